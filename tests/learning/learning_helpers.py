"""Helpers for the learning tests: the seed ledger, a journal, the CLI on a pseudo-terminal."""

from __future__ import annotations

import os
import select
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
SEED_LEDGER = FIXTURES / "seed_ledger.md"  # the user's example ledger (seed 002), verbatim


def entry(title: str, date: str, question: str, intuition: str, tags: str = "#zero") -> str:
    return (
        f"## {title} ({date})\n"
        "\n"
        "**Context**: Reading the training configuration.\n"
        "\n"
        f"**The Key Question I Had**: *{question}*\n"
        "\n"
        "### 🎯 Intuition\n"
        f"{intuition}\n"
        "\n"
        "### 🏷️ Tags\n"
        f"{tags}\n"
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


def run_on_a_terminal(
    args: list[str], cwd: Path, home: Path, script: list[tuple[bytes, bytes]]
) -> tuple[str, int]:
    """Run the CLI on a pseudo-terminal; each time the output shows the next trigger, type
    its answer. Returns (everything it printed, exit code)."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: become the CLI
        os.chdir(cwd)
        os.environ["HOME"] = str(home)
        os.environ.pop("JOURNAL_AGENT_ROOT", None)
        os.execv(sys.executable, [sys.executable, "-m", "journal_agent", *args])
    out = b""
    seen = 0  # output already matched against earlier triggers
    steps = list(script)
    while True:
        ready, _, _ = select.select([fd], [], [], 30)
        if not ready:
            os.kill(pid, 9)
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
        while steps and steps[0][0] in out[seen:]:
            trigger, answer = steps.pop(0)
            seen = out.index(trigger, seen) + len(trigger)
            os.write(fd, answer)
    _, status = os.waitpid(pid, 0)
    return out.decode(errors="replace"), os.waitstatus_to_exitcode(status)
