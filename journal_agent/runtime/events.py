"""Typed events the loop emits while it works.

The CLI renders them, the transcript records them, tests assert on them: one stream for all.
``agent`` names who emitted the event: ``main`` or ``main/<subagent_type>#<n>`` for sub-agents.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from journal_agent.runtime.usage import TokenUsage

if TYPE_CHECKING:
    from journal_agent.runtime.result import RunResult


@dataclass(frozen=True)
class Event:
    agent: str


@dataclass(frozen=True)
class TurnStarted(Event):
    turn: int
    model: str


@dataclass(frozen=True)
class AssistantText(Event):
    turn: int
    text: str


@dataclass(frozen=True)
class ToolCalled(Event):
    turn: int
    tool_use_id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolFinished(Event):
    turn: int
    tool_use_id: str
    name: str
    is_error: bool
    output: str
    seconds: float


@dataclass(frozen=True)
class UsageReported(Event):
    turn: int
    usage: TokenUsage
    cost_usd: float | None
    run_usage: TokenUsage
    run_cost_usd: float


@dataclass(frozen=True)
class Notice(Event):
    """Something the user should know that is not an error of the run (a retry, a skipped tool)."""

    message: str


@dataclass(frozen=True)
class Done(Event):
    result: RunResult


EventSink = Callable[[Event], None]


def ignore(_event: Event) -> None:
    """The default sink."""
