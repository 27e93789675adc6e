"""A classifier encoder's (BERT's, RoBERTa's) MLP going back under autocast, past the moment
``last_mlp`` counts (its output projection's 16-bit gradients), at the last and the first block.

transformers 5.24 ``modeling_bert.py``: ``BertIntermediate.forward`` is
``intermediate_act_fn(dense(h))``, ``BertOutput.forward`` ``LayerNorm(dropout(dense(h)) +
input_tensor)``. Under autocast each ``dense`` is an ``addmm`` on 16-bit copies (torch's
autocast list: ``linear`` casts its input, weight and bias to the 16-bit dtype; the weight's copy
is the one its backward saved), so its backward makes 16-bit gradients, and autograd's
``ToCopyBackward`` casts the weight's and bias' to fp32 for the fp32 parameters'
``AccumulateGrad`` (torch/csrc/autograd: the cast node between the copy and the leaf). Read in
order from the trace's live storages (bert-wide toy: h 256, f 1024, 64 × 2 tokens, amp-bf16,
8-bit Adam, 0.9635 of the trace before, −667,112 B):

- the output projection, once its 16-bit gradients are made (``last_mlp``'s moment ``M``): the
  node frees the gradient's 16-bit copy (s·b·h), GELU's output (s·b·f) and the weight's 16-bit
  copy (h·f), then the fp32 weight gradient (h·f·4) is made beside its 16-bit one;
- the input projection: the output projection's 16-bit weight gradient freed, its bias' fp32
  made (h); GELU's input gradient made as its saved input goes (net 0); the projection's input,
  weight and bias gradients in 16 bits (s·b·h + h·f + f);
- then GELU's input gradient, the saved input's and weight's 16-bit copies freed, the input
  gradient cast to fp32 and summed with the residual's out of place (s·b·h·c fewer, net), and
  the fp32 weight gradient made (h·f·4): the step's peak on few tokens (f ≥ 2h: the sum's
  moment is lower);
- at the first block, every block above has gone back: its kept tensors (``encoder.per_layer``,
  the 16-bit copies of its inputs among them) and its weights' 16-bit copies ((4h² + 2hf)·c)
  freed, its fp32 gradients made.

Full training without checkpointing, one GPU, a classifier (``encoder_first.applies``), under
autocast: equal to the trace on the toys (tests/profiling/estimate/test_encoder_amp.py). No
torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.encoder_first import AT_GELU, FIRST_INPUT, LAST_INPUT, applies
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

LAST_OUTPUT = "backward, the last block's MLP output projection"
FIRST_OUTPUT = "backward, the first block's MLP output projection"
LAST_INPUT_16 = "backward, the last block's MLP input projection, its 16-bit gradients"
FIRST_INPUT_16 = "backward, the first block's MLP input projection, its 16-bit gradients"


def moments(d: Dims, cfg: TrainingConfig, last: float, kept: float) -> list[tuple[str, float, str]]:
    """The moments after ``last`` (``last_mlp``'s, bytes) under autocast; ``kept``: one block's
    kept tensors. Empty where ``encoder_first.applies`` does not hold under autocast."""
    if not applies(d, cfg, amp=True):
        return []
    c = Bytes.of(cfg.precision).c  # the 16-bit copies' bytes; the parameters are fp32
    T, h, f, f_ = d.s * d.b, d.h, d.f, fmt_bytes
    at_out = h * f * 4 - T * h * c - T * f * c - h * f * c
    out_text = (
        f"− the gradient's 16-bit copy s·b·h·{c}, GELU's output s·b·f·{c} and the weight's "
        f"16-bit copy h·f·{c}, + its fp32 weight gradient h·f·4 {f_(at_out)}"
    )
    at_16 = at_out + h * (4 - c) + T * h * c + f * c
    in16_text = (
        f"{out_text}; its 16-bit weight gradient freed as the input projection's is made "
        f"(h·f·{c} each), its bias' fp32 gradient for its 16-bit one h·(4 − {c}), the input "
        f"projection's 16-bit input and bias gradients (s·b·h + f)·{c} {f_(at_16 - at_out)}"
    )
    at_in = at_16 - T * f * c - 2 * T * h * c - h * f * c + h * f * 4
    in_text = (
        f"{in16_text}; − GELU's input gradient s·b·f·{c}, the saved input's 16-bit copy and the "
        f"16-bit input gradient 2·s·b·h·{c}, the weight's 16-bit copy h·f·{c}, + the fp32 "
        f"weight gradient h·f·4 {f_(at_in - at_16)}"
    )
    block = 4 * h * h + 2 * h * f + 9 * h + f  # a block's parameters (encoder_first)
    lower = (d.L - 1) * (block * 4 - kept - (4 * h * h + 2 * h * f) * c)
    above = (
        f"(the {d.L - 1} blocks above: their fp32 gradients − their kept tensors − their "
        f"weights' 16-bit copies (4h² + 2hf)·{c}) {f_(lower)}"
    )
    here = [(LAST_OUTPUT, at_out, out_text), (LAST_INPUT_16, at_16, in16_text),
            (LAST_INPUT, at_in, in_text)]  # fmt: skip
    first = {LAST_OUTPUT: FIRST_OUTPUT, LAST_INPUT_16: FIRST_INPUT_16, LAST_INPUT: FIRST_INPUT}
    out = [(name, last + delta, f"the last block's MLP {f_(last)} {text} = {f_(last + delta)}")
           for name, delta, text in here]  # fmt: skip
    if d.L > 1:
        out.append((AT_GELU, last + lower, f"the last block's MLP {f_(last)} + {above} = "
                    f"{f_(last + lower)}"))  # fmt: skip
        out += [
            (first[name], last + lower + delta, f"the last block's MLP {f_(last)} + {above}; "
             f"{text} = {f_(last + lower + delta)}")
            for name, delta, text in here
        ]  # fmt: skip
    return out


__all__ = ["FIRST_INPUT_16", "FIRST_OUTPUT", "LAST_INPUT_16", "LAST_OUTPUT", "moments"]
