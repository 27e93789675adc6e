"""transformers' GPT-2 under full checkpointing with the optimizer stepped in backward
(``--optimizer-in-bwd``, torchtune's ``optimizer_in_bwd``): a recomputed block's ``mlp.c_proj``
stepped beside the block's recomputed tensors, as ``estimate.recomputed_gpt2`` counts the
same block going back with the optimizer stepped after backward.

The estimate's earlier bound under the optimizer in backward — the end of forward and one
block's kept tensors (``estimate.recomputed``) — missed c_proj's step: on the V 128 toy (h 128,
f 512, 64 × 2 tokens, AdamW) it read 0.921 (fp32) and 0.876 (amp-bf16) of the trace. Read from
the trace's live storages at its peak, at block i (0-based, of L; the highest at the last):

- the end of forward less the loss's and the final LayerNorm's tensors (``released``) and the
  checkpoints of the blocks above; no gradient of a block above, nor the final norm's: each
  was stepped and freed by its post-accumulate-grad hook (torchtune's ``optimizer_in_bwd``,
  as ``profiling.trace.in_backward`` runs it);
- a tied head's gradient: the head's and the embedding's uses share one ``AccumulateGrad``,
  whose input waits in autograd's buffer for the embedding's, made last (torch
  csrc/autograd/input_buffer.cpp, ``InputBuffer::accumulate``); an untied head's is stepped
  and freed before any block goes back;
- the block's kept tensors, recomputed, less ln_1's input (the checkpoint), and autocast's
  copies (``recomputed_gpt2.block_terms``);
- then the highest of: c_proj's backward making its input's gradient (s·b·f) and its weight's
  (h·f) beside its saved input (freed as it returns: torch csrc/autograd/engine.cpp
  ``evaluate_function`` releases the node's variables before queueing its outputs); the
  weight stepped (the for-loop's k scratch tensors of one h·f matrix,
  ``states.step_temporaries``) beside its gradient and the input's, ``AccumulateGrad`` running
  first of the ready nodes (accumulate_grad.cpp: its sequence number is UINT64_MAX); under
  autocast each 16-bit gradient cast back to fp32 first (``_to_copy``'s backward), the input's
  then the weight's; or gelu_new going back after it (``gpt2_end.mlp_going_back``), c_proj's
  gradients freed. Each beside the gradient reaching the block (s·b·h).

Equal to the trace to the byte on the toys, tied and untied, AdamW, SGD and 8-bit Adam, fp32,
bf16 and autocast (tests/profiling/estimate/test_recomputed_gpt2_in_bwd.py). No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.gpt2_end import c_proj_stepped
from profiling.estimate.recomputed import checkpoints, end_of_forward
from profiling.estimate.recomputed_gpt2 import NAME, block_terms
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def moment(
    lines: Sequence[Any], inp: TrainingConfig, shape: dict[str, Any], d: Dims, inputs: float,
    recompute: float,
) -> tuple[str, float, str]:  # fmt: skip
    """c_proj stepped (or gelu_new going back) in the recomputed last or first block, whichever
    is higher: (name, bytes, calculation). ``lines`` the estimate's, ``inputs`` the step's
    inputs held throughout, ``recompute`` one block's kept tensors."""
    from profiling.estimate.states import weight_bytes

    g = weight_bytes(inp.precision)  # the gradients are the weights' dtype (no master copy)
    t = block_terms(inp, d, recompute)
    e, fwd, each = Bytes.of(inp.precision), end_of_forward(lines, inputs), checkpoints(lines) / d.L
    head = int(d.V or 0) * d.h * g if shape.get("tied") else 0
    # under autocast ``t.copies`` sets c_proj's 16-bit input against the moment as freed: it is
    # alive while c_proj goes back (``c_proj_stepped`` counts it as saved). The recomputed
    # block's peak there reads without the bias' gradient (h·g, which the block that kept its
    # tensors holds: the untied wide toy fp32 8-bit Adam, no checkpointing): as measured.
    held = d.s * d.b * d.f * e.c if e.amp else 0
    late = max(c_proj_stepped(d, inp, shape, lines, bias=False) + held, t.mlp)
    best: tuple[float, str] = (0.0, "")
    for i in sorted({d.L - 1, 0}, reverse=True):
        n_above = d.L - 1 - i
        value = fwd - t.gone - n_above * each + head + t.kept + late + t.copies - t.mask
        calc = " ".join(
            [
                f"block {i + 1} of {d.L}: end of forward {fmt_bytes(fwd)} − {t.what} "
                f"{fmt_bytes(t.gone)}",
                *([f"− the checkpoints above {fmt_bytes(n_above * each)}"] if n_above else []),
                *([f"+ the tied head's gradient V·h·{g} {fmt_bytes(head)}"] if head else []),
                *t.words,
                f"= {fmt_bytes(value)}",
            ]
        )
        if value > best[0]:
            best = (value, calc)
    return NAME, best[0], best[1]


__all__ = ["moment"]
