"""DeepSpeed ZeRO-1/2's optimizer step and its ``BF16_Optimizer``: what the step's gradient
partition and, under bf16 with fp32 gradient accumulation at ZeRO-1, DeepSpeed's
``BF16_Optimizer`` keep on the GPU, per optimizer parameter group.

Read from DeepSpeed 0.19.6 (github.com/deepspeedai/DeepSpeed at edaa7221):

``deepspeed/runtime/zero/stage_1_and_2.py`` (``DeepSpeedZeroOptimizer.step``, line 2344):
  each parameter group is stepped in turn: its partition's gradients are flattened
  (``self.flatten``, torch's ``_flatten_dense_tensors``: a concatenated copy in the 16-bit
  dtype), the copy converted to fp32 (``flat_grad_partition.to(fp32)``) while it is alive, then
  deleted; the fp32 gradient lives through the group's ``_optimizer_step`` and is deleted
  before the next group. So the step holds (w + 4) B per element of the largest group's
  partition for a moment — 4 B in an fp32 engine, where ``.to`` returns the copy itself.

``deepspeed/runtime/engine.py`` (``_do_optimizer_sanity_check``, line 1993): ZeRO-1 with bf16,
``data_types.grad_accum_dtype`` fp32 and no optimizer offload runs ``BF16_Optimizer``
(``deepspeed/runtime/bf16_optimizer.py``), not the ZeRO optimizer:
  - per parameter group, the trained parameters in one bf16 flat buffer padded to a multiple of
    2·N elements (``_flatten_dense_tensors_aligned``, line 163) — the weights themselves;
  - ``fp32_groups_gradients_flat`` (line 181): an fp32 buffer the size of the whole flat group
    on every rank, made at initialisation and zeroed, never freed (``clear_hp_grads``): the
    gradient accumulators, 4 B per trained element, not partitioned;
  - the fp32 master partition (line 175) and the optimizer's states over it (Ψ/N each);
  - autograd's bf16 gradients (``lp.grad``) kept through the step and freed after it
    (``zero_grad(set_to_none=True)``, engine ``_take_model_step``);
  - at the end of backward ``update_hp_grads`` adds each bf16 gradient into its accumulator
    through an fp32 copy (``lp.grad.data.to(hp_grad.dtype)``, line 369): the largest tensor's
    4 B; then the engine all-reduces the fp32 buffers (``buffered_allreduce_fallback``,
    ``allreduce_no_retain`` with 5e8-element buckets, engine.py:3691): a bucket holding more
    than one group's buffer is concatenated first (``allreduce_bucket`` → ``self.flatten``),
    a copy of those groups in fp32; and the bucket is converted to
    ``communication_data_type`` for the all-reduce (``tensor.to``, engine.py:3664) — bf16
    unless set (the engine's ``communication_data_type`` under bf16), a 2-byte copy of the
    whole accumulator for one group, none with fp32;
  - there are no reduce buckets (``reduce_bucket_size``) and no fp32 gradient made at the step:
    the optimizer's gradient is a view of the accumulator (``step``, line 330).
No torch here.
"""

from __future__ import annotations

from typing import Any

from profiling._config_deepspeed import model_dtype
from profiling.config import TrainingConfig
from profiling.estimate import deepspeed_groups as dg
from profiling.estimate import deepspeed_padding as dp
from profiling.estimate.ledger import Ledger
from profiling.estimate.optim_states import largest_adapter
from profiling.estimate.states import weight_bytes
from profiling.units import fmt_count

ALLREDUCE_BUCKET = 500_000_000  # engine.py MEMORY_OPT_ALLREDUCE_SIZE, allreduce_gradients' default


def bf16_optimizer_runs(cfg: TrainingConfig) -> bool:
    """DeepSpeed 0.19.6's engine picks ``BF16_Optimizer`` at ZeRO-1 for bf16 with fp32
    gradient accumulation and no optimizer offload (engine.py:1993)."""
    return (
        cfg.deepspeed
        and cfg.zero == 1
        and cfg.precision == "mixed"
        and cfg.grad_accum_dtype == "fp32"
        and not cfg.offload_optimizer
        and not cfg.ds_fp16
    )


REDUCTION = "DeepSpeed gradient reduction: the bucket's slices flattened (in backward)"
ACCUMULATORS = "DeepSpeed ZeRO-1 fp32 gradient accumulators (grad_accum, every parameter's)"
COPIES = "DeepSpeed ZeRO-1 reduction of the fp32 accumulators: two 16-bit copies of a tensor"


