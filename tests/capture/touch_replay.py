"""A replay set for the touch recall (#33): coding sessions on a snapshot of this repository's own
code, with the learning journal a developer of it keeps, replayed through the plugin's real hooks.

The project (tests/capture/replay/project/: journal_agent's locks, lightjson, jsonl, processes,
capture/touch and capture/settings, and docs/plugin.md, copied at 6fd7ccc; stored as ``.txt`` so
the linters leave them be) and its journal (tests/capture/replay/learning_journal.md: 21 entries,
each citing the lines it explains) are real: the entries were written from reading that code, and
are appended through the journal's own ``append_entry``, which anchors every reference.

Each session is a task as a developer asks it, and the tool calls Claude Code makes for it: Grep
(ripgrep's output, as the Grep tool gives it), Read (whole, or ``offset``/``limit``), Edit (applied
to the file; ``structuredPatch`` made as Claude Code makes it, three lines of context), Write
(a rewrite or a new file), Bash (no hook: hooks.json's matcher leaves it out). Every session starts
from the snapshot. The calls are replayed as Claude Code makes them: hooks.json's command for each
event whose matcher takes the tool, in a process of its own, the payload on standard input, the
project as its working directory; what comes back is the ``additionalContext`` the model reads.

How the labels were judged (before any replay, from the task alone): an entry is *useful* to a
session when the lines it explains are code the task changes, or code whose behaviour the change
must keep; an entry on another part of a file the task reads is not, however close its lines.
An injected line is *relevant* when it names an entry useful to its session. Precision is relevant
lines over injected lines; recall is useful entries named at least once over useful entries.

These sessions are scripted. The second set, tests/capture/touch_replay_real.py, is made of the
real sessions in this repository's history after the snapshot (its commits, as tool calls).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

LINE_TOKENS = 40  # one injected line at most (#33)
REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "replay"

# Entry keys used by the sessions' labels: the titles of tests/capture/replay/learning_journal.md.
ENTRIES = {
    "lock-close": "flock Is Released When The Descriptor Closes",
    "lock-wait": "A Lock Wait Is Non-Blocking flock Polled To A Deadline",
    "lock-room": "The Lock File Is Opened Through The Room",
    "json-c": "Hooks Call The C JSON Scanner Directly",
    "json-stop": "The C Scanner Signals A Missing Value With StopIteration",
    "json-dumps": "lightjson dumps Keeps UTF-8 On One Line",
    "jsonl-torn": "A Torn JSON Line Is Skipped, Not Fatal",
    "jsonl-cr": "splitlines Also Splits On A Lone Carriage Return",
    "jsonl-latest": "LatestLines Keeps Two Ints Per Key",
    "proc-term": "Stopping A Command Is SIGTERM Then SIGKILL After A Grace",
    "proc-reap": "Our Own Popen Leaders Are Reaped Before Returning",
    "proc-zombie": "killpg With Signal 0 Counts Zombies As Alive",
    "touch-mmap": "The Hook Maps refs.jsonl Instead Of Reading It",
    "touch-git": "A Cloned Journal Is Found In Git's Index Bytes",
    "touch-newest": "The Newest refs.jsonl Line Of An Entry Wins",
    "touch-overlap": "Two Closed Ranges Overlap When Each Starts Before The Other Ends",
    "touch-moved": "A Moved Reference Is Found By Hashing Windows",
    "touch-patch": "structuredPatch Hunks Carry Three Lines Of Context",
    "touch-spoken": "Once Per Session Is A Line Per Entry In spoken.txt",
    "env-off": "JOURNAL_AGENT_CAPTURE=0 Turns Every Switch Off",
    "approved": "A Settings File Counts Only Once Approved",
}

LOCKS = "journal_agent/locks.py"
LJSON = "journal_agent/lightjson.py"
JSONL = "journal_agent/jsonl.py"
PROC = "journal_agent/processes.py"
TOUCH = "journal_agent/capture/touch.py"
SETS = "journal_agent/capture/settings.py"
DOC = "docs/plugin.md"
NEW_TEST = "tests/foundation/test_lightjson_bom.py"
BOM_TEST = 'from journal_agent.lightjson import loads\n\n\ndef test_bom():\n    assert loads(b"\\xef\\xbb\\xbf1") == 1\n'  # fmt: skip  # noqa: E501


@dataclass(frozen=True)
class Session:
    day: int
    prompt: str
    calls: list[tuple[Any, ...]]
    useful: frozenset[str] = frozenset()


def _s(day: int, prompt: str, useful: tuple[str, ...], *calls: tuple[Any, ...]) -> Session:
    unknown = set(useful) - set(ENTRIES)
    assert not unknown, unknown
    return Session(day, prompt, list(calls), frozenset(useful))


# Calls: ("Grep", pattern, path) · ("Read", path) · ("Read", path, offset, limit) ·
# ("Edit", path, old, new) · ("Write", path, old, new): the whole file written with old → new,
# or ("Write", path, None, content): a new file · ("Bash", command).
SESSIONS = [
    _s(1, "when a lock stays taken, the error should say how long we waited", ("lock-wait",),
       ("Grep", "def held", "journal_agent"), ("Read", LOCKS),
       ("Edit", LOCKS, "raise error(busy) from None",
        'raise error(f"{busy} (waited {timeout:g} s)") from None'),
       ("Bash", "pytest -q tests/foundation/test_locks.py")),
    _s(1, "LatestLines returns the wrong line after a line ending in \\r\\n",
       ("jsonl-cr", "jsonl-latest"),
       ("Read", JSONL), ("Grep", "_placed_lines", "journal_agent"),
       ("Edit", JSONL, "            line = raw.rstrip(b\"\\r\\n\")\n",
        "            line = raw.rstrip(b\"\\r\\n\")  # the ending, whichever it was\n"),
       ("Bash", "pytest -q tests/foundation/test_jsonl.py")),
    _s(1, "document in plugin.md how to turn the touch recall off, env switch included",
       ("env-off", "approved"),
       ("Read", DOC), ("Grep", "recall_touch", "journal_agent"), ("Read", SETS),
       ("Edit", DOC, "- **Off**: `\"recall_touch\": false` in an approved",
        "- **Off** (the switch): `\"recall_touch\": false` in an approved")),
    _s(1, "a timed-out command left a zombie: reap our leaders even when the group is gone",
       ("proc-term", "proc-reap"),
       ("Grep", "def stop_groups", "journal_agent"), ("Read", PROC, 21, 30),
       ("Edit", PROC, "        if p.poll() is None:\n            p.wait()\n",
        "        with contextlib.suppress(ChildProcessError):\n            p.wait()\n"),
       ("Bash", "pytest -q tests/foundation/test_processes.py")),
    _s(1, "add a test that lightjson.loads accepts a UTF-8 BOM in bytes like json does", (),
       ("Read", LJSON, 55, 30), ("Write", NEW_TEST, None, BOM_TEST),
       ("Bash", f"pytest -q {NEW_TEST}")),
    _s(1, "why does the hook import sqlite3? check the imports of the capture modules", (),
       ("Grep", "import sqlite3", "journal_agent"),
       ("Grep", "^import|^from", "journal_agent/capture"),
       ("Bash", "python -X importtime -c 'import journal_agent.capture.touch'")),
    _s(2, "a Grep with -C context lines should not name entries for the context lines", (),
       ("Grep", "def _grep_hits", "journal_agent"), ("Read", TOUCH, 268, 20), ("Read", TOUCH),
       ("Edit", TOUCH, "        if not (sep and sep2 and number.isdigit()):\n",
        "        if not (sep and sep2 and number.isdigit()):  # a context line is path-N-text\n"),
       ("Bash", "pytest -q tests/capture/test_touch_recall.py")),
    _s(2, "state() hashes every window of a big file when the cited text is unknown; stop that",
       ("touch-moved",),
       ("Read", TOUCH), ("Grep", "def state", "journal_agent/capture"),
       ("Edit", TOUCH, "        if (first is None or lines[start - 1] == first) and at(start):\n",
        "        if first is not None and lines[start - 1] == first and at(start):\n"),
       ("Bash", "pytest -q tests/capture/test_touch_recall.py")),
    _s(2, "add a capture.recall_budget switch to the capture settings", ("env-off",),
       ("Read", SETS),
       ("Write", SETS, '    "recall_touch": True,\n',
        '    "recall_touch": True,\n    "recall_budget": True,  # a token budget per day\n'),
       ("Bash", "pytest -q tests/capture")),
    _s(2, "group_alive reads all of /proc: use a pidfd per member instead", ("proc-zombie",),
       ("Read", PROC),
       ("Edit", PROC, "    try:\n        entries = os.listdir(\"/proc\")\n",
        "    try:\n        entries = sorted(os.listdir(\"/proc\"))\n"),
       ("Bash", "pytest -q tests/foundation/test_processes.py")),
    _s(2, "cited() still recalls an entry whose newest refs line dropped the file",
       ("touch-newest",),
       ("Grep", "def cited", "journal_agent/capture"), ("Read", TOUCH, 112, 35),
       ("Edit", TOUCH, "            continue  # a later line of the entry",
        "            continue  # a newer line of the entry"),
       ("Bash", "pytest -q tests/capture/test_touch_recall.py")),
    _s(2, "while waiting for a lock, log at debug level every second who holds it", ("lock-wait",),
       ("Grep", "def _wait", "journal_agent"), ("Read", LOCKS, 40, 30),
       ("Edit", LOCKS, "        time.sleep(POLL_S)\n",
        "        time.sleep(POLL_S)\n        logger.debug(\"still waiting for the lock\")\n"),
       ("Bash", "pytest -q tests/foundation/test_locks.py")),
    _s(2, "where do the hooks read files through confined? list the calls", (),
       ("Grep", "confined\\.", "journal_agent"), ("Read", JSONL, 1, 20)),
    # Day 3 was written after the reading rules (capture/touch.py: READ_SHARE, GREP_FOCUS) were
    # set on days 1 and 2, and replayed once as written: the held-out day.
    _s(3, "lightjson.dumps with sort_keys: check which encoder the flag picks", ("json-dumps",),
       ("Grep", "def dumps", "journal_agent"), ("Read", LJSON),
       ("Edit", LJSON, "  # type: ignore[operator]  # C encoder",
        "  # type: ignore[operator]  # C encoder, 2: sorted"),
       ("Bash", "pytest -q tests/foundation/test_lightjson.py")),
    _s(3, "lightjson.loads of bytes that are not UTF-8 should raise json's error", ("json-stop",),
       ("Read", LJSON, 55, 40),
       ("Edit", LJSON, '        text = data.decode("utf-8-sig", "surrogatepass")\n',
        '        text = bytes(data).decode("utf-8-sig", "surrogatepass")\n'),
       ("Bash", "pytest -q tests/foundation/test_lightjson.py")),
    _s(3, "make the grace period of stop_groups configurable per Bash call", ("proc-term",),
       ("Grep", "grace_s", "journal_agent"), ("Read", PROC, 1, 50),
       ("Edit", PROC, "    grace_s: float,\n", "    grace_s: float = 2.0,\n")),
    _s(3, "cited() breaks on a file path that holds a colon", ("touch-newest",),
       ("Grep", "needle", "journal_agent/capture"), ("Read", TOUCH, 110, 40),
       ("Edit", TOUCH, '    needle = b\'"\' + rel.encode("utf-8", "surrogateescape") + b":"\n',
        '    needle = b\'"\' + rel.encode("utf-8", "surrogateescape") + b":"  # the last colon\n')),
    _s(3, "the hooks must not follow a .git file whose gitdir points outside the repository",
       ("touch-git",),
       ("Read", TOUCH), ("Grep", "gitdir", "journal_agent/capture"),
       ("Edit", TOUCH, "        repo, name = os.path.normpath(target), \"index\"\n",
        "        repo, name = os.path.realpath(target), \"index\"\n")),
    _s(3, "the Stop hook got slower: which capture modules does it import?", (),
       ("Read", SETS), ("Read", JSONL), ("Grep", "^def ", "journal_agent/capture")),
    _s(3, "LatestLines keeps its file open: let it be used in a with block", ("jsonl-latest",),
       ("Read", JSONL, 61, 47),
       ("Edit", JSONL, "    def close(self) -> None:\n",
        "    def __enter__(self) -> LatestLines:\n        return self\n\n"
        "    def __exit__(self, *_: object) -> None:\n        self.close()\n\n"
        "    def close(self) -> None:\n"),
       ("Bash", "pytest -q tests/foundation/test_jsonl.py")),
    _s(3, "why does the moved check compare only the first line before hashing?", ("touch-moved",),
       ("Grep", "def state", "journal_agent/capture"), ("Read", TOUCH, 184, 20)),
]  # fmt: skip


# -- the project and its journal -----------------------------------------------------------------


def make_project(root: Path) -> dict[str, str]:
    """The snapshot at ``root`` and its journal appended entry by entry; returns key → entry id."""
    from journal_agent.journal.api import append_entry
    from journal_agent.workspace import Workspace

    restore(root)
    text = (DATA / "learning_journal.md").read_text(encoding="utf-8")
    (root / "learning_journal.md").write_text("# Learning Journal\n", encoding="utf-8")
    ids: dict[str, str] = {}
    by_title = {title: key for key, title in ENTRIES.items()}
    for part in text.split("\n## ")[1:]:
        outcome = append_entry(Workspace(root), "## " + part.rstrip("\n") + "\n")
        assert outcome.appended and outcome.entry_id, outcome.to_dict()
        ids[by_title[part.split(" (", 1)[0]]] = outcome.entry_id
    assert set(ids) == set(ENTRIES)
    return ids


def restore(root: Path) -> None:
    """The snapshot's files as they were (a session's edits undone)."""
    for src in (DATA / "project").rglob("*.txt"):
        dest = root / src.relative_to(DATA / "project").with_suffix("")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    shutil.rmtree(root / "tests", ignore_errors=True)


# -- Claude Code's tool results ------------------------------------------------------------------


def structured_patch(old: str, new: str) -> list[dict[str, Any]]:
    """Claude Code's ``structuredPatch`` of an Edit or Write: hunks with three lines of context."""
    a, b = old.splitlines(), new.splitlines()
    hunks = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(3):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        lines: list[str] = []
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                lines += [" " + x for x in a[a1:a2]]
            else:
                lines += ["-" + x for x in a[a1:a2]] + ["+" + x for x in b[b1:b2]]
        hunks.append(
            {"oldStart": i1 + 1, "oldLines": i2 - i1, "newStart": j1 + 1, "newLines": j2 - j1,
             "lines": lines}
        )  # fmt: skip
    return hunks


