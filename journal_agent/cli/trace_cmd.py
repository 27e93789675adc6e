"""``journal-agent trace``: one steady-state training step under fake tensors, no GPU needed.

The flags come from the shared configuration (``profiling.config.TrainingConfig``); the work is
``profiling.trace.run.trace_and_record`` (the ``MemoryTrace`` tool runs the same).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import JsonOption, RootOption, echo, print_json
from journal_agent.cli._config_flags import config_flags
from journal_agent.cli._plot import ForceOption, SnapshotOption, check_plot, check_snapshot
from journal_agent.cli._profiling_common import (
    NoSaveOption,
    PlotOption,
    TimeoutOption,
    _saving_store,
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
from profiling.time_bound import DEFAULT_TIMEOUT_S


@app.command("trace")
@config_flags()
def trace_command(
    config: dict[str, Any],
    depth: Annotated[int, typer.Option("--depth", min=0, help="Module depth in by_module.")] = 2,
    compare_estimate: Annotated[
        bool,
        typer.Option(
            "--compare-estimate", help="Show the closed-form estimate of the same step beside it."
        ),
    ] = False,
    as_json: JsonOption = False,
    plot: PlotOption = None,
    snapshot: SnapshotOption = None,
    force: ForceOption = False,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    from_files: FromOption = None,
    no_save: NoSaveOption = False,
    root: RootOption = None,
) -> None:
    """Trace a steady-state training step under fake tensors: exact bytes by category and
    FLOPs, no GPU needed (--gpu NAME adds the step time at --mfu).

    Example: journal-agent trace --model llama-7b --seq 2048 --precision amp-bf16 --gpu h100-sxm
    """
    check_plot(plot, force)
    check_snapshot(snapshot, force)
    from profiling.trace.run import trace_and_record

    plan = any(k in config for k in ("pp", "cp", "dp_shard", "dp_replicate"))
    if "model" not in config and not from_files and not plan:  # a plan takes a shape by hand
        raise UserError("trace needs --model NAME (a reference model or package.module:factory)")
    cfg, recipe = parse_with_recipe(config, from_files)
    if cfg.is_plan:
        from journal_agent.cli.estimate_cmd import _plan

        store = recipe_store(_saving_store(root, save=not no_save), recipe)
        _plan(cfg, store, traced=True, options=(plot, snapshot), timeout=timeout,
              as_json=as_json, recipe=recipe, compare=compare_estimate)  # fmt: skip
        return
    if cfg.model is None:
        raise UserError("trace needs a model: give --model NAME (the recipe names none we ship)")
    with _trace_progress(cfg, quiet=as_json) as progress:
        run = trace_and_record(
            cfg,
            recipe_store(_saving_store(root, save=not no_save), recipe),
            compare_estimate=compare_estimate,
            module_depth=depth,
            plot=plot,
            snapshot=snapshot,
            progress=progress,
            timeout=timeout,
        )
    if recipe is not None:
        run.payload["recipe"] = recipe.as_json()
    if as_json:
        print_json(mark_unsaved(run.payload))
    else:
        print_recipe(recipe)
        echo(unsaved_text(run.text()))
