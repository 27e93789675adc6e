"""MemoryTrace: exact bytes of one training step under fake tensors, saved as a record."""

from __future__ import annotations

from pydantic import Field

from journal_agent.paths import measurements_dir
from journal_agent.tools._config_input import config_input_model
from journal_agent.tools.base import Tool, ToolContext, ToolResult

# The schema is the shared training configuration's, plus the comparison switch.
MemoryTraceInput = config_input_model(
    "MemoryTraceInput",
    model=(
        str,
        Field(
            description="A reference model (gpt2-small, gpt2-medium, gpt2-large, gpt2-xl, "
            "llama-1b, llama-7b) or a factory in the workspace, 'package.module:function', "
            "returning a module and its inputs."
        ),
    ),
    compare_estimate=(
        bool,
        Field(False, description="Also show the closed-form estimate of the same step beside it."),
    ),
)


class MemoryTrace(Tool):
    name = "MemoryTrace"
    description = (
        "Trace a steady-state training step (a first step creates the optimizer's state, then "
        "the traced forward, loss, backward and optimizer step) under fake tensors with "
        "PyTorch's memory tracker: exact peak bytes by category (parameters, gradients, "
        "optimizer state, activations, temporaries) and by module, the first step's peak "
        "beside it, and the step's FLOPs, with no GPU and nothing allocated. FSDP2 sharding at "
        "any world size gives the per-rank peak; gpu adds the step time at mfu.\n"
        "- Returns the breakdown and a record id; cite the numbers as [m:<id>].\n"
        "- A 7B model takes several seconds; small models well under one.\n"
        "- A workspace factory runs the user's code, so it is permission-checked like Bash."
    )
    Input = MemoryTraceInput

    def run(self, ctx: ToolContext, params: MemoryTraceInput) -> ToolResult:  # type: ignore[override,valid-type]
        from profiling.records import RecordStore

        if ":" in (params.model or "") and ctx.policy is not None:
            # Importing a workspace module runs its code: the same approval as running it.
            ctx.policy.ensure("Bash", command=f"journal-agent trace --model {params.model}")
        store = RecordStore(measurements_dir(ctx.root))
        # A ProfilingError (a model that will not trace) becomes an error result in Tool.call.
        return ToolResult(_trace(params, ctx, store))


def _trace(params: MemoryTraceInput, ctx: ToolContext, store: object) -> str:  # type: ignore[valid-type]
    import sys

    from profiling.config import TrainingConfig
    from profiling.errors import ProfilingError
    from profiling.trace.run import trace_and_record

    cfg = TrainingConfig.parse(style="field", **params.config_values())
    if cfg.model is None:
        raise ProfilingError(
            "MemoryTrace needs model: a reference model or 'package.module:function'"
        )
    root = str(ctx.root)
    added = cfg.is_factory and root not in sys.path
    if added:  # the factory lives in the workspace
        sys.path.insert(0, root)
    try:
        run = trace_and_record(cfg, store, compare_estimate=params.compare_estimate)
    finally:
        if added:
            sys.path.remove(root)
    return run.text()
