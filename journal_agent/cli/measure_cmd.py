"""``journal-agent gpu`` and ``profile``: what this machine has, and a measured training run.

Measured numbers come from the device at hand (``profiling.measure.devices``): NVML and the CUDA
allocator on a GPU, live tensor bytes and RSS on the CPU. torch is imported only inside the
commands that need it; ``gpu`` on a machine without an NVIDIA driver never imports it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import JsonOption, RootOption, echo, print_json
from journal_agent.cli._config_flags import config_flags
from journal_agent.cli._plot import (
    MAX_TIMEOUT_S,
    SnapshotOption,
    check_new_file,
    check_plot,
    check_snapshot,
)
from journal_agent.cli._profiling_common import (
    NoSaveOption,
    _print_record_line,
    _saving_store,
    mark_unsaved,
)
from journal_agent.cli._recipe_option import (
    FromOption,
    parse_with_recipe,
    print_recipe,
    recipe_store,
)
from journal_agent.errors import UserError
from profiling import config_table

if TYPE_CHECKING:
    from rich.progress import TaskID

    from profiling.config import TrainingConfig
    from profiling.measure.distributed import RanksSummary
    from profiling.measure.run import MeasuredRun, RunOptions
    from profiling.recipes import Recipe
    from profiling.records import RecordStore


@app.command("gpu")
def gpu_command(as_json: JsonOption = False) -> None:
    """The NVIDIA GPUs here: driver, CUDA and torch versions, memory in use and by whom.

    Without a GPU or driver: one sentence saying so (and the CPU), exit code 0.
    """
    from profiling.measure.devices import gpu_info
    from profiling.measure.report import render_gpu_info

    info = gpu_info()
    if as_json:
        print_json(info.model_dump(mode="json"))
        return
    echo(render_gpu_info(info))


# --------------------------------------------------------------------- profile


class _LineProgress:
    """Progress as ``progress: DONE/TOTAL what`` lines on stderr, for a parent that reads them."""

    def add_task(self, _description: str, total: int) -> TaskID:
        from rich.progress import TaskID

        return TaskID(0)

    def update(self, _task: TaskID, completed: int, total: int, description: str) -> None:
        print(f"progress: {completed}/{total} {description}", file=sys.stderr, flush=True)


def _progress_runner(model: str | None, quiet: bool):
    """A rich progress bar on a terminal (stderr); nothing in pipes, logs and --json."""
    from rich.console import Console

    if os.environ.get("JOURNAL_AGENT_PROGRESS") == "lines":
        return contextlib.nullcontext(_LineProgress())  # for the MemoryProfile tool
    console = Console(stderr=True)
    if quiet or not console.is_terminal:
        return contextlib.nullcontext(None)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(f"profiling {model}: " + "{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} steps"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


@app.command("profile")
@config_flags(include=config_table.profile_fields(), exclude=("world_size", "flash_attention"))
def profile_command(
    config: dict[str, Any],
    steps: Annotated[int, typer.Option("--steps", min=1, help="Timed steps.")] = 10,
    warmup: Annotated[
        int, typer.Option("--warmup", min=0, help="Steps run first and left out of the times.")
    ] = 2,
    device: Annotated[
        str | None, typer.Option("--device", help="cpu | cuda | cuda:N (default: CUDA if any).")
    ] = None,
    nproc: Annotated[
        int,
        typer.Option("--nproc", min=1, help="Ranks on this machine, one process each (torchrun)."),
    ] = 1,
    nnodes: Annotated[
        int,
        typer.Option(
            "--nnodes",
            min=1,
            help="Nodes of --nproc ranks, meeting by torchrun's c10d rendezvous (without "
            "--rdzv-endpoint: that many node groups on this machine, on 127.0.0.1).",
        ),
    ] = 1,
    node_rank: Annotated[
        int | None,
        typer.Option("--node-rank", min=0, help="This machine's node, 0 to --nnodes − 1."),
    ] = None,
    rdzv_endpoint: Annotated[
        str | None,
        typer.Option("--rdzv-endpoint", help="HOST:PORT where the nodes meet (c10d)."),
    ] = None,
    spike_threshold: Annotated[
        float,
        typer.Option(
            "--spike-threshold", min=0.001, help="A spike: peak > running median × (1 + this)."
        ),
    ] = 0.2,
    count_tensors: Annotated[
        bool,
        typer.Option(
            "--count-tensors/--no-count-tensors",
            help="CPU: count live tensor bytes exactly (a few µs per operator).",
        ),
    ] = True,
    trace: Annotated[
        bool,
        typer.Option("--trace/--no-trace", help="Trace the same step beside the measurement."),
    ] = True,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", min=0.001, max=MAX_TIMEOUT_S, help="Give up after this many seconds."
        ),
    ] = None,
    csv_path: Annotated[
        Path | None, typer.Option("--csv", help="Write every phase and step as CSV rows.")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write the memory and time chart (PNG).")
    ] = None,
    snapshot: SnapshotOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Let --csv, --plot and --snapshot overwrite files.")
    ] = False,
    from_files: FromOption = None,
    as_json: JsonOption = False,
    no_save: NoSaveOption = False,
    root: RootOption = None,
) -> None:
    """Measure real training steps on this machine's device: memory and time per phase.

    Example: journal-agent profile --model gpt2-small --batch 2 --seq 256 --steps 10
    """
    from profiling.measure.distributed import (
        die_with_torchrun,
        launched_by_torchrun,
        run_under_torchrun,
    )

    if launched_by_torchrun():
        die_with_torchrun()  # before anything slow: a rank never outlives the launch
    check_snapshot(snapshot, force)
    check_plot(plot, force)
    check_new_file("--csv", csv_path, force)
    if snapshot is not None and nproc * nnodes > 1:
        raise UserError(
            "--snapshot records one process; leave out --nproc and --nnodes (or --snapshot)."
        )
    if not launched_by_torchrun():
        _check_nodes(nnodes, node_rank, rdzv_endpoint)
    if (nproc > 1 or nnodes > 1) and not launched_by_torchrun():
        # torchrun's own launcher starts one process per rank; each runs this very command.
        nodes = (nnodes, node_rank, rdzv_endpoint)
        raise typer.Exit(run_under_torchrun(nproc, sys.argv[1:], nodes))
    from pydantic import ValidationError

    from profiling.measure.run import RunOptions

    if "model" not in config and not from_files:
        raise UserError("profile needs --model NAME (a reference model or package.module:factory)")
    cfg, recipe = parse_with_recipe(
        config, from_files, only=(*config_table.profile_fields(), "model"), command="profile"
    )
    if not as_json and not launched_by_torchrun():
        print_recipe(recipe)
    try:
        options = RunOptions(
            steps=steps,
            warmup=warmup,
            timeout=timeout,
            device=device,
            track_tensors=count_tensors,
            spike_threshold=spike_threshold,
            compare_trace=trace and not launched_by_torchrun(),
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UserError(f"--{err['loc'][0]}: {err['msg']}".replace("_", "-")) from None
    store = recipe_store(_saving_store(root, save=not no_save), recipe)
    if launched_by_torchrun():
        from profiling.measure.distributed import leave_rank, profile_rank

        gathered = profile_rank(cfg, options)
        code = 0
        if gathered is not None:  # rank 0 reports for everyone
            try:
                _finish_ranks(gathered, store, as_json)
            except typer.Exit as done:
                code = done.exit_code
        leave_rank(code)
    _profile_here(cfg, options, store, csv_path, plot, as_json, snapshot, recipe)


def _check_nodes(nnodes: int, node_rank: int | None, endpoint: str | None) -> None:
    from profiling.errors import ConfigError
    from profiling.measure.nodes import check_nodes

    try:
        check_nodes(nnodes, node_rank, endpoint)
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def _measure_with_progress(cfg: TrainingConfig, options: RunOptions, quiet: bool) -> MeasuredRun:
    from profiling.measure.run import measure_step

    with _progress_runner(cfg.model, quiet) as bar:
        task = bar.add_task("starting", total=options.steps + options.warmup) if bar else None

        def progress(done: int, total: int, what: str) -> None:
            if bar is not None and task is not None:  # task is None only when bar is
                bar.update(task, completed=done, total=total, description=what)

        return measure_step(cfg, options, progress=progress)


def _snapshot_during(
    options: RunOptions, path: Path | None
) -> contextlib.AbstractContextManager[None]:
    """On CUDA, the real allocator's history recorded around the run (dumped after it)."""
    import contextlib

    if path is None or not _on_cuda(options.device):
        return contextlib.nullcontext()
    from profiling.trace.snapshot_export import cuda_history

    return cuda_history(path)


