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
from profiling.estimate.shape import Dims, param_dims
from profiling.estimate.states import Ledger, Line, optimizer_states
from profiling.models.shape_overrides import workload_of
from profiling.models.workloads import as_run
from profiling.units import fmt_count

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# swap_tensor/optimizer_utils.py is_swappable_tensor: min_aio_bytes (MIN_AIO_BYTES 1 MiB, the aio
# block_size 1 MiB by default) ≤ numel · 4 B (fp32): 262,144 elements.
SWAPPABLE = 1024**2 // 4


@dataclass(frozen=True)
class SubGroups:
    sizes: list[float]  # elements of each sub-group of one rank, in the model's order
    largest: float  # the largest (a bound where the tensors are not itemized)
    exact: bool

    def marked(self, ratio: float | None) -> list[float]:
        """The sub-groups ``offload_optimizer.ratio`` marks for the GPU (the first ones)."""
        if ratio is None:
            return []
        keep = int((1 - ratio) * len(self.sizes))  # DeepSpeed's own expression
        return self.sizes[:keep]

    def on_gpu(self, ratio: float | None, nvme: bool = False) -> list[float]:
        """The marked sub-groups that stay on the GPU: to NVMe, only those too small to swap
        (``_swappable_optimizer_subgroup``: under 1 MiB of fp32); the others are swapped out
        whatever the ratio (``_create_fp32_partitions``, stage3.py:1061)."""
        return [e for e in self.marked(ratio) if not (nvme and e >= SWAPPABLE)]


def _tensors(cfg: TrainingConfig, shape: dict[str, Any]) -> list[Dims] | None:
    """The shape of each trained tensor in the model's order; None where the tensors are not
    itemized (a hand shape, adapters, ``--params`` apart)."""
    if cfg.lora_rank is not None or not cfg.model:
        return None
    w = as_run(workload_of(cfg), cfg.tied_head, cfg.loss, cfg.litgpt_norm)
    dims = param_dims(w) if w is not None else None
    if not dims or sum(math.prod(d) for d in dims) != int(shape["params"]):
        return None
    return dims


def group_tensors(cfg: TrainingConfig, shape: dict[str, Any]) -> list[list[int]] | None:
    """Each optimizer parameter group's tensors (elements, the model's order): one group, or
    with ``hf_param_groups`` the Hugging Face Trainer's two — weight decay, then none for
    biases and norms (``Trainer.create_optimizer``, ``get_decay_parameter_names``: names with
    bias or a norm, LayerNorm modules; here the 1-D tensors, which in these models are exactly
    those); DeepSpeed drops an empty group (engine.py ``_configure_optimizer``)."""
    dims = _tensors(cfg, shape)
    if dims is None:
        return None
    if not cfg.hf_param_groups:
        return [[math.prod(d) for d in dims]]
    decay = [math.prod(d) for d in dims if len(d) > 1]
    none = [math.prod(d) for d in dims if len(d) == 1]
    return [g for g in (decay, none) if g]


def group_sizes(cfg: TrainingConfig, shape: dict[str, Any], trained: int) -> list[int]:
    """Elements of each optimizer group; not itemized, the Trainer's no-decay group is taken
    as a Llama's norms, (2·L + 1)·h (GPT-2's biases are itemized with its tensors)."""
    groups = group_tensors(cfg, shape)
    if groups is not None:
        return [sum(g) for g in groups]
    h, L = int(shape.get("hidden") or 0), int(shape.get("layers") or 0)
    none = (2 * L + 1) * h if cfg.hf_param_groups and cfg.lora_rank is None else 0
    return [trained - none, none] if 0 < none < trained else [trained]


def _close(parts: list[int], size: float) -> list[float]:
    """_create_fp16_sub_groups over one group's partitions: a sub-group closes once it holds
    ``size`` elements or more; one sub-group when they fit."""
    if size >= sum(parts):
        return [float(sum(parts))]
    sizes: list[float] = []
    held = 0
    for i, p in enumerate(parts):
        held += p
        if held >= size or i == len(parts) - 1:
            sizes.append(float(held))
            held = 0
    return sizes


