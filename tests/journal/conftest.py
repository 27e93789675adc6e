"""Fixtures for the journal tests: a workspace with source files and measurement records."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from journal_agent import workspace
from journal_agent.paths import measurements_dir
from profiling.records import MeasurementRecord, Quantity, RecordStore, Step
from tests.entries import render_entry

if TYPE_CHECKING:
    from tests.conftest import CLI

GIB = 2.0**30


def make_entry(
    title: str = "ZeRO Stage 2",
    date: str = "2026-11-21",
    body: str = "",
    tags: str = "#zero #deepspeed",
) -> str:
    return render_entry(
        title,
        date,
        context="Studying the training configuration and encountering DeepSpeed.",
        question="Why do we need DeepSpeed?",
        intuition="DeepSpeed splits optimizer states across GPUs instead of duplicating them.",
        tags=tags,
        body=body,
    )


class Workspace:
    def __init__(self, root: Path, cli: CLI) -> None:
        self.root = root
        self.workspace = workspace.Workspace(root)  # what the journal's front door takes
        self.records = RecordStore(measurements_dir(root))
        self._cli = cli

    @property
    def journal(self) -> Path:
        return self.root / "learning_journal.md"

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def record(self, record_id: str, results: dict[str, tuple[float, str]], steps=()) -> str:
        self.records.save(
            MeasurementRecord(
                id=record_id,
                kind="estimated",
                title="test record",
                results=[Quantity(name=k, value=v, unit=u) for k, (v, u) in results.items()],
                steps=[
                    Step(name=n, formula=f, substituted=s, value=v, unit=u)
                    for n, f, s, v, u in steps
                ],
            )
        )
        return record_id

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """``journal-agent journal ARGS`` on this workspace (in-process, see tests/conftest.py)."""
        env = {"JOURNAL_AGENT_ROOT": str(self.root), "NO_COLOR": "1"}
        return self._cli("journal", *args, input=stdin, env=env, cwd=self.root)


@pytest.fixture
def ws(tmp_path: Path, cli: CLI) -> Workspace:
    w = Workspace(tmp_path, cli)
    w.write("src/train.py", "".join(f"line {i}\n" for i in range(1, 101)))
    return w


@pytest.fixture(scope="module")
def relevance_journal(tmp_path_factory) -> Workspace:
    """The relevance set's 43 entries, indexed and embedded once per test module (its ``cli``
    is unset: the ``cli`` fixture is per test)."""
    from journal_agent.journal import api

    from .search import relevance

    w = Workspace(tmp_path_factory.mktemp("relevance"), None)  # type: ignore[arg-type]
    relevance.write_journal(w.root)
    api.index(w.workspace)
    return w
