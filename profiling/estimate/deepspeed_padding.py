"""DeepSpeed's partitions as it pads and cuts them: what one rank holds of the trained
parameters' 16-bit flat buffer, fp32 master, optimizer states and gradients, element for
element, not Ψ/N.

Read from DeepSpeed 0.19.6 (github.com/deepspeedai/DeepSpeed at edaa7221):

``deepspeed/runtime/zero/stage_1_and_2.py`` (``DeepSpeedZeroOptimizer.__init__``, line 392):
  each optimizer group's trained parameters are flattened into one 16-bit buffer padded to a
  multiple of ``nccl_start_alignment_factor · N`` = 2·N elements (``flatten_dense_tensors_
  aligned``), held whole on every rank; a rank's partition of it is a 2·N-th of that, so the
  fp32 master (``single_partition_of_fp32_groups``), the optimizer's states over it and the
  step's flattened fp32 gradient (``flatten_dense_tensors_aligned(…, partition_size)``) are
  ceil(Ψ_group / 2N) · 2 elements per group — up to 2 more than Ψ_group/N, on every rank
  (the padding of the last is zeros, stepped like the rest). ``BF16_Optimizer``
  (``runtime/bf16_optimizer.py``, line 163) pads its groups the same way.

``copy_grads_in_partition`` (line 1670, ZeRO-2, ``contiguous_gradients``): the buffer the
  reduced gradients are kept in is ``sum(p.numel() for p in params_in_partition)`` — the WHOLE
  of every tensor that starts in the rank's partition or straddles its start
  (``get_partition_info``, line 1986), not its Ψ/N slice: a rank whose partition cuts an
  embedding keeps all of it (GPT-2 small on 8 ranks: 48.2M elements, not 15.6M; Llama 7B on
  64 ranks: 243M, not 105M). The largest over the ranks is the per-GPU number.

``partition_parameters.py`` (``_partition_param``, line 1788, ZeRO-3): each tensor is padded
  to a multiple of N and cut into N equal pieces (``_aligned_size``): a rank holds
  ceil(numel / N) of each, of the 16-bit partitions (frozen tensors too), and of the fp32
  master, states and gradient partitions of the trained ones (``partition_numel``).
No torch here.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate import deepspeed_groups as dg
from profiling.estimate import deepspeed_lora as dl
from profiling.estimate.ledger import Ledger
from profiling.estimate.optim_states import largest_adapter, trainable_numels
from profiling.units import fmt_count


def group_parts(cfg: TrainingConfig, shape: dict[str, Any], psi: int) -> list[int]:
    """ZeRO-1/2: one rank's partition of each optimizer group, ceil(Ψ_group / 2N) · 2."""
    n = cfg.gpus
    return [-(-g // (2 * n)) * 2 for g in dg.group_sizes(cfg, shape, psi)]


def _ceil_sum(numels: list[tuple[int, int]] | None, n: int, total: int) -> tuple[float, bool]:
    """Σ ceil(numel / N) over (numel, count) tensors; without them Ψ/N (not padded)."""
    if not numels or sum(v * c for v, c in numels) != total:
        return total / n, False
    return float(sum(-(-v // n) * c for v, c in numels)), True


def partition(cfg: TrainingConfig, shape: dict[str, Any], psi: int) -> tuple[float, bool]:
    """Elements of one rank's partition of the trained parameters (the fp32 master's, each
    optimizer state's, ZeRO-3's gradient partition's), and whether every tensor was known."""
    if cfg.zero < 3:
        return float(sum(group_parts(cfg, shape, psi))), True
    return _ceil_sum(trainable_numels(cfg, shape), cfg.gpus, psi)


def sixteen_bit(cfg: TrainingConfig, shape: dict[str, Any]) -> tuple[float, bool]:
    """ZeRO-3: one rank's 16-bit partitions of every parameter, frozen ones too."""
    numels = [(int(v), int(c)) for v, c in shape.get("param_numels") or []]
    if cfg.lora_rank is not None:
        numels += trainable_numels(cfg, shape) or []
    return _ceil_sum(numels, cfg.gpus, dl.partitioned(cfg, shape))


def _kept(tensors: list[int], part: int, n: int) -> list[int]:
    """``get_partition_info`` over one group for every rank: the whole tensors that start in
    the rank's ``[r·part, (r + 1)·part)`` or straddle its start."""
    starts = [0, *accumulate(tensors)]
    out = []
    for r in range(n):
        s, e = r * part, (r + 1) * part
        first = max(bisect_right(starts, s) - 1, 0)  # the tensor holding s
        last = bisect_left(starts, e, lo=first)  # tensors starting before e
        last = min(last, len(tensors))
        out.append(starts[last] - starts[first] if first < len(tensors) else 0)
    return out


def grads_kept(cfg: TrainingConfig, shape: dict[str, Any], psi: int) -> tuple[float, str]:
    """ZeRO-2's ``grads_in_partition`` on the rank that keeps the most: elements, and how.
    Tensors not itemized (a hand shape, adapters): the partition plus two of the largest
    trained tensor (one straddling each end), at most Ψ."""
    n, parts = cfg.gpus, group_parts(cfg, shape, psi)
    groups = dg.group_tensors(cfg, shape)
    if groups is not None:
        ranks = [_kept(g, p, n) for g, p in zip(groups, parts, strict=True)]
        per_rank = [sum(x) for x in zip(*ranks, strict=True)]
        return float(max(per_rank)), "the whole tensors in or straddling a rank's partition"
    big = largest_adapter(cfg, shape) if cfg.lora_rank is not None else int(
        shape.get("largest_tensor") or 0)  # fmt: skip
    return float(min(sum(parts) + 2 * big, psi)), "≤ the partition + 2 · the largest tensor"


def _is_sharded(bytes_: float, unsharded: float, n: int) -> bool:
    return bytes_ > 0 and unsharded > 0 and abs(bytes_ * n - unsharded) <= 1e-6 * unsharded


def pad(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any]) -> None:
    """The ledger's Ψ/N model-state lines made DeepSpeed's partitions: the optimizer's side
    ceil-padded, ZeRO-2's gradients the whole tensors a rank keeps, the 16-bit flat buffer of
    ZeRO-1/2 padded to 2·N elements per group and ZeRO-3's partitions per tensor."""
    n = cfg.gpus
    if not cfg.deepspeed or cfg.zero == 0 or n == 1:
        return
    psi = dl.trainable(cfg, shape)
    if not psi:
        return
    part, _ = partition(cfg, shape, psi)
    grads = grads_kept(cfg, shape, psi) if cfg.zero == 2 else None
    flat = sum(p * n for p in group_parts(cfg, shape, psi)) - psi  # ZeRO-1/2's padding
    every, _ = sixteen_bit(cfg, shape) if cfg.zero == 3 else (0.0, False)
    trained = ("Weights (", "LoRA adapter weights")
    for ln in ledger.lines:
        if ln.group != "model states" or ln.bytes <= 0:
            continue
        sharded = _is_sharded(ln.bytes, ln.unsharded, n)
        if ln.category == "gradients" and grads is not None and sharded:
            ln.bytes = ln.bytes * grads[0] / (psi / n)
            ln.substituted += f" → {fmt_count(grads[0])} elements kept ({grads[1]})"
        elif ln.category in ("optimizer", "gradients") and sharded and part * n != psi:
            ln.bytes = ln.bytes * part / (psi / n)
            ln.substituted += f" → {fmt_count(part)} per rank (DeepSpeed's padded partitions)"
        elif cfg.zero == 3 and ln.category == "parameters" and sharded and every:
            whole = dl.partitioned(cfg, shape)
            if every * n != whole:
                ln.bytes = ln.bytes * every / (whole / n)
                ln.substituted += f" → {fmt_count(every)} per rank (each tensor padded to N)"
        elif cfg.zero < 3 and ln.category == "parameters" and flat and ln.name.startswith(trained):
            w = ln.bytes / psi
            ln.bytes += w * flat
            ln.substituted += f" + {flat:,} elements padding (each group to a multiple of 2·N)"


__all__ = ["grads_kept", "group_parts", "pad", "partition", "sixteen_bit"]
