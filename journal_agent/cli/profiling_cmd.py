"""``journal-agent estimate``, ``trace`` and ``measurements``: memory without the hardware.

Every run saves a measurement record under ``<root>/.journal/measurements/`` and prints its
id, so a journal entry can cite the number as ``[m:<id>]``. torch and matplotlib are imported
inside the commands (``profiling.trace`` imports torch); the modules imported here are light.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from journal_agent.cli import app
from journal_agent.cli._common import RootOption, print_json, resolve_root
from journal_agent.errors import UserError
from journal_agent.paths import measurements_dir

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts and agents.")]
PlotOption = Annotated[
    Path | None, typer.Option("--plot", help="Write a breakdown chart (PNG) to this path.")
]


@contextlib.contextmanager
def _user_errors() -> Iterator[None]:
    """ProfilingError (and a corrupt record) become the CLI's one-sentence UserError."""
    from profiling.errors import ProfilingError

    try:
        yield
    except ProfilingError as exc:
        raise UserError(str(exc)) from None


def _store(root: Path | None) -> Any:
    from profiling.records import RecordStore

    return RecordStore(measurements_dir(resolve_root(root)))


def _console() -> Any:
    from rich.console import Console

    console = Console(highlight=False)
    # Piped into a file or an agent: wide enough that the calculation column stays on one line.
    return console if console.is_terminal else Console(highlight=False, width=150)


def _print_record_line(record_id: str) -> None:
    typer.echo(f"record: {record_id}  (cite as [m:{record_id}])")


# --------------------------------------------------------------------- estimate


def _estimate_table(est: Any) -> Any:
    from rich.table import Table

    from profiling._units import fmt_bytes
    from profiling.estimate import describe_setup, verdict

    table = Table(
        title=f"Memory for training {describe_setup(est.inputs, est.shape)}",
        title_justify="left",
        show_footer=True,
    )
    table.add_column("Component", footer="Total per GPU")
    table.add_column("Per GPU", justify="right", footer=fmt_bytes(est.per_gpu_bytes, "GB"))
    table.add_column("Calculation", footer=verdict(est) or "Σ above")
    group = None
    for c in est.components:
        if c.group != group:
            group = c.group
            table.add_row(f"[bold]{group.capitalize()}[/bold]", "", "")
        table.add_row(f"  {c.name}", fmt_bytes(c.bytes, "GB"), c.calculation)
    return table


def _print_estimate(est: Any) -> None:
    from profiling._units import fmt_bytes

    console = _console()
    console.print(_estimate_table(est))
    if est.inputs.zero or est.inputs.gpus > 1:
        console.print(
            f"Without ZeRO (one GPU, nothing sharded): {fmt_bytes(est.unsharded_bytes, 'GB')}"
        )
    console.print(f"({fmt_bytes(est.per_gpu_bytes, 'GiB')} per GPU; 1 GB = 10^9 B, 1 GiB = 2^30 B)")
    for note in est.notes:
        console.print(f"note: {note}", soft_wrap=True)


