"""A fully checkpointed GPT-NeoX-kind block (transformers' GPT-NeoX/Pythia and Falcon, our
blocks as LitGPT's Phi) under autocast with an adapted ``down``: the recomputation's end, at
down's adapter, can be the step's peak rather than the MLP's gradients after it
(``estimate.recomputed_neox``).

Going back, the block's backward first reaches down's adapter (the sum with the base output and
the scaling save nothing), whose B needs its saved tensors: torch's non-reentrant checkpoint
(torch/utils/checkpoint.py, ``_checkpoint_hook``) runs the block's forward again and stops it
(``_StopRecomputationError``) at the last tensor the forward saved — B's input and its 16-bit
weight, saved before B's matmul runs (autograd saves an op's inputs before it computes). Then
the layer's forward is still running, and alive beside the block's kept tensors (recomputed) are
what that forward holds as locals and no backward saves:

- peft 0.x ``lora.layer.Linear.forward`` casts the adapter's input to the adapter's dtype
  (``_cast_input_dtype``: ``x.to(lora_A.weight.dtype)``, fp32) — GELU's 16-bit output made an
  fp32 copy s·b·f·4, which autocast casts back to the 16-bit copy A saves (counted); with
  lora_dropout its dropped fp32 copy too (its mask is counted); GELU's output itself (a local
  of ``GPTNeoXMLP.forward``/``FalconMLP.forward``, saved by nothing: a frozen base keeps no
  input) and the base layer's 16-bit output ``result`` s·b·h·2;
- the MLP's input, the norm's fp32 output (an argument of the running call; Falcon-40B's new
  decoder architecture computes both norms first: two), and, attention and MLP in parallel, the
  attention's 16-bit output waiting for the residual sum (``GPTNeoXLayer.forward``'s
  ``attn_output``, ``FalconDecoderLayer.forward``'s ``attention_output``; our blocks'
  ``x + a + self._mlp(y)``, ``profiling.models.neox_blocks``, hold ``a`` and the fp32 ``x + a``);
- from backward: the gradient reaching the block (the residual's dtype), its 16-bit cast
  reaching the MLP's output (the residual sum adds a 16-bit MLP output to the fp32 stream), and
  the scaled gradient reaching B (peft's ``* scaling``). With ``--dropout`` the MLP's output is
  dropped and its mask is the last tensor saved: the recomputation runs past down's adapter,
  B's output and its scaled copy made before that gradient (a bound: 1.005-1.007).

By then the head has gone back (its 16-bit weight copy freed) and only the adapters of the
blocks above have gradients; autocast's cache, re-entered by the recomputation, holds the
block's weight copies again, the adapters' with them. The kept tensors' block input is its
checkpoint (counted once). A bound above the trace by the first block's (one block's adapters'
gradients beside one checkpoint fewer) and autocast's copies counted over the blocks' biases and
norms. GPT-NeoX LoRA all-linear amp-bf16 full checkpointing read 0.913-0.971 of the trace
without this moment (the MLP's gradients were counted instead).

transformers' GPT-NeoX with ``--dropout`` and down frozen reaches the same end by another road:
the MLP's output dropout saves its mask last, so the recomputation runs down's matmul again
beside GELU's output (``_runs_to_mlp_output``); with eager attention the layer holds its
dropped fp32 probabilities meanwhile (``_dropped_probabilities``). LoRA v eager --dropout read
0.953-0.967 of the trace without them, v,down 0.923. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

_MODULES = ("gpt_neox", "falcon")


def applies(d: Dims, e: Bytes, cfg: TrainingConfig) -> bool:
    """Autocast, LoRA (not 4-bit: bitsandbytes' layers hand back fp32) with down adapted, on
    transformers' GPT-NeoX or Falcon (Phi's gelu_new is fp32 already: no cast; BLOOM's eager
    attention peaks elsewhere)."""
    return (
        e.amp
        and cfg.lora_rank is not None
        and not cfg.qlora
        and not cfg.dora
        and ("down" in (cfg.lora_targets or []) or _runs_to_mlp_output(d, cfg))
        and (d.extra.get("hf_module") in _MODULES or bool(d.extra["neox"].get("litgpt")))
    )


def _runs_to_mlp_output(d: Dims, cfg: TrainingConfig) -> bool:
    """transformers' GPT-NeoX with ``--dropout`` and down frozen: the MLP's output dropout
    (``GPTNeoXLayer.post_mlp_dropout``) saves its mask last, so the recomputation runs the whole
    MLP again — down's output made beside GELU's output, a local no backward saves — where
    without it the recomputation stops at GELU's input (``recomputed_neox``'s moment)."""
    return bool(cfg.dropout) and d.extra.get("hf_module") == "gpt_neox"


def _dropped_probabilities(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """transformers' GPT-NeoX eager attention with dropout under autocast hands its dropped
    probabilities back (``eager_attention_forward`` returns ``attn_weights``, the dropout's fp32
    output: the query is fp32 after RoPE's fp32 cos/sin, so ``.to(query.dtype)`` keeps fp32), and
    ``GPTNeoXLayer.forward`` holds them as ``attn_output, _ = self.attention(...)`` until the
    layer returns; only autocast's 16-bit copy is saved (the second matmul's input), so a·s²·b·4
    is alive beside the MLP. In 16 or 32 bits the dropout's output is that saved input itself."""
    eager = cfg.attention == "eager" and d.extra.get("hf_module") == "gpt_neox"
    return d.a * d.s * d.s * d.b * 4 if eager and cfg.dropout and e.amp else 0


