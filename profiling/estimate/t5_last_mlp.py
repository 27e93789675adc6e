"""An encoder-decoder (T5, mT5) without autocast or checkpointing going back through its last
decoder block's MLP and its final norm: either can hold the step's peak where the vocabulary
is small next to the MLP (V 128 beside h 128, f 512): the loss's log-probabilities and the
decoder's final norm's kept tensors are freed by then, and the MLP's f-wide gradients are
alive at once.

transformers' ``T5DenseGatedActDense.forward`` (models/t5/modeling_t5.py) runs
``wo(dropout(act(wi_0(x)) * wi_1(x)))``; going back, wo's input gradient (t·b·f) is alive while
``mul``'s backward makes both factors' (torch derivatives.yaml: ``mul``: ``grad * other``,
``grad * self``): three t·b·f gradients at once, whether or not up or gate carry an adapter
(theirs go back after). ``T5DenseActDense`` (ReLU) makes two: wo's input gradient and ReLU's
(``threshold_backward``). Beside them the residual's gradient reaching the block (t·b·h in the
residual's dtype). The model's dropout (``--dropout``): its masks gone back already are freed
(bool: the MLP's t·b·f, T5LayerFF's on wo's output and T5Stack's after the final norm, t·b·h
each), and the MLP's own dropout makes its gradient before mul's (still three at once).

Under LoRA the frozen wo and wi saved no input (``mm`` saves its input only for a weight
needing a gradient). Freed by then: the loss's log-probabilities (its two scalars stay, the
loop holds them) and what the decoder's final ``T5LayerNorm`` kept under a frozen weight —
``pow``'s fp32 input (a copy of a 16-bit residual), the residual ``hidden_states * rsqrt``
saved and rsqrt (4 B a token); the frozen head kept no input. A full finetune frees the final
norm's normalized values and output too (the head's input) and the gated MLP's product (wo's
input, its weight gradient made), and adds the weight gradients made so far: the head's V·h,
the final norm's h and wo's h·f, in the weights' dtype (none where the loop keeps ``.grad``:
autograd adds into it in place).

In 16 bits (bf16, mixed: a 16-bit residual) under LoRA the final norm's own backward can lead
(T5 v1.0's ReLU MLP makes only two t·b·f gradients): ``hidden_states * rsqrt`` multiplies the
16-bit residual by an fp32 rsqrt, so its gradient to the residual waits in 16 bits (t·b·h·2)
for the variance's path, which goes back in fp32 — ``mean``'s expanded gradient and ``pow``'s
backward (``pow_backward``: ``grad * exponent * self.pow(exponent - 1)``) over the fp32 copy
``pow`` kept: four t·b·h·4 tensors at once; the residual and rsqrt are freed by then, the copy
is not.

Read off the trace (t5-small toy: h 128, f 512, V 128, 2 + 3 blocks, 32 input and 24 target
tokens, LoRA q, v, SGD): fp32 0.986 (−110,496 B), with up adapted −110,496 B, with dropout 0.1
−212,896 B; the ReLU toy (tied) in bf16 −12,288 B; a full finetune in fp32 at 64 × 2 tokens
−524,288 B; all now equal. Not here: autocast (the product's fp32 casts and 16-bit weight
copies going back: ``t5_forward_amp`` for its forward), an adapted down (its adapter goes back
beside wo), checkpointing, other losses, sharded or in-backward steps. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, the last decoder block's MLP"
NORM = "backward, the decoder's final norm in 16 bits"
WO = "backward, the last decoder block's wo (a gradient kept)"
FIRST = "backward, the first decoder block's MLP (gelu_new)"
GELU = "backward, the last decoder block's MLP (gelu_new)"


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """The moments, or none where they do not apply. ``d``: the logits' dims
    (``t5.logit_dims``: s is the target's)."""
    from profiling.estimate.losses import REFERENCE
    from profiling.estimate.states import weight_bytes
    from profiling.estimate.t5 import _norm

    if d is None or d.arch != "t5" or cfg.checkpointing != "none" or cfg.loss != REFERENCE:
        return []
    e, lora = Bytes.of(cfg.precision), cfg.lora_rank is not None
    # wo adapted: without dropout only
    down = "down" in cfg.lora_targets
    plain = not (cfg.dropout or cfg.lora_dropout)
    if e.amp and not (lora or cfg.sharded or cfg.optimizer_in_bwd):
        return _amp(d, e, cfg, fwd)
    if e.amp or cfg.sharded or cfg.optimizer_in_bwd or (down and not plain):
        return []
    U, h, f, gated = d.s * d.b, d.h, d.f, bool(d.extra["t5"]["gated"])
    logits = U * int(d.V or 0) * e.c  # the log-probabilities (``t5._logits``, no autocast)
    copy = 0 if e.r == 4 else 4  # pow's fp32 copy of a 16-bit residual
    # the final norm's kept tensors: under LoRA the copy, the residual and rsqrt; a full
    # finetune's normalized values and output too (t5._norm), and the gated product
    norm = U * ((copy + e.r) * h + 4) if lora else _norm(U, d, e)
    product = 0 if lora or not gated else U * f * e.c
    made = (
        0
        if lora or cfg.grads_kept
        else (int(d.V or 0) * h + h + h * f) * weight_bytes(cfg.precision)
    )
    masks = U * (f + 2 * h) if cfg.dropout else 0
    n = 3 if gated else 2
    grads = U * h * e.r + n * U * f * e.c
    value = fwd - logits - norm - product - masks + grads + made
    if down:
        # wo adapted: its lora_A keeps the product (in the forward's count) until A's backward
        # sums the frozen wo's input gradient with A's (peft tuners/lora/layer.py Linear.forward:
        # base_layer(x) + lora_B(lora_A(dropout(x))) * scaling): three t·b·f at that add, and
        # A's and B's weight gradients made (r·(f + h)); the trace reads one t·b·f and A's
        # t·b·r output gradient fewer than mul's three beside the product (fp32 all-linear
        # 32/24 x 1: −61,896 B before)
        r = int(cfg.lora_rank or 0)
        value += r * (f + h) * weight_bytes(cfg.precision) - U * (f + r) * e.c
        if not gated:
            # ReLU's: three t·b·f at that add beside ReLU's output (kept), two more than
            # threshold_backward's moment above, lora_B's saved t·b·r freed (fp32 all-linear
            # 32/24 x 1: −111,048 B before)
            value += 2 * U * f * e.c
    calc = (
        f"end of forward {fmt_bytes(fwd)} − the loss's log-probabilities {fmt_bytes(logits)} − "
        f"the decoder's final norm's kept tensors {fmt_bytes(norm)}"
        + (f" − the gated product t·b·f·{e.c} {fmt_bytes(product)}" if product else "")
        + (f" − the dropout masks gone back t·b·(f + 2h) {fmt_bytes(masks)}" if masks else "")
        + f" + the residual's gradient t·b·h·{e.r} and the MLP's {n} gradients "
        f"t·b·{n}f·{e.c} {fmt_bytes(grads)}"
        + (f" + the head's, the final norm's and wo's weight gradients {fmt_bytes(made)}"
           if made else "")
        + f" = {fmt_bytes(value)}"
    )  # fmt: skip
    out = [(NAME, value, calc)]
    if not lora and gated and not cfg.grads_kept and not cfg.dropout:
        out.append(_first_block(d, e, cfg, value))
        # one op later in the same block, GELU's last mul: wi_1's weight gradient (h·f) and
        # input gradient (t·b·h) made, its output and GELU's output freed, three t·b·f in
        # flight again (bf16 32 → 24 × 2: −45,056 B before)
        w = weight_bytes(cfg.precision)
        later = h * f * w + U * h * e.c - 2 * U * f * e.c
        if later > 0:
            out.append((GELU, value + later, f"the last decoder block's MLP {fmt_bytes(value)} "
                        f"+ at GELU's last mul: wi_1's h·f·{w} and t·b·h·{e.c} gradients made, "
                        f"its output and GELU's freed −2·t·b·f·{e.c} {fmt_bytes(later)} = "
                        f"{fmt_bytes(value + later)}"))  # fmt: skip
    if cfg.grads_kept and not lora:
        # where the loop keeps ``.grad``, wo's weight gradient is made apart (h·f) and added into
        # ``.grad`` in place (torch/csrc/autograd/functions/accumulate_grad.h: ``variable_grad
        # += new_grad``) while wo's input (the product) and its input gradient (t·b·f) are alive:
        # one op before mul's three gradients (toy h 256, f 1024, V 256, fp32: −950,272 B before)
        gone = U * 2 * h if cfg.dropout else 0  # T5LayerFF's and T5Stack's masks gone back
        # with --dropout, T5LayerFF's dropout makes wo's output gradient apart from the residual's
        gone -= U * h * e.c if cfg.dropout else 0
        fresh = h * f * weight_bytes(cfg.precision)
        # a tied head's gradient waits in autograd's input buffer for the embedding's (one
        # table, two uses): V·h beside the kept ``.grad`` (ReLU toy, tied: −65,536 B before)
        fresh += int(d.V or 0) * h * weight_bytes(cfg.precision) if d.extra["t5"]["tied"] else 0
        at = fwd - logits - norm - gone + U * h * e.r + U * f * e.c + fresh
        out.append((WO, at, (
            f"end of forward {fmt_bytes(fwd)} − the loss's log-probabilities {fmt_bytes(logits)} − "
            f"the decoder's final norm's kept tensors {fmt_bytes(norm)}"
            + (f" − two dropout masks gone back t·b·2h, + wo's output gradient the dropout "
               f"made t·b·h·{e.c}: {fmt_bytes(-gone)}" if gone else "")
            + f" + the residual's gradient t·b·h·{e.r}, wo's input gradient t·b·f·{e.c} and its "
            f"fresh weight gradient h·f (and a tied head's V·h waiting) "
            f"{fmt_bytes(at - fwd + logits + norm + gone)} = "
            f"{fmt_bytes(at)}")))  # fmt: skip
    if lora and e.r == 2:
        gone = U * (e.r * h + 4) + (U * h if cfg.dropout else 0)  # residual, rsqrt, mask
        at = fwd - logits - gone + U * h * 2 + 4 * U * h * 4
        out.append((NORM, at, (
            f"end of forward {fmt_bytes(fwd)} − the loss's log-probabilities "
            f"{fmt_bytes(logits)} − the norm's residual and rsqrt t·b·(h·2 + 4)"
            + (" and T5Stack's dropout mask t·b·h" if cfg.dropout else "")
            + f" {fmt_bytes(gone)} + the residual's 16-bit gradient t·b·h·2 and the variance's "
            f"four fp32 t·b·h·4 {fmt_bytes(U * h * 18)} = {fmt_bytes(at)}")))  # fmt: skip
    return out


def _amp(d: Dims, e: Bytes, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """A full finetune under CUDA's autocast (gated, untied head, no dropout, no kept .grad):
    the last decoder block's product ``mul`` going back, wi_1's output gradient cast to 16 bits
    — the log-probabilities (fp32), the final norm's kept tensors, the head's and wo's 16-bit
    input and weight copies freed; the head's, the final norm's and wo's fp32 weight gradients
    made; the residual's fp32 gradient, wo's input gradient cast to fp32, the mul's two fp32
    t·b·f and the 16-bit cast in flight (toy 128 → 96 × 8 amp-bf16 SGD: −2,913,792 B before)."""
    from profiling.estimate.activations import _cuda
    from profiling.estimate.t5 import _norm

    x = d.extra["t5"]
    if not (_cuda(cfg) and x["gated"]) or x["tied"] or cfg.dropout or cfg.grads_kept:
        return []
    U, h, f, c, V = d.s * d.b, d.h, d.f, e.c, int(d.V or 0)
    freed = U * V * 4 + _norm(U, d, e) + U * h * c + V * h * c + h * f * c + U * f * c
    made = (V * h + h + h * f) * 4 + U * h * 4 + 3 * U * f * 4 + U * f * c
    value = fwd - freed + made
    return [(NAME, value, (
        f"end of forward {fmt_bytes(fwd)} − the fp32 log-probabilities, the final norm's kept "
        f"tensors, the head's and wo's 16-bit input and weight copies {fmt_bytes(freed)} + the "
        f"head's, the final norm's and wo's fp32 weight gradients, the residual's fp32 "
        f"gradient, three fp32 t·b·f and one t·b·f·{c} {fmt_bytes(made)} = {fmt_bytes(value)}"
    ))]  # fmt: skip


def _first_block(d: Dims, e: Bytes, cfg: TrainingConfig, last: float) -> tuple[str, float, str]:
    """The first decoder block's MLP going back, at gelu_new (``t5_first_mlp``'s moment in the
    decoder), from the last block's product moment ``last``: the blocks above gone back (their
    kept tensors freed, their weight gradients made: self- and cross-attention's 8·h·q, the
    MLP's 3·h·f, three norms), wi_1's gradient made too; gelu_new's gradients where mul's were
    (two t·b·f fewer alive, one t·b·h more: wi_1's input gradient); and what waits for the
    blocks below: the encoder's output gradient from the cross-attention k and v gone back
    (s·b·h), the decoder's position bias's (a·t², the table's dtype) and one accumulated
    residual gradient per block above the second (as the encoder's first block). Read off the
    trace: toy h 128, f 512, 32 → 24 tokens × 2, fp32: −77,600 B before."""
    from profiling.estimate.states import weight_bytes
    from profiling.estimate.t5 import _decoder_block, _table

    x = d.extra["t5"]
    enc = Dims(**{**d.__dict__, "s": int(x["source_seq"])})
    n, U, T = int(x["decoder_layers"]), d.s * d.b, enc.s * enc.b
    h, f, c, q, w = d.h, d.f, e.c, int(x["q_dim"]), weight_bytes(cfg.precision)
    above = (n - 1) * ((8 * h * q + 3 * h * f + 3 * h) * w - _decoder_block(enc, e, cfg))
    waits = T * h * c + d.a * d.s**2 * _table(e, cfg) + max(n - 2, 0) * U * h * c
    gelu = h * f * w - 2 * U * f * c + U * h * c
    at = last + above + waits + gelu if n > 1 else last + gelu
    calc = (
        f"the last decoder block's MLP {fmt_bytes(last)} + the {n - 1} blocks above gone back "
        f"(weight gradients made, kept tensors freed) {fmt_bytes(above if n > 1 else 0)} + "
        f"what waits: the encoder output's gradient s·b·h·{c}, the position bias's a·t², "
        f"(L − 2) residual gradients t·b·h·{c} {fmt_bytes(waits if n > 1 else 0)} + at "
        f"gelu_new: wi_1's h·f, two t·b·f fewer, one t·b·h more {fmt_bytes(gelu)} = "
        f"{fmt_bytes(at)}"
    )
    return (FIRST, at, calc)


__all__ = ["FIRST", "GELU", "NAME", "NORM", "WO", "moments"]
