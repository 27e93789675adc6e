"""What ``--checkpointing selective`` (Megatron-style: the core attention's s² tensors
recomputed in backward, Korthikanti et al.'s "selective activation recomputation") changes of a
one-GPU step: eager attention's probabilities, and their dropout masks, are dropped from what
each block keeps (``activations``, ``hf_ops``, ``bloom``) and made again as that block's
attention goes back. Nothing else is recomputed: every block keeps the rest of what it saves to
its backward, as without checkpointing. Under SDPA (flash or memory-efficient), whose kernels
keep no s² tensor (their output, logsumexp, seed and offset: ``step_scalars``), the step's
tensors are exactly those without checkpointing.

So the moments counted from the end of forward without checkpointing — the loss's held tensors
(``llama_loss_held``, ``neox_loss_held``), the last block's MLP going forward or back
(``llama_end``, ``neox_moments``, ``neox_qkv``, ``bloom``, ``losses``), a 4-bit weight
dequantized going back (``llama_dequant``, ``llama_first_mlp``) — are moments of a selective
step too: they come before the last block's attention goes back, and the end of forward they
start from already lacks the dropped s² tensors. Gated on "none" alone, they left the loss's
moment leading under ``selective``: 0.81-0.99 of the trace on small-vocabulary Llama, GPT-NeoX,
Phi and Falcon toys (the trace runs no selective step; under SDPA it is the step without
checkpointing, which these moments equal). Under eager attention a block's recomputed
probabilities going back are a later moment, not counted here. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def blocks_keep_saved(cfg: TrainingConfig) -> bool:
    """Whether every block keeps what it saves from its forward to its backward (no forward
    runs again in backward): no checkpointing, or ``selective``, which recomputes eager
    attention's s² tensors alone."""
    return cfg.checkpointing in ("none", "selective")


__all__ = ["blocks_keep_saved"]
