"""The final RMSNorm run as separate ops, forward and backward, as a tape
(``profiling.estimate.loss_tape``): where a chunked or fused loss leaves the logits small, the
norm's own fp32 temporaries, right at the end of forward and the start of backward, make the
peak.

Two forms, read from the ops the trace records: transformers' ``LlamaRMSNorm`` (``x.float()``,
``pow(2).mean``, ``rsqrt``, the product cast back, then ``weight *``: it keeps the fp32 input,
rstd and the cast product) and the fp32-weighted form (Gemma's ``(1 + w)``, OLMo 2's
``(w · x).to()``, and ``F.rms_norm`` composed of aten ops on the CPU: it keeps the fp32 product
instead). CUDA's fused ``rms_norm`` and ``layer_norm`` make no such temporaries. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling.estimate.loss_tape import Dim, Tape, sized


@dataclass
class NormShape:
    T: int  # tokens (s·b)
    h: int
    r: int  # the norm's input and output dtype
    p: int  # its weight's dtype
    cast_product: bool  # Llama's form: the product cast back before the weight (else fp32)
    # a frozen weight (LoRA): autograd makes no gradient for it, nor the product that feeds it
    trained: bool = True


def forward_peak(n: NormShape) -> Tape:
    """The norm's forward from its input: the tape's peak, and at its end what it saved and its
    output."""
    tok: list[Dim] = [("s·b", n.T)]
    row = [*tok, ("h", n.h)]
    tape = Tape({"x": sized("the final norm's input", row, n.r)})
    tape.new("in32", sized("its fp32 copy", row, 4))
    tape.new("pow", sized("its square", row, 4))
    tape.new("mean", sized("the mean square", tok, 4))
    tape.free("pow")
    if n.cast_product:
        tape.new("add", sized("+ eps", tok, 4))
        tape.new("rstd", sized("rstd", tok, 4))
        tape.free("add")
        tape.new("prod", sized("the fp32 normalized", row, 4))
        tape.new("xn", sized("the normalized, cast back", row, n.r))
        tape.new("out", sized("the norm's output", row, n.r))
        tape.free("prod", "mean")
    else:
        tape.new("rstd", sized("rstd", tok, 4))
        tape.free("mean")
        tape.new("prod", sized("the fp32 normalized", row, 4))
        tape.new("out32", sized("the fp32 weighted", row, 4))
        tape.new("out", sized("the norm's output", row, n.r))
        tape.free("out32")
    tape.free("x")
    return tape


def backward_peak(n: NormShape) -> Tape:
    """The norm's backward from its output's gradient, what it saved alive: the tape's peak."""
    tok: list[Dim] = [("s·b", n.T)]
    row = [*tok, ("h", n.h)]
    saved = ("xn", sized("the normalized, cast back", row, n.r)) if n.cast_product else (
        "prod", sized("the fp32 normalized", row, 4))  # fmt: skip
    # the product saves the normalized for the weight's gradient only: a frozen weight's kept
    # none (torch's mul backward, derivatives.yaml: ``other`` saved where ``self`` needs a grad)
    kept = [saved[0]] if n.trained else []
    tape = Tape({
        "g": sized("the gradient of the norm's output", row, n.r),
        "in32": sized("its fp32 input", row, 4),
        "rstd": sized("rstd", tok, 4),
        **({saved[0]: saved[1]} if n.trained else {}),
    })  # fmt: skip
    if n.cast_product:  # out = w · xn
        tape.new("gxn", sized("gradient of the cast product", row, n.r))
        if n.trained:
            tape.new("gwp", sized("gradient · normalized (for the weight)", row, n.r))
            tape.new("gw", sized("the norm weight's gradient", [("h", n.h)], n.p))
            tape.free("gwp")
        tape.free("g", *kept)
        tape.new("g32", sized("the product's fp32 gradient", row, 4))
        tape.free("gxn")
    else:  # out = (prod · w).to(r)
        tape.new("g32", sized("the output's fp32 gradient", row, 4))
        tape.free("g")
        tape.new("gprod", sized("gradient of the fp32 normalized", row, 4))
        if n.trained:
            tape.new("gwp", sized("gradient · normalized (for the weight)", row, 4))
            tape.new("gw", sized("the norm weight's gradient", [("h", n.h)], n.p))
            tape.free("gwp")
        tape.free("g32", *kept)
        tape.keep_as("gprod", "g32", "the product's fp32 gradient")
    tape.new("ga", sized("gradient · rstd", row, 4))
    tape.new("gb", sized("gradient · fp32 input", row, 4))
    tape.new("gr", sized("rstd's gradient", tok, 4))
    tape.free("gb", "g32")
    # rsqrt's backward has run (the trace: rstd is gone by pow's backward): it released rstd,
    # the last node that kept it (the product's released its own reference before)
    tape.free("rstd")
    tape.new("gmean", sized("the mean's gradient, expanded", row, 4))
    tape.free("gr")
    tape.new("pw", sized("pow's backward: the input", row, 4))
    tape.new("pws", sized("· 2", row, 4))
    tape.new("pwm", sized("· gradient", row, 4))
    tape.free("pw", "pws", "gmean", "in32")
    tape.new("gsum", sized("the input's two gradients summed", row, 4))
    tape.free("ga", "pwm")
    tape.new("gx", sized("the input's gradient, cast back", row, n.r))
    tape.free("gsum")
    return tape


__all__ = ["NormShape", "backward_peak", "forward_peak"]
