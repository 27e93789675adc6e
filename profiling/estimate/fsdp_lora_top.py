"""LoRA under FSDP2 without checkpointing, Llama's kind: the top block's MLP going forward and
back, the final norm going back, and the top block's ``pre_backward`` prefetching the block
below — beside the moments ``fsdp_lora_moments`` counts (forward's copy-outs, backward's
start). No torch here.

The blocks keep what they save, so these are the one-GPU moments ``llama_end`` counts (from
the end of forward less what the loss, the final norm and the head kept), the whole weights
replaced by the shards and what FSDP2 holds gathered then (torch 2.13
``_fully_shard/_fsdp_param_group.py``, ``_fsdp_collectives.py``), g the gathered element size:

- going forward through the top block's MLP: the root's parameters (its all-gather output
  freed as block 0's ``wait_for_unshard`` returned) and the top block's all-gather output
  beside its parameters (kept in ``comm_ctx.all_gather_state`` to the root's
  ``post_forward``): (root + 2·block)·g;
- the final norm going back: the root gathered again at backward's start, its all-gather
  output beside its parameters: 2·root·g;
- the final norm's input gradient reaching the top block fires its ``pre_backward``:
  ``unshard``, ``wait_for_unshard`` (its all-gather output freed after the copy-out: in
  backward no ``all_gather_state`` keeps it) and ``_backward_prefetch``, which gathers the
  block below at once — its all-gather output (block·g), and under ``mixed`` its fp32 shards
  cast to bf16 first (``foreach_all_gather``'s ``param_all_gather_inputs``, freed only after
  ``all_gather_copy_in``: block·g/N), beside the root's parameters and the top block's;
- the top block's MLP going back: the same (root + 2·block)·g, the prefetched output for the
  top block's.

llama-wide (h 256, f 1024, V 256) LoRA q,v FSDP 2 seq 256 peaked in the trace at layers.1.mlp
going back, 1,546,272 B above the estimate's last copy-out under amp-bf16 (0.931, audit7 D72);
all-linear peaked in the forward at down's adapter, 0.867; under ``mixed`` with lora_dropout
on 128 tokens at the prefetch (211,456 B above the MLP going back).
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.ledger import Line
from profiling.estimate.states import gathered_bytes
from profiling.units import fmt_bytes

LAST = "forward, the last block's copy-out (the block before's all-gather output held)"
BACK = "backward start (the root gathered again)"
TOP_BACK = "backward, the top block recomputed going back through its MLP (a bound)"
PREFETCH = "backward, the top block gathered and the block below prefetched (FSDP2)"


def top_block(
    cfg: TrainingConfig, d: Any, fwd: float, lines: list[Line], groups: tuple[int, int]
) -> list[tuple[str, float, str]]:
    """The moments (name, bytes, calculation) from ``fwd`` (the shards, optimizer, the step's
    inputs and the end of forward's activations) and ``groups`` (the root's and one block's
    parameters as FSDP2 gathers them)."""
    from profiling.estimate import llama_end

    root, block = groups
    g, f = gathered_bytes(cfg), fmt_bytes
    top, norm = (root + 2 * block) * g, 2 * root * g
    out = []
    for name, value, calc in llama_end.moments(d, cfg, fwd + top, lines, fsdp2=True):
        held, words = (norm, "2·root") if name == llama_end.NORM else (top, "(root + 2·block)")
        out.append((
            f"{name} (FSDP2)",
            value - top + held,
            f"the shards, optimizer, the step's inputs and the end of forward's activations "
            f"{f(fwd)} + FSDP2's gathered {words}·{g} B {f(held)}; {calc}",
        ))  # fmt: skip
        if name == llama_end.MLP:
            out.append(_prefetch(cfg, d, fwd + top, lines, block))
    return out


def _prefetch(
    cfg: TrainingConfig, d: Any, base: float, lines: list[Line], block: int
) -> tuple[str, float, str]:
    """The top block's ``pre_backward``: the block below's all-gather output made (counted in
    ``base``'s (root + 2·block)·g for the top block's, freed by then) and under ``mixed`` its
    shards' bf16 casts beside it; the head's and the final norm's gradients and the gradient
    reaching the top block held, what the loss, the final norm and the head kept freed (under
    autocast the head's 16-bit weight copy too)."""
    from profiling.estimate import llama_end
    from profiling.estimate.activations import Bytes
    from profiling.estimate.lora_bytes import KERNEL_LOSSES

    e, g, f = Bytes.of(cfg.precision), gathered_bytes(cfg), fmt_bytes
    T, V = d.s * d.b, int(d.V or 0)
    gone = llama_end.released(d, e, cfg, lines)
    if e.amp and cfg.loss not in KERNEL_LOSSES:
        gone += V * d.h * 2
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    first = llama_end._grads(d, cfg, p)[0]
    reach = T * d.h * e.r
    shard = 4 if cfg.param_dtype == "fp32" else 2  # the shards' element size
    cast = block * g / cfg.gpus if g != shard else 0.0
    value = base - gone + first + reach + cast
    calc = (
        f"the shards, optimizer, the step's inputs and the end of forward's activations, the "
        f"root's and the top block's parameters and the block below's all-gather output "
        f"{f(base)} − what the loss, the final norm and the head kept"
        + (" and the head's 16-bit weight copy" if e.amp else "")
        + f" {f(gone)} + the head's and final norm's gradients {f(first)} + the gradient "
        f"reaching the top block s·b·h·{e.r} {f(reach)}"
        + (f" + the block below's shards cast to {g} B, block·{g}/{cfg.gpus} {f(cast)}" if cast
           else "")
        + f" = {f(value)}"
    )  # fmt: skip
    return PREFETCH, value, calc


__all__ = ["PREFETCH", "top_block"]
