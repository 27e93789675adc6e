"""Run the plugin's hook script as Claude Code does, on transcripts in Claude Code's format.

The transcript lines follow what Claude Code 2.1.197 writes (one line per content block,
compact JSON, tool results as ``user`` lines with ``toolUseResult``); tests/e2e checks the
same capture against the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hooks" / "capture.py"
ENTRY = REPO / "hooks" / "capture.sh"  # what hooks.json runs: /bin/sh capture.sh EVENT
RULE_OPEN = "`★ Insight ─────────────────────────────────────`"
RULE_CLOSE = "`─────────────────────────────────────────────────`"


def insight(body: str, star: str = "★") -> str:
    return f"{RULE_OPEN.replace('★', star)}\n{body}\n{RULE_CLOSE}"


def run_hook(
    event: str,
    payload: dict[str, Any] | bytes | str,
    root: Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 30,
    flags: tuple[str, ...] = (),
    entry: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """``python -I -S [FLAGS] hooks/capture.py EVENT`` with ``payload`` on stdin, in ``root``
    (``entry``: ``/bin/sh hooks/capture.sh EVENT``, as Claude Code runs it, with the python3
    on PATH).

    ``-S``: no site-packages at all, so the script proves it needs the standard library only.
    """
    data = payload if isinstance(payload, bytes) else None
    if data is None:
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
    base = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(root.parent),
        "CLAUDE_PROJECT_DIR": str(root),
        "LANG": "C.UTF-8",
        # the test's own trust store (tests/conftest.py), as Claude Code passes the user's on
        "XDG_CONFIG_HOME": os.environ.get("XDG_CONFIG_HOME", str(root.parent / ".config")),
    }
    args = ["/bin/sh", str(ENTRY)] if entry else [sys.executable, "-I", "-S", *flags, str(SCRIPT)]
    return subprocess.run(
        [*args, event],
        input=data,
        cwd=root,
        env={**base, **(env or {})},
        capture_output=True,
        timeout=timeout,
    )


class Transcript:
    """A Claude Code session transcript being written turn by turn."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path, self.root = path, root
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        self._n = 0

    def _write(self, item: dict[str, Any]) -> None:
        self._n += 1
        item = {"uuid": f"u{self._n}", "isSidechain": False, "sessionId": "s1", **item}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n")

    def prompt(self, text: str, prompt_id: str = "p1") -> None:
        self._write(
            {"type": "user", "promptId": prompt_id, "message": {"role": "user", "content": text}}
        )
        self._write({"type": "attachment", "attachment": {"type": "date"}})

    def say(self, text: str, *, sidechain: bool = False) -> None:
        content = [{"type": "text", "text": text}]
        self._write(
            {
                "type": "assistant",
                "isSidechain": sidechain,
                "message": {"id": f"msg{self._n}", "role": "assistant", "content": content},
            }
        )

    def edit(self, rel: str, old: str, new: str) -> None:
        """An Edit tool call and its result, with the file changed on disk as Claude Code does."""
        path = self.root / rel
        before = path.read_text()
        after = before.replace(old, new, 1)
        path.write_text(after)
        tid = f"toolu_{self._n}"
        self._write(
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": tid,
                            "name": "Edit",
                            "input": {"file_path": str(path), "old_string": old, "new_string": new},
                        }
                    ],
                },
            }
        )
        self.tool_result(
            tid,
            f"The file {path} has been updated successfully.",
            _patch(str(path), before, old, new),
        )

    def tool_result(self, tid: str, text: str, structured: dict[str, Any] | None = None) -> None:
        item: dict[str, Any] = {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"tool_use_id": tid, "type": "tool_result", "content": text}],
            },
        }
        if structured is not None:
            item["toolUseResult"] = structured
        self._write(item)

    def meta(self, text: str) -> None:
        self._write({"type": "user", "isMeta": True, "message": {"role": "user", "content": text}})


def capture_turn(
    root: Path, transcript: Transcript, prompt: str, edit: tuple[str, str, str], *texts: str
) -> None:
    """One turn the real Stop hook captures: ``prompt``, an Edit (file, old, new), then a final
    message holding each of ``texts`` as a ★ Insight; the hook must succeed."""
    transcript.prompt(prompt)
    transcript.edit(*edit)
    final = "\n".join(insight(t) for t in texts)
    transcript.say(final)
    payload = {
        "session_id": "s1",
        "prompt_id": "p1",
        "transcript_path": str(transcript.path),
        "last_assistant_message": final,
    }
    assert run_hook("Stop", payload, root).returncode == 0


def _patch(path: str, before: str, old: str, new: str) -> dict[str, Any]:
    """Claude Code's Edit result: one hunk with up to 3 lines of context around the change."""
    lines = before.split("\n")
    head = before[: before.index(old)].count("\n")  # 0-based first changed line
    old_n = old.count("\n") + 1
    new_lines = new.split("\n")
    ctx_a = max(0, head - 3)
    ctx_b = min(len(lines), head + old_n + 3)
    body = [" " + x for x in lines[ctx_a:head]]
    body += ["-" + x for x in lines[head : head + old_n]]
    body += ["+" + x for x in new_lines]
    body += [" " + x for x in lines[head + old_n : ctx_b]]
    return {
        "filePath": path,
        "oldString": old,
        "newString": new,
        "originalFile": before,
        "structuredPatch": [
            {
                "oldStart": ctx_a + 1,
                "oldLines": ctx_b - ctx_a,
                "newStart": ctx_a + 1,
                "newLines": ctx_b - ctx_a - old_n + len(new_lines),
                "lines": body,
            }
        ],
        "userModified": False,
        "replaceAll": False,
    }


def proposals_after_session_end(root: Path, timeout: float = 60) -> list[Path]:
    """The proposed 📚 rows, once SessionEnd's detached child has written them: it has when
    ``ended/`` holds no session any more (the child removes each after its proposal)."""
    import time

    capture = root / ".journal" / "capture"
    deadline = time.monotonic() + timeout
    while any((capture / "ended").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return sorted((capture / "proposals").glob("*.json"))


def inbox_lines(root: Path) -> list[dict[str, Any]]:
    path = root / ".journal" / "inbox.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
