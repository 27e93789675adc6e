"""LoRA on an encoder-decoder's MLP (T5, mT5: up, gate, down) under full checkpointing and
autocast: the MLP recomputed and going back, walked as ``estimate.t5_mlp_ckpt`` walks it
without autocast, read from the trace of peft's adapters on transformers' module under CUDA's
autocast (weights and adapters fp32, every matmul on 16-bit copies).

Each matmul casts its input and its weight to 16 bits again (autocast's cache is gone in the
recomputation): a frozen layer's input copy is freed after its matmul, its weight's copy saved
(kept; wo's only until its input gradient is made). An adapter reads the fp32 input itself
(peft casts nothing: it is the adapters' dtype), lora_dropout's fp32 output alive until A has
cast it, A's 16-bit input copy, A's output and both weights' copies kept; B's output, its
scaled copy and their sum with the frozen output, all 16-bit. The gated MLP's gelu_new runs in
fp32 from ``pow`` on and the product is fp32; ReLU's output is cast to wo's fp32 by T5.

The walk's moments: the recomputation's highest point — its end where down's B packs its
weight's copy (or the frozen wo's, after its input's copy), with down's first gradients (the
MLP's 16-bit output gradient and the scaling's) made before it starts — and the MLP going back:
three fp32 N·f gradients (A's and wo's input gradients and their sum, or the product's gradient
and both factors'), down's adapter's saved tensors freed and its fp32 weight gradients made.
Relative to what the block keeps with its weights' and adapters' 16-bit copies
(``t5_ckpt._rise_amp``'s base). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.lora_bytes import mask_bytes
from profiling.estimate.t5_mlp_ckpt import MLP_ROLES, _Walk

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def _linear(w: _Walk, n: int, width: tuple[int, int], adapted: bool, cfg: TrainingConfig,
            e: Bytes, keep: bool) -> None:  # fmt: skip
    """One linear over ``n`` tokens under autocast, its 16-bit output kept where ``keep``."""
    i, o = width
    c, r = e.c, int(cfg.lora_rank or 0)
    w.alloc(o * i * c, keep=True)  # the weight's copy (saved)
    w.alloc(n * i * c)  # the input's copy
    w.alloc(n * o * c, keep=keep and not adapted)
    w.free(n * i * c)
    if not adapted:
        return
    _adapter_a(w, n, i, cfg, e)
    w.alloc(o * r * c, keep=True)  # B's weight copy
    w.alloc(2 * n * o * c)  # B's output, its scaled copy
    w.free(n * o * c)
    w.alloc(n * o * c, keep=keep)  # the sum
    w.free(2 * n * o * c)  # the scaled copy, the frozen output


def _adapter_a(w: _Walk, n: int, i: int, cfg: TrainingConfig, e: Bytes) -> None:
    """lora_dropout's fp32 output (alive until A casts it) and mask, A's weight and input
    copies and its output (kept)."""
    c, r = e.c, int(cfg.lora_rank or 0)
    if cfg.lora_dropout:
        w.alloc(n * i * 4)
        w.alloc(n * i * mask_bytes(cfg), keep=True)
    w.alloc(r * i * c + n * i * c + n * r * c, keep=True)
    if cfg.lora_dropout:
        w.free(n * i * 4)


def rise(tokens: int, d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, int]:
    """(the recomputation's highest point, the MLP going back) above the block's kept tensors
    with their 16-bit weight copies (module docstring)."""
    roles = {x for x in cfg.lora_targets if x in MLP_ROLES}
    n, h, f, c, r = tokens, d.h, d.f, e.c, int(cfg.lora_rank or 0)
    gated, down = d.extra["t5"]["gated"], "down" in roles
    w = _Walk()
    w.alloc(n * h * c * (2 if down else 1))  # the MLP's 16-bit output gradient (the scaling's)
    w.alloc(n * h * 4)  # the norm's fp32 output
    if gated:
        _linear(w, n, (h, f), "gate" in roles, cfg, e, keep=False)
        # gelu_new: 0.5·x, pow's fp32 input, tanh, 1 + tanh, its fp32 output; its input freed
        w.alloc(n * f * (c + 4 * 4), keep=True)
        w.free(n * f * c)
        _linear(w, n, (h, f), "up" in roles, cfg, e, keep=True)
        w.alloc(n * f * 4)  # the fp32 product
    else:
        _linear(w, n, (h, f), "up" in roles, cfg, e, keep=False)
        w.alloc(n * f * c, keep=True)  # ReLU's output
        w.free(n * f * c)
        w.alloc(n * f * 4)  # T5's fp32 cast of it
    w.alloc(h * f * c + n * f * c)  # wo's weight and input copies
    if down:
        w.alloc(n * h * c)  # wo's frozen output
        w.free(n * f * c)
        _adapter_a(w, n, f, cfg, e)
        w.alloc(h * r * c, keep=True)  # B's weight copy, packed last
    recomputed = w.peak - w.kept
    back = 3 * n * f * 4  # three fp32 N·f gradients
    if down:  # its saved tensors freed, its fp32 weight gradients made
        saved = r * f * c + n * f * c + n * r * c + h * r * c
        saved += n * f * mask_bytes(cfg) if cfg.lora_dropout else 0
        back += r * (h + f) * 4 - saved
    return recomputed, back


__all__ = ["rise"]
