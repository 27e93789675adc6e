"""Helpers shared by the profiling commands (``estimate``, ``trace``, ``measurements``)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from journal_agent.cli._common import echo, open_workspace, resolve_root
from journal_agent.paths import records_dir_for_saving
from profiling.time_bound import MAX_TIMEOUT_S

if TYPE_CHECKING:
    from rich.console import Console

    from profiling.config import TrainingConfig
    from profiling.estimate.comparison import Comparison
    from profiling.records import MeasurementRecord, RecordStore

PlotOption = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        help="Write a breakdown chart to this new file (.png, .svg, .pdf, …; --force to "
        "overwrite).",
    ),
]


# The time bound of estimate, trace and fit (profiling.time_bound: one sentence when it runs out).
TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        min=0.001,
        max=MAX_TIMEOUT_S,
        metavar="SECONDS",
        help="Stop, and say so, after this many seconds.",
    ),
]


def _store(root: Path | None) -> RecordStore:
    return open_workspace(root).records


NoSaveOption = Annotated[
    bool,
    typer.Option(
        "--no-save",
        help="Print the result without keeping a record (nothing under .journal/measurements/ "
        "to cite or prune later).",
    ),
]
_UNSAVED: set[str] = set()  # ids of records this process made and did not keep (--no-save)


def _saving_store(root: Path | None, *, save: bool = True) -> RecordStore:
    """The store new records go to (the sandbox's outbox when run inside it); each record it
    saves says which command made it (``extra.command``, shown by the view's provenance).
    With ``save`` off (``--no-save``) it keeps nothing and remembers what it did not keep."""
    from profiling.records import RecordStore

    class _Store(RecordStore):
        def save(self, record: MeasurementRecord) -> str:
            if not save:
                _UNSAVED.add(record.id)
                return record.id
            record.extra.setdefault("command", invocation())
            return super().save(record)

    return _Store(records_dir_for_saving(resolve_root(root)))


def unsaved_text(text: str) -> str:
    """A report's "record: ID (cite as …)" line, for a record not kept, says so instead."""
    for record_id in _UNSAVED:
        text = re.sub(
            rf"^record: {re.escape(record_id)} .*$",
            "record: not saved (--no-save): there is nothing to cite",
            text,
            flags=re.M,
        )
    return text


def mark_unsaved(payload: dict) -> dict:
    """A command's --json payload says whether its record was kept (``saved``)."""
    if _UNSAVED:
        payload["saved"] = False
    return payload


def invocation() -> str:
    """``journal-agent ARGS`` as it was run, secrets redacted."""
    import shlex

    from journal_agent.cli._app import INVOCATION
    from journal_agent.secret_text import redact_secrets

    return redact_secrets("journal-agent " + shlex.join(INVOCATION))


def _console() -> Console:
    from rich.console import Console

    console = Console(highlight=False)
    # Piped into a file or an agent: wide enough that the calculation column stays on one line.
    return console if console.is_terminal else Console(highlight=False, width=150)


def _print_record_line(record_id: str) -> None:
    from profiling.citations import cite

    if record_id in _UNSAVED:
        echo("record: not saved (--no-save): there is nothing to cite")
        return
    echo(f"record: {record_id}  (cite as {cite(record_id)})")


def _print_comparison(cmp: Comparison, est_id: str, trace_id: str) -> None:
    from profiling.citations import cite
    from profiling.trace.report import render_compare_text

    echo("")
    if est_id in _UNSAVED or trace_id in _UNSAVED:  # --no-save: no record to cite
        echo("Estimate beside trace (per GPU / per rank; not saved: nothing to cite):")
    else:
        echo(f"Estimate {cite(est_id)} beside trace {cite(trace_id)} (per GPU / per rank):")
    echo(render_compare_text(cmp))


@contextlib.contextmanager
def _trace_progress(cfg: TrainingConfig, quiet: bool) -> Iterator[Callable[[str], None] | None]:
    """A spinner with the trace's stage on a terminal; nothing in pipes and logs."""
    from rich.console import Console

    console = Console(stderr=True)
    if quiet or not console.is_terminal:  # no spinner residue in pipes and logs
        yield None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn(f"tracing {cfg.model or 'the model'}: " + "{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("starting", total=None)
        yield lambda stage: progress.update(task, description=stage)
