"""Grep and Glob while a directory of the workspace is swapped, over and over, for a symlink
to a directory outside it: ripgrep runs in a view that holds the workspace alone, so the
link leads nowhere. 1,000 calls each, 0 leaks (the unconfined rg leaked in 40 / 15 of 1,000).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from journal_agent.tools.base import ToolContext
from journal_agent.tools.glob import Glob
from journal_agent.tools.grep import Grep
from journal_agent.tools.permissions import PermissionPolicy
from journal_agent.tools.sandbox import available_confinement

CALLS = 1000


@pytest.fixture
def racing(tmp_path: Path):
    if not available_confinement().active:
        pytest.skip(f"no OS sandbox on this machine: {available_confinement().reason}")
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "d").mkdir(parents=True)
    outside.mkdir()
    for i in range(20):
        (ws / "d" / f"inside-{i}.txt").write_text("NEEDLE inside\n")
        (outside / f"outside-{i}.txt").write_text("NEEDLE LEAKED-FROM-OUTSIDE\n")
    stop = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        d, real = ws / "d", ws / "d.real"
        while not stop.is_set():
            os.rename(d, real)
            os.symlink(outside, d)
            os.unlink(d)
            os.rename(real, d)
            swaps += 1

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    ctx = ToolContext(root=ws, policy=PermissionPolicy(ws, mode="default"))
    yield ctx, lambda: swaps
    stop.set()
    thread.join()


def test_grep_never_reads_outside_during_a_swap_race(racing):
    ctx, swaps = racing
    leaks = 0
    for _ in range(CALLS):
        res = Grep().call(ctx, {"pattern": "NEEDLE", "output_mode": "content"})
        leaks += "LEAKED-FROM-OUTSIDE" in res.content or "outside-" in res.content
    assert swaps() > CALLS  # the race really ran alongside
    assert leaks == 0


def test_glob_never_lists_outside_during_a_swap_race(racing):
    ctx, swaps = racing
    leaks = 0
    for _ in range(CALLS):
        res = Glob().call(ctx, {"pattern": "**/*.txt"})
        leaks += "outside-" in res.content
    assert swaps() > CALLS
    assert leaks == 0
