"""``journal-agent fit``: the ways to train a model that fit a GPU, ranked by throughput.

The search and the ranking live in ``profiling.fit``; this parses the shared configuration's
flags, calls it, and renders the table (or JSON).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import JsonOption, RootOption, echo, print_json
from journal_agent.cli._config_flags import config_flags
from journal_agent.cli._profiling_common import NoSaveOption, TimeoutOption
from journal_agent.cli._recipe_option import (
    FromOption,
    parse_with_recipe,
    print_recipe,
    recipe_store,
)
from journal_agent.errors import UserError
from profiling.time_bound import DEFAULT_TIMEOUT_S

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.recipes import Recipe


@app.command("fit")
@config_flags()
def fit_command(
    config: dict[str, Any],
    confirm: Annotated[
        int, typer.Option("--confirm", min=0, help="Trace the best N fitting configurations.")
    ] = 2,
    max_seq: Annotated[
        bool,
        typer.Option(
            "--max-seq",
            help="The largest sequence length at which the configuration as given fits "
            "(traced too unless --confirm 0).",
        ),
    ] = False,
    max_batch: Annotated[
        bool,
        typer.Option(
            "--max-batch",
            help="The largest micro-batch at which the configuration as given fits (traced too "
            "unless --confirm 0).",
        ),
    ] = False,
    plans: Annotated[
        bool,
        typer.Option(
            "--plans",
            help="Only torchtitan's plans of --gpus N GPUs (FSDP × TP × CP × PP, schedules, "
            "checkpointing, batch; without it fit --gpus N ranks them beside data parallelism "
            "with ZeRO): the plan that fits and its per-rank peak.",
        ),
    ] = False,
    global_batch: Annotated[
        int | None,
        typer.Option(
            "--global-batch",
            min=1,
            help="With --plans: sequences per optimizer step over all data-parallel ranks "
            "(torchtitan's global_batch_size), held: each plan's batch per rank follows, its "
            "gradient accumulation (microbatch size) is searched.",
        ),
    ] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Show the best N.")] = 10,
    from_files: FromOption = None,
    as_json: JsonOption = False,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    no_save: NoSaveOption = False,
    root: RootOption = None,
) -> None:
    """What fits a GPU, judged by what nvidia-smi would show: precision, ZeRO, checkpointing,
    LoRA/QLoRA, offload and micro-batch searched (what you give is held) and, with --gpus N,
    the parallel plans (TP, CP, PP beside FSDP) too, ranked together by estimated throughput,
    the best one-GPU and data-parallel candidates traced to confirm (a plan is not: its
    per-rank trace command is printed); or --max-seq / --max-batch; or --plans: the plans alone.

    Example: journal-agent fit --model llama-7b --gpu-mem 24 --gpu rtx-4090
    (plans: journal-agent fit --plans --model llama-7b --gpus 32 --gpu h100-sxm)
    """
    from journal_agent.cli._profiling_common import (
        _print_record_line,
        _saving_store,
        mark_unsaved,
    )
    from profiling.fit import fit
    from profiling.fit_gpus import fit_gpus
    from profiling.fit_render import fit_json, fit_record, render_fit
    from profiling.units import fmt_bytes

    if plans:
        _plans(config, from_files, top, as_json, no_save, root, timeout, global_batch)
        return
    if global_batch is not None:
        raise UserError("--global-batch is fit --plans' (a plan's gradient accumulation)")
    base, recipe = parse_with_recipe(config, from_files)
    if max_seq and max_batch:
        raise UserError("give --max-seq or --max-batch, not both (search one at a time)")
    if max_seq or max_batch:
        dim: Literal["seq", "batch"] = "seq" if max_seq else "batch"
        _largest(base, recipe, dim, confirm > 0, as_json, timeout, root, no_save)
        return
    # several GPUs: one search of data parallelism and the multi-axis plans (profiling.fit_gpus)
    search = fit_gpus if base.gpus > 1 else fit
    res = search(base, confirm=confirm, progress=None if as_json else _progress, timeout=timeout)
    # Every number the table shows is in the record, so an entry can cite it.
    store = _saving_store(root, save=not no_save)
    record_id = recipe_store(store, recipe).save(fit_record(res, top))
    if as_json:
        extra = {"recipe": recipe.as_json()} if recipe is not None else {}
        print_json(mark_unsaved({"record_id": record_id, **fit_json(res), **extra}))
    else:
        print_recipe(recipe)
        echo(render_fit(res, top=top))
        _print_record_line(record_id)
    if not res.fitting and res.host_short is not None and res.base.cpu_mem is not None:
        short = res.host_short
        raise UserError(
            f"nothing fits: {short.label()} fits the GPU, but DeepSpeed's offload needs "
            f"{fmt_bytes(short.host_bytes or 0, 'GB')} of host memory per node, over --cpu-mem "
            f"{res.base.cpu_mem:g} GB; give more host memory, fewer GPUs per node or less offload"
        )
    if not res.fitting:
        raise UserError(
            f"nothing fits in {fmt_bytes(res.gpu_mem_bytes, 'GB')}: the smallest need is "
            f"{fmt_bytes(res.smallest.nvml_bytes, 'GB')} on nvidia-smi per GPU "
            f"({res.smallest.label()}); use a larger GPU or more GPUs"
        )


def _plans(
    config: dict[str, Any],
    from_files: list[Path] | None,
    top: int,
    as_json: bool,
    no_save: bool,
    root: Path | None,
    timeout: float | None,
    global_batch: int | None = None,
) -> None:
    """``fit --plans``: the plans of --gpus N GPUs that fit (``profiling.fit_plans``)."""
    from journal_agent.cli._profiling_common import (
        _print_record_line,
        _saving_store,
        mark_unsaved,
    )
    from profiling.fit_plans import fit_plans, plan_fit_json, plan_fit_record, render_plan_fit
    from profiling.time_bound import TimeBound

    degrees = [f for f in ("dp_shard", "dp_replicate", "zero", "fsdp") if f in config]
    if degrees:
        raise UserError(
            "fit --plans lays FSDP over the GPUs the other degrees leave: leave out "
            + ", ".join("--" + d.replace("_", "-") for d in degrees)
        )
    # What runs on a plan only (Float8, torchtitan's per-op policy) makes the base FSDP's plan
    # over the GPUs; asynchronous TP waits for the candidates' TP degree (each candidate is
    # checked again, profiling.fit_plans)
    config = dict(config)
    async_tp = bool(config.pop("async_tp", False))
    if config.get("float8") or config.get("checkpointing") == "selective-op":
        config["fsdp"] = True
        config.setdefault("precision", "mixed")  # torchtitan's, as every candidate's
    base, recipe = parse_with_recipe(config, from_files)
    if "gpus" not in base.model_fields_set or base.gpus < 2:
        raise UserError("fit --plans needs --gpus N (every GPU of the job, 2 or more)")
    hint = "give it a longer timeout, or hold some degrees (--tp, --pp, --batch)"
    with TimeBound(timeout, "fit --plans", hint):
        res = fit_plans(base, base.gpus, async_tp, global_batch)
    record_id = recipe_store(_saving_store(root, save=not no_save), recipe).save(
        plan_fit_record(res, top)
    )
    if as_json:
        extra = {"recipe": recipe.as_json()} if recipe is not None else {}
        print_json(mark_unsaved({"record_id": record_id, **plan_fit_json(res), **extra}))
    else:
        print_recipe(recipe)
        echo(render_plan_fit(res, top=top))
        _print_record_line(record_id)
    if not res.fitting:
        need = res.smallest.nvml_bytes if res.smallest is not None else 0
        raise UserError(
            f"no plan of {res.world:,} GPUs fits in {res.gpu_mem_bytes / 1e9:.2f} GB: the smallest "
            f"need is {need / 1e9:.2f} GB on nvidia-smi; "
            + ("run fit without --plans (above)" if res.without_plan else
               "use more GPUs or larger ones")
        )  # fmt: skip


def _largest(
    base: TrainingConfig,
    recipe: Recipe | None,
    dim: Literal["seq", "batch"],
    confirm: bool,
    as_json: bool,
    timeout: float | None,
    root: Path | None,
    no_save: bool,
) -> None:
    from journal_agent.cli._profiling_common import (
        _print_record_line,
        _saving_store,
        mark_unsaved,
    )
    from profiling.fit_search import (
        largest,
        largest_json,
        largest_record,
        lighter,
        render_largest,
    )
    from profiling.units import fmt_bytes

    res = largest(base, dim, confirm, progress=None if as_json else _progress, timeout=timeout)
    record_id = recipe_store(_saving_store(root, save=not no_save), recipe).save(
        largest_record(res)
    )
    if as_json:
        extra = {"recipe": recipe.as_json()} if recipe is not None else {}
        print_json(mark_unsaved({"record_id": record_id, **largest_json(res), **extra}))
    else:
        print_recipe(recipe)
        echo(render_largest(res))
        _print_record_line(record_id)
    if res.best is None:
        need = res.above.nvml if res.above is not None else 0
        raise UserError(
            f"nothing fits in {fmt_bytes(res.gpu_mem_bytes, 'GB')} even at {dim} 1: it needs "
            f"{fmt_bytes(need, 'GB')} on nvidia-smi; use a larger GPU or what this step does "
            f"not use yet: {lighter(base)}"
        )


def _progress(stage: str) -> None:
    echo(stage, err=True)
