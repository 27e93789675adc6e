"""Drafting: the learning-journal agent, through our runtime, once per moment, capped.

    for done in draft_moments(root, moments):      # a generator: one DraftRun per moment
        print(done.moment.id, [d.id for d in done.drafts], done.tokens)

Before anything is sent: drafting must be on, an API key set and tokens left today. Each run
gets the agent's own definition (``learning-journal``: its system prompt, its model) and the
tools of :mod:`journal_agent.drafts.tools`, so whatever it appends or writes lands in
``.journal/drafts/``. A request is sent only when the tokens already spent plus the request's
estimate (its input counted offline with a 20 % margin, plus its whole ``max_tokens`` of output)
fit what the draft may spend: ``min(draft_max_tokens, draft_daily_tokens - spent today)``. Every
response's usage is counted into the day's total as it arrives.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from journal_agent.capture.drafts import Draft, drafted_moments
from journal_agent.drafts import caps
from journal_agent.errors import UserError
from journal_agent.runtime.client import ModelCallError

if TYPE_CHECKING:
    from journal_agent.capture.inbox import Moment
    from journal_agent.drafts.tools import DraftLog
    from journal_agent.runtime.events import Event
    from journal_agent.runtime.runner import Prepared
    from journal_agent.runtime.wire import RequestBody

AGENT = "learning-journal"
_MARGIN = 1.2  # the offline count is within some 10-20 % of Claude's (runtime/tokens.py)
_MAX_OUTPUT = 8_000  # one response: an entry is a few thousand tokens
_MAX_TURNS = 20
NO_KEY = (
    "inbox draft calls the Anthropic API, which needs an API key, and none is set (a Claude Pro "
    "or Max login in Claude Code has none to lend); set ANTHROPIC_API_KEY to a key from "
    "console.anthropic.com, or write the entries in Claude Code with /journal-agent:learn."
)


class CapReached(ModelCallError):
    """The next request would go past what the draft may spend; it was not sent. A
    ModelCallError, so that it ends the run even when a sub-agent's request meets it."""


@dataclass
class DraftRun:
    """What one moment's run gave: the drafts saved, the tokens spent, why it ended."""

    moment: Moment
    drafts: list[Draft] = field(default_factory=list)
    tokens: int = 0
    stopped: str = ""  # why the run ended early (a cap, a limit); "" when it finished
    final_text: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.drafts)


def pending(root: Path, moments: list[Moment]) -> tuple[list[Moment], dict[str, str]]:
    """The moments to draft, and those skipped (moment id → the draft already made from it)."""
    drafted = drafted_moments(root)
    todo = [m for m in moments if m.id not in drafted]
    return todo, {m.id: drafted[m.id] for m in moments if m.id in drafted}


def ensure_ready(root: Path, *, client: Any = None) -> caps.Caps:
    """Drafting is on, a key is set (unless a client is given), the caps are valid and tokens
    are left today: else one sentence, and nothing is sent or written."""
    caps.ensure_enabled(root)
    if client is None and not (
        os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    ):
        raise UserError(NO_KEY, exit_code=2)
    limits = caps.drafting_caps(root)
    caps.remaining(root, limits)
    return limits


def draft_moments(
    root: Path,
    moments: list[Moment],
    *,
    client: Any = None,
    model: str | None = None,
    home: Path | None = None,
    on_event: Callable[[Event], None] | None = None,
) -> Iterator[DraftRun]:
    """Draft each moment in turn (see the module doc). Raises :class:`UserError` before the
    first run when drafting cannot start, and when today's cap is used up before a later one."""
    from journal_agent.locks import held
    from journal_agent.paths import state_dir
    from journal_agent.runtime.client import make_client

    limits = ensure_ready(root, client=client)
    client = client if client is not None else make_client()
    busy = "another `journal-agent inbox draft` is running in this project; let it finish first."
    # One drafting run at a time: two would each see the same tokens left today.
    with held(state_dir(root) / "locks" / "drafting.lock", 2.0, busy):
        for moment in moments:
            tokens, spent = caps.remaining(root, limits)
            allowance = Allowance(tokens, spent, limits)
            yield _draft_one(root, moment, client, allowance, model, home, on_event)


@dataclass(frozen=True)
class Allowance:
    """What one draft may spend: the smaller of its cap and what is left of the day's."""

    tokens: int
    spent_today: int  # before this draft
    caps: caps.Caps

    def why(self) -> str:
        return (
            f"the {self.tokens:,} tokens this draft may spend (per-draft cap "
            f"{self.caps.per_draft:,}; today {self.spent_today:,} of {self.caps.daily:,} spent)"
        )


class DraftPreview(TypedDict):
    """One moment's first request beside what its draft may spend (``--dry-run --json``)."""

    moment: str
    model: str
    estimate: dict[str, int]  # tokens: tools, system, messages, total (offline)
    max_tokens: int
    need: int  # the estimate with its margin, plus max_tokens
    allowance: int
    fits: bool
    request: RequestBody


