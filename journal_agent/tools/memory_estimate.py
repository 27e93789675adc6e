"""MemoryEstimate: closed-form training memory with every step shown, saved as a record."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.paths import measurements_dir
from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Tool, ToolContext, ToolResult


class MemoryEstimateInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    model: str | None = Field(
        default=None,
        description="A reference model: gpt2-small, gpt2-medium, gpt2-large, gpt2-xl, "
        "llama-1b, llama-7b. Or give params (and the shape) instead.",
    )
    params: str | None = Field(
        default=None, description='Parameter count when no model, e.g. "7e9", "7B", "124M".'
    )
    layers: int | None = Field(default=None, ge=1, description="Transformer layers L.")
    hidden: int | None = Field(default=None, ge=1, description="Hidden size h.")
    heads: int | None = Field(default=None, ge=1, description="Attention heads a.")
    vocab: int | None = Field(default=None, ge=1, description="Vocabulary size V.")
    seq: int | None = Field(default=None, ge=1, description="Sequence length (default: model's).")
    batch: int = Field(default=1, ge=1, description="Micro-batch per GPU.")
    precision: Literal["fp32", "mixed", "bf16"] = Field(
        default="mixed", description="mixed = 16-bit weights/grads + fp32 master copy."
    )
    optimizer: Literal[
        "adamw", "adam", "sgd", "sgd-nomomentum", "adam8bit", "adafactor", "lion"
    ] = "adamw"
    gpus: int = Field(default=1, ge=1, description="Data-parallel GPUs N.")
    zero: int = Field(default=0, ge=0, le=3, description="ZeRO stage 0-3.")
    tp: int = Field(default=1, ge=1, description="Tensor-parallel degree t.")
    sequence_parallel: bool = False
    lora_rank: int | None = Field(default=None, ge=1, description="Train LoRA adapters of rank R.")
    qlora: bool = Field(default=False, description="4-bit NF4 base weights (needs lora_rank).")
    recompute: Literal["none", "selective", "full"] = "none"
    flash_attention: bool = False
    fp32_grads: bool = Field(
        default=False, description="Also count an fp32 gradient copy (DeepSpeed's convention)."
    )
    gpu_mem: float | None = Field(
        default=None, gt=0, description="GPU memory in GB, for the ✅ / ⚠️ / ❌ verdict."
    )


class MemoryEstimate(Tool):
    name = "MemoryEstimate"
    description = (
        "Estimate the GPU memory of one training step in closed form, every step of the "
        "calculation shown: weights, gradients and optimizer state by precision and optimizer, "
        "ZeRO stages over N GPUs, activations (Korthikanti et al.) with tensor/sequence "
        "parallelism, recomputation and flash attention, logits, LoRA/QLoRA.\n"
        "- Returns the table (component, bytes per GPU, calculation, ✅/⚠️/❌ against gpu_mem) "
        "and a record id; cite the numbers in the journal as [m:<id>].\n"
        "- These are estimates; use MemoryTrace for exact traced bytes of the same step."
    )
    Input = MemoryEstimateInput

    def run(self, ctx: ToolContext, params: MemoryEstimateInput) -> ToolResult:  # type: ignore[override]
        from profiling.estimate import EstimateInput, estimate, render_text
        from profiling.records import RecordStore
        from profiling.report import estimate_record
        from profiling.units import parse_count

        values = params.model_dump()
        values["gpu_mem_gb"] = values.pop("gpu_mem")
        # A ProfilingError (bad sizes, an unknown model) becomes an error result in Tool.call.
        if values["params"] is not None:
            values["params"] = parse_count(values["params"])
        est = estimate(EstimateInput.parse(**values))
        record = estimate_record(est)
        RecordStore(measurements_dir(ctx.root)).save(record)
        return ToolResult(f"{render_text(est)}\nrecord: {record.id}  (cite as {record.citation()})")
