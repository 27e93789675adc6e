"""The estimate's ledger: its lines (a component, its formula and its numbers) in order, and
the sharding divisors they are divided by. No torch here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from profiling.records import Step

Group = Literal["model states", "activations", "overhead", "temporaries", "inputs"]


@dataclass
class Line:
    name: str
    bytes: float
    unsharded: float
    formula: str
    substituted: str
    group: Group
    category: str  # parameters | gradients | optimizer | activations | temporaries


@dataclass
class Ledger:
    """The components of an estimate, in order, each with its formula and its numbers."""

    lines: list[Line] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, line: Line) -> None:
        self.lines.append(line)
        self.steps.append(
            Step(
                name=line.name,
                formula=line.formula,
                substituted=line.substituted,
                value=line.bytes,
                unit="B",
            )
        )

    def note(self, text: str) -> None:
        self.notes.append(text)


@dataclass
class Sharding:
    """Divisors of ZeRO stage z over N GPUs and tensor parallelism t, with their symbols."""

    n: int
    t: int
    z: int

    def of(self, stage: int) -> tuple[int, str, str]:
        """(divisor, symbol, numbers) for a state ZeRO shards from ``stage`` on (TP always)."""
        by_n = self.z >= stage and self.n > 1
        syms = (["N"] if by_n else []) + (["t"] if self.t > 1 else [])
        nums = ([str(self.n)] if by_n else []) + ([str(self.t)] if self.t > 1 else [])
        if not syms:
            return 1, "", ""
        div = (self.n if by_n else 1) * self.t
        if len(syms) == 1:
            return div, f" / {syms[0]}", f" / {nums[0]}"
        return div, " / (N·t)", f" / ({self.n}·{self.t})"


def add_state(
    ledger: Ledger, name: str, each: float, sh: Sharding, formula: str, numbers: str
) -> None:
    """One optimizer state's line, ZeRO-sharded from stage 1 (and by TP): ``each`` bytes whole,
    its formula and numbers with the divisor written in."""
    div, sym, num = sh.of(1)
    ledger.add(
        Line(
            name=f"Optimizer: {name}",
            bytes=each / div,
            unsharded=each,
            formula=f"({formula}){sym}" if sym else formula,
            substituted=f"({numbers}){num}" if num else numbers,
            group="model states",
            category="optimizer",
        )
    )


__all__ = ["Group", "Ledger", "Line", "Sharding", "add_state"]
