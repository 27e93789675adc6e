"""The bytes of LoRA's adapters and of what they keep, shared by the estimates of the Llama
family (``profiling.estimate.lora``) and of GPT-NeoX's kind (``profiling.estimate.lora_neox``).
No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling._config_lora import peft_autocast, trains_16bit

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Bytes


def adapter_bytes(cfg: TrainingConfig) -> int:
    """The adapters' element size: fp32 (PeftModel's cast), bf16 under pure bf16 — and under
    DeepSpeed's 16-bit engine, which casts the whole module (``estimate.deepspeed_lora``)."""
    engine16 = getattr(cfg, "deepspeed", False) and cfg.precision == "mixed"
    return 2 if trains_16bit(cfg) or engine16 else 4


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


__all__ = ["adapter_bytes", "adapter_compute", "mask_bytes", "own_copies"]
