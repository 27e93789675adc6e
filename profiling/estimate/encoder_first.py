"""A classifier encoder's (BERT's, RoBERTa's) MLP going back at its input projection, at the last
and the first block, beside ``encoder``'s last block's MLP (``last_mlp``: at GELU's backward).

Without checkpointing the estimate's highest backward moment was the last block's GELU going
back; on few tokens next to the MLP's weights (bert-wide toy: h 256, f 1024, 64 × 2 tokens,
fp32, 8-bit Adam) the trace's peak is later, in the first block's ``intermediate.dense`` going
back: 0.951 of the trace (−909,848 B). transformers 5.24 ``modeling_bert.py``:
``BertIntermediate.forward`` is ``intermediate_act_fn(dense(h))`` and ``BertOutput.forward``
``LayerNorm(dropout(dense(h)) + input_tensor)``. Going back, after GELU's backward:

- GELU's saved input is freed, its input gradient (s·b·f) made — and the output projection's
  input gradient, GELU's incoming one, is still alive (read from the trace's live storages):
  one f-wide tensor fewer than at GELU's backward, net;
- ``intermediate.dense`` makes its weight's and bias' gradients ((h·f + f) in the gradients'
  dtype) and its input's (s·b·h in the compute dtype);
- at a lower block, every block above has gone back: its kept tensors (``encoder.per_layer``)
  freed, its parameters' gradients made.

Full training without checkpointing, no autocast (``encoder_amp`` has its moments), no LoRA,
a classifier's head (not ViT's, not a masked LM's): equal to the trace on the toys
(tests/profiling/estimate/test_encoder_first.py). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.ranks import one_gpu_step
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

AT_GELU = "backward, the first block's MLP"
LAST_INPUT = "backward, the last block's MLP input projection"
FIRST_INPUT = "backward, the first block's MLP input projection"


def applies(d: Dims, cfg: TrainingConfig, amp: bool = False) -> bool:
    """Full training without checkpointing, one GPU, a classifier (``amp``: under autocast,
    ``encoder_amp``'s moments; else without)."""
    e = Bytes.of(cfg.precision)
    return (
        not d.extra["encoder"]["pixels"]
        and cfg.lora_rank is None
        and cfg.checkpointing == "none"
        and e.amp == amp
        and not cfg.grads_kept
        and not cfg.optimizer_in_bwd
        and not cfg.compile
        and one_gpu_step(cfg)
        and cfg.tp == 1
        and not cfg.sharded
    )


def moments(d: Dims, cfg: TrainingConfig, last: float, kept: float) -> list[tuple[str, float, str]]:
    """The moments beside ``last`` (the last block's MLP at GELU's backward, bytes; ``kept``:
    one block's kept tensors): the first block's GELU, the input projection at the last and
    the first block."""
    if not applies(d, cfg):
        return []
    e = Bytes.of(cfg.precision)
    g = 4 if e.r == 4 else 2  # the gradients' bytes
    tokens = d.s * d.b
    # a block's parameters: q, k, v, o (h² + h each), the MLP's two (h·f + f, f·h + h), two
    # LayerNorms (2h each)
    block = 4 * d.h * d.h + 2 * d.h * d.f + 9 * d.h + d.f
    lower = (d.L - 1) * (block * g - kept)  # every block above the first gone back
    at_input = (d.h * d.f + d.f) * g + tokens * d.h * e.c - tokens * d.f * e.c
    f = fmt_bytes
    steps = (
        f"(the input projection's weight and bias gradients (h·f + f)·{g} and input gradient "
        f"s·b·h·{e.c} − GELU's saved input s·b·f·{e.c}, freed) {f(at_input)}"
    )
    above = f"(the {d.L - 1} blocks above: their gradients − their kept tensors) {f(lower)}"
    out = [(LAST_INPUT, last + at_input, f"the last block's MLP {f(last)} + {steps} = "
            f"{f(last + at_input)}")]  # fmt: skip
    if d.L > 1:
        out += [
            (AT_GELU, last + lower, f"the last block's MLP {f(last)} + {above} = "
             f"{f(last + lower)}"),
            (FIRST_INPUT, last + lower + at_input, f"the last block's MLP {f(last)} + {above} + "
             f"{steps} = {f(last + lower + at_input)}"),
        ]  # fmt: skip
    return out


__all__ = ["AT_GELU", "FIRST_INPUT", "LAST_INPUT", "applies", "moments"]
