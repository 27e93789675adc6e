"""What a run returns: why it stopped, the final message, and what it cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from journal_agent.runtime.usage import TokenUsage, TurnUsage

if TYPE_CHECKING:
    from journal_agent.runtime.wire import ChatMessage

# Why a run stopped. ``completed`` is the only success; limits stop cleanly.
COMPLETED = "completed"
MAX_TURNS = "max_turns"
BUDGET = "budget"
MAX_TOKENS = "max_tokens"
REFUSAL = "refusal"
CONTEXT_WINDOW = "context_window"
UNKNOWN_STOP = "unknown_stop"
INTERRUPTED = "interrupted"

LIMIT_STOPS = {MAX_TURNS, BUDGET, MAX_TOKENS}


class RunSummary(TypedDict):
    """A run's result as ``--json`` prints it and a background run's status records it."""

    agent: str
    model: str
    status: str
    message: str
    turns: int
    tools_used: dict[str, int]
    usage: dict[str, int]  # TokenUsage.as_dict()
    cost_usd: float | None
    files_changed: list[str]
    per_turn: list[TurnUsage]
    transcript: str | None
    final_text: str


@dataclass
class RunResult:
    agent: str
    model: str
    status: str
    final_text: str
    message: str = ""  # a sentence explaining a non-completed status
    turns: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: float | None = 0.0
    tools_used: dict[str, int] = field(default_factory=dict)
    files_changed: list[str] = field(default_factory=list)
    messages: list[ChatMessage] = field(default_factory=list)
    transcript: str | None = None
    # Usage and cost of each model request of the run (sub-agents' included, tagged by agent).
    per_turn: list[TurnUsage] = field(default_factory=list)

    @property
    def transcript_path(self) -> Path | None:
        return Path(self.transcript) if self.transcript else None

    @property
    def ok(self) -> bool:
        return self.status == COMPLETED

    @property
    def exit_code(self) -> int:
        """0 completed; 3 stopped by a limit (turns, budget, output length); 1 otherwise."""
        if self.status == COMPLETED:
            return 0
        return 3 if self.status in LIMIT_STOPS else 1

    def summary(self) -> RunSummary:
        return {
            "agent": self.agent,
            "model": self.model,
            "status": self.status,
            "message": self.message,
            "turns": self.turns,
            "tools_used": self.tools_used,
            "usage": self.usage.as_dict(),
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "files_changed": self.files_changed,
            "per_turn": self.per_turn,
            "transcript": self.transcript,
            "final_text": self.final_text,
        }
