"""LoRA on the LM head under PyTorch's loss: the head's forward, before the loss runs, can hold
the step's peak. peft's ``Linear.forward`` (tuners/lora/layer.py) computes ``result =
self.base_layer(x)`` and then ``result = result + lora_B(lora_A(dropout(x))) * scaling``: the
frozen head's logits, B's output and its scaled copy — three s·b·V tensors — are alive at once,
beside the final norm's output (the head's input, held by the forward until the head returns,
though the frozen head keeps none of it). The loss's log-probabilities, its padded labels and
its scalars are not made yet.

Read off the trace (GPT-NeoX toy h 64, f 160, V 512, 3 blocks, 64 tokens, fp32, LoRA q, v,
lm_head, lora_dropout 0.1, eager attention, AdamW): the estimate read 0.992 of it before
(−16,376 B, its peak the loss's backward), now equal. Scope: fp32 and bf16 (one dtype for
the logits and the adapters), transformers' GPT-NeoX and Llama kinds, PyTorch's loss, one GPU.
No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.step_scalars import LOSS
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "forward, the LM head's adapter"
_NOT_KEPT = "frozen LM head: final norm's output not kept"


def moments(
    d: Dims | None, cfg: TrainingConfig, fwd: float, lines: Sequence[Any]
) -> list[tuple[str, float, str]]:
    """The moment, or none where it does not apply (see the module)."""
    from profiling.estimate.losses import REFERENCE

    if d is None or d.V is None or d.arch not in ("neox", "llama") or cfg.lora_rank is None:
        return []
    if "lm_head" not in cfg.lora_targets or cfg.precision not in ("fp32", "bf16"):
        return []
    if cfg.loss != REFERENCE or cfg.qlora or cfg.dora or cfg.compile or cfg.tp != 1:
        return []
    if cfg.sharded or cfg.dpo or cfg.kd_teacher or not d.extra.get("hf_module"):
        return []
    e = Bytes.of(cfg.precision)
    later = sum(ln.bytes for ln in lines if ln.name.startswith("Logits:") or ln.name == LOSS)
    # the final norm's output, the head's input: held until the head returns, where the
    # estimate's lines took it off (nothing keeps it for backward: a frozen head, an adapter
    # keeping its dropout's copy)
    norm_out = d.s * d.b * d.h * e.c if any(_NOT_KEPT in ln.name for ln in lines) else 0
    logits = 3 * d.s * d.b * int(d.V) * e.c
    value = fwd - later + norm_out + logits
    calc = (
        f"end of forward {fmt_bytes(fwd)} − the loss's log-probabilities, labels and scalars, "
        f"not made yet {fmt_bytes(later)}"
        + (f" + the final norm's output, the head's input {fmt_bytes(norm_out)}"
           if norm_out else "")
        + f" + the frozen head's logits, B's output and its scaled copy s·b·3V·{e.c} "
        f"{fmt_bytes(logits)} = {fmt_bytes(value)}"
    )  # fmt: skip
    return [(NAME, value, calc)]


__all__ = ["NAME", "moments"]
