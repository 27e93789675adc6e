"""Llama's kind of decoder, trained whole: the first block's input RMSNorm going back, the last
op before the embedding's, can hold the step's peak. By then every other gradient is made, the
optimizer's state of the last step is alive, and transformers' ``LlamaRMSNorm`` (separate ops:
``hidden_states.to(torch.float32)``, ``pow(2).mean(-1, keepdim=True)``, ``torch.rsqrt``, the
product cast back, then ``self.weight *``; transformers models/llama/modeling_llama.py) runs its
backward as fp32 element-wise ops (torch's derivatives.yaml: ``mul``, ``rsqrt``, ``mean``,
``pow``), several s·b·h·4 tensors at once (``norm_tapes.backward_peak``).

Where the optimizer's step makes no temporaries larger than that tape (SGD, bitsandbytes' 8-bit
Adam: one fused kernel per parameter, ``bitsandbytes.optim.optimizer.Optimizer8bit.update_step``)
and the vocabulary is small next to the tokens, this moment is above the optimizer step and the
tied end of backward: the estimate read 3,117,440 B against the trace's 3,158,408 (0.987) on the
Llama toy (h 128, V 128, 32 tokens, bf16, SGD, no checkpointing) before; now equal, untied too.
Under autocast the first block's MLP going back (its weights' 16-bit gradients cast to fp32
beside them) is higher still and not counted here.

Counted: the weights, every gradient but the embedding's (autograd's ``AccumulateGrad`` for a
tied weight waits for the embedding's contribution: the head's gradient waits beside the
others, the same bytes), the optimizer's state, the step's inputs and the loss's scalars, the
gradient reaching the norm along the residual (s·b·h in the residual's dtype, summed with the
norm's input gradient at its end) and the norm's backward at its peak less its weight's
gradient (counted among the gradients). Not here: LoRA (the frozen embedding's output needs no
gradient: no norm backward runs), CUDA's fused ``rms_norm`` (our own blocks), sharding, tensor
parallelism, optimizer steps in backward. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.step_scalars import LOSS
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, the first block's input norm"


def moments(
    d: Dims | None, cfg: TrainingConfig, held: float, tied: bool, lines: Sequence[Any]
) -> list[tuple[str, float, str]]:
    """The moment, or none where it does not apply. ``held``: the weights, gradients, optimizer
    state and the step's inputs, as the optimizer step counts them."""
    from profiling.estimate.hf_ops import fp32_norm
    from profiling.estimate.norm_tapes import NormShape, backward_peak

    if d is None or d.V is None or d.arch != "llama" or cfg.lora_rank is not None:
        return []
    module = d.extra.get("hf_module")
    if not module and getattr(cfg, "target", "cuda") == "cuda":
        return []  # CUDA's fused rms_norm: one kernel, no fp32 temporaries
    if cfg.tp != 1 or cfg.sharded or cfg.optimizer_in_bwd or cfg.activation_offload:
        return []
    e = Bytes.of(cfg.precision)
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    T, h = d.s * d.b, d.h
    tape = backward_peak(NormShape(T, h, e.r, p, bool(module) and not fp32_norm(d)))
    embedding = 0 if tied else int(d.V) * h * p  # not made yet (untied)
    reach = T * h * e.r
    scalars = sum(ln.bytes for ln in lines if ln.name == LOSS)
    value = held - embedding + scalars + reach + tape.peak - h * p
    calc = (
        f"weights, gradients, optimizer and inputs {fmt_bytes(held)}"
        + (f" − the embedding's gradient, not made yet V·h·{p} {fmt_bytes(embedding)}"
           if embedding else "")
        + (f" + the loss's scalars {fmt_bytes(scalars)}" if scalars else "")
        + f" + the gradient along the residual s·b·h·{e.r} {fmt_bytes(reach)} + the norm's "
        f"backward at its peak less its weight's gradient {fmt_bytes(tape.peak - h * p)}"
    )  # fmt: skip
    return [(NAME, value, calc)]
