"""LoRA under DeepSpeed's ZeRO engine (``--deepspeed --lora-rank``): what the engine keeps of a
model whose base is frozen.

Read in DeepSpeed 0.19.6 (github.com/deepspeedai/DeepSpeed at edaa7221,
``deepspeed/runtime/zero/``):

- **every parameter is partitioned, frozen or not**: ``zero.Init`` (the Hugging Face
  integration's ``zero3_init_flag``) and ``DeepSpeedZeRoOffload`` convert every parameter of the
  module (``parameter_offload.py``), so the frozen base is partitioned — and with
  ``offload_param`` held in host memory — like the adapters; ``mark_persistent_parameters``
  (line 311) keeps gathered every parameter of at most ``stage3_param_persistence_threshold``
  elements, frozen or trained: the norms, and each LoRA A (r × in) and B (out × r) at that size;
- **the optimizer's side is the trainable parameters' only**: ``stage3.py``'s
  ``_get_trainable_parameter_groups`` (line 677) keeps the parameters that require a gradient,
  and from those alone come the 16-bit flat partitions, the fp32 master partitions, the
  optimizer's states and the gradient partitions' flat buffer (``grad_partitions_flat_buffer``,
  line 742); stages 1 and 2 (``stage_1_and_2.py``) likewise build their flat groups from the
  parameters that require a gradient;
- the engine runs the whole module in its dtype (the base and the adapters cast to 16 bits
  with fp16/bf16), its fp32 master copy of the adapters in the optimizer: where Hugging Face's
  mixed precision keeps LoRA's adapters in fp32 under autocast, DeepSpeed's keeps them in 16
  bits with a 4-byte master.

The gradient bucket (``reduce_bucket_size`` elements), the prefetch bucket and the gathered
module are the engine's whatever trains. No torch here.
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.ledger import Ledger, Line
from profiling.estimate.optim_states import trainable_numels
from profiling.units import fmt_count


def trainable(cfg: TrainingConfig, shape: dict[str, Any]) -> int:
    """The parameters the engine's optimizer side holds: the adapters under LoRA, else all."""
    if cfg.lora_rank is not None:
        return int(shape.get("lora_adapters") or 0)
    return int(shape["params"])


def partitioned(cfg: TrainingConfig, shape: dict[str, Any]) -> int:
    """The parameters the engine partitions: the model's, and LoRA's adapters beside them."""
    extra = int(shape.get("lora_adapters") or 0) if cfg.lora_rank is not None else 0
    return int(shape["params"]) + extra


def sixteen_bit_adapters(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any]) -> None:
    """Under ``mixed`` the engine casts the adapters to 16 bits and keeps their fp32 master in
    its optimizer (offloaded with it): the LoRA ledger's fp32 adapters and gradients, made
    DeepSpeed's."""
    if cfg.lora_rank is None or cfg.precision != "mixed":
        return
    a = trainable(cfg, shape)
    for ln in ledger.lines:
        if ln.name in ("LoRA adapter weights", "LoRA adapter gradients"):
            ln.bytes, ln.unsharded = ln.bytes / 2, ln.unsharded / 2
            ln.name += " (16-bit: DeepSpeed's engine casts the module)"
            ln.formula = ln.formula.replace("4 B", "2 B")
            ln.substituted = ln.substituted.replace("· 4 B", "· 2 B")
    share = next(
        (ln.bytes / ln.unsharded for ln in ledger.lines
         if ln.category == "optimizer" and ln.unsharded),
        1.0,
    )  # fmt: skip
    off = cfg.offload_optimizer
    ledger.add(
        Line(
            name="Optimizer: the adapters' fp32 master weights" + (" (CPU)" if off else ""),
            bytes=0.0 if off else 4 * a * share,
            unsharded=4 * a,
            formula="A · 4 B",
            substituted=f"{fmt_count(a)} · 4 B" + (" → CPU memory" if off else ""),
            group="model states",
            category="optimizer",
        )
    )


def persistent_adapters(cfg: TrainingConfig, shape: dict[str, Any], threshold: int) -> int:
    """The adapters' elements kept gathered on every rank (each tensor of at most
    ``threshold`` elements)."""
    if cfg.lora_rank is None:
        return 0
    return sum(n * c for n, c in trainable_numels(cfg, shape) or [] if n <= threshold)


__all__ = ["partitioned", "persistent_adapters", "sixteen_bit_adapters", "trainable"]