@app.command("estimate")
def estimate_command(
    model: Annotated[
        str | None, typer.Option("--model", help="A reference model, e.g. llama-7b, gpt2-small.")
    ] = None,
    params: Annotated[
        str | None, typer.Option("--params", help="Parameter count instead: 7e9, 7B, 124M.")
    ] = None,
    layers: Annotated[int | None, typer.Option("--layers", min=1)] = None,
    hidden: Annotated[int | None, typer.Option("--hidden", min=1)] = None,
    heads: Annotated[int | None, typer.Option("--heads", min=1)] = None,
    vocab: Annotated[int | None, typer.Option("--vocab", min=1)] = None,
    seq: Annotated[
        int | None, typer.Option("--seq", min=1, help="Sequence length (default: the model's).")
    ] = None,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Micro-batch per GPU.")] = 1,
    precision: Annotated[
        str, typer.Option("--precision", help="fp32 | mixed (16-bit + fp32 master) | bf16.")
    ] = "mixed",
    optimizer: Annotated[
        str,
        typer.Option(
            "--optimizer", help="adamw | adam | sgd | sgd-nomomentum | adam8bit | adafactor | lion."
        ),
    ] = "adamw",
    gpus: Annotated[int, typer.Option("--gpus", min=1, help="Data-parallel GPUs N.")] = 1,
    zero: Annotated[int, typer.Option("--zero", min=0, max=3, help="ZeRO stage 0-3.")] = 0,
    tp: Annotated[int, typer.Option("--tp", min=1, help="Tensor-parallel t (N·t GPUs).")] = 1,
    sequence_parallel: Annotated[
        bool, typer.Option("--sequence-parallel", help="Sequence parallelism (with --tp).")
    ] = False,
    lora_rank: Annotated[
        int | None, typer.Option("--lora-rank", min=1, help="Train LoRA adapters of rank R.")
    ] = None,
    qlora: Annotated[bool, typer.Option("--qlora", help="4-bit NF4 base (with --lora-rank).")] = (
        False
    ),
    recompute: Annotated[
        str, typer.Option("--recompute", help="Activation recomputation: none | selective | full.")
    ] = "none",
    flash_attention: Annotated[
        bool, typer.Option("--flash-attention", help="No s² attention scores stored.")
    ] = False,
    fp32_grads: Annotated[
        bool,
        typer.Option("--fp32-grads", help="Also count an fp32 gradient copy (DeepSpeed's 18 B)."),
    ] = False,
    gpu_mem: Annotated[
        float | None, typer.Option("--gpu-mem", help="GPU memory in GB, for ✅ / ⚠️ / ❌.")
    ] = None,
    compare_trace: Annotated[
        bool,
        typer.Option(
            "--compare-trace",
            help="Also trace the same step under fake tensors and show both side by side.",
        ),
    ] = False,
    as_json: JsonFlag = False,
    plot: PlotOption = None,
    root: RootOption = None,  # type: ignore[assignment]
) -> None:
    """Estimate training memory in closed form, every step of the calculation shown.

    Example: journal-agent estimate --model llama-7b --precision mixed --optimizer adamw
    --gpus 2 --zero 2 --gpu-mem 40
    """
    from profiling._units import parse_count
    from profiling.estimate import EstimateInput, estimate
    from profiling.report import estimate_json, estimate_record

    with _user_errors():
        try:
            n_params = parse_count(params) if params is not None else None
        except ValueError as exc:
            raise UserError(f"--params: {exc}") from None
        inp = EstimateInput.parse(
            model=model,
            params=n_params,
            layers=layers,
            hidden=hidden,
            heads=heads,
            vocab=vocab,
            seq=seq,
            batch=batch,
            precision=precision,
            optimizer=optimizer,
            gpus=gpus,
            zero=zero,
            tp=tp,
            sequence_parallel=sequence_parallel,
            lora_rank=lora_rank,
            qlora=qlora,
            recompute=recompute,
            flash_attention=flash_attention,
            fp32_grads=fp32_grads,
            gpu_mem_gb=gpu_mem,
        )
        store = _store(root)
        est = estimate(inp)
        record = estimate_record(est)
        store.save(record)
        payload = estimate_json(est, record.id)
        result = cmp = trace_rec = None
        if compare_trace:
            if model is None:
                raise UserError("--compare-trace needs --model NAME (a reference model to trace)")
            from profiling.report import (
                compare,
                trace_config_for_estimate,
                trace_json,
                trace_record,
            )

            result = _run_trace(trace_config_for_estimate(est), quiet=as_json)
            trace_rec = trace_record(result)
            store.save(trace_rec)
            cmp = compare(est, result)
            payload["trace"] = trace_json(result, trace_rec.id)
            payload["comparison"] = cmp
        if plot is not None:
            from profiling.plot import plot_compare, plot_estimate

            # With a trace beside it, the chart shows both (estimate and trace per category).
            made = plot_compare(cmp, plot) if cmp is not None else plot_estimate(est, plot)
            payload["plot"] = str(made)
    if as_json:
        print_json(payload)
        return
    _print_estimate(est)
    _print_record_line(record.id)
    if cmp is not None and trace_rec is not None:
        from profiling.report import render_trace_text

        typer.echo("")
        typer.echo(render_trace_text(result))
        _print_record_line(trace_rec.id)
        _print_comparison(cmp, record.id, trace_rec.id)
    if plot is not None:
        typer.echo(f"plot: {payload['plot']}")


