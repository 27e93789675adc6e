"""``journal-agent estimate`` and ``measurements`` (``trace`` lives in ``trace_cmd``, ``fit`` in
``fit_cmd``).

Every run saves a measurement record under ``<root>/.journal/measurements/`` and prints its
id, so a journal entry can cite the number as ``[m:<id>]``. torch and matplotlib are imported
inside the commands (``profiling.trace.step`` imports torch); the modules imported here are light.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import JsonOption, RootOption, cell, echo, print_json, resolve_root
from journal_agent.cli._config_flags import config_flags
from journal_agent.cli._plot import ForceOption, check_plot
from journal_agent.cli._profiling_common import (
    NoSaveOption,
    PlotOption,
    TimeoutOption,
    _console,
    _print_comparison,
    _print_record_line,
    _saving_store,
    _store,
    _trace_progress,
    mark_unsaved,
    unsaved_text,
)
from journal_agent.cli._recipe_option import (
    FromOption,
    parse_with_recipe,
    print_recipe,
    recipe_store,
)
from journal_agent.errors import UserError
from profiling.time_bound import DEFAULT_TIMEOUT_S, TimeBound

if TYPE_CHECKING:
    from rich.table import Table

    from profiling.estimate.memory import Estimate
    from profiling.estimate.run import EstimateRun
    from profiling.records import MeasurementRecord, RecordStore

# --------------------------------------------------------------------- estimate


def _estimate_table(est: Estimate) -> Table:
    from rich.table import Table

    from profiling.estimate.memory import describe_setup, verdict
    from profiling.units import fmt_bytes

    table = Table(
        title=cell(f"Memory for training {describe_setup(est.inputs, est.shape)}"),
        title_justify="left",
        show_footer=True,
    )
    table.add_column("Component", footer="Total per GPU (allocated)")
    table.add_column("Per GPU", justify="right", footer=fmt_bytes(est.per_gpu_bytes, "GB"))
    peak = f"the peak, at the {est.peak_moment}"
    table.add_column("Calculation", footer=f"{peak}; {verdict(est)}" if verdict(est) else peak)
    group = None
    for c in est.components:
        if c.group != group:
            group = c.group
            table.add_row(f"[bold]{group.capitalize()}[/bold]", "", "")
        table.add_row(cell(f"  {c.name}"), fmt_bytes(c.bytes, "GB"), cell(c.calculation))
    return table


def _print_estimate(est: Estimate) -> None:
    from profiling.estimate.memory import moment_lines, time_lines
    from profiling.estimate.render import comm_block, counters_block, host_block
    from profiling.units import fmt_bytes

    console = _console()
    console.print(_estimate_table(est))
    console.print("Moments of the step (not every row is alive at once; the total is the largest):")
    for line in moment_lines(est):
        console.print(cell(line), soft_wrap=True)
    for line in counters_block(est) + comm_block(est) + host_block(est):
        console.print(cell(line), soft_wrap=True)
    if est.time is not None:
        console.print("Time:")
        for line in time_lines(est):
            console.print(cell(f"  {line}"), soft_wrap=True)
    if est.inputs.zero or est.inputs.gpus > 1:
        console.print(
            f"Without ZeRO (one GPU, nothing sharded): {fmt_bytes(est.unsharded_bytes, 'GB')}"
        )
    console.print(f"({fmt_bytes(est.per_gpu_bytes, 'GiB')} per GPU; 1 GB = 10^9 B, 1 GiB = 2^30 B)")
    for note in est.notes:
        console.print(cell(f"note: {note}"), soft_wrap=True)


@app.command("estimate")
@config_flags()
def estimate_command(
    config: dict[str, Any],
    compare_trace: Annotated[
        bool,
        typer.Option(
            "--compare-trace",
            help="Also trace the same step under fake tensors and show both side by side.",
        ),
    ] = False,
    from_files: FromOption = None,
    as_json: JsonOption = False,
    plot: PlotOption = None,
    force: ForceOption = False,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    no_save: NoSaveOption = False,
    root: RootOption = None,
) -> None:
    """Estimate training memory in closed form, every step of the calculation shown.

    Example: journal-agent estimate --model llama-7b --precision mixed --optimizer adamw
    --gpus 2 --zero 2 --gpu-mem 40
    """
    check_plot(plot, force)
    from profiling.estimate.run import estimate_and_record

    cfg, recipe = parse_with_recipe(config, from_files)
    store = recipe_store(_saving_store(root, save=not no_save), recipe)
    if cfg.is_plan:
        _plan(cfg, store, traced=False, options=(plot,), timeout=timeout, as_json=as_json,
              recipe=recipe, compare=compare_trace)  # fmt: skip
        return
    # One bound for the command: the estimate's and the trace's own are within it.
    what = f"the estimate and trace of {cfg.model}" if compare_trace else "the estimate"
    with TimeBound(timeout, what, "give it a longer timeout, or leave out --compare-trace"):
        run = estimate_and_record(cfg, store, timeout=timeout)
        if compare_trace:
            _trace_beside(run, store, timeout, quiet=as_json)
    if recipe is not None:
        run.payload["recipe"] = recipe.as_json()
    if plot is not None:
        from profiling.plot import plot_compare, plot_estimate

        # With a trace beside it, the chart shows both (estimate and trace per category).
        cmp = run.comparison
        made = plot_compare(cmp, plot) if cmp is not None else plot_estimate(run.estimate, plot)
        run.payload["plot"] = str(made)
    if as_json:
        print_json(mark_unsaved(run.payload))
        return
    print_recipe(recipe)
    _print_run(run)


def _plan(
    cfg: Any,
    store: Any,
    *,
    traced: bool,
    options: tuple[Any, ...],
    timeout: float,
    as_json: bool,
    recipe: Any = None,
    compare: bool = False,
) -> None:
    """A parallel plan: every distinct rank, estimated or traced (``profiling.plans``); with
    ``compare`` both, side by side (``profiling.plans.compare``)."""
    from profiling.plans.report import plan_and_record

    if any(options):
        raise UserError(
            "a parallel plan (--pp, --cp, --dp-shard, --dp-replicate) is reported per rank; "
            "--plot and --snapshot do not take one yet: leave them out"
        )
    with _trace_progress(cfg, quiet=as_json or not (traced or compare)) as progress:
        if compare:
            from profiling.plans.compare import plan_compare_and_record

            first = "traced" if traced else "estimated"
            run: Any = plan_compare_and_record(
                cfg, store, first=first, timeout=timeout, progress=progress
            )
        else:
            run = plan_and_record(cfg, store, traced=traced, timeout=timeout, progress=progress)
    if recipe is not None:
        run.payload["recipe"] = recipe.as_json()
    if as_json:
        print_json(mark_unsaved(run.payload))
    else:
        print_recipe(recipe)
        echo(unsaved_text(run.text()))


def _trace_beside(run: EstimateRun, store: RecordStore, timeout: float, quiet: bool) -> None:
    from profiling.trace.report import trace_config_for_estimate
    from profiling.trace.run import trace_beside_estimate

    with _trace_progress(trace_config_for_estimate(run.estimate), quiet=quiet) as progress:
        trace_beside_estimate(run, store, progress=progress, timeout=timeout)


def _print_run(run: EstimateRun) -> None:
    _print_estimate(run.estimate)
    _print_record_line(run.record.id)
    if run.comparison is not None:
        from profiling.trace.report import render_trace_text

        echo("")
        echo(render_trace_text(run.trace))
        _print_record_line(run.trace_record.id)
        _print_comparison(run.comparison, run.record.id, run.trace_record.id)
    if "plot" in run.payload:
        echo(f"plot: {run.payload['plot']}")


# --------------------------------------------------------------------- measurements

measurements_app = typer.Typer(
    help="List and show the saved measurement records (estimates, traces, measurements).",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(measurements_app, name="measurements")


def _headline(record: MeasurementRecord) -> str:
    from profiling.units import fmt_bytes

    # an estimate's per-GPU total, else a trace's or a measurement's peak, said in words
    for name, said in (("per_gpu_total", "{} per GPU"), ("peak", "peak {}")):
        with contextlib.suppress(KeyError):
            return said.format(fmt_bytes(record.result(name).value))
    # A fit's: its best configuration's peak, or that nothing fits (the record page's verdict)
    best = next((q for q in record.results if q.name.startswith("#1 ") and q.unit == "B"), None)
    if best is not None:  # "#1 mixed, batch 2: peak", the first of its row's values
        return f"best {fmt_bytes(best.value)} ({best.name[3:].removesuffix(': peak')})"
    with contextlib.suppress(KeyError):
        return f"nothing fits: smallest {fmt_bytes(record.result('smallest_peak').value)}"
    return ""


KindOption = Annotated[
    str | None,
    typer.Option("--kind", help="Only records of this kind: estimated, traced or measured."),
]
ModelOption = Annotated[
    str | None, typer.Option("--model", help="Only records whose model or title holds this.")
]
UnreferencedOption = Annotated[
    bool,
    typer.Option(
        "--unreferenced",
        help="Only records nothing cites (the journal, the ledger, the inbox, drafts, other "
        "records).",
    ),
]


@measurements_app.callback()
def measurements_list(
    ctx: typer.Context,
    kind: KindOption = None,
    model: ModelOption = None,
    unreferenced: UnreferencedOption = False,
    as_json: JsonOption = False,
    root: RootOption = None,
) -> None:
    """List the records under .journal/measurements/, oldest first."""
    if ctx.invoked_subcommand is not None:
        return
    records, corrupt = _store(root).scan()
    # A record that cannot be read is reported, never silently left out (exit 1 below).
    for problem in corrupt:
        echo(f"warning: {problem}", err=True)
    _list_records(_chosen(records, kind, model, unreferenced, root), as_json)
    if corrupt:
        raise typer.Exit(1)


def _chosen(
    records: list[MeasurementRecord],
    kind: str | None,
    model: str | None,
    unreferenced: bool,
    root: Path | None,
) -> list[MeasurementRecord]:
    if kind is not None and kind not in ("estimated", "traced", "measured"):
        raise UserError(f"--kind {kind!r} is not a kind; use estimated, traced or measured.")
    out = [r for r in records if kind is None or r.kind == kind]
    if model:
        low = model.lower()
        out = [r for r in out if low in f"{r.config.get('model') or ''} {r.title}".lower()]
    if unreferenced:
        from journal_agent.journal.record_refs import unreferenced as nothing_cites

        keep = set(nothing_cites(resolve_root(root), [r.id for r in out]))
        out = [r for r in out if r.id in keep]
    return out


@measurements_app.command("prune")
def measurements_prune(
    kind: KindOption = None,
    model: ModelOption = None,
    older_than: Annotated[
        float | None,
        typer.Option("--older-than", min=0, metavar="DAYS", help="Only records older than this."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be deleted; delete nothing.")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", help="Delete without asking (for scripts).")
    ] = False,
    root: RootOption = None,
) -> None:
    """Delete the records nothing cites (the journal, the ledger, the inbox, drafts and other
    records are read for [m:…] ids); a cited record is never deleted."""
    from datetime import UTC, datetime, timedelta

    from journal_agent.journal.record_refs import prune, unreferenced

    records, corrupt = _store(root).scan()
    chosen = _chosen(records, kind, model, False, root)
    if older_than is not None:
        since = datetime.now(UTC) - timedelta(days=older_than)
        chosen = [r for r in chosen if r.created < since]
    base = resolve_root(root)
    gone = unreferenced(base, [r.id for r in chosen])
    if not gone:
        echo(f"nothing to prune: every one of the {len(chosen)} record(s) chosen is cited")
        return
    for record_id in gone:
        echo(f"  {record_id}")
    if dry_run:
        echo(f"would delete {len(gone)} record(s) nothing cites (--dry-run: nothing deleted)")
        return
    if not yes:
        _ask_to_prune(len(gone))
    done = prune(base, gone)
    kept = len(records) - len(done.deleted)
    echo(f"deleted {len(done.deleted)} record(s) nothing cited; kept {kept}")
    if corrupt:
        echo(f"warning: {len(corrupt)} unreadable record file(s) were left alone", err=True)


def _ask_to_prune(count: int) -> None:
    import sys

    if not sys.stdin.isatty():
        raise UserError(
            f"prune would delete {count} record(s); run it on a terminal to confirm, add --yes "
            "to delete without asking, or --dry-run to list them."
        )
    answer = input(f"Delete these {count} record(s)? Type yes to delete: ").strip().lower()
    if answer != "yes":
        raise UserError("nothing deleted (the answer was not yes).")


def _list_records(records: list[MeasurementRecord], as_json: bool) -> None:
    from journal_agent.record_seal import made_here

    if as_json:
        print_json(
            [
                {
                    "id": r.id,
                    "kind": r.kind,
                    "created": r.created.isoformat(),
                    "title": r.title,
                    "headline": _headline(r),
                    "made_here": made_here(r),
                }
                for r in records
            ]
        )
        return
    if not records:
        echo("no measurement records yet; make one with 'journal-agent estimate' or 'trace'")
        return
    from rich.table import Table

    table = Table("id", "kind", "created (UTC)", "made", "title", "headline")
    elsewhere = 0
    for r in records:
        # (a record is a file: its id, title and headline written out, no markup read)
        when = r.created.strftime("%Y-%m-%d %H:%M")
        made = "here" if made_here(r) else "elsewhere"
        elsewhere += made == "elsewhere"
        table.add_row(cell(r.id), cell(r.kind), when, made, cell(r.title), cell(_headline(r)))
    _console().print(table)
    if elsewhere:
        echo(
            f"{elsewhere} of these were not made by your journal-agent (a repository committed "
            "them, another machine made them, or another hand changed them): an entry may not "
            "cite them until you read them and run `journal-agent measurements adopt` in your "
            "terminal."
        )


@measurements_app.command("show")
def measurements_show(
    record_id: Annotated[str, typer.Argument(metavar="ID", help="A record id, e.g. est-1a2b3c4d.")],
    as_json: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Show one record: its table, results and calculation steps."""
    store = _store(root)
    record_id = record_id.removeprefix("[m:").removesuffix("]")
    try:
        record = store.load(record_id)
    except KeyError:
        raise UserError(
            f"no measurement record {record_id!r} in {store.directory}; "
            "list them with 'journal-agent measurements'"
        ) from None
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if as_json:
        print_json(record.model_dump(mode="json"))
        return
    from journal_agent.record_seal import made_here, not_made_here
    from profiling.citations import cite
    from profiling.units import fmt_bytes

    echo(f"{record.id} ({record.kind}, {record.created.isoformat()}): {record.title}")
    if not made_here(record):
        echo(f"warning: {not_made_here(record.id)}.")
    if record.extra.get("table"):
        echo("")
        echo(record.extra["table"])
    else:
        for q in record.results:
            value = fmt_bytes(q.value) if q.unit == "B" else f"{q.value:g} {q.unit}".strip()
            echo(f"  {q.name}: {value}")
    if record.steps and not record.extra.get("table"):
        echo("")
        for step in record.steps:
            echo(f"  {step.name}: {step.formula} = {step.substituted} = {step.value:g}")
    echo(f"cite as {cite(record.id)}")


