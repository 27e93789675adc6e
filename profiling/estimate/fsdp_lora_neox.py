"""LoRA under FSDP2 on GPT-NeoX's kind (transformers' GPT-NeoX/Pythia, Phi, Falcon, BLOOM): the
last block's MLP going forward and going back (``neox_moments``, and BLOOM's attention moments
beside them) with what FSDP2 holds gathered then. No torch here.

The one-GPU moments start from the end of forward, whose ZeRO-3 line counts the root and one
block gathered (``fsdp_lora.lora_gathered``: the last block's all-gather output, held to the
root's post-forward). Inside the last block, forward or back, its parameters are gathered
beside that all-gather output: ``FSDPParamGroup.wait_for_unshard`` keeps a group's all-gather
result in ``comm_ctx.all_gather_state`` until the next group's copy-out, and in backward the
last block, unsharded again by its ``pre_backward``, is the only group gathered until block
L − 2's (torch 2.13 ``_fully_shard/_fsdp_param_group.py``, ``_fsdp_collectives.py``). So each of
these moments holds one block more, block·g: Phi (V 128, h 128, f 512, 64 tokens, q, v) read
0.883–0.941 of the trace, its peak the last block's GELU going back.
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.activations import Dims
from profiling.estimate.fsdp_lora import group_params, lora_fsdp2
from profiling.estimate.states import gathered_bytes
from profiling.units import fmt_bytes

COPY_OUT = "backward, the last block's copy-out (its shards' bf16 casts held)"


def last_block_held(
    cfg: TrainingConfig, shape: dict[str, Any], d: Dims | None, fwd: float
) -> list[tuple[str, float, str]]:
    """``bloom.moments`` (the last block's: ``neox_moments``, BLOOM's attention) from the end
    of forward ``fwd``, with the last block's parameters beside its all-gather output under
    LoRA on FSDP2, and under ``mixed`` the last block's copy-out going back."""
    from profiling.estimate import bloom

    moments = bloom.moments(d, cfg, fwd)
    if not moments or d is None or not lora_fsdp2(cfg) or not shape.get("block_params"):
        return moments
    g, block = gathered_bytes(cfg), group_params(cfg, shape)[1]
    extra = block * g / cfg.tp
    words = f" + the last block's parameters beside its all-gather output block·{g} B"
    out = [(name, value + extra, calc + words) for name, value, calc in moments]
    return out + _copy_out_back(cfg, d, fwd, block)


def _copy_out_back(
    cfg: TrainingConfig, d: Dims, fwd: float, block: int
) -> list[tuple[str, float, str]]:
    """Under ``mixed`` the last block's copy-out going back: its shards' bf16 casts (the
    all-gather's inputs, ``FSDPParam.all_gather_inputs``: ``sharded_param.to(param_dtype)``,
    block·2/N B) are still alive beside its all-gather output and its parameters, before its MLP
    makes any gradient — above the MLP's moment where the casts outweigh the MLP's f-wide
    gradients (GPT-NeoX V 128, h 128, f 512, 64 tokens: −71,296 B, 0.987-0.998 of the trace)."""
    from profiling.estimate.activations import Bytes
    from profiling.estimate.neox_moments import released

    if cfg.precision != "mixed":  # the shards are the all-gather's inputs: nothing cast
        return []
    e, f, t = Bytes.of(cfg.precision), fmt_bytes, cfg.tp
    gone, what = released(d, e, cfg)
    grad = d.s * d.b * d.h * e.r / t
    cast = block * 2 / (cfg.world_size * t)
    value = fwd - gone + grad + block * 2 / t + cast
    return [(
        COPY_OUT,
        value,
        f"end of forward {f(fwd)} − {what} {f(gone)} + the gradient reaching the block "
        f"s·b·h·{e.r} {f(grad)} + its parameters beside its all-gather output block·2 B "
        f"{f(block * 2 / t)} + its shards' bf16 casts block·2/N B {f(cast)} = {f(value)}",
    )]  # fmt: skip


__all__ = ["COPY_OUT", "last_block_held"]