def _print_comparison(cmp: dict[str, Any], est_id: str, trace_id: str) -> None:
    from profiling.report import render_compare_text

    typer.echo("")
    typer.echo(f"Estimate [m:{est_id}] beside trace [m:{trace_id}] (per GPU / per rank):")
    typer.echo(render_compare_text(cmp))


# --------------------------------------------------------------------- trace


def _run_trace(cfg: Any, quiet: bool) -> Any:
    from rich.console import Console

    from profiling.trace import trace_step

    console = Console(stderr=True)
    if quiet or not console.is_terminal:  # no spinner residue in pipes and logs
        return trace_step(cfg)
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn(f"tracing {cfg.model}: " + "{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("starting", total=None)
        return trace_step(cfg, progress=lambda stage: progress.update(task, description=stage))


@app.command("trace")
def trace_command(
    model: Annotated[
        str,
        typer.Option(
            "--model", help="A reference model (gpt2-small … llama-7b) or package.module:factory."
        ),
    ],
    batch: Annotated[int, typer.Option("--batch", min=1)] = 1,
    seq: Annotated[
        int | None,
        typer.Option("--seq", min=1, help="Sequence length (default: the model's, ≤ 2048; 512)."),
    ] = None,
    dtype: Annotated[
        str, typer.Option("--dtype", help="Autocast compute dtype: bf16 | fp16 | fp32 (none).")
    ] = "fp32",
    param_dtype: Annotated[
        str, typer.Option("--param-dtype", help="Parameter dtype: fp32 | bf16 (pure bf16).")
    ] = "fp32",
    optimizer: Annotated[
        str,
        typer.Option(
            "--optimizer", help="adamw | adam | sgd | sgd-nomomentum | adagrad | rmsprop."
        ),
    ] = "adamw",
    world_size: Annotated[
        int, typer.Option("--world-size", min=1, help="Ranks of the fake process group.")
    ] = 1,
    fsdp: Annotated[bool, typer.Option("--fsdp", help="Shard with FSDP2 fully_shard.")] = False,
    no_reshard: Annotated[
        bool,
        typer.Option("--no-reshard", help="FSDP: keep gathered parameters (ZeRO-2 style)."),
    ] = False,
    checkpointing: Annotated[
        bool, typer.Option("--checkpointing", help="Activation checkpointing on every block.")
    ] = False,
    foreach: Annotated[
        bool | None,
        typer.Option(
            "--foreach/--no-foreach",
            help="Multi-tensor optimizer (default: on, off with FSDP).",
            show_default=False,
        ),
    ] = None,
    depth: Annotated[int, typer.Option("--depth", min=0, help="Module depth in by_module.")] = 2,
    compare_estimate: Annotated[
        bool,
        typer.Option(
            "--compare-estimate", help="Show the closed-form estimate of the same step beside it."
        ),
    ] = False,
    gpu_mem: Annotated[
        float | None,
        typer.Option("--gpu-mem", help="GPU memory in GB: ✅ / ⚠️ / ❌ for the traced peak."),
    ] = None,
    as_json: JsonFlag = False,
    plot: PlotOption = None,
    root: RootOption = None,  # type: ignore[assignment]
) -> None:
    """Trace one training step under fake tensors: exact bytes by category, no GPU needed.

    Example: journal-agent trace --model llama-7b --seq 2048 --dtype bf16 --optimizer adamw
    """
    from pydantic import ValidationError

    from profiling.report import trace_json, trace_record

    with _user_errors():
        from profiling.trace import TraceConfig

        try:
            cfg = TraceConfig(
                model=model,
                batch=batch,
                seq=seq,
                dtype=dtype,
                param_dtype=param_dtype,
                optimizer=optimizer,
                foreach=foreach,
                world_size=world_size,
                fsdp=fsdp,
                reshard_after_forward=not no_reshard,
                checkpointing=checkpointing,
                module_depth=depth,
            )
        except ValidationError as exc:
            err = exc.errors()[0]
            raise UserError(f"--{err['loc'][0]}: {err['msg']}".replace("_", "-")) from None
        store = _store(root)
        if compare_estimate:  # fail before a long trace, not after it
            if ":" in model:
                raise UserError("--compare-estimate needs a reference model, not a factory")
            from profiling.report import estimate_input_for_trace

            estimate_input_for_trace(cfg, gpu_mem)
        result = _run_trace(cfg, quiet=as_json)
        record = trace_record(result, gpu_mem)
        store.save(record)
        payload = trace_json(result, record.id)
        from profiling.report import trace_verdict

        payload.update(trace_verdict(result, gpu_mem))
        cmp = est_record = None
        if compare_estimate:
            from profiling.estimate import estimate
            from profiling.report import compare, estimate_record

            est = estimate(estimate_input_for_trace(result.config, gpu_mem))
            est_record = estimate_record(est)
            store.save(est_record)
            cmp = compare(est, result)
            payload["estimate"] = {"record_id": est_record.id, "per_gpu_bytes": est.per_gpu_bytes}
            payload["comparison"] = cmp
        if plot is not None:
            from profiling.plot import plot_compare, plot_trace

            made = plot_compare(cmp, plot) if cmp is not None else plot_trace(result, plot)
            payload["plot"] = str(made)
    if as_json:
        print_json(payload)
        return
    from profiling.report import render_trace_text

    typer.echo(render_trace_text(result))
    if payload.get("verdict"):
        typer.echo(payload["verdict"])
    _print_record_line(record.id)
    if cmp is not None and est_record is not None:
        typer.echo("")
        typer.echo(est_record.extra["table"])
        _print_record_line(est_record.id)
        _print_comparison(cmp, est_record.id, record.id)
    if plot is not None:
        typer.echo(f"plot: {payload['plot']}")


# --------------------------------------------------------------------- measurements

measurements_app = typer.Typer(
    help="List and show the saved measurement records (estimates, traces, measurements).",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(measurements_app, name="measurements")


def _headline(record: Any) -> str:
    from profiling._units import fmt_bytes

    for name in ("per_gpu_total", "peak"):
        with contextlib.suppress(KeyError):
            return f"{name} {fmt_bytes(record.result(name).value)}"
    return ""


@measurements_app.callback()
def measurements_list(
    ctx: typer.Context,
    as_json: JsonFlag = False,
    root: RootOption = None,  # type: ignore[assignment]
) -> None:
    """List the records under .journal/measurements/, oldest first."""
    if ctx.invoked_subcommand is not None:
        return
    records = _store(root).list()
    if as_json:
        print_json(
            [
                {
                    "id": r.id,
                    "kind": r.kind,
                    "created": r.created.isoformat(),
                    "title": r.title,
                    "headline": _headline(r),
                }
                for r in records
            ]
        )
        return
    if not records:
        typer.echo("no measurement records yet; make one with 'journal-agent estimate' or 'trace'")
        return
    from rich.table import Table

    table = Table("id", "kind", "created (UTC)", "title", "headline")
    for r in records:
        table.add_row(r.id, r.kind, r.created.strftime("%Y-%m-%d %H:%M"), r.title, _headline(r))
    _console().print(table)


@measurements_app.command("show")
def measurements_show(
    record_id: Annotated[str, typer.Argument(metavar="ID", help="A record id, e.g. est-1a2b3c4d.")],
    as_json: JsonFlag = False,
    root: RootOption = None,  # type: ignore[assignment]
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
    from profiling._units import fmt_bytes

    typer.echo(f"{record.id} ({record.kind}, {record.created.isoformat()}): {record.title}")
    if record.extra.get("table"):
        typer.echo("")
        typer.echo(record.extra["table"])
    else:
        for q in record.results:
            value = fmt_bytes(q.value) if q.unit == "B" else f"{q.value:g} {q.unit}".strip()
            typer.echo(f"  {q.name}: {value}")
    if record.steps and not record.extra.get("table"):
        typer.echo("")
        for step in record.steps:
            typer.echo(f"  {step.name}: {step.formula} = {step.substituted} = {step.value:g}")
    typer.echo(f"cite as [m:{record.id}]")
