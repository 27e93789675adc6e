"""Drafts on disk: ``.journal/drafts/<id>.md``, one entry each, waiting for the user.

A draft is the entry's markdown after one header line that says where it came from::

    <!-- journal-agent draft {"created": "…", "model": "…", "moments": ["9a88b80a0c97"], …} -->
    ## Warm-up Is Counted in Steps (2026-11-26)
    …

``<id>`` is the entry's own id (``warm-up-is-counted-in-steps-2026-11-26``, with ``-2``… when
taken). The user may edit the file before accepting it; :func:`accept` sends the entry (header
removed) through the journal's one append path (:func:`journal_agent.journal.api.append_entry`:
locked, atomic, every ``path:line`` and ``[m:id]`` checked), then marks its moments written and
removes the draft. Other files under ``drafts/`` (the agents' own scratch drafts in Claude Code)
carry no header and are not listed here.

The drafting run (:mod:`journal_agent.drafts`) saves them; the CLI's ``inbox drafts`` /
``accept-draft`` / ``reject-draft`` and the web view's inbox page list, accept and reject them
through this module, which never starts a run. SessionStart counts them
(:func:`journal_agent.capture.status.waiting_drafts`) by the header's first bytes.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journal_agent import confined
from journal_agent.errors import UserError
from journal_agent.paths import drafts_dir, state_dir

if TYPE_CHECKING:
    from journal_agent.journal.api import AppendOutcome
    from journal_agent.journal.model import Entry
    from journal_agent.journal.verify import Problem

# SessionStart counts drafts by this line's first bytes (capture.status.DRAFT_HEADER).
_HEADER = re.compile(r"\A<!-- journal-agent draft (\{.*?\}) -->\r?\n")
_MAX_BYTES = 1 << 20  # a draft is one entry: a few KB; anything larger is not ours
_LOCK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Draft:
    """One draft: its entry text (header removed) and where it came from."""

    id: str
    path: Path
    text: str
    moments: tuple[str, ...] = ()
    created: str = ""
    model: str = ""
    run: str = ""
    title: str = field(default="", compare=False)
    utf8: bool = field(default=True, compare=False)  # False: shown with U+FFFD, never appended
    # (inode, size, mtime) as read: the file is removed only while it is still that version.
    stamp: tuple[int, int, int] = field(default=(0, 0, 0), compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": str(self.path),
            "title": self.title,
            "moments": list(self.moments),
            "created": self.created,
            "model": self.model,
            "run": self.run,
            "text": self.text,
        }


def check_entry(root: Path, text: str) -> tuple[Entry, list[Problem]]:
    """The checks an append runs (one entry, required sections, ``path:line``, ``[m:id]``,
    no secret), so a draft that would be refused is not saved. Raises :class:`UserError` when
    the text is not one entry or holds a secret."""
    from journal_agent.journal.verify import DraftError, validate_draft
    from journal_agent.secret_text import refuse_secrets

    refuse_secrets(text, "a journal draft")
    try:
        return validate_draft(root, text)
    except DraftError as exc:
        raise UserError(f"this is not one journal entry: {exc}.") from None


def save(
    root: Path,
    text: str,
    *,
    moments: list[str],
    model: str = "",
    run: str = "",
    replace: str | None = None,
) -> Draft:
    """Write ``text`` (one checked entry) as a new draft, or over this run's draft ``replace``."""
    entry, _ = check_entry(root, text)
    folder = drafts_dir(root)
    draft_id = replace or _free_id(root, folder, entry.id)
    meta = {"created": _now(), "model": model, "moments": list(moments), "run": run}
    body = text.removeprefix("\ufeff").rstrip("\n") + "\n"
    header = f"<!-- journal-agent draft {json.dumps(meta, sort_keys=True)} -->\n"
    path = folder / f"{draft_id}.md"
    confined.replace(root, path, header + body)
    return Draft(draft_id, path, body, tuple(moments), meta["created"], model, run, entry.title)


def list_drafts(root: Path) -> list[Draft]:
    """The drafts ``inbox draft`` wrote that wait for the user, oldest first."""
    folder = drafts_dir(root)
    try:
        names = confined.listdir(root, folder)
    except (confined.Refused, NotADirectoryError):
        return []  # (doctor names a drafts folder that is a link)
    found = [
        d for d in (_read(root, folder / n) for n in names if n.endswith(".md")) if d is not None
    ]
    return sorted(found, key=lambda d: (d.created, d.id))


