"""The bytes of LoRA's adapters and of what they keep, shared by the estimates of the Llama
family (``profiling.estimate.lora``) and of GPT-NeoX's kind (``profiling.estimate.lora_neox``).
No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling._config_lora import peft_autocast, trains_16bit

KERNEL_LOSSES = ("liger", "cce")  # the losses that run the LM head inside their own kernel

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Bytes, Dims


def adapter_bytes(cfg: TrainingConfig) -> int:
    """The adapters' element size as forward and backward use them: fp32 (PeftModel's cast),
    bf16 under pure bf16 — under DeepSpeed's 16-bit engine, which casts the whole module
    (``estimate.deepspeed_lora``), and under FSDP's ``mixed``, whose gathers are
    ``MixedPrecisionPolicy(param_dtype=bf16)``'s: the fp32 shards' adapters gathered in bf16
    (torch ``_fully_shard/_fsdp_param.py`` ``FSDPParam.init_all_gather_outputs``), so peft
    casts nothing and their unsharded gradients are bf16."""
    engine16 = getattr(cfg, "deepspeed", False) and cfg.precision == "mixed"
    gathered16 = getattr(cfg, "fsdp", False) and cfg.precision == "mixed"
    return 2 if trains_16bit(cfg) or engine16 or gathered16 else 4


def adapter_compute(cfg: TrainingConfig, e: Bytes) -> int:
    """The dtype the adapters' matmuls run in: autocast's 16 bits (the Trainer's over a bf16
    model's fp32 adapters too), else their own."""
    return 2 if e.amp or peft_autocast(cfg) else adapter_bytes(cfg)


def own_copies(cfg: TrainingConfig, e: Bytes) -> bool:
    """Whether each adapter keeps a copy of its input of its own: peft casts the input to the
    fp32 adapters (``mixed``), autocast casts it for lora_A (``amp-*``), or lora_dropout makes
    a new tensor; otherwise lora_A keeps the very tensor the base layer was given."""
    return e.amp or adapter_bytes(cfg) != e.c or bool(cfg.lora_dropout)


def mask_bytes(cfg: TrainingConfig) -> int:
    """lora_dropout's mask per element: a bool on CUDA, the dropped tensor's dtype on the CPU
    (the adapters' dtype: peft casts the input to it first)."""
    return 1 if getattr(cfg, "target", "cuda") == "cuda" else adapter_bytes(cfg)


def head_adapter(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """An adapted head's adapter's kept tensors, freed as the head goes back: its input's own
    copy (autocast's 16-bit, the dropped or the cast one; else the norm's output, counted in
    the norm's line), lora_dropout's mask, A's output, and under autocast A's and B's 16-bit
    copies (``lora._head_adapter_copies``)."""
    if cfg.lora_rank is None or "lm_head" not in cfg.lora_targets:
        return 0
    T, h, r, a = d.s * d.b, d.h, int(cfg.lora_rank), adapter_bytes(cfg)
    kept = T * h * (2 if e.amp else a) if own_copies(cfg, e) else 0
    kept += T * h * mask_bytes(cfg) if cfg.lora_dropout else 0
    kept += T * r * (2 if e.amp else a)
    return kept + ((r * h + int(d.V or 0) * r) * 2 if e.amp else 0)


def head_input_not_kept(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """Bytes a token's h-wide element of the LM head's input that a frozen head does not keep
    (mm saves its input only for the weight's gradient): the final norm's output, or autocast's
    16-bit copy of it; 0 where something else keeps it."""
    adapted = "lm_head" in cfg.lora_targets
    # Lightning's 4-bit LM head (--fabric-bnb, untied) of bitsandbytes <= 0.43.1 keeps its
    # input, the final norm's output, as every 4-bit layer does (MatMul4Bit's ctx.tensors);
    # the loss's tape keeps it past the head (estimate.loss_tapes, _fwd_litgpt)
    nf4_keeps = cfg.fabric_bnb and cfg.bnb_keeps_inputs and not d.extra.get("tied")
    # Liger's and Cut Cross-Entropy's kernels take the head's weight, not its Linear: what they
    # keep of the final norm's output is their tape's (losses.plan: CCE keeps it for its
    # backward, Liger nothing, the hidden's gradient made in forward)
    kernel = cfg.loss in KERNEL_LOSSES
    if (adapted and not own_copies(cfg, e)) or nf4_keeps or kernel:
        return 0
    return 2 if e.amp else e.c


__all__ = [
    "KERNEL_LOSSES",
    "adapter_bytes",
    "adapter_compute",
    "head_adapter",
    "mask_bytes",
    "own_copies",
]
