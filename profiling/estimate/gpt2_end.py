"""transformers' GPT-2 module under full training with a vocabulary small next to its blocks
(V 128 beside h 128, f 512): the last block's MLP going back, not the loss, holds the step's
peak. Without this moment the estimate's peak was the loss's backward, 0.94 of the trace at
64 × 2 tokens (−721,408 B; fp32, amp-bf16 and amp-fp16 alike). Counted from the end of forward
as ``estimate.neox_moments`` counts GPT-NeoX's kind (T = s·b tokens).

transformers 5.24 ``modeling_gpt2.py``: ``GPT2MLP.forward`` is ``c_proj(act(c_fc(h)))`` with
``Conv1D`` (``addmm(bias, x, weight)``, ``pytorch_utils.py``) and ``act = gelu_new``
(``activations.py`` ``NewGELUActivation``: ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``, eager
ops). Going back, once the loss's log-probabilities and labels and the final LayerNorm's
tensors are freed (``neox_moments.released``) and the head's (tied: the embedding's) and the
final norm's gradients are made:

- ``c_proj`` goes back: its input's gradient (s·b·f), its weight's and bias' gradients (h·f + h)
  made, its saved input (GELU's output) freed;
- then gelu_new's last ``mul``'s backward makes both operands' gradients (s·b·f each) while its
  incoming gradient is alive — two f-wide tensors net (as Phi's gelu_new, ``neox_moments.f_wide``;
  ``pow``'s backward reaches the same height later), beside the gradient reaching the block
  (s·b·h in the residual's dtype). Under autocast gelu_new runs in fp32 from ``pow`` on:
  three fp32 f-wide gradients there, c_proj's and the head's 16-bit weight copies freed.

Full training, PyTorch's loss, every block keeping what it saved (no full checkpointing), one
GPU, no compile: tests/profiling/estimate/test_gpt2_end.py. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims, _cuda
from profiling.estimate.selective import blocks_keep_saved
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

BACKWARD = "backward, the last block's MLP"
GELU_NEW = 2  # gelu_new's f-wide gradients at once, net of c_proj's freed input


def _applies(d: Dims | None, cfg: TrainingConfig) -> bool:
    from profiling.estimate.losses import REFERENCE

    if d is None or d.V is None or d.arch != "gpt2" or d.extra.get("hf_module") != "gpt2":
        return False
    if cfg.loss != REFERENCE or cfg.lora_rank is not None or not blocks_keep_saved(cfg):
        return False
    if Bytes.of(cfg.precision).amp and not _cuda(cfg):
        return False  # CPU's autocast lists differ (its dtypes there not read here)
    return not (cfg.compile or cfg.tp != 1 or cfg.sharded)


def mlp_going_back(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[float, str]:
    """The gradient reaching the block and gelu_new's f-wide gradients going back, c_proj's saved
    input freed (bytes, words); shared with ``estimate.recomputed_gpt2``'s recomputed block."""
    T, h, f, V = d.s * d.b, d.h, d.f, int(d.V or 0)
    if Bytes.of(cfg.precision).amp:
        # Under autocast gelu_new is fp32 from ``pow`` on (autocast's fp32 list) and c_proj saved
        # the product's 16-bit cast: its input gradient is cast back to fp32 (``_to_copy``'s
        # backward) and ``mul``'s two gradients are fp32 beside it — three fp32 f-wide tensors;
        # the 16-bit cast of 0.5·x's gradient equals c_proj's freed 16-bit input. Its and the
        # head's 16-bit weight copies (autocast's cache, saved by their matmuls) are freed.
        return T * h * e.r + 3 * T * f * 4 - (h * f + V * h) * e.c, (
            f"the gradient reaching the block s·b·h·{e.r} and gelu_new's three fp32 f-wide "
            f"gradients s·b·3f·4 − c_proj's and the head's 16-bit weight copies (h·f + V·h)·{e.c}"
        )
    return T * h * e.r + GELU_NEW * T * f * e.c, (
        f"the gradient reaching the block s·b·h·{e.r} and gelu_new's two f-wide gradients "
        f"s·b·2f·{e.c}"
    )


