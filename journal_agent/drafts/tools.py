"""The tools of a drafting run: nothing but a draft is written, whatever the model asks.

The learning-journal agent is told (by its own file) to append entries; in a drafting run the
routing, not the prompt, decides where they land:

- ``JournalAppend`` checks the entry as an append would and saves it as a draft;
- ``Write`` / ``Edit`` of ``learning_journal.md`` (by any path that resolves to it: ``./``, an
  absolute path, a symlink) take the text the call would *add* — a Write that keeps the journal
  and appends, an Edit that keeps ``old_string`` and adds beside it — and save that as a draft;
  a call that would change existing text is refused. ``Write`` of a file under
  ``.journal/drafts/`` (what the agent's file says a draft is) is saved as a draft too;
- ``Write`` / ``Edit`` of any other file is refused: a drafting run changes nothing of the
  user's but its drafts;
- tools that write elsewhere are not offered at all: ``Bash`` (it could run
  ``journal-agent journal append``), ``LedgerUpdate``, ``JournalInbox`` (it marks moments
  written: that happens when the user accepts), ``MemoryProfile`` (it runs the user's training)
  and ``Task``'s sub-agents get these same tools.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from journal_agent.capture import drafts as store
from journal_agent.errors import UserError
from journal_agent.paths import JOURNAL_FILE, drafts_dir
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from journal_agent.tools.confined_paths import resolve_path, workspace_root
from journal_agent.tools.edit import EditInput
from journal_agent.tools.journal_append import JournalAppendInput
from journal_agent.tools.write import WriteInput

# Offered as they are: they only read, or (MemoryEstimate, MemoryTrace) add a measurement record.
PASSED_THROUGH = (
    "Read",
    "Grep",
    "Glob",
    "JournalSearch",
    "JournalCheck",
    "LedgerShow",
    "MemoryEstimate",
    "MemoryTrace",
    "DeviceInfo",
)
_ONLY_DRAFTS = (
    "In this drafting run nothing but entry drafts is written: {path} was not changed. Give the "
    "entry to JournalAppend; it is saved as a draft for the user to accept."
)


@dataclass
class DraftLog:
    """The drafts one run saved, all from the same moments."""

    root: Path
    moments: list[str]
    model: str = ""
    run: str = ""
    drafts: list[store.Draft] = field(default_factory=list)
    _by_entry: dict[str, str] = field(default_factory=dict)

    def save(self, text: str) -> ToolResult:
        """Check ``text`` as an append would; save it (again, under the same name, if this run
        saved that entry before) or list what to fix."""
        try:
            entry, problems = store.check_entry(self.root, text)
        except UserError as exc:
            raise ToolError(f"The draft was NOT saved: {exc.message}") from None
        if problems:
            lines = [
                f"The draft was NOT saved: {len(problems)} problem(s). Fix each one and call again "
                "(line numbers are lines of your entry):"
            ]
            lines += [
                f"- line {p.line}: {p.kind}: {p.detail}" if p.line else f"- {p.kind}: {p.detail}"
                for p in problems
            ]
            raise ToolError("\n".join(lines))
        replace = self._by_entry.get(entry.id)
        draft = store.save(
            self.root, text, moments=self.moments, model=self.model, run=self.run, replace=replace
        )
        self._by_entry[entry.id] = draft.id
        self.drafts = [d for d in self.drafts if d.id != draft.id] + [draft]
        rel = draft.path.relative_to(Path(workspace_root(self.root)))
        return ToolResult(
            f"Saved entry {entry.id} as the draft {rel} for the user to review and accept "
            f"(`journal-agent inbox accept-draft {draft.id}`); {JOURNAL_FILE} is not changed in a "
            "drafting run. Call again to replace this draft with a corrected entry."
        )


class DraftAppend(Tool[JournalAppendInput]):
    name = "JournalAppend"
    description = (
        "Check one learning-journal entry as an append to learning_journal.md would, and save it "
        "as a draft for the user to accept (in this run nothing is appended to the journal "
        "itself): the heading '## <Concept title> (YYYY-MM-DD)' and the required sections, every "
        "code reference `path:line` / `path:start-end` resolving to existing lines (read the "
        "file first), every citation [m:<id>] naming a record whose values are the numbers "
        "beside it, and every other memory or time number cited or shown as a calculation. If "
        "anything fails nothing is saved and the result lists each problem with its line; fix "
        "them and call again."
    )
    Input = JournalAppendInput

    def __init__(self, log: DraftLog) -> None:
        self.log = log

    def run(self, ctx: ToolContext, params: JournalAppendInput) -> ToolResult:
        # ``force`` is the user's call, at accept time (`inbox accept-draft --force`).
        return self.log.save(params.entry)


class DraftWrite(Tool[WriteInput]):
    name: ClassVar[str] = "Write"
    description: ClassVar[str] = (
        "Write a file. In this drafting run only entry drafts are written: a Write of "
        "learning_journal.md that keeps it and appends one entry, or of a file under "
        ".journal/drafts/, saves that entry as a draft for the user (checked as JournalAppend "
        "checks it); any other Write is refused."
    )
    Input = WriteInput

    def __init__(self, log: DraftLog) -> None:
        self.log = log

    def run(self, ctx: ToolContext, params: WriteInput) -> ToolResult:
        path = resolve_path(ctx.root, params.file_path)
        if _is_journal(ctx.root, path):
            current = _journal_text(ctx.root)
            if current is None:
                return self.log.save(_without_preamble(params.content))
            if not params.content.startswith(current):
                raise ToolError(_REWRITE)
            return self.log.save(_added(params.content[len(current) :]))
        if _in_drafts(ctx.root, path):
            return self.log.save(params.content)
        raise ToolError(_ONLY_DRAFTS.format(path=params.file_path))


class DraftEdit(Tool[EditInput]):
    name: ClassVar[str] = "Edit"
    description: ClassVar[str] = (
        "Edit a file. In this drafting run only entry drafts are written: an Edit of "
        "learning_journal.md that keeps old_string and adds one entry before or after it saves "
        "that entry as a draft for the user (checked as JournalAppend checks it); any other Edit "
        "is refused (to correct a draft, give the whole corrected entry to JournalAppend)."
    )
    Input = EditInput

    def __init__(self, log: DraftLog) -> None:
        self.log = log

    def run(self, ctx: ToolContext, params: EditInput) -> ToolResult:
        path = resolve_path(ctx.root, params.file_path)
        if not _is_journal(ctx.root, path):
            raise ToolError(_ONLY_DRAFTS.format(path=params.file_path))
        old, new = params.old_string, params.new_string
        current = _journal_text(ctx.root)
        if current is None or not old:
            if current or old:  # creating needs an empty old_string and no journal yet
                raise ToolError(f"old_string is not in {JOURNAL_FILE}; Read it first.")
            return self.log.save(_without_preamble(new))
        if old not in current:
            raise ToolError(f"old_string is not in {JOURNAL_FILE}; Read it and copy it exactly.")
        if new.startswith(old):
            return self.log.save(_added(new[len(old) :]))
        if new.endswith(old):
            return self.log.save(_added(new[: len(new) - len(old)]))
        raise ToolError(_REWRITE)


_REWRITE = (
    f"In this drafting run {JOURNAL_FILE} is read-only (the user accepts drafts into it), and "
    "this call would change text already in it; nothing was changed. Give the new entry to "
    "JournalAppend: it is saved as a draft."
)


def drafting_tools(log: DraftLog) -> dict[str, Tool]:
    """The registry of a drafting run (see the module doc)."""
    from journal_agent.tools.registry import builtin_tools

    every = builtin_tools()
    tools: dict[str, Tool] = {name: every[name] for name in PASSED_THROUGH if name in every}
    tools.update(JournalAppend=DraftAppend(log), Write=DraftWrite(log), Edit=DraftEdit(log))
    return tools


def _is_journal(root: Path, path: Path) -> bool:
    journal = Path(workspace_root(root)) / JOURNAL_FILE
    if path == journal:
        return True
    try:  # a hard link to the journal is the journal too
        return os.path.samefile(path, journal)
    except OSError:
        return False


def _in_drafts(root: Path, path: Path) -> bool:
    folder = os.path.realpath(drafts_dir(Path(workspace_root(root))))
    return str(path).startswith(folder + os.sep)


def _journal_text(root: Path) -> str | None:
    from journal_agent import confined

    try:  # never through a link a clone committed at the journal's name (only compared with:
        # a second name of it is no harm here, the drafting tools write drafts only)
        f = confined.open_read(workspace_root(root), JOURNAL_FILE, one_name=False)
        if f is None:
            return None
        with f:
            return f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(
            f"{JOURNAL_FILE} cannot be read ({exc}); give the entry to JournalAppend."
        ) from None


def _added(text: str) -> str:
    if not text.strip():
        raise ToolError(f"This call adds nothing to {JOURNAL_FILE}; nothing was saved.")
    return text.strip("\n") + "\n"


def _without_preamble(text: str) -> str:
    """A whole new journal's text from its first entry heading on (``# Learning Journal`` and
    such go: the journal gets its title when the first draft is accepted)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.startswith("## ")), 0)
    return _added("".join(lines[start:]))
