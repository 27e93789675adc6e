"""Helpers for the learning tests: the seed ledger and a journal."""

from __future__ import annotations

from pathlib import Path

from tests.entries import render_entry

FIXTURES = Path(__file__).parent / "fixtures"
SEED_LEDGER = FIXTURES / "seed_ledger.md"  # the user's example ledger (seed 002), verbatim


def entry(title: str, date: str, question: str, intuition: str, tags: str = "#zero") -> str:
    return render_entry(
        title,
        date,
        context="Reading the training configuration.",
        question=question,
        intuition=intuition,
        tags=tags,
    )


JOURNAL = (
    "# Learning Journal\n\n---\n\n"
    + entry(
        "ZeRO Stage 2",
        "2026-11-20",
        "Why shard gradients as well as optimizer state?",
        "Each GPU keeps only the gradients of the parameters it updates.",
    )
    + "\n---\n\n"
    + entry(
        "Activation Checkpointing",
        "2026-11-21",
        "What does recomputation trade for memory?",
        "Keep a few activations, recompute the rest in the backward pass.",
        "#checkpointing",
    )
)


def write_journal(root: Path) -> None:
    (root / "learning_journal.md").write_text(JOURNAL, encoding="utf-8")