def c_proj_stepped(
    d: Dims, cfg: TrainingConfig, shape: dict[str, Any], lines: Sequence[Any], bias: bool = True
) -> float:
    """Under ``--optimizer-in-bwd``: a block's ``mlp.c_proj`` going back and its weight stepped,
    beside the gradient reaching the block (bytes above what the block saved; ``lines`` the
    estimate's, for the for-loop step's scratch of one h·f matrix, ``states.step_temporaries``).

    c_proj's backward makes its input's gradient (s·b·f) and its weight's (h·f) beside its saved
    input, freed as it returns (torch csrc/autograd/engine.cpp ``evaluate_function`` releases
    the node's variables before queueing its outputs); then the weight is stepped beside its
    gradient and the input's, ``AccumulateGrad`` running first of the ready nodes
    (accumulate_grad.cpp: its sequence number is UINT64_MAX)."""
    from profiling.estimate.states import weight_bytes

    e, g = Bytes.of(cfg.precision), weight_bytes(cfg.precision)
    T, h, f, V = d.s * d.b, d.h, d.f, int(d.V or 0)
    largest = int(shape.get("largest_tensor") or 0)
    temps = sum(ln.bytes for ln in lines if ln.category == "temporaries")
    scratch = temps * h * f / largest if largest else 0.0
    # with dropout c_proj's incoming gradient is resid_dropout's (s·b·h) beside the residual's,
    # freed as c_proj's backward returns (before the casts and the step)
    drop = T * h * e.r if cfg.dropout else 0
    if e.amp:
        # its 16-bit input and weight gradients made while its saved 16-bit input and weight
        # copy are alive; then each is cast back to fp32 (``_to_copy``'s backward: its input
        # was autocast's cast of gelu_new's fp32 output, its weight fp32), the input's first,
        # each 16-bit one freed after its cast, c_proj's saved input and weight copy freed as
        # it returned, and the weight stepped beside the fp32 input gradient; the head's 16-bit
        # copy was freed with the head's backward
        made = T * f * e.c + h * f * e.c
        cast = T * f * 4 + max(T * f * e.c + h * f * e.c, h * f * (e.c + 4), h * f * 4 + scratch)
        return T * h * e.r + max(made + drop, cast - h * f * e.c - T * f * e.c) - V * h * e.c
    # the bias' gradient is summed from the incoming one (``sum_to`` in engine.cpp's
    # validate_outputs) before the node's saved input is released: h·g more as it returns
    return T * h * e.r + h * f * g + max(T * f * e.c + h * g * bias + drop, scratch)


def moments(
    d: Dims | None,
    cfg: TrainingConfig,
    fwd: float,
    shape: dict[str, Any] | None = None,
    lines: Sequence[Any] = (),
) -> list[tuple[str, float, str]]:
    """The last block's MLP going back; none where it does not apply (see the module).
    ``shape`` and ``lines`` (the estimate's) for ``--optimizer-in-bwd``'s c_proj step."""
    if not _applies(d, cfg):
        return []
    assert d is not None
    from profiling.estimate.neox_moments import released

    e = Bytes.of(cfg.precision)
    T, h, f, V = d.s * d.b, d.h, d.f, int(d.V or 0)
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    gone, what = released(d, e, cfg)
    # the head's (the tied embedding's), the final norm's (weight, bias), c_proj's (and bias)
    grads = (V * h + 2 * h + h * f + h) * p
    if cfg.grads_kept:
        # accumulated into the kept ones (counted in the end of forward) as each is made, but
        # the tied head's waits for the embedding's to be summed with it (an untied head's is
        # accumulated at once: a bound there); c_proj's own, made before its saved input is
        # freed, can be the higher moment
        grads = V * h * p
    # resid_pdrop's mask after c_proj, freed by its backward before c_proj goes back
    mask = T * h * (1 if _cuda(cfg) else e.r) if cfg.dropout else 0
    mlp, words = mlp_going_back(d, e, cfg)
    named = f"the head's, the final norm's and c_proj's gradients (V·h + 2h + h·f + h)·{p}"
    if cfg.optimizer_in_bwd:
        # each gradient is stepped and freed by its post-accumulate-grad hook as it is made: the
        # final norm's and an untied head's are gone; a tied head's waits in autograd's input
        # buffer for the embedding's (torch csrc/autograd/input_buffer.cpp); c_proj's is
        # stepped as it goes back (``c_proj_stepped``), before gelu_new goes back
        grads = V * h * p if shape and shape.get("tied") else 0
        named = f"the tied head's gradient V·h·{p}" if grads else "no gradient (each stepped)"
        stepped = c_proj_stepped(d, cfg, shape or {}, lines)
        if stepped > mlp:
            mlp, words = (
                stepped,
                "c_proj going back, its weight stepped (the optimizer in backward)",
            )
    if cfg.grads_kept and not e.amp:  # c_proj's input and weight gradients before accumulation
        mlp = T * h * e.r + max(GELU_NEW * T * f * e.c, T * f * e.c + (h * f + h) * p)
    value = fwd - gone + grads + mlp - mask
    calc = (
        f"end of forward − {what} {fmt_bytes(gone)} + {named} {fmt_bytes(grads)} + {words} "
        f"{fmt_bytes(mlp)}"
        + (f" − the MLP's dropout mask {fmt_bytes(mask)}" if mask else "")
        + " = "
        f"{fmt_bytes(value)}"
    )
    return [(BACKWARD, value, calc)]


def norm_output_held(d: Dims | None, cfg: TrainingConfig) -> float:
    """Under CUDA's autocast the final LayerNorm's output is fp32 (``layer_norm`` on autocast's
    fp32 list) and the head's matmul saves its 16-bit cast, not it; yet transformers 5.24
    ``GPT2LMHeadModel.forward`` holds it (``hidden_states``) until the loss returns: s·b·h·4
    beside the logits, which the loss's forward moment missed (gpt2-l4 amp-bf16 64 × 2:
    −32,768 B, the peak under --optimizer-in-bwd with full checkpointing). 0 elsewhere."""
    if d is None or d.arch != "gpt2" or d.extra.get("hf_module") != "gpt2":
        return 0.0
    if not (Bytes.of(cfg.precision).amp and _cuda(cfg)) or cfg.compile or cfg.tp != 1:
        return 0.0
    return d.s * d.b * d.h * 4


__all__ = ["BACKWARD", "mlp_going_back", "moments", "norm_output_held"]