def accum_attribute_runs(cfg: TrainingConfig) -> bool:
    """ZeRO-1's own optimizer with fp32 accumulation — with an offloaded optimizer or in fp16,
    where the engine does not pick ``BF16_Optimizer`` (engine.py:1994):
    ``use_grad_accum_attribute`` (stage_1_and_2.py:361: a separate accumulation dtype without
    partitioned gradients)."""
    return (
        cfg.deepspeed
        and cfg.zero == 1
        and cfg.precision == "mixed"
        and cfg.grad_accum_dtype == "fp32"
        and bool(cfg.offload_optimizer or cfg.ds_fp16)
    )


def accum_attribute(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], psi: int) -> None:
    """``use_grad_accum_attribute`` (stage_1_and_2.py): each gradient hook makes
    ``param.grad_accum = param.grad.to(fp32)`` and drops the bf16 gradient (line 1126): 4 B for
    every trained element on every rank in place of the 16-bit gradients. At backward's end
    ``reduce_gradients`` (line 861) takes ``grad_accum.to(bf16)`` for each parameter and, to
    bucket it, ``reduce_independent_p_g_buckets_and_remove_grads`` takes another (line 1198,
    ``get_gradient_for_reduction``): two 16-bit copies of the largest tensor at once, while a
    full bucket is reduced. The accumulators of the rank's own tensors are freed as they are
    copied to the host (``async_inplace_copy_grad_to_fp32_buffer_from_gpu``), the others'
    stay to the step (``clear_grad_attribute`` is for the offload path only). Not offloaded
    (fp16), the rank's own are copied back in 16 bits into ``grads_in_partition``
    (``copy_grads_in_partition``, line 1670: the whole tensors of its partition) until the
    reduction's end, and the step flattens the fp32 accumulators' slices (4 B, ``.to(fp32)``
    returning the copy itself: ``step_partition``)."""
    w = weight_bytes(cfg.precision)
    for ln in ledger.lines:
        if ln.category == "gradients" and ln.group == "model states" and ln.bytes:
            ln.name = ACCUMULATORS
            ln.bytes, ln.unsharded = ln.bytes * 4 / w, ln.unsharded * 4 / w
            ln.formula = ln.formula.replace(f"{w} B", "4 B")
            ln.substituted = ln.substituted.replace(f"· {w} B", "· 4 B") + " (fp32)"
    big = largest_adapter(cfg, shape) if cfg.lora_rank is not None else int(
        shape.get("largest_tensor") or 0)  # fmt: skip
    kept = 0.0 if cfg.offload_optimizer else dp.grads_kept(cfg, shape, psi)[0]
    dg.add_line(
        ledger,
        COPIES,
        2 * w * big + w * kept,
        "2 · w · largest tensor (grad_accum.to(16-bit) in reduce_gradients and in the "
        "bucketing)" + (" + w · the rank's tensors (grads_in_partition)" if kept else ""),
        f"2 · {w} · {fmt_count(big)}" + (f" + {w} · {fmt_count(kept)}" if kept else ""),
        group="temporaries",
        category="temporaries",
    )