def held(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[float, str]:
    """What the recomputation's end holds beyond the block's kept tensors and weight copies and
    the step's held tensors (bytes, calculation)."""
    T, h, f = d.s * d.b, d.h, d.f
    neox = d.extra["neox"]
    two = d.extra.get("hf_module") == "falcon" and neox["residual"] == "parallel"
    norms = T * h * 4 * (2 if two else 1)
    attn = T * h * 2 if neox["residual"] != "sequential" else 0
    if neox.get("litgpt"):  # our blocks' ``x + a + self._mlp(y)``: the sum x + a too
        attn += T * h * e.r
    probs = _dropped_probabilities(d, e, cfg)
    if "down" not in (cfg.lora_targets or []):  # _runs_to_mlp_output: down frozen
        grads = T * h * (e.r + 2)  # the gradient reaching the block and its 16-bit cast
        value = grads + norms + attn + T * (f + h) * 2 + probs
        words = (
            f"the gradient reaching it and its 16-bit cast s·b·h·({e.r} + 2) + the MLP's "
            f"input(s) {fmt_bytes(norms)}"
            + (" + the attention's output s·b·h·2" if attn else "")
            + " + GELU's output and down's s·b·(f + h)·2"
            + (" + the dropped probabilities the layer holds a·s²·b·4" if probs else "")
        )
        return value, words
    dropped = T * f * 4 if cfg.lora_dropout else 0
    # the gradient reaching the block and its 16-bit cast; then B's scaled gradient — or, with
    # the MLP's output dropped (--dropout: its mask the last tensor saved), the recomputation
    # runs on past down's adapter: B's output and its scaled copy, before that gradient exists
    grads = T * h * (e.r + 2 + (4 if cfg.dropout else 2))
    mlp = T * f * 2 + T * f * 4 + dropped + T * h * 2
    value = grads + norms + attn + mlp + probs
    words = (
        "the gradient reaching it, its 16-bit cast and "
        + ("B's output and scaled copy" if cfg.dropout else "B's scaled gradient")
        + f" s·b·h·({e.r} + 2 + {4 if cfg.dropout else 2}) + "
        f"the MLP's input(s) {fmt_bytes(norms)}"
        + (" + the attention's output s·b·h·2" if attn else "")
        + " + GELU's output, its fp32 cast for down's adapter"
        + (" and the dropped copy" if dropped else "")
        + f" and the base's output s·b·(2f + 4f{' + 4f' if dropped else ''} + 2h)"
        + (" + the dropped probabilities the layer holds a·s²·b·4" if probs else "")
    )
    return value, words


__all__ = ["applies", "held"]
