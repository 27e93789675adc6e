"""A plan's result, traced or estimated: every distinct rank's memory, the highest, the spread.

No torch here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from profiling._config_plan import ddp_alone, megatron_mixed
from profiling.config import TrainingConfig
from profiling.plans import zbv_form
from profiling.plans.layout import Layout
from profiling.plans.profile import RankMemory, StageProfile
from profiling.trace.allocations import Replay


class PlanResult(BaseModel):
    kind: Literal["traced", "estimated"]
    config: TrainingConfig
    layout: Layout
    params: int
    ranks: list[RankMemory]  # one per pipeline rank: every GPU of it holds the same
    stages: list[StageProfile]  # what each stage adds, action by action (the record keeps them)
    wall_seconds: float = 0.0
    torch_version: str | None = None
    notes: list[str] = Field(default_factory=list)
    # --counter reserved|nvml, traced: a pipeline rank's step replayed through the caching
    # allocator (every stage at its own block count; plans without a pipeline)
    replays: dict[int, Replay] = Field(default_factory=dict)
    # a context-parallel ring's kinds of rank, each place's pipeline ranks (ring rank 1: the
    # ranks from 1 on alike; 0: the first) where both were profiled — at cp 2, and from cp 3
    # on for a comparison; ``ranks`` holds each pipeline rank's higher
    ring_ranks: dict[int, list[RankMemory]] = Field(default_factory=dict)

    @property
    def highest(self) -> RankMemory:
        """The pipeline rank with the highest peak (the first of equals)."""
        return max(self.ranks, key=lambda r: (r.peak_bytes, -r.pp_rank))

    @property
    def lowest(self) -> RankMemory:
        return min(self.ranks, key=lambda r: (r.peak_bytes, r.pp_rank))

    @property
    def spread_bytes(self) -> int:
        """Highest peak − lowest peak over every rank of the plan."""
        return self.highest.peak_bytes - self.lowest.peak_bytes


COMPILED_NOTE = "torch.compile of each block"


ZBV_NOTE = (
    "ZBV: the closed form follows the split backward without sequence parallelism (Ulysses) "
    "or compile, with or without FSDP, with checkpointing none or full (every block or "
    "every N-th), with TP, CP or both, under Float8 without TP or checkpointing "
    "(profiling.plans.zbv_form); not this plan's: trace the plan before relying on it"
)


# what the estimate of a compiled ZBV plan is worth (tests/profiling/plans/test_zbv.py's toys)
ZBV_COMPILE_NOTE = (
    "ZBV under compile: a compiled block is one autograd node, whose backward the input "
    "backward runs whole and the weight backward again, block by block — not followed: this "
    "estimate stood at 0.966-0.9985 of the trace (below it), with and without checkpointing"
)


def estimate_notes(cfg: TrainingConfig, layout: Layout) -> list[str]:
    """A closed form's notes: the plan's, and what the closed form is worth for it."""
    notes = [*plan_notes(cfg, layout), "closed form: trace the plan for torch's own numbers"]
    zbv = layout.pp > 1 and layout.schedule == "zbv"
    if not zbv or zbv_form.modelled(cfg):
        return notes
    return [*notes, ZBV_NOTE, *([ZBV_COMPILE_NOTE] if cfg.compile else [])]


def plan_notes(cfg: TrainingConfig, layout: Layout) -> list[str]:
    """What every result of the plan says about the step it stands for."""
    notes = [
        "the step is torchtitan's (Llama 3 at its December 2024 benchmarks' commit): its "
        "parallelisms, FSDP2 wrapping and loss",
    ]
    if layout.tp > 1:
        notes.append("tensor parallelism is torchtitan's: sequence-parallel norms, loss parallel")
    if layout.pp > 1:
        notes.append(
            f"pipeline: torch's PipelineStage; {layout.microbatches} microbatches of "
            f"{layout.microbatch_size}; FSDP keeps each stage's parameters gathered and its "
            "gradients unsharded from the first forward to the reduction (torchtitan's default "
            "with pipelining); the loss computed per microbatch, the last stage keeping each "
            "microbatch's logits until its backward"
            + (
                "; as torch 2.6 runs it (--pp-keeps-outputs), each stage's outputs then kept "
                "until the next step and the last stage's merged at the step's end"
                if layout.keeps_outputs
                else ""
            )
        )
    if cfg.fsdp and layout.pp == 1 and not cfg.reshard_after_forward:
        notes.append(
            "--zero 2: FSDP2 keeps each group gathered from its forward to its backward "
            "(fully_shard(reshard_after_forward=False), torchtitan's fsdp_reshard_after_forward "
            '= "never")'
        )
    if cfg.reshard_always and layout.pp > 1:
        notes.append(
            "--reshard-always under a pipeline: FSDP2 reshards every group after each "
            "microbatch's forward and a backward gathers them again, keeping them until the "
            "stage's next forward (torch's PipelineStage: set_reshard_after_backward(False)); "
            "the closed form bounds a backward after a forward from above at its first block"
        )
    elif cfg.reshard_always:
        notes.append(
            "--reshard-always: FSDP2 reshards the final norm and output after forward too and "
            "gathers them again for their backward (torchtitan's fsdp_reshard_after_forward = "
            '"always"; its default keeps them gathered in between)'
        )
    if cfg.titan_root_group and cfg.fsdp:
        notes.append(
            "--titan-root-group: torchtitan's FSDP groups before 83e6941 (July 2025) — the "
            "embedding, norm and output in the root's group, gathered all step"
            + (
                ", the last block kept from its forward to its backward; the closed form bounds "
                "the blocks' backward from above"
                if layout.pp == 1
                else "; under a pipeline every group stays gathered all step either way"
            )
        )
    if layout.cp > 1:
        notes.append(
            f"context parallelism {layout.cp}: torch's ring attention (context_parallel's "
            "dispatcher, the all-gather rotation, the head-tail load balancer) around every "
            "attention, traced on the fake group as ring rank 1 (rank 0 attends to half its "
            f"queries from the second step: less at attention's highest moment"
            + (
                ", but at cp 2 it keeps wo's copy of the merged output, a block's q more: "
                "ring ranks 0 and 1 both traced and estimated, each pipeline rank the higher"
                if layout.cp == 2
                else ""
            )
            + ")"
        )
    if layout.ulysses > 1:
        u = layout.ulysses
        notes.append(
            f"Ulysses {u} (DeepSpeed's DistributedAttention): each rank holds 1/{u} of the "
            f"sequence outside attention; all-to-alls give it the whole sequence for 1/{u} of "
            "the heads around the attention kernel (the same bytes) and back (wo keeps that "
            "copy beside the kernel's output); fewer key/value heads than ranks are replicated "
            "to one per rank, as DeepSpeed's UlyssesSPAttentionHF does; the all-to-alls' send "
            "and receive buffers are transient (traced with torch's all_to_all_single on the fake "
            "group); FSDP shards over the Ulysses ranks too, as ZeRO does over DeepSpeed's "
            "sequence-data-parallel group"
        )
    if cfg.compile:
        notes.append(
            f"{COMPILED_NOTE}, after tensor parallelism and checkpointing, as torchtitan compiles "
            "it: Inductor's partitioner on fake tensors (DTensor weights as AOTAutograd flattens "
            "them, the checkpoint's policy as its recompute tags), its forward graph run op by "
            "op (Inductor's fused kernels hold fewer transients)"
        )
    if cfg.float8:
        notes.append(
            f"Float8 ({cfg.float8}) as torchao runs it: every Linear of the blocks converted, "
            "the output projection left out (torchtitan's converter); the high-precision input "
            "and weight kept for backward, each cast to fp8 at 9 bytes per element at its "
            "highest (profiling/plans/float8_form.py)"
            + ("; FSDP gathers the converted weights in fp8" if cfg.float8_all_gather else "")
        )
    if cfg.float8 == "tensorwise" and layout.tp > 1:
        notes.append(
            "Float8 under tensor parallelism: torchao's TP styles, as torchtitan runs them with "
            "tensorwise (Float8ColwiseParallel, Float8RowwiseParallel, PrepareFloat8ModuleInput): "
            "the attention's and the MLP's inputs cast to fp8 before their all-gather and kept "
            "at one byte, wo's and w2's inputs kept in fp8"
        )
    if cfg.async_tp:
        notes.append(
            "asynchronous TP: its symmetric-memory workspace is counted in nvidia-smi's column; "
            "torchtitan runs it only under torch.compile (Inductor's micro-pipeline pass), and "
            "the blocks here are counted as eager ones"
        )
    if megatron_mixed(cfg):
        notes.append(
            "--precision mixed beside TP or a pipeline without FSDP: 16-bit weights with an "
            "fp32 master copy (Megatron's way), not torchtitan's step — its maybe_enable_amp "
            'turns mixed precision off there ("Mixed precision training is disabled"): '
            "estimate --precision fp32 for what torchtitan holds"
        )
    if ddp_alone(cfg):
        notes.append(
            "DDP alone (torchtitan's replicate, bucket_cap_mb=100): the Reducer's buckets hold a "
            "copy of every gradient in the parameters' dtype from the wrap on, beside .grad"
        )
    notes.append(
        "steady state: the second step of a loop (optimizer states created by the first); "
        "gradients freed between steps"
    )
    return notes


__all__ = ["PlanResult", "plan_notes"]
