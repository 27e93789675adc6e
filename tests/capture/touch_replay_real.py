"""A second replay set for the touch recall (#33), built from real coding sessions: this
repository's own history after the snapshot of tests/capture/touch_replay.py (6fd7ccc).

Each commit after 6fd7ccc that changed one of the snapshot's files (journal_agent's locks,
lightjson, jsonl, processes, capture/touch*.py and capture/settings, docs/plugin.md: ``git log
6fd7ccc..942f6ed -- <those>``, all of them, oldest first: 16 commits; the set's own commit and
later ones are not in it) was made by a coding agent's session whose task is the commit message
and whose edits are the diff. Each becomes a session of the tool calls Claude Code makes to
produce that diff:

- a **Read of the whole file** before its first Edit in the session (Claude Code requires a Read
  before an Edit; the rule here is always the whole file, never a window: a real session reads
  the file it is about to change, and a window would be a guess at what it looked at);
- each of the commit's hunks (``git show -U3``) as one **Edit**, in order: ``old_string`` the
  hunk's old side (its three lines of context included, widened a line at a time each side until
  it is once in the file), ``new_string`` its new side; the tool result's ``structuredPatch`` is
  made as the scripted set makes it (three lines of context);
- a new file (capture/touched.py, capture/touch_line.py) as a **Write**.

Calls on files outside the snapshot (the commit's tests, benchmarks, other modules) are left out:
the journal cites none of them, and the snapshot does not hold them (``left_out`` in the data
file names them per commit). Each session starts from the snapshot as the earlier commits left
it (their patches applied in order, each hunk checked against the lines it expects), and the
journal's references follow the code as a developer keeps them: ``journal check --fix``
(journal.api.fix_refs) before each session, so a moved reference points at its lines; a changed
one keeps its recorded lines. The calls go through the real hooks exactly as the scripted set's.

How the labels were judged (tests/capture/replay/real_sessions.json, one reason per label, with
the commit's hash): from the commit message (the task) and the diff's purpose alone, written
before any replay of the set, with the scripted set's rule: an entry is *useful* to a session
when the lines it explains are code the task changes, or code whose behaviour the change must
keep. Sessions with no useful entry say why (``none_useful_because``: mostly docs changes, which
no entry cites).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.capture.touch_replay import DATA, ENTRIES, Session, restore

SET = DATA / "real_sessions.json"
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class RealSession:
    commit: str
    session: Session
    start: dict[str, str]  # the snapshot's files as the earlier commits left them


def _patches(text: str) -> list[tuple[str, bool, list[tuple[int, list[str]]]]]:
    """``(path, new file, [(old start, hunk lines)])`` of each file of a ``git show`` patch."""
    files: list[tuple[str, bool, list[tuple[int, list[str]]]]] = []
    for part in re.split(r"^diff --git ", text, flags=re.M)[1:]:
        head, _, body = part.partition("\n@@")
        path = head.split("\n", 1)[0].split(" b/", 1)[1]
        hunks: list[tuple[int, list[str]]] = []
        for chunk in re.split(r"^(?=@@ )", "@@" + body, flags=re.M):
            found = HUNK.match(chunk)
            if found:
                lines = chunk.split("\n")[1:]
                if lines and lines[-1] == "":
                    lines.pop()
                hunks.append((int(found.group(1)), lines))
        files.append((path, "\nnew file mode" in head, hunks))
    return files


def _once(text: list[str], first: int, last: int) -> tuple[int, int]:
    """The line range [first, last) widened a line at a time until its text is once in the file."""
    whole = "\n".join(text) + "\n"
    while True:
        old = "".join(x + "\n" for x in text[first:last])
        if old and whole.count(old) == 1:
            return first, last
        assert first > 0 or last < len(text), "no unique old_string"
        first, last = max(first - 1, 0), min(last + 1, len(text))


def _edits(text: str, hunks: list[tuple[int, list[str]]]) -> tuple[list[tuple[Any, ...]], str]:
    """The Edit calls that make ``hunks`` on ``text`` (each checked against the lines it
    expects), and the text after them."""
    lines = text.split("\n")[:-1] if text else []  # (no patch here ends without a newline)
    calls: list[tuple[Any, ...]] = []
    shift = 0
    for start, body in hunks:
        old = [x[1:] for x in body if x[:1] in " -"]
        new = [x[1:] for x in body if x[:1] in " +"]
        at = start - 1 + shift if old else start + shift
        assert lines[at : at + len(old)] == old, f"hunk at {start} does not apply"
        first, last = _once(lines, at, at + len(old))
        before, after = lines[first:at], lines[at + len(old) : last]
        calls.append(("Edit", "".join(x + "\n" for x in lines[first:last]),
                      "".join(x + "\n" for x in [*before, *new, *after])))  # fmt: skip
        lines[at : at + len(old)] = new
        shift += len(new) - len(old)
    return calls, "".join(x + "\n" for x in lines)


def sessions(data: Path = SET) -> list[RealSession]:
    """The set, oldest commit first: each session's calls and the files it starts from."""
    state = {
        str(src.relative_to(DATA / "project").with_suffix("")): src.read_text(encoding="utf-8")
        for src in (DATA / "project").rglob("*.txt")
    }
    out = []
    for item in json.loads(data.read_text(encoding="utf-8"))["sessions"]:
        assert not set(item["useful"]) - set(ENTRIES), item["useful"]
        start = dict(state)
        calls: list[tuple[Any, ...]] = []
        patch = (data.parent / item["patch"]).read_text(encoding="utf-8")
        for path, new, hunks in _patches(patch):
            if new:
                state[path] = "".join(x[1:] + "\n" for _, body in hunks for x in body)
                calls.append(("Write", path, None, state[path]))
                continue
            edits, state[path] = _edits(state[path], hunks)
            calls.append(("Read", path))
            calls += [("Edit", path, old, new) for _, old, new in edits]
        session = Session(1, item["task"], calls, frozenset(item["useful"]))
        out.append(RealSession(item["commit"], session, start))
    return out


def starter(real: list[RealSession]):
    """``replay``'s ``start``: the n-th session's files written on the snapshot (files made by
    later commits removed), then the journal's moved references brought to their lines."""
    made = {path for r in real for path in r.start} | {
        call[1] for r in real for call in r.session.calls if call[0] == "Write"
    }

    def start(root: Path, n: int) -> None:
        from journal_agent.journal.api import fix_refs
        from journal_agent.workspace import Workspace

        restore(root)
        for path in made - set(real[n].start):
            (root / path).unlink(missing_ok=True)
        for path, text in real[n].start.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, encoding="utf-8")
        fix_refs(Workspace(root))

    return start
