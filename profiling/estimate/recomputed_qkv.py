"""A GPT-NeoX block recomputed in backward (``--checkpointing full``) with its fused q/k/v
partly adapted: the adapter's forward in the recomputation, not the MLP's gradients, can hold
the block's highest moment (``recomputed_neox``'s bound read 0.9927 of the trace below it:
gpt_neox-wide toy h 256, f 1024, V 256, 16 × 2, mixed, LoRA r 8 q,v,lm_head, −30,696 B; under
--dpo −32,718 B).

The trace's fused adapter is LitGPT's ``LoRAQKVLinear`` (``trace.lora_neox.FusedQKVLoRA``):
the base's output (s·b·3h, compute dtype), the input's cast to the adapters' dtype, A's output
(s·b·n·r), the grouped conv's update (s·b·n·h) and, more than one sequence, its contiguous copy
for ``index_copy`` with its column index (n·h int64), the zero-padded output of index_copy
(s·b·3h: the zeros freed first), the scaled copy and the sum (each s·b·3h in the adapters'
dtype) — all alive at the sum, beside the input norm's output the recomputation made first.
Read off the trace's live storages at that moment (the lowest block's recomputation). The rest
is ``recomputed_neox``'s at the same block: the end of forward less the loss's and the final
norm's tensors and the checkpoints above, the gradients made by then (not this block's
adapters' nor the blocks' below: ``not_made``), an adapted head's kept tensors freed (its input's
cast and A's output: ``lora_bytes.head_adapter``) and the gradient reaching the block.

transformers' GPT-NeoX (``hf_module`` gpt_neox) under ``mixed`` with fp32 adapters, q, k or v
but not all three adapted, no lora_dropout, no QLoRA or DoRA; elsewhere none. ``--dropout`` adds
nothing at the sum: the recomputation has run only the input norm and the base q/k/v by then
(GPTNeoXLayer.forward: the attention's and the MLP's dropouts come after), and the forward's
own dropout masks are the end of forward's (V 128, h 128, 128 × 2 q,v read 0.884 of the trace
while this moment was not taken with --dropout; equal now). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.lora_bytes import adapter_bytes
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Bytes, Dims

NAME = "backward, a recomputed block's q/k/v adapter"


def adapted(d: Dims, inp: TrainingConfig) -> int:
    """How many of q, k, v the fused adapter adapts where this moment applies, else 0."""
    n = len({"q", "k", "v"} & set(inp.lora_targets))
    plain = not (inp.qlora or inp.dora or inp.lora_dropout)
    if d.extra.get("hf_module") != "gpt_neox" or inp.precision != "mixed" or not plain:
        return 0
    return n if 0 < n < 3 and inp.lora_rank is not None else 0


def not_made(d: Dims, inp: TrainingConfig, grads: float, i: int) -> float:
    """The adapters' gradients of block ``i`` and the blocks below, not made yet when block
    ``i`` recomputes (``grads``: every trained gradient, the head's adapter's among them)."""
    head = (
        int(inp.lora_rank or 0) * (d.h + int(d.V or 0)) * 4 if "lm_head" in inp.lora_targets else 0
    )
    return (grads - head) / d.L * (i + 1)


def dpo_released(d: Dims, e: Bytes, inp: TrainingConfig) -> float:
    """Under ``--dpo``, what ``neox_moments.released`` counts freed beyond DPO's tape: it reads
    PyTorch's loss (s·b·V·4 log-probabilities and the shifted labels) where DPO's kept
    log-probabilities are (s − 1) rows long, with their labels' copy and mask
    (``estimate.preference``), the loss the loop's; 0 without --dpo."""
    if not inp.dpo:
        return 0.0
    from profiling.estimate.hf_ops import _shifted_labels
    from profiling.estimate.losses import _dpo_plan

    T, V = d.s * d.b, int(d.V or 0)
    plan = _dpo_plan(d, e, inp)
    hidden = T * d.h * e.r  # the final norm's output: counted with the norm by ``released``
    # the loss, which the tape counts released, is the loop's, and its gradient (backward's
    # ones) alive: 2·4 B
    return T * V * 4 + _shifted_labels(d).bytes - (plan.released - hidden) + 2 * 4


def down_waiting(d: Dims, e: Bytes, inp: TrainingConfig) -> tuple[int, str]:
    """With down adapted too, what its adapter's backward holds while the block recomputes
    (bytes, words): the backward reaches down's B first and its saved input sets the
    recomputation off, beside peft's ``result.to(torch_result_dtype)`` gradient — fp32, the
    adapter's sum being fp32 — and its 16-bit cast for the base branch (peft 0.x
    ``lora.layer.Linear.forward``; ``recomputed_neox_mixed``). With ``--dropout`` the MLP
    output's dropout mask, saved last, sets it off first: only the gradient reaching the block
    then. GPT-NeoX q,v,down mixed full checkpointing read 0.984 of the trace without it."""
    if "down" not in inp.lora_targets or inp.dropout:
        return 0, ""
    T, h = d.s * d.b, d.h
    return T * h * (4 + e.c), f" + down's adapter's gradients waiting s·b·h·(4 + {e.c})"


def transient(d: Dims, e: Bytes, inp: TrainingConfig, n: int, last: bool) -> tuple[int, str]:
    """What the recomputation holds at the fused adapter's sum (bytes, words), beyond the
    gradient reaching the block; ``last``: the last block's, whose input norm's statistics are
    alive there too (the trace's: freed before the sum at the lowest block)."""
    from profiling.estimate.activations import _cuda

    T, h, a, r = d.s * d.b, d.h, adapter_bytes(inp), int(inp.lora_rank or 0)
    copy = T * n * h * a if d.b > 1 else 0
    stats = T * (8 if _cuda(inp) else 2 * e.r) if last else 0
    value = (
        T * h * e.c + stats + T * 3 * h * e.c + T * h * a + T * n * r * a + T * n * h * a
        + copy + 8 * n * h + 3 * T * 3 * h * a
    )  # fmt: skip
    words = (
        f"the norm's output s·b·h·{e.c}"
        + (" and statistics" if stats else "")
        + f", the base's output s·b·3h·{e.c}, the input's cast "
        f"s·b·h·{a}, A's output s·b·{n}r·{a}, the update s·b·{n}h·{a}"
        + (f" and its contiguous copy s·b·{n}h·{a}" if copy else "")
        + f", the column index {n}h·8, the padded update, its scaled copy and the sum "
        f"3·s·b·3h·{a} {fmt_bytes(value)}"
    )
    return value, words


__all__ = ["NAME", "adapted", "down_waiting", "dpo_released", "not_made", "transient"]
