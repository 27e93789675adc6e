"""LoRA on an encoder-decoder (T5, mT5) without autocast or checkpointing: the last decoder
block's MLP going forward, at its output matmul wo or at the MLP's own dropout (autocast's:
``estimate.t5_forward_amp``).

With wo adapted (role ``down``) peft's ``lora.Linear.forward`` (peft tuners/lora/layer.py) runs
``result = base_layer(x)``, then ``result = result + lora_B(lora_A(dropout(x))) * scaling``
after ``_cast_input_dtype`` (a copy where the adapters' dtype is not the base's: ``mixed``'s
fp32 over bf16): the frozen base's output (t·b·h·c), B's output and its scaled copy (or the
scaled copy and the sum; t·b·h in the adapters' dtype each) are alive at once, beside what wo
reads. That is the MLP's product (``T5DenseGatedActDense.forward``, transformers
models/t5/modeling_t5.py: ``wo(dropout(act(wi_0(x)) * wi_1(x)))``; ReLU's output in
``T5DenseActDense``), or its dropped copy under the model's dropout: kept by the step where
lora_A reads it itself (``lora_dropout`` 0, adapters in the base's dtype: ``mm`` saves the
input of a weight needing a gradient) or ReLU's backward keeps it (``threshold_backward``),
else freed once wo returns — so is peft's cast of it. Without an adapter on wo: its output
alone. Under the model's dropout the MLP's own (before wo) can lead: the product and its
dropped copy at once (the mask kept).

Alive though nothing saves it (``T5Stack.forward`` and ``T5ForConditionalGeneration.forward``
hold them): the decoder's input ids and embeddings, its position bias (1 × heads × t × t in the
table's dtype, handed from block to block), the MLP norm's output (kept where an undropped
adapter on gate or up reads it) and the encoder's output (kept where one on k or v does). Not
made yet, though kept by the step: the block's residual sum, pow's fp32 copy of it (16-bit
residual) and rsqrt, which the decoder's frozen final norm keeps, the log-probabilities and the
loss's two scalars; with the model's dropout the masks after wo (T5LayerFF's) and after the
final norm (T5Stack's), t·b·h each.

Read off the trace (t5-small toys: h 128, f 512, V 128, 2 + 3 blocks): audit6's fp32 all-linear
r 8, lora_dropout 0.1, 8-bit Adam, 64 tokens 0.9817 of it before (−262,392 B); mixed q, v, gate
with dropout 0.1, 32 and 24 tokens −3,772 B; mixed q, v, down, lora_dropout 0.1 −61,440 B
before this moment's mixed cast was counted — all now equal. Not here: an adapted head, other
losses, sharded or in-backward steps. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """The moment (``t5_forward_amp.NAME``), or none where it does not apply. ``d``: the
    logits' dims (``t5.logit_dims``: s is the target's)."""
    from profiling.estimate.losses import REFERENCE
    from profiling.estimate.t5 import _table
    from profiling.estimate.t5_forward_amp import NAME

    if d is None or d.arch != "t5" or cfg.lora_rank is None or cfg.checkpointing != "none":
        return []
    e, t = Bytes.of(cfg.precision), set(cfg.lora_targets)
    if e.amp or "lm_head" in t or cfg.loss != REFERENCE or d.V is None:
        return []
    if cfg.sharded or cfg.optimizer_in_bwd:
        return []
    from profiling.estimate.lora_bytes import adapter_bytes, adapter_compute

    a = adapter_bytes(cfg)
    if adapter_compute(cfg, e) != a:
        return []
    U, h, f, c = d.s * d.b, d.h, d.f, e.c
    T = int(d.extra["t5"]["source_seq"]) * d.b
    # an undropped adapter in the weights' dtype keeps the very tensor it reads; in another
    # (mixed: fp32 adapters over a 16-bit base) it keeps peft's cast of it instead
    read_kept = not cfg.lora_dropout and a == c
    copy = 0 if e.r == 4 else 4  # pow's fp32 copy of a 16-bit residual
    # the final norm's residual, its fp32 copy and rsqrt; the log-probabilities, two scalars;
    # the model's dropout masks after wo and after the final norm
    later = U * ((copy + e.r) * h + 4) + U * int(d.V) * c + 2 * c
    later += 2 * U * h if cfg.dropout else 0
    # the decoder's ids, embeddings and position bias; the MLP norm's output and the
    # encoder's output where no adapter keeps them
    alive = U * 8 + U * h * c + d.a * d.s * d.s * _table(e, cfg)
    alive += 0 if read_kept and t & {"gate", "up"} else U * h * c
    alive += 0 if read_kept and t & {"k", "v"} else T * h * c
    # what wo reads — the gated product, or the MLP's dropped copy of it under the model's
    # dropout — is kept by an undropped adapter on wo alone; ReLU's output undropped by ReLU's
    # own backward (threshold_backward)
    relu = not d.extra["t5"]["gated"]
    down = "down" in t
    wo_in = 0 if (read_kept and down) or (relu and not cfg.dropout) else U * f * c
    # peft's cast of it to the adapters' dtype (``_cast_input_dtype``), kept by lora_A
    # undropped, else freed once wo returns
    cast = U * f * a if a != c and cfg.lora_dropout and down else 0
    # at wo: the base's output (with B's output and its scaled copy, the sum in the adapters'
    # dtype); at the MLP's own dropout: the product (ReLU's kept) beside its dropped copy
    at_wo = wo_in + cast + U * h * (c + 2 * a if down else c)
    at_drop = (0 if relu else U * f * c) + wo_in if cfg.dropout else 0
    transient = max(at_wo, at_drop)
    value = fwd - later + alive + transient
    calc = (
        f"end of forward {fmt_bytes(fwd)} − kept but not made yet (the final norm's residual, "
        f"its fp32 copy and rsqrt, the log-probabilities t·b·V·{c} and two scalars"
        + (", the dropout masks after wo and the final norm" if cfg.dropout else "")
        + f") {fmt_bytes(later)} + held by the forward (the decoder's ids, embeddings and "
        f"position bias, the MLP norm's and the encoder's outputs where nothing keeps them) "
        f"{fmt_bytes(alive)} + "
        + (
            f"the MLP's product and its dropped copy t·b·f·{c} each"
            if at_drop > at_wo
            else (f"what wo reads t·b·f·{c}, " if wo_in else "")
            + (f"its cast t·b·f·{a}, " if cast else "")
            + (
                f"wo's output, B's output and its scaled copy t·b·h·({c} + 2·{a})"
                if down
                else f"wo's output t·b·h·{c}"
            )
        )
        + f" {fmt_bytes(transient)} "
        f"= {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


__all__ = ["moments"]
