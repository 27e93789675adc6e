"""LoRA on an encoder-decoder (T5, mT5) under autocast, no checkpointing: what the forward holds
though backward keeps none of it, and the last decoder block's MLP going forward.

Held while the decoder and the loss run (beside the decoder's fp32 output and input ids,
``t5.output_held``; both counted by ``t5.lora_held``):

- the encoder's fp32 output (its final ``T5LayerNorm``'s output, fp32 under autocast):
  ``T5ForConditionalGeneration.forward`` (transformers models/t5/modeling_t5.py) holds it as
  ``hidden_states`` to hand every cross-attention; each k and v matmul (or its adapter's
  lora_A) keeps a 16-bit copy of its own, not it;
- autocast's cached 16-bit copies of the first blocks' lora_A on q, k and v (r·h each, both
  stacks): autocast caches a cast of a leaf fp32 weight that requires a gradient (torch
  aten/src/ATen/autocast_mode.cpp, ``cached_cast``: ``arg.requires_grad() && arg.is_leaf()``)
  until the autocast region exits; the matmul saves none (its input, the frozen embedding's
  output, needs no gradient, so its weight is not needed going back).

The last decoder block's MLP, at its output matmul (``T5DenseGatedActDense.forward``:
``wo(dropout(act(wi_0(x)) * wi_1(x)))``; ``T5DenseActDense``: ``wo(act(wi(x)))`` after
T5's cast to wo's fp32 weight): the fp32 product (or the fp32 cast of ReLU's 16-bit output),
autocast's 16-bit copy of it that wo reads and wo's 16-bit output are alive at once, beside the
norm's fp32 output (the frozen wi read their own copies of it, freed), the decoder's fp32
input embeddings and its fp32 position bias (1 × heads × t × t, handed from block to block),
held by ``T5Stack.forward``. Not made yet, though kept by the step: the block's residual sum
and rsqrt the final norm keeps, the head's 16-bit weight copy (saved: its input needs a
gradient), the log-probabilities and the loss's two scalars; with the model's dropout also
the masks after wo (T5LayerFF's) and after the final norm (T5Stack's), t·b·h each — the MLP's
own dropped copy takes the product's place. An adapter on up or gate keeps its own 16-bit copy
of the norm's output and changes none of this. Where the vocabulary is small beside the MLP
(V 128, f 512) this is the step's peak: t5-small toy (h 128, f 512, V 128, 2 + 3 blocks, 32
input and 24 target tokens), amp-bf16, LoRA q, v: 0.9952 of the trace before (−45,976 B), now
equal. With wo adapted (``_down``) the fp32 product beside three t·b·h 16-bit outputs (or the
dropped product lora_A reads): all-linear −13,208 B before, now equal. Not here: an adapted
head, other losses. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "forward, the last decoder block's MLP output matmul"


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """The moment, or none where it does not apply. ``d``: the logits' dims
    (``t5.logit_dims``: s is the target's)."""
    from profiling.estimate.losses import REFERENCE
    from profiling.estimate.t5 import lora_held

    if d is None or d.arch != "t5" or cfg.lora_rank is None or cfg.checkpointing != "none":
        return []
    if not Bytes.of(cfg.precision).amp:
        return []
    if "lm_head" in cfg.lora_targets or cfg.loss != REFERENCE or d.V is None:
        return []
    U, h, f, t = d.s * d.b, d.h, d.f, d.s
    # the final norm's residual and rsqrt, the head's weight copy, log-probabilities, scalars
    later = U * (h * 4 + 4) + d.V * h * 2 + U * d.V * 4 + 2 * 4
    # the model's dropout: T5LayerFF's mask on wo's output and T5Stack's on the final norm's
    masks = 2 * U * h if cfg.dropout else 0
    later += masks
    more, more_f = lora_held(d, cfg)
    # the decoder's input ids and embeddings, its position bias, the MLP norm's output
    alive = more + U * 8 + U * h * 4 + d.a * t * t * 4 + U * h * 4
    transient = U * f * (4 + 2) + U * h * 2
    what = "wo's 16-bit copy of it and its output t·b·(f·6 + h·2)"
    if "down" in cfg.lora_targets:
        transient, what = _down(U, h, f, cfg)
    value = fwd - later + alive + transient
    calc = (
        f"end of forward {fmt_bytes(fwd)} − kept but not made yet (the final norm's t·b·(h·4 + "
        f"4), the head's weight copy V·h·2, the log-probabilities t·b·V·4 and two scalars) "
        f"{fmt_bytes(later)} + held by the forward ({more_f}: the encoder's output, the first "
        f"blocks' cached A copies; t·b·8 + t·b·h·4 + a·t²·4 + t·b·h·4: the decoder's ids, "
        f"embeddings, position bias, the MLP norm's output) {fmt_bytes(alive)} + the fp32 "
        f"product, {what} {fmt_bytes(transient)} = {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


def _down(U: int, h: int, f: int, cfg: TrainingConfig) -> tuple[int, str]:
    """wo adapted (peft ``lora.Linear.forward``: ``result = base_layer(x)``, then ``result +
    lora_B(lora_A(dropout(x))) * scaling``): the frozen base's 16-bit copy of the product is
    freed once its output is made (its weight needs no gradient; lora_A keeps a copy of its
    own, which the step keeps), so the fp32 product and three t·b·h 16-bit tensors are alive at
    once — the base's output, B's output and its scaled copy (or the scaled copy and the sum).
    With lora_dropout the dropped fp32 product is alive beside the product while lora_A runs
    (its mask and A's copy of it kept by the step): t·b·f·4 more, beside the base's output,
    before B's cached 16-bit copy (r·h·2, which the step keeps) is made."""
    after = U * f * 4 + 3 * U * h * 2
    if cfg.lora_dropout:
        at_a = U * f * 8 + U * h * 2 - int(cfg.lora_rank or 0) * h * 2
        if at_a > after:
            return at_a, "the dropped fp32 copy A reads and wo's output t·b·(f·8 + h·2) − r·h·2"
    return after, "wo's output, B's output and its scaled copy t·b·(f·4 + 3·h·2)"


__all__ = ["NAME", "moments"]
