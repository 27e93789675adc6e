"""DeepSpeed ZeRO-1/2's backward: its gradient buckets alive beside the activations, and the
moment its first reduction comes.

Read from DeepSpeed 0.19.6 (github.com/deepspeedai/DeepSpeed at edaa7221,
``deepspeed/runtime/zero/stage_1_and_2.py``): ZeRO-2 (or ZeRO-1 with ``overlap_comm``) reduces
in backward. The buckets are made at the first gradient hook (``setup_buckets``, line 2493)
and freed at backward's end (``_release_ipg_buffers``, line 828). Each gradient is copied into
the bucket as its hook fires; when the next one would not fit (``bucket.elements +
param.numel() > reduce_bucket_size``, line 1201) the bucket is reduced: its slices flattened
(``allreduce_bucket``, a w-byte copy) and, at ZeRO-2, the rank's gradients copied into
``grads_in_partition``, made at that first reduction and kept to the step (line 1678; its size:
:func:`profiling.estimate.deepspeed_padding.grads_kept`). Hooks fire in backward's order: an
untied LM head's, the final norm's, then the blocks' from the last (a tied head's at the
embedding, last). No torch here.
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate import deepspeed_lora as dl
from profiling.estimate import deepspeed_padding as dp
from profiling.estimate import deepspeed_zero12 as z12
from profiling.estimate.deepspeed_engine import Settings
from profiling.units import fmt_bytes, fmt_count

Moment = tuple[str, float, str]


def blocks_before(cfg: TrainingConfig, shape: dict[str, Any], reduce: int) -> tuple[int, bool]:
    """(k, after_head): the blocks whose backward has ended — every gradient of theirs in the
    bucket — before the first reduction, and whether the loss and head are behind it. What
    comes before the blocks is counted whole (an untied head, the final norm, GPT-2's
    positions: ``root_params`` less the embedding), so k is never more than DeepSpeed's; under
    LoRA the adapters are taken as Ψ_A / L per block (an lm_head adapter only lowers k)."""
    L = int(shape.get("layers") or 0)
    psi = dl.trainable(cfg, shape)
    if not L or not psi:
        return 0, False
    if psi <= reduce:  # one bucket holds them all: reduced at backward's end
        return L, True
    if cfg.lora_rank is not None:
        return min(reduce * L // psi, L), True
    root, block = int(shape.get("root_params") or 0), int(shape.get("block_params") or 0)
    V, h = int(shape.get("vocab") or 0), int(shape.get("hidden") or 0)
    if not (root and block and V and h):
        return 0, False
    ahead = root - V * h  # an untied head, the final norm, positions (the embedding's own: last)
    if ahead > reduce:
        return 0, False
    return min((reduce - ahead) // block, L), True


def backward_buckets(
    cfg: TrainingConfig, shape: dict[str, Any], parts: dict[str, float], moments: list[Moment]
) -> list[Moment]:
    """The buckets from the first hook (``contiguous_gradients``' hooks make them at ZeRO-1
    too): the loss's backward moment with them (a bound: the hook comes in the head's
    backward, after the loss's); and at ZeRO-2 or with ``overlap_comm`` the first reduction, the
    activations of the blocks whose backward has ended (and the loss's log-probabilities)
    freed, beside the buckets, the reduction's flattened copy and the gradients the rank keeps
    (ZeRO-2). A bound: the activations of the block being run are all counted."""
    if not cfg.deepspeed or cfg.zero not in (1, 2) or z12.bf16_optimizer_runs(cfg):
        return []
    s = Settings.of(cfg, shape)
    psi, w = dl.trainable(cfg, shape), s.w
    buckets = s.reduce * w * (2 if s.overlap else 1)
    f = fmt_bytes
    loss = next((b for n, b, _ in moments if n == "loss backward"), None)
    out: list[Moment] = []
    if loss is not None:  # ZeRO-1 too: contiguous_gradients' hooks make them (line 639)
        out.append((
            "backward, DeepSpeed's buckets made (the head's hook; bound)",
            loss + buckets,
            f"loss backward {f(loss)} + gradient bucket(s) {f(buckets)}",
        ))  # fmt: skip
    if cfg.zero == 1 and not s.overlap:  # stage 1 reduces at backward's end: the step's moment
        return out
    copy = z12.reduction_bytes(cfg, w, psi, s.reduce)  # and its communication_data_type copy
    kept = dp.grads_kept(cfg, shape, psi)[0] if cfg.zero == 2 else 0.0
    part = w * kept if cfg.zero == 2 and not cfg.offload_optimizer else 0.0
    fwd = sum(parts[k] for k in ("sharded weights", "optimizer", "kept", "activations"))
    act, logp = parts["activations"], parts["log-probs"]
    k, after = blocks_before(cfg, shape, s.reduce)
    L = int(shape.get("layers") or 1)
    # The blocks' activations as (act − log-probs)/L each: the rest (the final norm's saved
    # tensors, freed in the head's backward before any block's; RoPE's cos/sin, positions)
    # is spread over them, so k/L of it is freed with them.
    freed = (logp + k * (act - logp) / L) if after else 0.0
    done = f" less {k} block(s)' and the loss's {f(freed)}" if freed else ""
    out.append((
        "backward, DeepSpeed's first reduction (bound)",
        fwd - freed + buckets + copy + part,
        f"weights, optimizer and activations of the end of forward {f(fwd)}{done} "
        f"(reduce_bucket_size {fmt_count(s.reduce)} elements) + gradient bucket(s) "
        f"{f(buckets)} + a reduction's flattened copy {f(copy)}"
        + (f" + the gradients the rank keeps {f(part)}" if part else ""),
    ))  # fmt: skip
    return out


__all__ = ["backward_buckets", "blocks_before"]
