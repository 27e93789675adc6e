"""A fully checkpointed GPT-NeoX-kind block (transformers' GPT-NeoX/Pythia and Falcon) under
``--precision mixed`` — fp32 adapters over a 16-bit base, no autocast — with down adapted: the
recomputation's end at down's adapter, as ``recomputed_neox_amp`` counts it under autocast.

Going back, the block's backward first reaches down's adapter, whose B needs its saved input:
torch's non-reentrant checkpoint (torch/utils/checkpoint.py, ``_checkpoint_hook``,
``_StopRecomputationError``) runs the block's forward again up to the last tensor the forward
saved — B's input, A's fp32 output — while the layer's forward is still running. Read on the
trace (peft 0.x ``lora.layer.Linear.forward``, transformers ``GPTNeoXLayer.forward`` /
``GPTNeoXMLP.forward``), alive beside the block's kept tensors (recomputed) and what the
recomputed-MLP moment counts of the step (``recomputed_neox``):

- locals no backward saves, down's base frozen: GELU's 16-bit output (the base layer's input;
  peft's fp32 cast of it is what A saves, already among the kept tensors), the base layer's
  16-bit output ``result`` s·b·h·c, the MLP's 16-bit norm output (up frozen keeps none; an
  adapted up's A keeps its own fp32 cast; Falcon-40B's new decoder architecture computes both
  norms first: two), and, attention and MLP in parallel, the attention's output waiting for
  the residual sum (``attn_output``); with ``lora_dropout`` peft's cast itself beside the
  dropped copy A saves;
- from backward: the gradient reaching the block, and the gradient of peft's
  ``result.to(torch_result_dtype)`` — fp32 (``result + lora_B(...) * scaling`` is fp32) — beside
  its 16-bit cast for the base branch: s·b·h·(r + 4 + c). With ``--dropout`` the MLP's output
  is dropped and its mask is the last tensor saved (``GPTNeoXLayer.post_mlp_dropout``): the
  recomputation runs past down's adapter, B's fp32 output and its scaled copy made before any
  gradient but the one reaching the block, s·b·h·(r + 4 + 4), and that mask, among the kept
  tensors, not made yet.

Without this moment GPT-NeoX LoRA v,down mixed full checkpointing read −36,864 B of the trace
(V 128, h 128, f 512, 128 × 2), −69,632 with ``--dropout``; the recomputed MLP's gradients were
the estimate's peak. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

_MODULES = ("gpt_neox", "falcon")


def applies(d: Dims, e: Bytes, cfg: TrainingConfig) -> bool:
    """``mixed`` (no autocast, adapters in fp32 over a 16-bit base), LoRA (not 4-bit, not DoRA:
    their layers run their own forward) with down adapted, on transformers' GPT-NeoX or
    Falcon."""
    from profiling.estimate.lora_bytes import adapter_bytes

    return (
        not e.amp
        and cfg.lora_rank is not None
        and adapter_bytes(cfg) > e.c
        and not cfg.qlora
        and not cfg.dora
        and "down" in (cfg.lora_targets or [])
        and d.extra.get("hf_module") in _MODULES
    )


def held(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[float, str]:
    """What the recomputation's end holds beyond the block's kept tensors and the step's held
    tensors (bytes, calculation)."""
    T, h, f = d.s * d.b, d.h, d.f
    neox = d.extra["neox"]
    two = d.extra.get("hf_module") == "falcon" and neox["residual"] == "parallel"
    norms = T * h * e.c * (2 if two else 1)
    attn = T * h * e.c if neox["residual"] != "sequential" else 0
    cast = T * f * 4 if cfg.lora_dropout else 0  # peft's cast beside the dropped copy A saves
    back = 4 if cfg.dropout else e.c  # B's scaled copy, or the base branch's 16-bit gradient
    grads = T * h * (e.r + 4 + back)
    # the MLP output's dropout mask, among the kept tensors, is not made yet (1 B on CUDA)
    unmade = T * h * (1 if getattr(cfg, "target", "cuda") == "cuda" else e.c) if cfg.dropout else 0
    value = grads + norms + attn + T * f * e.c + T * h * e.c + cast - unmade
    words = (
        "the gradient reaching it and "
        + (
            "B's fp32 output and scaled copy (the MLP's output dropped: its mask saved last)"
            if cfg.dropout
            else "peft's cast back's fp32 gradient and its 16-bit cast for the base"
        )
        + f" s·b·h·({e.r} + 4 + {back}) + the MLP's norm output(s) s·b·h·{e.c}"
        + (" ×2" if two else "")
        + (f" + the attention's output s·b·h·{e.c}" if attn else "")
        + f" + GELU's output and the base's s·b·(f + h)·{e.c}"
        + (" + peft's fp32 cast beside the dropped copy s·b·f·4" if cast else "")
        + (" − the MLP output's dropout mask, kept but not made yet" if unmade else "")
    )
    return value, words


__all__ = ["applies", "held"]
