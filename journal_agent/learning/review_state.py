"""Spaced review's state on disk: ``.journal/review.json``, one FSRS card per reviewed id and
every review as a log line, replaced atomically under ``.journal/locks/review.lock``.

A store in its own module (not beside the scheduling in :mod:`journal_agent.learning.review`):
:class:`journal_agent.workspace.Workspace` hands it out, and the review's functions take the
workspace, so the two may not share a module (the layer test finds every import circle).
A corrupt state file is moved aside (nothing is deleted) and the user is told in one sentence.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from journal_agent import confined
from journal_agent.errors import UserError
from journal_agent.foreign_changes import REVIEW
from journal_agent.foreign_changes import check as check_foreign
from journal_agent.foreign_changes import remember as remember_ours
from journal_agent.locks import held
from journal_agent.paths import review_file, state_dir

if TYPE_CHECKING:
    from collections.abc import Iterator

    from fsrs.card import CardDict

STATE_VERSION = 1


class SavedCard(TypedDict):
    card: CardDict  # fsrs's Card.to_dict()
    title: str


class LogLine(TypedDict):
    item: str
    rating: int  # 1-4: again, hard, good, easy
    at: str  # ISO UTC
    due: str
    stability: float | None


class State(TypedDict):
    """What ``review.json`` holds."""

    version: int
    cards: dict[str, SavedCard]
    log: list[LogLine]


class ReviewState:
    """``.journal/review.json``: FSRS cards by item id, plus the review log."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = review_file(self.root)
        self._held = False  # whether this store holds the review lock now

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with held(
            state_dir(self.root) / "locks" / "review.lock",
            60,
            "another journal-agent review has held the review lock for over 60 s; finish "
            "it and try again.",
            anchor=self.root,
        ):
            self._held = True
            try:
                yield
            finally:
                self._held = False

    def load(self) -> State:
        # A change by another hand (a clone's committed state, an editor) is said first; the
        # check takes the review lock, as our writer holds it, unless we hold it already.
        check_foreign(self.root, REVIEW, held=self._held)
        raw = confined.read(self.root, self.path)
        if raw is None:
            return {"version": STATE_VERSION, "cards": {}, "log": []}
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("cards"), dict):
                raise ValueError("not a review state")
            if not isinstance(data.get("log", []), list):
                raise ValueError("its log is not a list")
            from fsrs import Card

            for value in data["cards"].values():
                Card.from_dict(value["card"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            aside = self._set_aside()
            raise UserError(
                f"the review state {self.path} was unreadable ({_short(exc)}); it was kept as "
                f"{aside.name} and the next review starts a fresh schedule — restore that file "
                "if you fixed it."
            ) from None
        data.setdefault("log", [])
        return cast("State", data)  # its cards and log were checked above

    def _set_aside(self) -> Path:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while confined.lstat(self.root, aside) is not None:
            n += 1
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        confined.rename(self.root, self.path, aside, overwrite=False)
        return aside

    def save(self, data: State) -> None:
        text = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True).encode() + b"\n"
        st = confined.replace(self.root, self.path, text)
        if self._held:  # (under the lock: what the next load expects to find)
            remember_ours(self.root, REVIEW, text, st)


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:80]