def step_partition(
    ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], w: int, psi: int, reduce: int
) -> None:
    """ZeRO-1/2's step: the largest group's partition flattened (w B) and made fp32 (4 B); or,
    when larger, a reduction's flattened bucket in backward (:func:`reduction`), the same
    weights, gradient partition, states and buckets alive beside it."""
    n = cfg.gpus
    groups = dg.group_sizes(cfg, shape, psi)
    e = max(-(-g // (2 * n)) * 2 for g in groups)  # the partition padded to 2·N per group
    copy = w if w != 4 and not accum_attribute_runs(cfg) else 0  # fp32 slices: .to is a no-op
    if (w + conversion(cfg)) * min(reduce, psi) > (4 + copy) * e:
        reduction(ledger, cfg, psi, reduce, f" (above the step's {4 + copy} B · Ψ/N)")
        return
    many = f"; the largest of {len(groups)} parameter groups" if len(groups) > 1 else ""
    dg.add_line(
        ledger,
        "DeepSpeed fp32 gradient partition (at the step, with its flattened copy)",
        (4 + copy) * e,
        "(4 B" + (f" + its flattened {copy} B copy" if copy else "") + ") · ceil(Ψ_group/2N)·2",
        f"{4 + copy} · {fmt_count(e)}: {fmt_count(max(groups))} / {n} padded{many}",
        group="temporaries",
        category="temporaries",
    )


def conversion(cfg: TrainingConfig) -> int:
    """Bytes per element of ``allreduce_bucket``'s ``tensor.to(communication_data_type)``
    (stage_1_and_2.py:1850): a copy when the dtype is not the model's (bf16 under mixed,
    fp16 with ``ds_fp16``), none when it is or unset."""
    model = model_dtype(cfg)
    return dg.DTYPE_BYTES[cfg.comm_dtype] if cfg.comm_dtype not in (None, model) else 0


def reduction_bytes(cfg: TrainingConfig, w: int, psi: int, reduce: int) -> int:
    """A reduction's copies: the flattened slices (w B) and their ``communication_data_type``
    conversion, both alive while it is all-reduced and copied back."""
    return (w + conversion(cfg)) * min(reduce, psi)


def reduction(ledger: Ledger, cfg: TrainingConfig, psi: int, reduce: int, why: str = "") -> None:
    """A reduction of the IPG bucket (stage_1_and_2.py ``average_tensor`` → ``allreduce_and_
    scatter`` → ``allreduce_bucket``, line 1841): the bucket's per-rank slices are flattened,
    a w-byte copy of up to ``reduce_bucket_size`` elements, alive while it is all-reduced; with
    a ``communication_data_type`` not the model's, converted too (a c-byte copy beside it)."""
    w, c = weight_bytes(cfg.precision), conversion(cfg)
    dg.add_line(
        ledger,
        REDUCTION,
        reduction_bytes(cfg, w, psi, reduce),
        "(w" + (" + c(communication_data_type)" if c else "") + ") · min(reduce_bucket_size, Ψ)",
        f"{f'({w} + {c})' if c else w} · {fmt_count(min(reduce, psi))}{why}",
        group="temporaries",
        category="temporaries",
    )


def _buckets(sizes: list[int]) -> list[list[int]]:
    """``allreduce_no_retain``'s buckets of the groups' flat buffers: one closes once it holds
    more than 5e8 elements, the rest at the end."""
    out, held = [], []
    for s in sizes:
        held.append(s)
        if sum(held) > ALLREDUCE_BUCKET:
            out.append(held)
            held = []
    return out + ([held] if held else [])


def _reduced(bucket: list[int], c: int) -> int:
    """``allreduce_bucket``: more than one buffer is concatenated (fp32), then the whole is
    converted to ``communication_data_type`` (c B; bf16 by default under bf16, engine.py
    ``communication_data_type``) for the all-reduce and copied back."""
    n = sum(bucket)
    return (4 * n if len(bucket) > 1 else 0) + (c * n if c != 4 else 0)


def bf16_optimizer(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], psi: int) -> None:
    """``BF16_Optimizer``'s fp32 accumulators (whole groups, every rank) and its end of
    backward: an fp32 copy of the largest gradient, or the all-reduce's concatenation."""
    n = cfg.gpus
    groups = [-(-g // (2 * n)) * 2 * n for g in dg.group_sizes(cfg, shape, psi)]  # 2·N aligned
    total = sum(groups)
    split = f" ({' + '.join(fmt_count(g) for g in groups)})" if len(groups) > 1 else ""
    dg.add_line(
        ledger,
        "DeepSpeed BF16_Optimizer fp32 gradient accumulators (every trained parameter's)",
        4 * total,
        "4 B · Ψ, each group's flat buffer padded to 2·N elements (not partitioned)",
        f"4 · {fmt_count(total)}{split}",
        group="model states",
        category="optimizer",
    )
    big = largest_adapter(cfg, shape) if cfg.lora_rank is not None else int(
        shape.get("largest_tensor") or 0)  # fmt: skip
    c = dg.comm_bytes(cfg, 2)
    bucket = max(_buckets(groups), key=lambda b: _reduced(b, c))
    reduce = _reduced(bucket, c)
    if reduce > 4 * big:
        cat = len(bucket) > 1
        per = (f"(4 + {c})" if c != 4 else "4") if cat else f"{c}"
        value, how = reduce, f"{per} · {fmt_count(sum(bucket))}: the all-reduce's " + (
            "concatenation" + (f" and {c}-byte copy" if c != 4 else "") if cat
            else f"{c}-byte copy")  # fmt: skip
    else:
        value, how = 4 * big, f"4 · {fmt_count(big)}: the largest gradient in fp32"
    dg.add_line(
        ledger,
        "DeepSpeed BF16_Optimizer end of backward (the all-reduce's copies of the fp32 "
        "accumulators, or a gradient's fp32 copy)",
        value,
        "max((4 B if concatenated + c B of communication_data_type unless fp32) · a 5e8-element "
        "bucket of groups, 4 B · largest tensor)",
        how,
        group="temporaries",
        category="temporaries",
    )


__all__ = [
    "ACCUMULATORS",
    "ALLREDUCE_BUCKET",
    "COPIES",
    "REDUCTION",
    "accum_attribute",
    "accum_attribute_runs",
    "bf16_optimizer",
    "bf16_optimizer_runs",
    "conversion",
    "reduction",
    "reduction_bytes",
    "step_partition",
]
