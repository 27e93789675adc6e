"""Phi's MLP under autocast (``amp-*``): its ``gelu_new`` runs in fp32 where GPT-NeoX's GELU
stays 16-bit, so its last block's MLP going back holds fp32 f-wide tensors the 16-bit count
(``neox_moments.f_wide``) missed (Phi LoRA q,v 0.77 of the trace, full training 0.88).

``NewGELUActivation.forward`` (transformers 5.24.0, ``activations.py``) is
``0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3.0))))``; ``pow`` is on autocast's
fp32 list, so the rest is promoted to fp32. Saved for backward, F = s·b·f elements: ``pow``'s
fp32 cast of fc1's output (4F), ``tanh``'s output (4F), ``1 + tanh`` (4F), ``0.5·x`` (2F); its
output is fp32 (4F) and fc2's input a 16-bit cast of it. Going back (the trace's live storages,
tiny Phi h 128, f 512, V 128, seq 256 × 2), the last mul's backward holds the fp32 gradient of
GELU's output (4F), both factors' fp32 gradients (4F each) and the 16-bit one's cast (2F): 14F
beside the gradient reaching the block and its 16-bit cast, less what fc2 kept and freed by
then: its 16-bit weight copy (h·f·2, which its input's gradient needed), its 16-bit input under
full training or an adapted fc2 (2F), an adapted fc2's lora_dropout mask. (Read on a second toy,
h 256, f 1024, 16 tokens, where T·h·2 and h·f·2 differ.)

Going forward, at fc2: GELU's fp32 output beside its 16-bit cast (one more 4F than counted); an
adapted fc2 takes that fp32 output as its input (no cast of its own to add) and its base's
16-bit cast is gone before B's output is made. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.lora_bytes import mask_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Dims


def applies(d: Dims) -> bool:
    """Transformers' Phi (its MLP's ``gelu_new``)."""
    return d.extra.get("hf_module") == "phi"


def going_back(d: Dims, cfg: TrainingConfig) -> tuple[int, str]:
    """The MLP's f-wide tensors at GELU's backward (bytes, calculation)."""
    F = d.s * d.b * d.f
    kept = 0  # what fc2 kept for its own weight's or adapter's gradient, freed by then
    if cfg.lora_rank is None or "down" in cfg.lora_targets:
        kept = 2 * F + (
            F * mask_bytes(cfg) if cfg.lora_rank is not None and cfg.lora_dropout else 0
        )
    words = "gelu_new's fp32 gradients s·b·f·(4 + 4 + 4 + 2)"
    return 14 * F - kept, words + (" − fc2's kept input" if kept else "")


def forward_extra(d: Dims, cfg: TrainingConfig) -> int:
    """What ``neox_amp_moments.forward``'s count at fc2 misses (or over-counts) on Phi."""
    F = d.s * d.b * d.f
    return -2 * F if "down" in cfg.lora_targets else 4 * F


__all__ = ["applies", "forward_extra", "going_back"]
