"""FSDP2's backward of GPT-NeoX's kind (transformers' GPT-NeoX/Pythia, Phi, Falcon) through its
top block's MLP, full training, every block keeping its saved tensors. No torch here.

Going back, the top block is gathered first (torch 2.13 ``_fsdp_param_group.py``
``FSDPParamGroup.pre_backward``: its unsharded parameters, block·g) and the block below is
prefetched (its all-gather output, block·g, alive until that block's own ``pre_backward``
copies it out); no block has gone back yet, so no reduce-scatter input is held and no block's
sharded gradients exist, but every block's saved tensors are alive. The top block's MLP goes
back there as ``neox_moments`` counts it on one GPU: the output projection's weight and bias
gradients (h·f + h)·g made, beside the gradient reaching the block (s·b·h in the residual's
dtype) and the MLP's f-wide gradients (``neox_moments.f_wide``: GELU's one net, Phi's
gelu_new's two).

Only ``fsdp_block_gather.GATHER`` (a lower block's copy-out, one block's saved tensors) and
``fsdp``'s first and last blocks (one layer's activations) were counted, so once the blocks'
saved tensors outweigh a block's reduce-scatter input and sharded gradients the estimate was
below the trace: toys (V 128, h 128, f 512, 2 blocks, FSDP 2) GPT-NeoX fp32 SGD 64 × 2 0.928
(−453,392 B), mixed 128 × 2 0.940, bf16 64 × 2 0.929; Falcon-7B alike. Equal to the trace now
(tests/profiling/trace/test_fsdp_neox_top.py); 28 of the sweep's 48 rows read 0.909-0.964.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate.selective import blocks_keep_saved
from profiling.estimate.states import gathered_bytes
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

TOP_MLP = "backward, the top block's MLP (the block below prefetched, every block's saved tensors)"


def applies(d: Any, cfg: TrainingConfig) -> bool:
    """Full training of transformers' GPT-NeoX, Phi or Falcon on FSDP2 resharding after forward,
    eager, every block keeping its saved tensors, PyTorch's loss, no autocast (its 16-bit
    weight copies and fp32 casts going back are not read here), no tensor parallelism; BLOOM's
    MLP goes back through its own GeLUFunction (``bloom.moments``)."""
    from profiling.estimate.losses import REFERENCE

    return (
        d.arch == "neox"
        and d.extra.get("hf_module") in ("gpt_neox", "phi", "falcon")
        and not d.extra.get("experts")
        and cfg.lora_rank is None
        and blocks_keep_saved(cfg)
        and not cfg.compile
        and cfg.zero != 2
        and cfg.tp == 1
        and cfg.loss == REFERENCE
        and not cfg.precision.startswith("amp-")
    )


def top_mlp(
    d: Any, e: Any, cfg: TrainingConfig, sums: tuple[float, ...], layer: float
) -> list[tuple[str, float, str]]:
    """The moment (name, bytes, calculation), where it applies: ``sums`` are
    ``fsdp_block_gather.block_gather``'s (the fixed part — sharded weights, optimizer, the root
    gathered, the head's and final norm's unsharded gradients, two blocks gathered and the
    reduce-scatter input above —, what is held beside it, one block's sharded gradients, one
    block gathered, one block's reduce-scatter input, the blocks, what a block keeps);
    ``layer`` one block's saved tensors."""
    if not applies(d, cfg):
        return []
    from profiling.estimate.neox_moments import _dropout, f_wide

    fixed, held, _shard, _block_g, block_r, blocks, _kept = sums
    L = int(blocks)
    T, h, f = d.s * d.b, d.h, d.f
    p = gathered_bytes(cfg)  # the unsharded gradients' dtype, the gathered weights'
    bias = h if d.extra["neox"].get("bias") else 0
    down = (h * f + bias) * p  # the output projection's weight (and bias) gradients
    n = f_wide(d, e, cfg)
    mlp = n * T * f * e.c
    drop, drop_words = _dropout(d, e, cfg, n)
    value = fixed - block_r + L * layer + down + mlp + drop + held
    calc = (
        f"{fmt_bytes(fixed)} as above less the reduce-scatter input above (none: no block has "
        f"gone back) {fmt_bytes(block_r)} + every block's saved tensors {L}·"
        f"{fmt_bytes(layer)} + the output projection's gradients (h·f"
        + (" + h" if bias else "")
        + f")·{p} B {fmt_bytes(down)} + the MLP's {n} f-wide gradients s·b·{n}f·{e.c}"
        f"{drop_words} {fmt_bytes(mlp + drop)} + {fmt_bytes(held)} held = {fmt_bytes(value)}"
    )
    return [(TOP_MLP, value, calc)]


__all__ = ["TOP_MLP", "applies", "top_mlp"]
