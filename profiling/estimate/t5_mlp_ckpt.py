"""LoRA on an encoder-decoder's MLP (T5, mT5: up, gate, down) under full checkpointing: the
recomputed forward of a block's MLP, op by op, as the trace runs peft's adapters on
transformers' ``T5DenseGatedActDense`` / ``T5DenseActDense`` (no autocast).

Each adapted layer runs peft's ``Linear.forward`` (peft 0.17 ``tuners/lora/layer.py``): the
frozen layer's output R, the input cast to the adapters' dtype where it differs (``mixed``:
kept as lora_A's input unless lora_dropout makes another, kept, with its mask), A's output
(kept: B's input), B's output and its scaled copy, their sum with R in the adapters' dtype
(the scaled copy and R freed), cast back to R's dtype (the sum freed). Above the layer's kept
output that is 2·N·out·a (with mixed's cast copy alive beside dropout's output).

The recomputation stops as the block's last saved tensor is packed (torch's non-reentrant
checkpoint, early stop): with down adapted when lora_B's matmul packs A's output (before B's
output is made); with down frozen when its matmul packs its weight (before its output). What
is alive there beside everything kept: the MLP's norm output (unless an adapter keeps that very
tensor), the gated product (unless down's adapter keeps it), down's frozen output.

``rise`` returns the walk's highest point above what the MLP keeps at its end — the block's
kept tensors being counted whole by ``estimate.t5_ckpt`` — so a block's moment is its start +
its kept tensors less its input + this rise. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.lora_bytes import adapter_bytes, mask_bytes, own_copies

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

MLP_ROLES = ("gate", "up", "down")


class _Walk:
    """Live bytes of the MLP's recomputation: what stays (kept) and the highest point."""

    def __init__(self) -> None:
        self.live = self.kept = self.peak = 0

    def alloc(self, n: int, keep: bool = False) -> None:
        self.live += n
        self.kept += n if keep else 0
        self.peak = max(self.peak, self.live)

    def free(self, n: int) -> None:
        self.live -= n


def _linear(w: _Walk, n: int, width: tuple[int, int], adapted: bool, cfg: TrainingConfig,
            e: Bytes, keep: bool = False) -> int:  # fmt: skip
    """One linear of ``width`` (in, out) over ``n`` tokens (its output kept by a later op where
    ``keep``); returns its output's bytes."""
    i, o = width
    c, a, r = e.c, adapter_bytes(cfg), int(cfg.lora_rank or 0)
    w.alloc(n * o * c, keep=keep and not adapted)  # the frozen layer's output R
    if not adapted:
        return n * o * c
    cast, drop = a != c, bool(cfg.lora_dropout)
    if cast:
        w.alloc(n * i * a, keep=not drop)
    if drop:
        w.alloc(n * i * (a + mask_bytes(cfg)), keep=True)  # dropout's output and mask
    w.alloc(n * r * a, keep=True)  # A's output
    w.alloc(n * o * a)  # B's output
    w.alloc(n * o * a)  # scaled
    w.free(n * o * a)
    w.alloc(n * o * a, keep=keep and not cast)  # the sum
    w.free(n * o * a)
    w.free(n * o * c)  # R
    if cast:
        w.alloc(n * o * c, keep=keep)
        w.free(n * o * a)
    if cast and drop:
        w.free(n * i * a)  # the cast input, dropout's output kept instead
    return n * o * c


def _down(w: _Walk, n: int, d: Dims, cfg: TrainingConfig, e: Bytes) -> None:
    """down adapted: its frozen output, its input's copies and A's output; the recomputation
    stops as lora_B's matmul packs A's output, before B's output is made."""
    c, a, r, f = e.c, adapter_bytes(cfg), int(cfg.lora_rank or 0), d.f
    w.alloc(n * d.h * c)
    if a != c:
        w.alloc(n * f * a, keep=not cfg.lora_dropout)
    if cfg.lora_dropout:
        w.alloc(n * f * (a + mask_bytes(cfg)), keep=True)
    w.alloc(n * r * a, keep=True)


def _back_head(w: _Walk, n: int, o: int, cfg: TrainingConfig, e: Bytes, owned: int) -> None:
    """An adapted linear's first steps going back, which unpack nothing (for down, made before
    the recomputation starts): the output's cast (freed with the scaling's node; its 16-bit
    gradient ``owned`` freed with the cast's where nothing else holds it), the frozen layer's
    share cast back, the scaling's gradient."""
    c, a = e.c, adapter_bytes(cfg)
    if a != c:
        w.alloc(n * o * a)
        w.free(owned)
        w.alloc(n * o * c)
    w.alloc(n * o * a)  # the scaling's
    if a != c:
        w.free(n * o * a)