def _on_cuda(device: str | None) -> bool:
    import torch

    return (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")


def _snapshot_after(
    cfg: TrainingConfig, options: RunOptions, path: Path | None, payload: dict[str, Any]
) -> None:
    """Without CUDA there is no allocator to record: the snapshot holds the traced
    allocations of the same step (``profiling.trace.snapshot_export``)."""
    if path is None:
        return
    if _on_cuda(options.device):
        payload["snapshot"], payload["snapshot_of"] = str(path), "the CUDA caching allocator"
        return
    from profiling.trace.snapshot_export import SnapshotRecorder, write_snapshot
    from profiling.trace.step import trace_step

    recorder = SnapshotRecorder()
    trace_step(cfg, observe=recorder.attach)
    write_snapshot(recorder.snapshot(), path)
    payload["snapshot"], payload["snapshot_of"] = str(path), "the traced step (no CUDA here)"


def _profile_here(
    cfg: TrainingConfig,
    options: RunOptions,
    store: RecordStore,
    csv_path: Path | None,
    plot: Path | None,
    as_json: bool,
    snapshot: Path | None = None,
    recipe: Recipe | None = None,
) -> None:
    """One process on this machine's device: measure, save, print; exit 1 on out-of-memory."""
    from profiling.citations import cite
    from profiling.measure.report import render_comparison, render_summary, run_json, run_record
    from profiling.trace.report import trace_record

    with _snapshot_during(options, snapshot):
        run = _measure_with_progress(cfg, options, as_json)
    trace_id = store.save(trace_record(run.trace)) if run.trace is not None else None
    record = run_record(run, trace_id)
    store.save(record)
    payload = run_json(run, record.id, trace_id)
    if recipe is not None:
        payload["recipe"] = recipe.as_json()
    if csv_path is not None:
        payload["csv"] = str(run.profiler.to_csv(csv_path))
    if plot is not None:
        payload["plot"] = str(run.profiler.plot(plot))
    _snapshot_after(cfg, options, snapshot, payload)
    if as_json:
        print_json(mark_unsaved(payload))
    else:
        echo(render_summary(run.summary))
        if run.comparison:
            echo("")
            echo(render_comparison(run.comparison, trace_id))
        _print_record_line(record.id)
        for key in ("csv", "plot"):
            if key in payload:
                echo(f"{key}: {payload[key]}")
        if "snapshot" in payload:
            echo(
                f"memory snapshot of {payload['snapshot_of']}: {payload['snapshot']} (drop it "
                "on https://pytorch.org/memory_viz)"
            )
    o = run.summary.oom  # run.oom
    if o is not None:
        print(
            f"error: out of memory at step {o.step}, {o.phase}; the measurement up to there is "
            f"saved as {cite(record.id)} — try a smaller --batch/--seq or --checkpointing",
            file=sys.stderr,
        )
        raise typer.Exit(1)


def _finish_ranks(gathered: RanksSummary, store: RecordStore, as_json: bool) -> None:
    from profiling.measure.distributed import ranks_record, render_ranks

    record = ranks_record(gathered)
    store.save(record)
    if as_json:
        print_json(mark_unsaved({"record_id": record.id, **gathered.model_dump(mode="json")}))
    else:
        echo(render_ranks(gathered))
        _print_record_line(record.id)
    if any(r.oom for r in gathered.ranks):
        raise typer.Exit(1)