def sub_groups(cfg: TrainingConfig, shape: dict[str, Any], trained: float) -> SubGroups:
    """The sub-groups of one rank's ``trained / N`` elements, made group by group
    (``_create_fp16_partitions_with_defragmentation``, stage3.py:868: a sub-group never
    holds two optimizer groups' tensors)."""
    size = cfg.sub_group_size or dsc.SUB_GROUP_DEFAULT
    groups = group_tensors(cfg, shape)
    if groups is not None:  # ceil(numel / N): each tensor partitioned on its own
        sizes = [s for g in groups for s in _close([-(-p // cfg.gpus) for p in g], size)]
        return SubGroups(sizes, max(sizes), True)
    # Not itemized: sub-groups of sub_group_size, the last the rest; each closes at the first
    # tensor that reaches the size, so the largest is bounded by the size + a tensor's partition.
    sizes: list[float] = []
    bounds: list[float] = []
    big = -(-int(shape.get("largest_tensor") or 0) // cfg.gpus)
    for g in group_sizes(cfg, shape, int(trained)):
        total = g / cfg.gpus
        if size >= total:  # one sub-group: the whole partition of the group
            sizes.append(total)
            bounds.append(total)
            continue
        full = int(total // size)
        sizes += [float(size)] * full + ([total - full * size] if total > full * size else [])
        bounds.append(min(total, size + big))
    return SubGroups(sizes, max(bounds), all(b <= size for b in bounds))


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
    nvme = cfg.offload_to == "nvme"
    kept = groups.on_gpu(cfg.offload_ratio, nvme)
    marked = groups.marked(cfg.offload_ratio)
    if nvme and len(kept) < len(marked):
        ledger.note(
            f"DeepSpeed's offload_optimizer.ratio {cfg.offload_ratio:g} to nvme: "
            f"{len(marked) - len(kept)} of the {len(marked)} sub-group(s) it marks for the GPU "
            "hold 1 MiB of fp32 or more and are swapped to NVMe all the same; torch's AdamW "
            "steps them in host memory (stage3.py _create_fp32_partitions, _optimizer_step)"
        )
    if not kept:
        if not marked:
            ledger.note(
                f"DeepSpeed's offload_optimizer.ratio {cfg.offload_ratio:g} leaves no sub-group "
                f"on the GPU: int((1 − ratio) · {len(groups.sizes)} sub-group(s)) is 0"
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


def nvme_host(
    cfg: TrainingConfig, shape: dict[str, Any], psi: int
) -> list[tuple[str, float, str, bool]]:
    """Host memory of an optimizer offloaded to NVMe beyond the swap buffers, per rank (name,
    bytes, formula, pinned): the sub-groups too small to swap that the ratio does not keep on
    the GPU stay in CPU memory — fp32 master, states, a pinned fp32 gradient buffer
    (``_create_fp32_partitions``, ``initialize_optimizer_states``); the swapped sub-groups the
    ratio marks for the GPU are stepped by torch's AdamW (``backup_optimizer``, stage3.py:312)
    on their swapped-in host buffers, single-tensor on the CPU (``exp_avg_sq.sqrt() / c``: two
    fp32 temporaries), with states of its own."""
    groups = sub_groups(cfg, shape, psi)
    marked = groups.marked(cfg.offload_ratio)
    small = [e for e in groups.sizes[len(marked) :] if e < SWAPPABLE]
    out = []
    if small:
        per, labels = optimizer_per_param(cfg, shape)
        out.append((f"sub-groups too small to swap (under 1 MiB of fp32): fp32 master, {labels}, "
                    "fp32 gradients", (8 + per) * sum(small),
                    f"{8 + per:g} B · {fmt_count(sum(small))}", False))  # fmt: skip
    stepped = [e for e in marked if e >= SWAPPABLE]
    if stepped:
        # The swapper swaps DeepSpeedCPUAdam's states (optimizer_utils.py _get_state_tensors);
        # torch's AdamW makes its own at its first step on the host tensor and keeps them.
        per, labels = optimizer_per_param(cfg, shape)
        out += [
            (f"torch AdamW's own states of the swapped sub-groups the ratio marks for the GPU "
             f"({labels}; in host memory, never swapped)", per * sum(stepped),
             f"{per:g} B · {fmt_count(sum(stepped))}", False),
            ("torch AdamW's step on one of them (two fp32 temporaries)", 8 * max(stepped),
             f"8 B · {fmt_count(max(stepped))}", False),
        ]  # fmt: skip
    return out


__all__ = [
    "DTYPE_BYTES",
    "SWAPPABLE",
    "SubGroups",
    "accum_bytes",
    "add_line",
    "comm_bytes",
    "fp32_sub_group",
    "group_sizes",
    "group_tensors",
    "kept_on_gpu",
    "nvme_host",
    "optimizer_per_param",
    "sub_groups",
]