def _back_linear(w: _Walk, n: int, width: tuple[int, int], cfg: TrainingConfig, e: Bytes,
                 saved: int, owned: int = 0) -> None:  # fmt: skip
    """An adapted linear going back after ``_back_head`` (its output's gradient alive, the
    caller's): B's and A's weight gradients (kept: the step's) and input gradients, dropout's
    and the cast's, the frozen layer's input gradient and their sum (left alive: the
    caller's); ``saved``: A's saved input, freed with A's node (0 where another op keeps
    it); ``owned``: the output's gradient, freed with the frozen layer's node without a cast
    (0 where the residual holds it)."""
    i, o = width
    c, a, r = e.c, adapter_bytes(cfg), int(cfg.lora_rank or 0)
    cast = a != c
    w.alloc(r * o * a)  # B's weight gradient (stays)
    w.alloc(n * r * a)  # B's input gradient
    w.free(n * r * a)  # A's output (B's saved input)
    w.free(n * o * a)  # the scaling's gradient
    w.alloc(r * i * a)  # A's weight gradient (stays)
    w.alloc(n * i * a)  # A's input gradient
    w.free(n * r * a)
    w.free(saved)
    if cfg.lora_dropout:
        w.alloc(n * i * a)
        w.free(n * i * a)
        w.free(n * i * mask_bytes(cfg))
    if cast:
        w.alloc(n * i * c)
        w.free(n * i * a)
    w.alloc(n * i * c)  # the frozen layer's input gradient
    w.free(n * o * c if cast else owned)  # what the frozen layer's node read
    w.alloc(n * i * c)  # the sum
    w.free(2 * n * i * c)


def _saved(n: int, width: int, cfg: TrainingConfig, e: Bytes, shared: int) -> int:
    """What an adapter's A saved of its input: its own copy (dropout's output and mask, or the
    cast), else ``shared`` (the very input, freed with it where nothing else keeps it)."""
    a = adapter_bytes(cfg)
    if cfg.lora_dropout:
        return n * width * a  # the mask is freed by dropout's node (``_back_linear``)
    return n * width * a if a != e.c else shared


def rise(tokens: int, d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, int, int]:
    """The highest points of a block's MLP with adapters recomputed (up to the recomputation's
    end) and going back, above what the block keeps (its kept tensors counted whole), and what
    is left when it has gone back: its adapters' weight gradients less all it kept (the MLP's
    norm goes back from there); zeros when no MLP layer is adapted or under autocast
    (``t5_ckpt._rise_amp``)."""
    roles = {x for x in cfg.lora_targets if x in MLP_ROLES}
    if not roles or e.amp:
        return 0, 0, 0
    n, h, f, c = tokens, d.h, d.f, e.c
    gated, shared = d.extra["t5"]["gated"], not own_copies(cfg, e)
    w = _Walk()
    if "down" in roles:  # its head goes back before anything is unpacked
        _back_head(w, n, h, cfg, e, 0)  # its gradient: the residual's
    head = w.live
    w.alloc(n * h * c, keep=shared and bool({"up", "gate"} & roles))  # the norm's output
    if gated:
        _linear(w, n, (h, f), "gate" in roles, cfg, e, keep=True)  # gelu keeps its input
        w.alloc(4 * n * f * c, keep=True)  # gelu_new's kept: 0.5·x, tanh, 1 + tanh, output
        _linear(w, n, (h, f), "up" in roles, cfg, e, keep=True)  # the product keeps it
        w.alloc(n * f * c, keep=shared and "down" in roles)  # the product
    else:
        out = _linear(w, n, (h, f), "up" in roles, cfg, e)
        w.alloc(n * f * c, keep=True)  # ReLU's output (it keeps it)
        w.free(out)
    if "down" in roles:
        _down(w, n, d, cfg, e)
    recomputed = w.peak - w.kept
    w.free(w.live - w.kept - head)  # the recomputation's locals
    if "down" in roles:
        product = n * f * c if gated else 0  # ReLU's output stays: ReLU keeps it
        _back_linear(w, n, (f, h), cfg, e, _saved(n, f, cfg, e, product))
    else:
        w.alloc(n * f * c)  # the product's (ReLU's output's) gradient
    if gated:
        w.alloc(2 * n * f * c)  # both factors' gradients
        w.free(3 * n * f * c)  # the product's gradient, the two factors
    else:
        w.alloc(n * f * c)  # ReLU's input gradient
        w.free(2 * n * f * c)
    if "up" in roles:
        _back_linear_head(w, n, (h, f), cfg, e)
    ends = {"gate": h + f, "up": h + f, "down": f + h}
    grads = int(cfg.lora_rank or 0) * sum(ends[x] for x in roles) * adapter_bytes(cfg)
    return recomputed, w.peak - w.kept, grads - w.kept


def _back_linear_head(w: _Walk, n: int, width: tuple[int, int], cfg: TrainingConfig,
                      e: Bytes) -> None:  # fmt: skip
    """up going back (its input, the norm's output, gate's or freed later), its output's
    gradient its own."""
    grad = n * width[1] * e.c
    _back_head(w, n, width[1], cfg, e, grad)
    _back_linear(w, n, width, cfg, e, 0, 0 if adapter_bytes(cfg) != e.c else grad)


__all__ = ["MLP_ROLES", "rise"]
