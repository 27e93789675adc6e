"""MemoryTrace: exact bytes of one training step under fake tensors, saved as a record."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.paths import measurements_dir
from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Tool, ToolContext, ToolResult


class MemoryTraceInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    model: str = Field(
        description="A reference model (gpt2-small, gpt2-medium, gpt2-large, gpt2-xl, llama-1b, "
        "llama-7b) or a factory in the workspace, 'package.module:function', returning a module "
        "and its inputs."
    )
    batch: int = Field(default=1, ge=1)
    seq: int | None = Field(default=None, ge=1, description="Sequence length (default: model's).")
    dtype: Literal["fp32", "bf16", "fp16"] = Field(
        default="fp32", description="Autocast compute dtype (fp32 = no autocast)."
    )
    param_dtype: Literal["fp32", "bf16", "fp16"] = Field(
        default="fp32", description="Parameter dtype (bf16 = pure bf16 training)."
    )
    optimizer: Literal["adamw", "adam", "sgd", "sgd-nomomentum", "adagrad", "rmsprop"] = "adamw"
    world_size: int = Field(default=1, ge=1, description="Ranks of the fake process group.")
    fsdp: bool = Field(default=False, description="Shard with FSDP2 (needed for world_size > 1).")
    no_reshard: bool = Field(
        default=False, description="FSDP: keep gathered parameters after forward (ZeRO-2 style)."
    )
    checkpointing: bool = Field(default=False, description="Activation checkpointing per block.")
    compare_estimate: bool = Field(
        default=False, description="Also show the closed-form estimate of the same step beside it."
    )
    gpu_mem: float | None = Field(
        default=None, gt=0, description="GPU memory in GB, for ✅ / ⚠️ / ❌ against the peak."
    )


class MemoryTrace(Tool):
    name = "MemoryTrace"
    description = (
        "Trace one training step (forward, loss, backward, optimizer step) under fake tensors "
        "with PyTorch's memory tracker: exact peak bytes by category (parameters, gradients, "
        "optimizer state, activations, temporaries) and by module, with no GPU and nothing "
        "allocated. FSDP2 sharding at any world size gives the per-rank peak.\n"
        "- Returns the breakdown and a record id; cite the numbers as [m:<id>].\n"
        "- A 7B model takes several seconds; small models well under one.\n"
        "- A workspace factory runs the user's code, so it is permission-checked like Bash."
    )
    Input = MemoryTraceInput

    def run(self, ctx: ToolContext, params: MemoryTraceInput) -> ToolResult:  # type: ignore[override]
        from profiling.records import RecordStore

        if ":" in params.model and ctx.policy is not None:
            # Importing a workspace module runs its code: the same approval as running it.
            ctx.policy.ensure("Bash", command=f"journal-agent trace --model {params.model}")
        store = RecordStore(measurements_dir(ctx.root))
        # A ProfilingError (a model that will not trace) becomes an error result in Tool.call.
        return ToolResult(_trace(params, ctx, store))


def _trace(params: MemoryTraceInput, ctx: ToolContext, store: object) -> str:
    import sys

    from profiling.report import render_trace_text, trace_record
    from profiling.trace import TraceConfig, trace_step

    cfg = TraceConfig(
        model=params.model,
        batch=params.batch,
        seq=params.seq,
        dtype=params.dtype,
        param_dtype=params.param_dtype,
        optimizer=params.optimizer,
        world_size=params.world_size,
        fsdp=params.fsdp,
        reshard_after_forward=not params.no_reshard,
        checkpointing=params.checkpointing,
    )
    if params.compare_estimate and ":" not in params.model:
        from profiling.report import estimate_input_for_trace

        estimate_input_for_trace(cfg, params.gpu_mem)  # fail before a long trace
    root = str(ctx.root)
    added = ":" in params.model and root not in sys.path
    if added:  # the factory lives in the workspace
        sys.path.insert(0, root)
    try:
        result = trace_step(cfg)
    finally:
        if added:
            sys.path.remove(root)
    from profiling.report import trace_verdict

    record = trace_record(result, params.gpu_mem)
    store.save(record)  # type: ignore[attr-defined]
    parts = [render_trace_text(result)]
    if params.gpu_mem:
        parts.append(trace_verdict(result, params.gpu_mem)["verdict"])
    parts.append(f"record: {record.id}  (cite as {record.citation()})")
    if params.compare_estimate and ":" not in params.model:
        from profiling.estimate import estimate, render_text
        from profiling.report import (
            compare,
            estimate_input_for_trace,
            estimate_record,
            render_compare_text,
        )

        est = estimate(estimate_input_for_trace(result.config, params.gpu_mem))
        est_rec = estimate_record(est)
        store.save(est_rec)  # type: ignore[attr-defined]
        parts += [
            "",
            render_text(est),
            f"record: {est_rec.id}  (cite as {est_rec.citation()})",
            "",
            f"Estimate {est_rec.citation()} beside trace {record.citation()}:",
            render_compare_text(compare(est, result)),
        ]
    return "\n".join(parts)