def preview(
    root: Path, moments: list[Moment], *, model: str | None = None, home: Path | None = None
) -> list[DraftPreview]:
    """``inbox draft --dry-run``: each moment's first request as it would be sent, estimated
    offline, beside what the draft may spend. Sends nothing; needs no key."""
    from journal_agent.drafts.tools import DraftLog
    from journal_agent.runtime.tokens import estimate_request

    limits = caps.drafting_caps(root)
    spent = caps.used_today(root)
    allowance = Allowance(min(limits.per_draft, max(0, limits.daily - spent)), spent, limits)
    out: list[DraftPreview] = []
    for moment in moments:
        done = DraftRun(moment)
        log = DraftLog(root, [moment.id])
        prepared = _prepare(root, moment, allowance, None, done, log, model, home, None)
        request = prepared.first_request()
        estimate = estimate_request(request)
        need = int(estimate["total"] * _MARGIN) + int(request["max_tokens"])
        out.append(
            {
                "moment": moment.id,
                "model": request["model"],
                "estimate": estimate,
                "max_tokens": request["max_tokens"],
                "need": need,
                "allowance": allowance.tokens,
                "fits": need <= allowance.tokens,
                "request": request,
            }
        )
    return out


def _draft_one(
    root: Path,
    moment: Moment,
    client: Any,
    allowance: Allowance,
    model: str | None,
    home: Path | None,
    on_event: Callable[[Event], None] | None,
) -> DraftRun:
    from journal_agent.drafts.tools import DraftLog
    from journal_agent.runtime.runner import execute

    done = DraftRun(moment)
    log = DraftLog(root, [moment.id])
    prepared = _prepare(root, moment, allowance, client, done, log, model, home, on_event)
    try:
        result = execute(prepared)
    except CapReached as exc:
        done.stopped = exc.message
    else:
        done.final_text = result.final_text
        if not result.ok:
            done.stopped = result.message
    done.drafts = list(log.drafts)
    return done


def _prepare(
    root: Path,
    moment: Moment,
    allowance: Allowance,
    client: Any,
    done: DraftRun,
    log: DraftLog,
    model: str | None,
    home: Path | None,
    on_event: Callable[[Event], None] | None,
) -> Prepared:
    """The agent's run for one moment: its definition, the drafting tools, the caps."""
    from journal_agent.drafts.tools import drafting_tools
    from journal_agent.runtime.events import UsageReported
    from journal_agent.runtime.loop import RunOptions
    from journal_agent.runtime.runner import RunConfig, prepare_agent
    from journal_agent.runtime.transcript import new_run_id

    def emit(event: Event) -> None:
        if isinstance(event, UsageReported):
            done.tokens += event.usage.total
            caps.add_usage(root, event.usage.total)
        if on_event is not None:
            on_event(event)

    log.run = new_run_id()
    config = RunConfig(
        root=root,
        model=model,
        options=RunOptions(
            budget_tokens=allowance.tokens,
            # A response cut off inside its JournalAppend call is retried with twice the room,
            # once; the cap check counts the larger max_tokens before that request too.
            max_tokens=max(1, min(_MAX_OUTPUT, allowance.tokens // 4)),
            max_tokens_ceiling=max(1, min(2 * _MAX_OUTPUT, allowance.tokens // 2)),
            max_turns=_MAX_TURNS,
        ),
        tools=drafting_tools(log),
        client=None if client is None else _Capped(client, done, allowance.tokens, allowance.why()),
        emit=emit,
        home=home,
        run_id=log.run,
    )
    prepared = prepare_agent(AGENT, drafting_prompt(moment), config)
    # The tools the agent's file names that a drafting run leaves out (Bash, MemoryProfile)
    # are left out on purpose: no notice that they are "not available here".
    prepared.missing_tools = []
    log.model = prepared.spec.model
    return prepared


def drafting_prompt(moment: Moment) -> str:
    """The first user message of a moment's run: the moment, and how this run differs."""
    lines = [
        "Draft one learning-journal entry from this learning moment, captured while I worked "
        f"in Claude Code ({moment.time}, moment {moment.id}):",
        "",
        "<moment>",
        moment.text,
        "</moment>",
        "",
    ]
    if moment.files:
        specs = ", ".join(f.spec() for f in moment.files)
        lines.append(f"Files that turn edited: {specs} (Read them for the exact lines to cite).")
    if moment.records:
        cited = ", ".join(f"[m:{r}]" for r in moment.records)
        lines.append(f"Measurement records it created: {cited} (cite each beside its numbers).")
    lines += [
        "",
        "I am not here to answer questions, so ask none: decide from the moment and the code. "
        "Give the finished entry to JournalAppend; in this run it is saved as a draft that I "
        "review and accept later (learning_journal.md itself is not changed, and Bash is not "
        "available). Then say in one line what you drafted.",
    ]
    return "\n".join(lines)


class _Capped:
    """The Anthropic client, except that a request which would take the draft past what it may
    spend is not sent (:class:`CapReached`). Everything else is the client's own."""

    def __init__(self, client: Any, done: DraftRun, allowance: int, why: str) -> None:
        self._client = client
        self.messages = _CappedMessages(client.messages, done, allowance, why)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class _CappedMessages:
    def __init__(self, messages: Any, done: DraftRun, allowance: int, why: str) -> None:
        self._messages, self._done, self._allowance, self._why = messages, done, allowance, why

    def create(self, **request: Any) -> Any:
        from journal_agent.runtime.tokens import estimate_request

        need = int(estimate_request(request)["total"] * _MARGIN) + int(request["max_tokens"])
        spent = self._done.tokens
        if spent + need > self._allowance:
            moment = self._done.moment.id
            if spent == 0:
                raise CapReached(
                    f"the draft from moment {moment} was not started: its first request needs "
                    f"up to about {need:,} tokens, over {self._why}; nothing was sent. Raise "
                    '"capture.draft_max_tokens" in .journal/settings.json to draft it.'
                )
            raise CapReached(
                f"the draft from moment {moment} stopped before its next request: it would need "
                f"up to about {need:,} tokens more, over {self._why} ({spent:,} spent on it)."
            )
        return self._messages.create(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._messages, name)
