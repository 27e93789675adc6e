"""Token usage and its cost: per turn, per agent and for a whole run (sub-agents included)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from journal_agent.runtime.models import Price

if TYPE_CHECKING:
    from anthropic.types import Usage


@dataclass
class TokenUsage:
    input: int = 0
    output: int = 0
    cache_write: int = 0
    cache_read: int = 0

    @classmethod
    def from_api(cls, usage: Usage) -> TokenUsage:
        """From the SDK's ``Usage`` (cache fields may be None on gateways that omit them)."""
        return cls(
            input=usage.input_tokens or 0,
            output=usage.output_tokens or 0,
            cache_write=getattr(usage, "cache_creation_input_tokens", None) or 0,
            cache_read=getattr(usage, "cache_read_input_tokens", None) or 0,
        )

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_write + self.cache_read

    @property
    def prompt(self) -> int:
        """Every input token of the request, cached or not."""
        return self.input + self.cache_write + self.cache_read

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input + other.input,
            self.output + other.output,
            self.cache_write + other.cache_write,
            self.cache_read + other.cache_read,
        )

    def cost(self, price: Price | None) -> float | None:
        if price is None:
            return None
        return (
            self.input * price.input
            + self.output * price.output
            + self.cache_write * price.cache_write
            + self.cache_read * price.cache_read
        ) / 1_000_000

    def as_dict(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_write": self.cache_write,
            "cache_read": self.cache_read,
        }


class TurnUsage(TypedDict):
    """One model request of a run: who made it, at which turn, its tokens and cost."""

    agent: str
    turn: int
    input: int
    output: int
    cache_write: int
    cache_read: int
    cost_usd: float | None  # None when the model has no price


class Meter:
    """Run-wide totals shared by the main agent and its sub-agents (threads), for budgets."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.usage = TokenUsage()
        self.cost_usd = 0.0
        self.unpriced = False  # some model had no price: cost is a lower bound
        # One entry per model request, in the order they completed: who, which turn, usage.
        self.per_turn: list[TurnUsage] = []

    def add(
        self, usage: TokenUsage, cost: float | None, *, agent: str = "main", turn: int = 0
    ) -> tuple[TokenUsage, float]:
        with self._lock:
            self.usage = self.usage + usage
            if cost is None:
                self.unpriced = True
            else:
                self.cost_usd += cost
            self.per_turn.append(
                {
                    "agent": agent,
                    "turn": turn,
                    "input": usage.input,
                    "output": usage.output,
                    "cache_write": usage.cache_write,
                    "cache_read": usage.cache_read,
                    "cost_usd": None if cost is None else round(cost, 6),
                }
            )
            return self.usage, self.cost_usd
