"""``learning_ledger.md`` on disk: read it, and update it atomically under the journal's lock.

An update reads the file, applies the operations and checks the result *outside* the lock —
a batch of operations must not hold journal appends up — then takes the same lock as journal
appends (and as Write/Edit of the ledger) only to check that the file is still what it read
(size, mtime, inode) and replace it with a temp file + fsync + rename. If another writer or an
editor changed it meanwhile, the update is redone on the new content (up to five times), so
neither loses the other's change.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date as _date
from pathlib import Path

from journal_agent import confined
from journal_agent.errors import UserError
from journal_agent.foreign_changes import check as check_foreign
from journal_agent.foreign_changes import remember as remember_ours
from journal_agent.journal.store import changed_since
from journal_agent.learning.ledger import Ledger, parse_ledger
from journal_agent.learning.ledger_edit import new_ledger, set_updated
from journal_agent.learning.ledger_ops import LedgerOperation, apply
from journal_agent.paths import LEDGER_FILE


@dataclass
class UpdateResult:
    path: Path
    created: bool
    changes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "created": self.created, "changes": self.changes}


def refuse_new_secrets(old: str, new: str) -> None:
    """The ledger never receives a secret (an API key, a token, a password): refuse an update
    whose new lines hold one. Lines already there, put by the user, do not block an unrelated
    update (as for Write/Edit into the ledger)."""
    from journal_agent.secret_text import refuse_secrets

    before = set(old.splitlines())
    refuse_secrets("\n".join(line for line in new.splitlines() if line not in before), LEDGER_FILE)


class LedgerStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / LEDGER_FILE

    def exists(self) -> bool:
        """Whether something has the ledger's name (a link there is refused when read)."""
        return confined.lstat(self.root, self.path) is not None

    def read_text(self) -> str:
        check_foreign(self.root, LEDGER_FILE)
        # Never through a link: a ledger that is a link to ~/.ssh/id_ed25519 would be copied
        # into the workspace by the next update (confined.Refused says so instead).
        data = confined.read(self.root, self.path)
        if data is None:
            raise UserError(
                f"there is no {LEDGER_FILE} in {self.root} yet; create it with "
                "`journal-agent ledger init` or run /end-session."
            ) from None
        return _decode(data, self.path)

    def load(self) -> Ledger:
        return parse_ledger(self.read_text())

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The journal's lock: journal appends, ledger updates and Write/Edit of either."""
        from journal_agent.journal.store import JournalStore

        with JournalStore(self.root).lock():
            yield

    def update(
        self,
        operations: list[LedgerOperation],
        *,
        title: str | None = None,
        today: str | None = None,
    ) -> UpdateResult:
        """Apply the operations together (all or none) and stamp ``Last Updated``."""
        from journal_agent.learning.ledger_ops import validate

        day = today or _date.today().isoformat()
        dated = ("add_session", "archive_insight", "set_updated")
        operations = [
            op.model_copy(update={"date": day}) if op.op in dated and op.date is None else op
            for op in operations
        ]
        validate(self.root, operations)
        return self.edit(
            lambda ledger: [apply(ledger, op) for op in operations],
            title=title,
            today=today,
            stamp=not any(op.op == "set_updated" for op in operations),
        )

    def edit(
        self,
        change: Callable[[Ledger], list[str]],
        *,
        title: str | None = None,
        today: str | None = None,
        stamp: bool = True,
    ) -> UpdateResult:
        check_foreign(self.root, LEDGER_FILE)  # a change by another hand: said before ours
        for _ in range(5):
            st, text = self._snapshot()
            created = st is None
            if created:
                text = new_ledger(title or "Learning Ledger", today)
            # The work, without the lock: parse, apply, stamp, render, refuse secrets.
            ledger = parse_ledger(text)
            changes = change(ledger)
            # A tick of a ticked box changes nothing: no new date either.
            if stamp and (created or ledger.render() != text):
                set_updated(ledger, today or _date.today().isoformat())
            new_text = ledger.render()
            if new_text == text and not created:
                return UpdateResult(self.path, False, changes)
            refuse_new_secrets("" if created else text, new_text)
            with self.locked():  # held only to re-check and write
                if self._changed(st, text):
                    continue  # written meanwhile: redo on its content
                confined.remove_stale_temps(self.root, self.path)
                data = new_text.encode("utf-8")
                written = confined.replace(self.root, self.path, data)
                remember_ours(self.root, LEDGER_FILE, data, written)
                return UpdateResult(self.path, created, changes)
        raise UserError(
            f"{self.path} kept changing while updating it; close the editor that is saving it "
            "and try again."
        )

    def _snapshot(self) -> tuple[os.stat_result | None, str]:
        """The file's stat and text now; (None, "") when there is none yet."""
        found = confined.snapshot(self.root, self.path)
        if found is None:
            return None, ""
        st, data = found
        return st, _decode(data, self.path)

    def _changed(self, st: os.stat_result | None, text: str) -> bool:
        """Whether the file is no longer what the update was computed from (a stat identity
        can repeat after a rename frees an inode: the bytes decide)."""
        if st is None:
            return confined.lstat(self.root, self.path) is not None
        return changed_since(self.root, self.path, st) or self._snapshot()[1] != text


def _decode(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UserError(
            f"{path.name} is not valid UTF-8 (line {line}); save it as UTF-8 in your editor "
            "and try again."
        ) from None
