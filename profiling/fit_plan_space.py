"""The plans ``fit`` searches for N GPUs (``profiling.fit_plans``): every way torchtitan lays N
GPUs out — TP within a node, CP (or DeepSpeed-Ulysses in its place) for long sequences, a
pipeline over any divisor the layers split over, FSDP over the rest — with its schedules,
checkpointing and batches; what the user gave held. No torch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from profiling.config import TrainingConfig
from profiling.errors import ConfigError

TP_DEGREES = (1, 2, 4, 8)  # within a node, as torchtitan's recipes run it
CP_DEGREES = (1, 2, 4, 8)
CP_FROM_SEQ = 16_384  # context parallelism is searched from this sequence length on
# ZBV where the closed form follows its split backward (profiling.plans.zbv_form.modelled:
# no Ulysses or compile, checkpointing none or full, Float8 alone), else not searched
SCHEDULES = ("1f1b", "interleaved", "zbv")
ULYSSES_DEGREES = (2, 4, 8)  # DeepSpeed's sequence_parallel_size, searched where CP is
PLAN_FIELDS = ("tp", "cp", "ulysses", "pp", "pp_schedule", "checkpointing", "checkpoint_every",
               "microbatches", "virtual_stages", "dp_replicate")  # fmt: skip
# (checkpointing, every N-th block): what is searched unless --checkpointing is given
CHECKPOINTING = (("none", None), ("selective-op", None), ("full", None), ("full", 2), ("full", 4))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _layouts(
    base: TrainingConfig, world: int, heads: int, kv: int
) -> list[tuple[int, int, int, int]]:
    """(tp, cp, ulysses, pp) for ``world`` GPUs, the user's degrees held."""
    held = base.model_fields_set
    seq = base.seq_or_default()
    tps = (base.tp,) if "tp" in held else TP_DEGREES
    cps = (base.cp,) if "cp" in held else CP_DEGREES if seq >= CP_FROM_SEQ else (1,)
    out = []
    for tp, cp, u in itertools.product(tps, cps, _ulysses_degrees(base, seq, heads, kv)):
        if u > 1 and (tp > 1 or cp > 1):  # DeepSpeed-Ulysses runs neither beside it
            continue
        sp = tp * cp * u
        if world % sp or heads % tp or kv % tp or (seq // cp) % tp or seq % cp:
            continue
        pps = (base.pp,) if "pp" in held else _divisors(world // sp)
        out += [(tp, cp, u, pp) for pp in pps if (world // sp) % pp == 0]
    return out


def _ulysses_degrees(base: TrainingConfig, seq: int, heads: int, kv: int) -> tuple[int, ...]:
    """1, and from CP's sequence length on each degree DeepSpeed's UlyssesSPAttentionHF takes:
    dividing the heads and the sequence, dividing the key/value heads or a multiple of them
    (replicated); the user's held."""
    if "ulysses" in base.model_fields_set:
        return (base.ulysses,)
    if seq < CP_FROM_SEQ:
        return (1,)
    ok = [u for u in ULYSSES_DEGREES if not heads % u and not seq % u and not (kv % u and u % kv)]
    return (1, *ok)


def plan_variants(
    base: TrainingConfig, world: int, heads: int, kv: int, global_batch: int | None = None
) -> list[dict[str, Any]]:
    from profiling.fit_accum import plan_batches

    held = base.model_fields_set
    given = ((base.checkpointing, base.checkpoint_every),)
    ckpts = given if "checkpointing" in held else CHECKPOINTING
    out = []
    layouts = _layouts(base, world, heads, kv)
    for (tp, cp, u, pp), (ckpt, every) in itertools.product(layouts, ckpts):
        schedules = ((base.pp_schedule,) if "pp_schedule" in held else SCHEDULES) if pp > 1 else ()
        dp = world // (tp * cp * u * pp)
        for batch, m in plan_batches(base, global_batch, dp, pp):
            common = {"tp": tp, "cp": cp, "ulysses": u, "dp_shard": dp, "microbatches": m,
                      "checkpointing": ckpt, "checkpoint_every": every, "batch": batch}  # fmt: skip
            if pp == 1:  # microbatches: gradient accumulation (profiling.fit_accum)
                out.append({**common, "pp": 1})
                continue
            for schedule in schedules:
                out.append({**common, "pp": pp, "pp_schedule": schedule})
    return out


def titan_precision(update: dict[str, Any]) -> str:
    """torchtitan's default ``mixed_precision_param`` (bf16) on a candidate, as its
    ``maybe_enable_amp`` (torchtitan/distributed/utils.py) applies it: fully_shard's policy
    (``mixed``) where FSDP shards (dp_shard or cp > 1); without FSDP beside TP or a pipeline
    "Mixed precision training is disabled": the step is fp32."""
    fsdp = (update.get("dp_shard") or 1) > 1 or (update.get("cp") or 1) > 1
    model_parallel = (update.get("tp") or 1) > 1 or (update.get("pp") or 1) > 1
    return "fp32" if model_parallel and not fsdp else "mixed"


def plan_config(base: TrainingConfig, update: dict[str, Any]) -> TrainingConfig | None:
    """The candidate's configuration, validated as the command line is, or None; torchtitan's
    mixed precision (``titan_precision``) unless the user gave one."""
    drop = {"gpus", "fsdp", "zero", *PLAN_FIELDS, "dp_shard"}
    values = {k: getattr(base, k) for k in base.model_fields_set if k not in drop}
    values.setdefault("precision", titan_precision(update))
    # FSDP's fp8 all-gather has nothing to do for a candidate without FSDP
    if (update.get("dp_shard") or 1) == 1:
        values.pop("float8_all_gather", None)
    try:
        return TrainingConfig.parse(style="field", **{**values, **update})
    except (ConfigError, ValueError):
        return None


def setups(variants: list[dict[str, Any]], per_setup: bool) -> list[list[dict[str, Any]]]:
    """The variants by setup (all but the batch and its microbatches), batches ascending; one
    variant each unless ``per_setup``."""
    if not per_setup:
        return [[v] for v in variants]
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for v in variants:
        key = tuple((k, x) for k, x in v.items() if k not in ("batch", "microbatches"))
        out.setdefault(key, []).append(v)
    return list(out.values())


def largest_index(fits: Callable[[int], bool], n: int) -> int | None:
    """The largest index in [0, n) that fits, bisecting: what a step keeps grows with the
    batch (more activations, a pipeline's more microbatches in flight), so a larger batch
    fits only where a smaller one does; None when the smallest does not."""
    if n == 0 or not fits(0):
        return None
    good, bad = 0, n
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid) else (good, mid)
    return good


__all__ = [
    "CHECKPOINTING", "CP_DEGREES", "CP_FROM_SEQ", "PLAN_FIELDS", "SCHEDULES", "TP_DEGREES",
    "ULYSSES_DEGREES", "largest_index", "plan_config", "plan_variants", "setups",
]  # fmt: skip