def find_draft(root: Path, key: str) -> Draft:
    """The draft ``key`` names: its number in :func:`list_drafts`, its id, or a unique prefix."""
    drafts = list_drafts(root)
    hint = "`journal-agent inbox drafts` lists them"
    if key.isdigit() and len(key) < 6:
        n = int(key)
        if 1 <= n <= len(drafts):
            return drafts[n - 1]
        raise UserError(f"there are {len(drafts)} drafts, so no number {n}; {hint}.")
    exact = [d for d in drafts if d.id == key.removesuffix(".md")]
    found = exact or [d for d in drafts if d.id.startswith(key)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise UserError(f"no draft has the id {key!r}; {hint}.")
    raise UserError(f"{len(found)} drafts have ids starting with {key!r}; give more of it.")


def drafted_moments(root: Path) -> dict[str, str]:
    """Moment id → the id of a draft waiting that was made from it."""
    return {m: d.id for d in list_drafts(root) for m in d.moments}


@dataclass
class Accepted:
    draft: Draft
    outcome: AppendOutcome
    marked: list[str] = field(default_factory=list)  # moments marked written


def accept(root: Path, key: str, *, force: bool = False) -> Accepted:
    """Append draft ``key`` to the journal through the one append path; when it lands, mark its
    moments written and remove the draft. Refused (problems listed, draft kept) otherwise."""
    from journal_agent.journal.api import append_entry
    from journal_agent.locks import held
    from journal_agent.workspace import Workspace

    draft = find_draft(root, key)
    busy = f"another command is accepting or rejecting drafts; try again in a moment ({draft.id})."
    with held(state_dir(root) / "locks" / "drafts.lock", _LOCK_TIMEOUT_S, busy, anchor=root):
        # Read again under the lock: a concurrent accept may have taken it, or the user edited it.
        current = _read(root, draft.path)
        if current is None:
            raise UserError(f"the draft {draft.id} is gone (accepted or rejected meanwhile).")
        if not current.utf8:  # appended, its bytes would become U+FFFD and the draft be deleted
            raise UserError(
                f"{draft.path} is not UTF-8 text (an editor saved it in another encoding); save "
                "it as UTF-8 and accept it again. Nothing was appended."
            )
        outcome = append_entry(Workspace(root), current.text, force=force)
        if not outcome.appended:
            return Accepted(current, outcome)
        marked = _mark_written(root, current.moments)
        _remove_if_unchanged(root, current)
    return Accepted(current, outcome, marked)


def reject(root: Path, key: str) -> Draft:
    """Delete draft ``key``; its moments stay in the inbox."""
    from journal_agent.locks import held

    draft = find_draft(root, key)
    busy = f"another command is accepting or rejecting drafts; try again in a moment ({draft.id})."
    with held(state_dir(root) / "locks" / "drafts.lock", _LOCK_TIMEOUT_S, busy, anchor=root):
        confined.unlink(root, draft.path)  # not while an accept of it is appending it
    return draft


def _remove_if_unchanged(root: Path, draft: Draft) -> None:
    """Remove the draft just appended, unless it was written again while it was appended (the
    user's editor, a command): that version was not appended, so it stays to be looked at."""
    st = confined.lstat(root, draft.path)
    if st is not None and (st.st_ino, st.st_size, st.st_mtime_ns) == draft.stamp:
        confined.unlink(root, draft.path)


def _mark_written(root: Path, moments: tuple[str, ...]) -> list[str]:
    from journal_agent.capture.inbox import dismiss

    marked = []
    for moment in moments:
        try:
            marked.append(dismiss(root, moment, "written").id)
        except KeyError:  # dismissed meanwhile, or the inbox was cleared: nothing to mark
            continue
    return marked


def _free_id(root: Path, folder: Path, entry_id: str) -> str:
    candidate, n = entry_id, 1
    while confined.lstat(root, folder / f"{candidate}.md") is not None:  # a link too
        n += 1
        candidate = f"{entry_id}-{n}"
    return candidate


def _read(root: Path, path: Path) -> Draft | None:
    """The draft in ``path``, or None: not ours (no header), a symlink, not a file, too large."""
    # A folder named x.md (a sandboxed `mkdir` can plant one) or a FIFO is None here too.
    try:
        f = confined.open_read(root, path)
        if f is None:
            return None
        with f:
            # The stamp of the version read: one written meanwhile is kept, never removed unread.
            st = os.fstat(f.fileno())
            raw = f.read(_MAX_BYTES + 1) if st.st_size <= _MAX_BYTES else None
    except OSError:
        return None
    if raw is None or len(raw) > _MAX_BYTES:  # too large, or grew since it was opened
        return None
    try:
        text, utf8 = raw.decode("utf-8"), True
    except UnicodeDecodeError:  # listed and shown, but accept refuses it (see accept)
        text, utf8 = raw.decode("utf-8", "replace"), False
    match = _HEADER.match(text)
    if match is None:
        return None
    try:
        meta = json.loads(match.group(1))
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    body = text[match.end() :]
    heading = next((ln for ln in body.splitlines() if ln.startswith("## ")), "")
    moments = meta.get("moments")
    return Draft(
        id=path.stem,
        path=path,
        text=body,
        moments=tuple(str(m) for m in moments) if isinstance(moments, list) else (),
        created=str(meta.get("created") or ""),
        model=str(meta.get("model") or ""),
        run=str(meta.get("run") or ""),
        title=heading.removeprefix("## ").strip(),
        utf8=utf8,
        stamp=(st.st_ino, st.st_size, st.st_mtime_ns),
    )


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
