"""A fully checkpointed GPT-NeoX-kind block (transformers' GPT-NeoX/Pythia and Phi) with eager
attention, trained whole without autocast: the exact live set at its softmax's backward, in
place of ``recomputed_neox._eager_back``'s bound (D57: 1.02-1.19 of the trace; every tensor the
block's recomputation keeps counted, the s² gradients at 4 B).

The parallel block's MLP is created after the attention, so the autograd engine (highest
sequence number first) runs the MLP's backward first, then the attention's from its output
projection down to the softmax. There, read from the trace's live storages (SnapshotRecorder):

- gradients made: the MLP's weights and biases, the second norm's (GPT-NeoX's two norms, in
  parallel or one after the other), the output projection's;
- of the block's recomputed tensors, what the attention's first half still needs: the attention
  norm's statistics (fp32 mean and rstd on CUDA) and output (the q/k/v projections' input), the
  rotated query and key the scores' matmul saved, and ``eager_attention_forward``'s fp32
  probabilities (``softmax(dtype=torch.float32)``; their 16-bit copy, saved by the matmul with
  the values, is freed). The checkpoint (the norm's input) is counted once; the MLP's tensors,
  the values and the output projection's input are freed;
- from backward: the gradient reaching the block summed with the second norm's input gradient
  (one s·b·h in the residual's dtype; Phi's one shared norm: the MLP's input gradient waits
  apart, s·b·h more), the values' gradient (s·b·q) and softmax's two fp32 s² gradients — ATen's
  ``softmax(input, dim, dtype)`` converts a bfloat16 input to fp32 first (its half-to-float
  path is fp16's alone), so its backward's output is fp32 too, as the probabilities' gradient
  cast up from 16 bits.

GPT-NeoX fp32 seq 128 × 2 (V 512, h 64, f 160) read +312,576 B above the trace with the bound
(+180,480 before the eager mask was counted, ``eager_mask``), now equal; GPT-NeoX bf16, GPT-NeoX
sequential, Phi bf16 likewise; one sequence of 64 in fp32 reads +15,488 to +16,384 B (a bound).
Not here (the bound stays): Falcon (its recomputation's own softmax, forward, can be higher:
``FalconAttention.forward`` holds three s² tensors at once), LoRA, autocast, dropout, 4-bit
bases, BLOOM (its own attention), our blocks. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, _cuda

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

_MODULES = ("gpt_neox", "phi")


def applies(d: Dims, e: Bytes, cfg: TrainingConfig) -> bool:
    """transformers' GPT-NeoX and Phi, trained whole, eager, no autocast, no dropout."""
    if d.extra.get("hf_module") not in _MODULES:
        return False
    return (
        cfg.attention == "eager"
        and cfg.lora_rank is None
        and not e.amp
        and not cfg.qlora
        and not cfg.dropout
        and not cfg.compile
    )


def at_softmax(d: Dims, e: Bytes, cfg: TrainingConfig, p: int) -> tuple[float, str]:
    """(bytes, words): the block's gradients made by then, its recomputed tensors still alive
    and backward's, at its softmax's backward; ``p`` the gradients' bytes per element."""
    x = d.extra["neox"]
    T, h, f, q, c, r = d.s * d.b, d.h, d.f, int(x["q_dim"]), e.c, e.r
    one_norm = x["residual"] == "parallel_one_norm"
    bias = 1 if x.get("bias") else 0
    made = (2 * h * f + (h + f) * bias + (0 if one_norm else 2 * h) + h * q + h * bias) * p
    stats = 8 if _cuda(cfg) else 2 * r
    s2 = d.a * d.s * d.s * d.b
    kept = T * stats + T * h * c + 2 * T * q * c + s2 * 4
    back = T * h * r + (T * h * c if one_norm else 0) + T * q * c + s2 * 8
    words = (
        f"its MLP's, {'' if one_norm else 'second norm' + chr(39) + 's, '}output projection's "
        f"gradients {made:,.0f} + the attention norm's statistics and output, the rotated query "
        f"and key, the fp32 probabilities s·b·({stats} + h·{c} + 2q·{c}) + a·s²·b·4 "
        f"{kept:,.0f} + the gradient reaching it s·b·h·{r}"
        + (f", the MLP's input gradient s·b·h·{c}" if one_norm else "")
        + f", the values' gradient s·b·q·{c} and softmax's a·s²·b·(4 + 4) {back:,.0f}"
    )
    return made + kept + back, words


__all__ = ["applies", "at_softmax"]
