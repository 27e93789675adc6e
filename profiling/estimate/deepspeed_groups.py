"""DeepSpeed ZeRO-3's optimizer sub-groups, its dtypes and its partial offload: what
``sub_group_size``, ``offload_optimizer.ratio``, ``data_types.grad_accum_dtype`` and
``communication_data_type`` move on the GPU and in host memory.

Read from DeepSpeed 0.19.6 (github.com/deepspeedai/DeepSpeed at edaa7221,
``deepspeed/runtime/zero/stage3.py``; ``engine.py`` for the defaults):

- ``_create_fp16_sub_groups`` (line 1160): a rank's partitions of the trainable parameters are
  taken in the model's order into a sub-group until it holds ``sub_group_size`` elements or
  more (default 1e9, ``zero/config.py``); one sub-group when they fit;
- ``step`` (line 2604) updates one sub-group at a time: ``_prepare_fp32_grad_for_sub_group``
  (line 2398) flattens the sub-group's gradient partitions (``_flatten_dense_tensors``: a
  copy, in ``grad_accum_dtype``) and converts that copy to fp32 — both alive until ``.to``
  returns; with fp32 gradients the conversion is the copy itself — and
  ``_release_sub_group`` frees the fp32 gradients after the sub-group's step;
- ``_create_fp32_partitions`` (line 1031): with ``offload_optimizer`` the first
  ``int((1 − ratio) · sub-groups)`` sub-groups keep their fp32 master and their optimizer
  states on the GPU, stepped by a torch ``AdamW`` (the "backup optimizer", line 312: its
  foreach step makes one fp32 temporary of the sub-group, ``exp_avg_sq.sqrt()``), and
  ``initialize_optimizer_states`` (line 1288) gives each of them an fp32 gradient buffer on the
  GPU for the whole run; a ratio below 1 with a single sub-group still offloads all of it;
- ``grad_partitions_flat_buffer`` (line 742), the gradients' partitions, is allocated in
  ``gradient_accumulation_dtype`` — ``data_types.grad_accum_dtype``, the model's dtype when
  unset (``engine.get_data_types``);
- the gradient bucket (``ipg_buckets``, line 733) is ``reduce_bucket_size`` elements of
  ``communication_data_type`` (the model's dtype when unset: ``engine.communication_data_type``).
No torch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from profiling import _config_deepspeed as dsc
from profiling.config import TrainingConfig
from profiling.estimate.shape import param_dims
from profiling.estimate.states import Ledger, Line, optimizer_states
from profiling.models.workloads import as_run, find_workload
from profiling.units import fmt_count

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


@dataclass(frozen=True)
class SubGroups:
    sizes: list[float]  # elements of each sub-group of one rank, in the model's order
    largest: float  # the largest (a bound where the tensors are not itemized)
    exact: bool

    def on_gpu(self, ratio: float | None) -> list[float]:
        """The sub-groups ``offload_optimizer.ratio`` leaves on the GPU (the first ones)."""
        if ratio is None:
            return []
        keep = int((1 - ratio) * len(self.sizes))  # DeepSpeed's own expression
        return self.sizes[:keep]


def _partitions(cfg: TrainingConfig, shape: dict[str, Any]) -> list[int] | None:
    """A rank's partition of each trained tensor, ceil(numel / N), in the model's order; None
    where the tensors are not itemized (a hand shape, adapters, ``--params`` apart)."""
    if cfg.lora_rank is not None or not cfg.model:
        return None
    w = as_run(find_workload(cfg.model), cfg.tied_head, cfg.loss, cfg.litgpt_norm)
    dims = param_dims(w) if w is not None else None
    if not dims or sum(math.prod(d) for d in dims) != int(shape["params"]):
        return None
    return [-(-math.prod(d) // cfg.gpus) for d in dims]


def sub_groups(cfg: TrainingConfig, shape: dict[str, Any], trained: float) -> SubGroups:
    """The sub-groups of one rank's ``trained / N`` elements."""
    size = cfg.sub_group_size or dsc.SUB_GROUP_DEFAULT
    parts = _partitions(cfg, shape)
    total = float(sum(parts)) if parts is not None else trained / cfg.gpus
    if size >= total:  # one sub-group: the whole partition, itemized or not
        return SubGroups([total], total, True)
    if parts is not None:
        sizes: list[float] = []
        held = 0
        for i, p in enumerate(parts):
            held += p
            if held >= size or i == len(parts) - 1:
                sizes.append(float(held))
                held = 0
        return SubGroups(sizes, max(sizes), True)
    # Not itemized: sub-groups of sub_group_size, the last the rest; each closes at the first
    # tensor that reaches the size, so the largest is bounded by the size + a tensor's partition.
    full = int(total // size)
    sizes = [float(size)] * full + ([total - full * size] if total > full * size else [])
    big = -(-int(shape.get("largest_tensor") or 0) // cfg.gpus)
    return SubGroups(sizes, min(total, size + big), False)


def accum_bytes(cfg: TrainingConfig, w: int) -> int:
    """Bytes of a gradient partition's element (``grad_accum_dtype``, the model's by default)."""
    return DTYPE_BYTES[cfg.grad_accum_dtype] if cfg.grad_accum_dtype else w


def comm_bytes(cfg: TrainingConfig, w: int) -> int:
    """Bytes of a ZeRO-3 bucket's element (``communication_data_type``, the model's)."""
    return DTYPE_BYTES[cfg.comm_dtype] if cfg.comm_dtype else w


def add_line(
    ledger: Ledger, name: str, value: float, formula: str, numbers: str, **kw: Any
) -> None:
    line = Line(name=name, bytes=value, unsharded=kw.get("unsharded", 0.0), formula=formula,
                substituted=numbers, group=kw.get("group", "overhead"),
                category=kw.get("category", "gradients"))  # fmt: skip
    ledger.add(line)
    if line.group == "model states":  # shown with the other model states, not after activations
        ledger.lines.remove(line)
        last = max(i for i, ln in enumerate(ledger.lines) if ln.group == "model states")
        ledger.lines.insert(last + 1, line)


def optimizer_per_param(cfg: TrainingConfig, shape: dict[str, Any]) -> tuple[float, str]:
    states = optimizer_states(cfg.optimizer, "mixed", shape.get("hidden"))
    per = sum(p for _, p, _ in states)
    return per, " + ".join(label for _, _, label in states) or "0 B"


def fp32_sub_group(
    ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], acc: int, psi: int
) -> None:
    """ZeRO-3's step: one sub-group's gradients flattened (in grad_accum_dtype) and converted
    to fp32, both alive while ``.to`` runs (profiling.estimate.deepspeed_groups)."""
    groups = sub_groups(cfg, shape, psi)
    e, copy = groups.largest, (acc if acc != 4 else 0)
    size = fmt_count(cfg.sub_group_size or dsc.SUB_GROUP_DEFAULT)
    how = "" if groups.exact else f" (≤ sub_group_size {size} + the largest tensor's partition)"
    add_line(
        ledger,
        "DeepSpeed fp32 gradient sub-group (at the step)",
        (4 + copy) * e,
        "(4 B" + (f" + its flattened {copy} B copy" if copy else "") + ") · largest sub-group",
        f"{4 + copy} · {fmt_count(e)}: {len(groups.sizes)} sub-group(s) of "
        f"sub_group_size {size}{how}",
        group="temporaries",
        category="temporaries",
    )


def kept_on_gpu(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], psi: int) -> None:
    """``offload_optimizer.ratio``: the sub-groups DeepSpeed leaves on the GPU keep their fp32
    master, states and fp32 gradients there, and a torch AdamW steps them (its sqrt's copy)."""
    groups = sub_groups(cfg, shape, psi)
    kept = groups.on_gpu(cfg.offload_ratio)
    if not kept:
        ledger.note(
            f"DeepSpeed's offload_optimizer.ratio {cfg.offload_ratio:g} leaves no sub-group on "
            f"the GPU: int((1 − ratio) · {len(groups.sizes)} sub-group(s)) is 0"
        )
        return
    per, labels = optimizer_per_param(cfg, shape)
    e = sum(kept)
    add_line(
        ledger,
        "DeepSpeed offload_optimizer.ratio: the sub-groups kept on the GPU (fp32 master, "
        "states, fp32 gradients)",
        (8 + per) * e,
        f"(4 B + {labels} + 4 B) · the first int((1 − ratio) · sub-groups)",
        f"{8 + per:g} · {fmt_count(e)}: {len(kept)} of {len(groups.sizes)} sub-groups",
        group="model states",
        category="optimizer",
    )
    add_line(
        ledger,
        "DeepSpeed offload_optimizer.ratio: torch AdamW's step on a GPU sub-group",
        4 * max(kept),
        "4 B · the largest sub-group on the GPU (foreach: sqrt of exp_avg_sq)",
        f"4 · {fmt_count(max(kept))}",
        group="temporaries",
        category="temporaries",
    )


__all__ = [
    "DTYPE_BYTES",
    "SubGroups",
    "accum_bytes",
    "add_line",
    "comm_bytes",
    "fp32_sub_group",
    "kept_on_gpu",
    "optimizer_per_param",
    "sub_groups",
]
