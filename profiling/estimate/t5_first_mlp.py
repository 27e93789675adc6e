"""A full finetune of an encoder-decoder (T5, mT5) with a gated-GELU MLP, without autocast,
checkpointing or dropout: the first encoder block's MLP going back, the step's last MLP, holds
the peak where the optimizer's state is as large as the weights (SGD with momentum, Adam's two
in 16 bits: the optimizer step itself reads less).

By then every other block has gone back: all their weight gradients made (the decoder's input
embedding, the shared table, has its gradient from the decoder's side), their saved tensors
freed. Not made yet: the block's wi_0 (the gate, whose output's gradient gelu_new is making),
its attention's q, k, v and o, its two norms' and the encoder's position-bias table's. Kept
still: the block's attention and norms as ``t5`` counts them, wi_0's output (gelu_new's
input: ``pow`` and the two ``mul`` read it) and the encoder's int64 position buckets (s², the
table's ``embedding_backward`` reads them); gelu_new's other saved tensors, the linear branch
and the product are freed. In flight (transformers models/t5/modeling_t5.py
``T5DenseGatedActDense.forward``: ``wo(act(wi_0(x)) * wi_1(x))``, ``act`` = ``NewGELUActivation``
of eager ops ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3))))``): six s·b·f
gradients at once inside gelu_new's backward (the product's gradient to gelu's output, the
``mul``, ``tanh`` and ``pow`` backward's (torch derivatives.yaml: ``tanh_backward``,
``pow_backward``) and the three partial gradients to x before they are summed), beside three
s·b·h ones — the residual's gradient reaching the block, wo's output gradient through the
residual add, and wi_1's input gradient waiting for wi_0's — and the loss's seed gradient and
output (a scalar each, in the logits' dtype).

Read off the trace (t5-small toy: h 128, f 512, V 128, 2 + 3 blocks, 32 input and 24 target
tokens, fp32, SGD): 0.9828 of it before (−269,592 B), now equal. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, an encoder block's MLP (gelu_new)"


def moments(
    d: Dims | None, cfg: TrainingConfig, fwd: float, lines: Sequence[Any]
) -> list[tuple[str, float, str]]:
    """The moment, or none where it does not apply. ``d``: the logits' dims
    (``t5.logit_dims``: s is the target's)."""
    from profiling.estimate.losses import REFERENCE
    from profiling.estimate.states import weight_bytes
    from profiling.estimate.t5 import _encoder_block, _mlp, _table

    if d is None or d.arch != "t5" or cfg.lora_rank is not None or cfg.checkpointing != "none":
        return []
    e, x = Bytes.of(cfg.precision), d.extra["t5"]
    if e.amp or cfg.dropout or cfg.loss != REFERENCE or cfg.grads_kept:
        return []
    if cfg.sharded or cfg.optimizer_in_bwd or cfg.compile:
        return []
    enc = Dims(**{**d.__dict__, "s": int(x["source_seq"])})
    T, h, f, c, q = enc.s * enc.b, d.h, d.f, e.c, int(x["q_dim"])
    act = sum(ln.bytes for ln in lines if ln.category == "activations")
    grads = sum(ln.bytes for ln in lines if ln.category == "gradients")
    w = weight_bytes(cfg.precision)
    later = (h * f + 4 * h * q + 2 * h + int(x["rel_buckets"]) * d.a) * w
    # the block's attention and norms (its MLP's kept tensors freed but wi_0's output), and
    # the encoder's int64 position buckets, which its table's embedding backward reads
    block = _encoder_block(enc, e, cfg)
    kept = block - _mlp(T, enc, e, cfg) + T * f * c + 8 * enc.s**2
    # in flight: gelu_new's six s·b·f gradients, two s·b·h, the loss's output and seed
    flight = 6 * T * f * c + 2 * T * h * c + 2 * c
    # at the first block the position bias's gradient from the blocks above waits in the
    # input buffer for this block's (a·s², the table's dtype)
    wait = d.a * enc.s**2 * _table(e, cfg) if d.L > 1 else 0
    # and, above two encoder blocks, one s·b·h gradient per further block: the trace's
    # accumulated residual gradients (autograd's ``add`` in the input buffers) still alive at
    # the first block (toy h 128, 4 encoder blocks, 32 tokens: −32,768 B before; none with 2)
    wait += max(d.L - 2, 0) * T * h * c
    mlp = 3 if x["gated"] else 2
    if not x["gated"]:
        # T5 v1.0's ReLU MLP, at wi's input gradient: wo's and wi's weight gradients made,
        # ReLU's output freed (the MLP keeps nothing); in flight threshold_backward's s·b·f,
        # wi's input gradient and the residual's, s·b·h each (fp32 32 → 24: −7,440 B before)
        later -= h * f * w
        kept -= T * f * c  # the MLP keeps nothing then (wi_0's output is the gated MLP's)
        flight = T * f * c + 2 * T * h * c + 2 * c
    first = fwd - act + grads - later + kept + flight + wait
    # going back from the last encoder block to the first, each block makes its weights'
    # gradients and frees its kept tensors: the last block's MLP can lead instead
    below = (d.L - 1) * ((4 * h * q + mlp * h * f + 2 * h) * w - block)
    value, which = max((first, "first"), (first - wait - below, "last"))
    # one op earlier, the gated product's backward (``mul``: its input's gradient and its two
    # output gradients, three s·b·f) beside every tensor the MLP kept but the product wo read
    # (gelu_new's four, wi_0's and wi_1's outputs), wi_1's weight gradient not made yet, one
    # s·b·h in flight (the residual's): it leads once 2·s·b·f·c > s·b·h·c + h·f·w (a long input:
    # toy h 128, f 512 fp32 at 128 tokens, −196,608 B before)
    # ReLU's the same: at threshold_backward wo's input gradient and ReLU's output are alive,
    # wi's weight and input gradients not made (fp32 at 128 tokens: −196,608 B before)
    product = 2 * T * f * c - T * h * c - h * f * w
    value, at = (value + product, "the gated product's") if product > 0 else (value, "gelu_new's")
    if not x["gated"]:
        at = "ReLU's threshold_backward" if product > 0 else "ReLU's wi input gradient's"
    what = "gelu_new's six" if x["gated"] else "threshold_backward's one"
    calc = (
        f"at the {which} encoder block, {at} backward: end of forward less its activations "
        f"{fmt_bytes(fwd - act)} + the gradients {fmt_bytes(grads)} − those not made yet "
        f"(wi_0's h·f, the attention's 4·h·q, two norms', the position-bias table's) "
        f"{fmt_bytes(later)} + the block's kept attention, norms, wi_0's output and the "
        f"position buckets {fmt_bytes(kept)} + "
        f"{what} s·b·f·{c} gradients, two "
        f"s·b·h·{c} and the loss's seed and output 2·{c} {fmt_bytes(flight)}"
        + (
            f" + the position bias's gradient waiting a·s²·{_table(e, cfg)} and (L − 2) "
            f"accumulated s·b·h·{c} {fmt_bytes(wait)}"
            if which == "first" and wait
            else f" − the blocks below's gradients not made, plus their kept tensors "
            f"{fmt_bytes(-below)}"
            if which == "last"
            else ""
        )
        + (
            f" + the product's backward: 2·s·b·f·{c} − s·b·h·{c} − wi_1's h·f·{w} "
            f"{fmt_bytes(product)}"
            if product > 0
            else ""
        )
        + f" = {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


__all__ = ["NAME", "moments"]