@measurements_app.command("adopt")
def measurements_adopt(
    record_ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[ID]...", help="Records to adopt (default: every one made elsewhere)."
        ),
    ] = None,
    root: RootOption = None,
) -> None:
    """Take records your journal-agent did not make (committed by a repository, made on another
    machine) as yours to cite, after you read them; asks on your terminal."""
    from journal_agent.record_seal import made_here
    from journal_agent.terminal_confirm import confirm

    store = _store(root)
    wanted = {i.removeprefix("[m:").removesuffix("]") for i in record_ids or []}
    records, corrupt = store.scan()
    foreign = [r for r in records if not made_here(r) and (not wanted or r.id in wanted)]
    missing = wanted - {r.id for r in records}
    if missing:
        raise UserError(
            f"no measurement record {', '.join(sorted(missing))} in {store.directory}; list "
            "them with 'journal-agent measurements'"
        )
    if not foreign:
        echo("every record here was made by your journal-agent; nothing to adopt")
        raise typer.Exit(1 if corrupt else 0)
    details = [f"journal-agent will take these records of {store.directory} as yours to cite:"]
    details += [f"  {cell(r.id)}  {cell(r.title)}  {cell(_headline(r))}" for r in foreign]
    confirm(
        f"adopting {len(foreign)} measurement records", details, "journal-agent measurements adopt"
    )
    for r in foreign:
        store.save(r)  # (sealed as it is saved)
        echo(f"adopted {r.id}")