def tool_call(root: Path, call: tuple[Any, ...]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Run one call on the project as Claude Code's tool would: (tool, input, response)."""
    tool = call[0]
    if tool == "Grep":
        from journal_agent.tools._rg import rg_binary

        path = root / call[2]
        done = subprocess.run(
            [rg_binary(), "-n", "--no-heading", "--color", "never", "--", call[1], str(path)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        content = done.stdout.rstrip("\n")
        given = {"pattern": call[1], "path": str(path), "output_mode": "content", "-n": True}
        files = {line.split(":", 1)[0] for line in content.splitlines()}
        lines = len(content.splitlines())
        return tool, given, {"mode": "content", "numFiles": len(files), "filenames": [],
                             "content": content, "numLines": lines}  # fmt: skip
    path = root / call[1]
    if tool == "Read":
        text = path.read_text(encoding="utf-8").splitlines()
        given: dict[str, Any] = {"file_path": str(path)}
        first, count = 1, 2000
        if len(call) > 2:
            given |= {"offset": call[2], "limit": call[3]}
            first, count = call[2], call[3]
        shown = text[first - 1 : first - 1 + count]
        file = {"filePath": str(path), "content": "\n".join(shown), "numLines": len(shown),
                "startLine": first, "totalLines": len(text)}  # fmt: skip
        return tool, given, {"type": "text", "file": file}
    if tool == "Bash":
        return tool, {"command": call[1]}, {"stdout": "", "stderr": "", "interrupted": False}
    old_text = path.read_text(encoding="utf-8") if path.exists() else ""
    if call[2] is None:
        new_text = call[3]
    else:
        assert old_text.count(call[2]) == 1, f"{call[2]!r} is not once in {call[1]}"
        new_text = old_text.replace(call[2], call[3])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new_text, encoding="utf-8")
    patch = structured_patch(old_text, new_text)
    if tool == "Edit":
        given = {"file_path": str(path), "old_string": call[2], "new_string": call[3]}
        return tool, given, {"filePath": str(path), "oldString": call[2], "newString": call[3],
                             "originalFile": old_text, "structuredPatch": patch,
                             "userModified": False, "replaceAll": False}  # fmt: skip
    kind = "update" if old_text else "create"
    return tool, {"file_path": str(path), "content": new_text}, {
        "type": kind, "filePath": str(path), "content": new_text,
        "structuredPatch": patch if old_text else [], "originalFile": old_text or None}  # fmt: skip


# -- the hooks, as Claude Code runs them ---------------------------------------------------------


def hook_commands(event: str, tool: str | None, plugin: Path = REPO) -> list[dict[str, Any]]:
    """The plugin's hooks.json commands for ``event`` whose matcher takes ``tool`` (Claude Code's
    rule: a regex matched against the whole tool name; none, or ``*``, matches everything)."""
    hooks = plugin / "hooks" / "hooks.json"
    config = json.loads(hooks.read_text(encoding="utf-8"))["hooks"].get(event, [])
    out = []
    for group in config:
        matcher = group.get("matcher", "")
        if tool is None or matcher in ("", "*") or re.fullmatch(matcher, tool):
            out.extend(group["hooks"])
    return out


def run_hooks(root: Path, event: str, payload: dict[str, Any], env: dict[str, str]) -> list[str]:
    """Each command's ``additionalContext`` (Claude Code runs them apart, stdin the payload)."""
    said = []
    plugin = Path(env["CLAUDE_PLUGIN_ROOT"])
    for hook in hook_commands(event, payload.get("tool_name"), plugin):
        args = [a.replace("${CLAUDE_PLUGIN_ROOT}", str(plugin)) for a in hook.get("args", [])]
        done = subprocess.run(
            [hook["command"], *args], input=json.dumps(payload).encode(), cwd=root, env=env,
            capture_output=True, timeout=hook.get("timeout", 60), check=False,
        )  # fmt: skip
        assert done.returncode == 0 and not done.stderr, (event, done.stderr)
        if done.stdout.strip():
            out = json.loads(done.stdout)["hookSpecificOutput"]
            said.append(out.get("additionalContext") or "")
    return [s for s in said if s]


# -- the replay ----------------------------------------------------------------------------------

NAMED = re.compile(r"journal-agent journal show (\S+?)[;.]?(?=\s|$)")


@dataclass
class SessionResult:
    day: int
    prompt: str
    named: list[str] = field(default_factory=list)  # entry keys, one per injected line
    cut: int = 0  # lines whose command to open the entry was cut (an id no command opens)
    useful: frozenset[str] = frozenset()
    tokens: int = 0
    line_tokens: list[int] = field(default_factory=list)  # each injected line's own
    hook_calls: int = 0
    hook_s: float = 0.0


def replay(
    root: Path,
    sessions: list[Session],
    ids: dict[str, str],
    env: dict[str, str],
    tag: str,
    start: Callable[[Path, int], None] | None = None,
) -> list[SessionResult]:
    """Every session on a fresh copy of the snapshot (``start``: what the n-th session starts
    from instead, tests/capture/touch_replay_real.py); ``tag`` keeps session ids apart."""
    from journal_agent.tokenizer import encoding

    key_of = {entry: key for key, entry in ids.items()}
    results = []
    for n, session in enumerate(sessions):
        if start is None:
            restore(root)
        else:
            start(root, n)
        sid = f"{tag}-{n}"
        result = SessionResult(session.day, session.prompt, useful=session.useful)
        base = {"session_id": sid, "transcript_path": str(root / f".{sid}.jsonl"),
                "cwd": str(root), "permission_mode": "acceptEdits"}  # fmt: skip
        prompt = {**base, "hook_event_name": "UserPromptSubmit", "prompt": session.prompt}
        run_hooks(root, "UserPromptSubmit", prompt, env)  # recall_inject is off: says nothing
        for i, call in enumerate(session.calls):
            tool, given, response = tool_call(root, call)
            payload = {**base, "hook_event_name": "PostToolUse", "tool_name": tool,
                       "tool_input": given, "tool_response": response,
                       "tool_use_id": f"toolu_{sid}_{i}"}  # fmt: skip
            if not hook_commands("PostToolUse", tool, Path(env["CLAUDE_PLUGIN_ROOT"])):
                continue
            started = time.perf_counter()
            said = run_hooks(root, "PostToolUse", payload, env)
            result.hook_s += time.perf_counter() - started
            result.hook_calls += 1
            for text in said:
                result.tokens += len(encoding().encode(text))
                result.line_tokens += [len(encoding().encode(x)) for x in _lines(text)]
                for shown in NAMED.findall(text):
                    result.cut += shown.endswith("…")
                    result.named.append(_entry_key(shown, key_of))
        results.append(result)
    return results


def _lines(text: str) -> list[str]:
    """One tool call's lines, one per entry: a line each, or (before #33's 40 tokens a line)
    one line of them joined by "; "."""
    if "\n" in text or len(NAMED.findall(text)) <= 1:
        return text.split("\n")
    return re.split(r"; (?=\"|your edit)", text)


def _entry_key(shown: str, key_of: dict[str, str]) -> str:
    """The entry a line names: its id, or the one entry a cut id (``…``) is the start of, so a
    line with a cut command is still judged by its entry (and counted as cut)."""
    if shown in key_of:
        return key_of[shown]
    start = shown.removesuffix("…")
    found = [key for entry, key in key_of.items() if entry.startswith(start)]
    return found[0] if len(found) == 1 else shown


def hook_env(root: Path, plugin: Path = REPO, **extra: str) -> dict[str, str]:
    """The environment Claude Code gives a plugin hook (the plugin's files at ``plugin``)."""
    data = root.parent / "plugin-data"
    data.mkdir(exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root.parent),
        "LANG": "C.UTF-8",
        "CLAUDE_PROJECT_DIR": str(root),
        "CLAUDE_PLUGIN_ROOT": str(plugin),
        "CLAUDE_PLUGIN_DATA": str(data),
        "XDG_CONFIG_HOME": os.environ.get("XDG_CONFIG_HOME", str(root.parent / ".config")),
        **extra,
    }


def score(results: list[SessionResult], detail: bool = True) -> dict[str, Any]:
    """Precision, recall and tokens, per session and per replayed day (``detail``: each day's
    own precision and recall, and every line judged irrelevant and every useful entry missed)."""
    lines = sum(len(r.named) for r in results)
    relevant = sum(sum(k in r.useful for k in r.named) for r in results)
    useful = sum(len(r.useful) for r in results)
    found = sum(len(r.useful & set(r.named)) for r in results)
    days: dict[int, int] = {}
    for r in results:
        days[r.day] = days.get(r.day, 0) + r.tokens
    calls = sum(r.hook_calls for r in results)
    out = {
        "sessions": len(results),
        "hook_calls": calls,
        "injected_lines": lines,
        "relevant_lines": relevant,
        "cut_commands": sum(r.cut for r in results),
        "precision": round(relevant / lines, 3) if lines else None,
        "useful_entries": useful,
        "useful_named": found,
        "recall": round(found / useful, 3) if useful else None,
        "tokens_per_day": {str(d): t for d, t in sorted(days.items())},
        # Each line counted alone (tokens_per_day counts what each call gave, lines together).
        "tokens_per_line": round(sum(t for r in results for t in r.line_tokens) / lines, 1)
        if lines
        else None,
        "tokens_per_line_max": max((t for r in results for t in r.line_tokens), default=0),
        "lines_over_40_tokens": round(
            sum(t > LINE_TOKENS for r in results for t in r.line_tokens) / lines, 3
        )
        if lines
        else None,
        "tokens_per_session": {
            "mean": round(sum(r.tokens for r in results) / len(results), 1) if results else 0,
            "max": max((r.tokens for r in results), default=0),
        },
        "hook_ms_mean": round(1000 * sum(r.hook_s for r in results) / calls, 1) if calls else None,
    }
    if not detail:
        return out
    return out | {
        "per_day": {
            str(d): {
                k: v
                for k, v in score([r for r in results if r.day == d], False).items()
                if k in ("sessions", "injected_lines", "precision", "recall")
            }
            for d in sorted(days)
        },
        "irrelevant": [
            {"prompt": r.prompt, "named": k} for r in results for k in r.named if k not in r.useful
        ],
        "missed": [
            {"prompt": r.prompt, "useful": k}
            for r in results
            for k in sorted(r.useful - set(r.named))
        ],
    }
