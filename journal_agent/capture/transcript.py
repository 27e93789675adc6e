"""This turn of a Claude Code transcript, read backwards from the end, bounded.

A transcript is JSONL with one line per content block (``assistant`` lines), the prompt and the
tool results (``user`` lines) and bookkeeping. A turn starts at the last ``user`` line that is a
prompt (a string, or a list with a text block; not ``isMeta``, not a tool result). Reading from
the end in 64 KB blocks and parsing only ``user``/``assistant`` lines costs well under a
millisecond on a 100 MB transcript, where parsing every line takes most of a second.

Stdlib only: the Stop hook imports this under ``python3 -I -S`` (JSON through
:mod:`journal_agent.lightjson`).
"""

from __future__ import annotations

import os

from journal_agent.lightjson import loads

BLOCK = 64 << 10
LIMIT = 16 << 20  # bytes read back at most: a turn larger than this is captured in part
_ASSISTANT = b'"type":"assistant"'
_USER = b'"type":"user"'


class Turn:
    """What one turn holds, oldest first. (A plain class: importing dataclasses costs a hook
    several milliseconds.)"""

    def __init__(self, end: int = 0) -> None:
        self.texts: list[str] = []  # assistant text blocks
        # the API message each text block belongs to (Claude Code writes one line per block,
        # each with its message's id): a <private> span may run across a message's blocks
        self.messages: list[str] = []
        self.tool_results: list[str] = []  # the text of each tool result
        # file path (as the tool reported it) → [(start, end)] lines of the new content
        self.edits: dict[str, list[tuple[int, int]]] = {}
        self.prompt_id = ""
        self.end = end  # the transcript's size when read: the next capture starts here


def read_turn(path: str, *, since: int = 0, sidechain: bool = False, limit: int = LIMIT) -> Turn:
    """The last turn of the transcript at ``path``, not reading before byte ``since``.

    ``sidechain``: a sub-agent's own transcript, whose lines are all marked ``isSidechain``;
    in the main transcript those lines are skipped. OSError if the file cannot be read.
    """
    lines: list[dict] = []
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        if since > size:
            since = 0  # the file was replaced by a shorter one: what is there now is all new
        turn = Turn(end=size)
        for raw in _backwards(f, size, max(since, size - limit)):
            if _ASSISTANT not in raw and _USER not in raw:
                continue
            try:
                item = loads(raw)
            except ValueError:
                continue  # a line still being written, or torn
            if not isinstance(item, dict) or item.get("isMeta"):
                continue
            if item.get("isSidechain") and not sidechain:
                continue
            if item.get("type") == "user" and _is_prompt(item):
                turn.prompt_id = str(item.get("promptId") or "")
                break
            lines.append(item)
    for item in reversed(lines):
        _take(turn, item)
    return turn


def _backwards(f, size: int, floor: int):
    """Complete lines of ``f`` from the end back to byte ``floor``, newest first."""
    pos, rest = size, b""
    while pos > floor:
        step = min(BLOCK, pos - floor)
        pos -= step
        f.seek(pos)
        chunk = f.read(step) + rest
        parts = chunk.split(b"\n")
        rest = parts[0] if pos > floor else b""
        for raw in reversed(parts[1:] if pos > floor else parts):
            if raw:
                yield raw
    if rest:
        yield rest


def _is_prompt(item: dict) -> bool:
    content = (item.get("message") or {}).get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "text" for b in content
    )


def _take(turn: Turn, item: dict) -> None:
    message = item.get("message")
    if not isinstance(message, dict):
        return
    content = message.get("content")
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        if item.get("type") == "assistant" and block.get("type") == "text":
            turn.texts.append(str(block.get("text") or ""))
            turn.messages.append(str(message.get("id") or item.get("uuid") or len(turn.texts)))
        elif block.get("type") == "tool_result":
            turn.tool_results.append(_result_text(block.get("content")))
    result = item.get("toolUseResult")
    if isinstance(result, dict) and isinstance(result.get("filePath"), str):
        _take_edit(turn.edits, result)


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


def _take_edit(edits: dict[str, list[tuple[int, int]]], result: dict) -> None:
    """An Edit/MultiEdit/Write result: the new lines of each hunk of its ``structuredPatch``
    (a created file: all of it). Ranges recorded earlier in the same file move with the lines
    this edit inserted or removed above them."""
    path = result["filePath"]
    ranges = edits.setdefault(path, [])
    if result.get("type") == "create" and isinstance(result.get("content"), str):
        count = max(1, result["content"].count("\n") + (not result["content"].endswith("\n")))
        ranges[:] = [(1, count)]
        return
    for hunk in result.get("structuredPatch") or []:
        try:
            old_start, old_lines = int(hunk["oldStart"]), int(hunk["oldLines"])
            new_start, new_lines = int(hunk["newStart"]), int(hunk["newLines"])
            body = [str(x) for x in hunk["lines"]]
        except (KeyError, TypeError, ValueError):
            continue
        shift = new_lines - old_lines
        ranges[:] = [
            (a + shift, b + shift) if a > old_start + old_lines - 1 else (a, b) for a, b in ranges
        ]
        ranges.extend(_added(new_start, body))
    ranges[:] = _merge(ranges)


def _added(start: int, body: list[str]) -> list[tuple[int, int]]:
    """Ranges of the lines a hunk added or changed, numbered in the new file; a pure deletion
    is the line after it."""
    out: list[tuple[int, int]] = []
    line, deleted = start, False
    for text in body:
        if text.startswith("+"):
            out.append((line, line))
            line, deleted = line + 1, False
        elif text.startswith("-"):
            deleted = True
        else:
            if deleted:
                out.append((line, line))
            line, deleted = line + 1, False
    if deleted:  # removed at the end of the file: its last line
        out.append((max(1, line - 1), max(1, line - 1)))
    return out


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def handed_prompt(path: str, agent_type: str, *, limit: int = 4 << 20) -> str:
    """The prompt the main thread's last Agent (or Task) call for ``agent_type`` handed over,
    read backwards from the end of the transcript at ``path`` (at most ``limit`` bytes); ""
    when there is none. OSError if the file cannot be read."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        for raw in _backwards(f, size, max(0, size - limit)):
            if _ASSISTANT not in raw or b'"tool_use"' not in raw:
                continue
            try:
                item = loads(raw)
            except ValueError:
                continue
            content = (item.get("message") or {}).get("content") if isinstance(item, dict) else None
            for block in reversed(content if isinstance(content, list) else []):
                given = block.get("input") if isinstance(block, dict) else None
                if block.get("name") not in ("Agent", "Task") or not isinstance(given, dict):
                    continue
                if str(given.get("subagent_type") or "") != agent_type:
                    continue
                return " ".join(str(given.get(k) or "") for k in ("description", "prompt"))
    return ""
