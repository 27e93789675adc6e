"""transformers' Llama (Mistral, Qwen2) with eager attention and no checkpointing: the last
block's softmax going back, at a long sequence the step's peak.

``eager_attention_forward`` (transformers 5.x ``modeling_llama.py``) keeps, per block, the
softmax's fp32 output and its copy in the compute dtype (or, with ``--dropout``, the mask and the
dropped copy), a·s²·b each. Going back through the last block, after its MLP, its second norm
and ``o_proj``, the probabilities' matmul frees its copy and the repeated values and makes the
probabilities' gradient (and the values'); the cast's backward makes that gradient fp32 (fp32
already: the gradient itself), and ``_softmax_backward_data`` writes its fp32 output beside it
and beside the fp32 probabilities it reads: two fp32 s² tensors more than the block kept —
12 B per score more than the loss's moment at bf16 on top of what the block still holds. At
2 × 512 tokens on a toy Llama (h 128, four heads, V 512) that moment is 1,737,216 B above the
loss backward the estimate took as its peak (0.965 of the trace).

Counted from the end of forward less what the loss, the final norm and the head kept
(``llama_end.released``) and less the last block's kept tensors (the estimate's own count of
one block), plus what the block still holds at that moment — its first norm's saved tensors
and output (as LoRA counts them: a frozen norm keeps no normalized values, a frozen q/k/v keeps
no input unless an adapter keeps that very tensor), q and the repeated keys, the fp32
probabilities, the q/k/v adapters' A outputs, own input copies and dropout masks — the
gradients made (the head's, the final norm's, the MLP's, the second norm's, ``o_proj``'s; under
LoRA the adapters' of those), the gradient reaching the block (s·b·h), the values' gradient
(s·b·q) and the two fp32 s² tensors. Equal to the trace on the toy's rows
(tests/profiling/estimate/test_llama_eager_softmax.py). Under autocast the first norm is
fp32, q, k and v (or under LoRA their adapters) keep 16-bit copies of its output and autocast's
16-bit weight copies of the head, ``o_proj`` and the MLP and of their adapters are freed by
then (LoRA under autocast: a bound, the block count's o input s·b·q·2 over, as with
lora_dropout). Not here: QLoRA, DoRA, other losses, compile,
checkpointing (``recomputed_eager``, ``selective``), LitGPT's modules. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, the last block's eager softmax"
_MODULES = ("llama", "mistral", "qwen2")
_QKV = ("q", "k", "v")


def _applies(d: Dims | None, cfg: TrainingConfig) -> bool:
    from profiling._config_lora import peft_autocast
    from profiling.estimate.activations import _cuda
    from profiling.estimate.hf_ops import eager
    from profiling.estimate.llama_end import _applies as last_block_read
    from profiling.estimate.losses import REFERENCE

    if d is None or d.extra.get("hf_module") not in _MODULES or not last_block_read(d, cfg):
        return False
    if d.extra.get("litgpt_norm") or d.extra.get("litgpt_qkv") or not eager(d, cfg):
        return False
    if not _cuda(cfg):  # read on CUDA's kernels (the CPU's autocast lists and masks differ)
        return False
    plain = not (cfg.qlora or cfg.dora or cfg.compile or peft_autocast(cfg))
    return plain and cfg.checkpointing == "none" and cfg.loss == REFERENCE


def _grads(d: Dims, cfg: TrainingConfig) -> tuple[int, str]:
    """The gradients made before the softmax goes back: the head's and the final norm's, the
    MLP's, the second norm's and ``o_proj``'s (under LoRA their adapters')."""
    from profiling.estimate.lora_bytes import adapter_bytes

    h, f, q, V = d.h, d.f, d.a * d.hd, int(d.V or 0)
    if cfg.lora_rank is None:
        p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
        return (V * h + 3 * h * f + q * h + 2 * h) * p, f"(V·h + 3h·f + q·h + 2h)·{p}"
    r, a, t = int(cfg.lora_rank), adapter_bytes(cfg), set(cfg.lora_targets)
    widths = {"lm_head": h + V, "o": q + h, "gate": h + f, "up": h + f, "down": f + h}
    n = sum(w for name, w in widths.items() if name in t)
    return r * n * a, f"the adapters' r·Σ(in + out)·{a}"


def _held(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """What the last block still holds as its softmax goes back: its first norm's saved tensors
    and output, q and the repeated keys, the fp32 probabilities, the q/k/v adapters' tensors."""
    from profiling.estimate.hf_ops import normalized_bytes, unfused_norms
    from profiling.estimate.lora_bytes import adapter_compute, mask_bytes, own_copies

    T, h, q = d.s * d.b, d.h, d.a * d.hd
    norm = T * ((4 + e.r) * h + 4)
    out = T * h * e.c if not e.amp else 3 * T * h * 2  # autocast: q's, k's, v's own copies
    held = 2 * T * q * e.c + d.a * d.s * d.s * d.b * 4
    if cfg.lora_rank is None:
        return norm + out + held
    r, own = int(cfg.lora_rank), own_copies(cfg, e)
    n = len(set(_QKV) & set(cfg.lora_targets))
    if unfused_norms(d, cfg):  # a frozen norm: no normalized values kept
        norm -= T * h * normalized_bytes(d, e)
    if own or not n:  # no adapter keeps the frozen q/k/v's very input
        out = 0
    held += T * n * r * adapter_compute(cfg, e)
    if own:
        held += T * n * h * (2 if e.amp else adapter_compute(cfg, e))
    if cfg.lora_dropout:
        held += T * n * h * mask_bytes(cfg)
    return norm + out + held


def moments(
    d: Dims | None, cfg: TrainingConfig, fwd: float, lines: Sequence[Any]
) -> list[tuple[str, float, str]]:
    """The last block's eager softmax going back (none where it does not apply)."""
    from profiling.estimate import block_terms
    from profiling.estimate import lora as lora_acts
    from profiling.estimate.llama_end import released

    if not _applies(d, cfg):
        return []
    assert d is not None
    e = Bytes.of(cfg.precision)
    T, h, q = d.s * d.b, d.h, d.a * d.hd
    gone = released(d, e, cfg, lines)
    terms = block_terms.per_layer(d, e, cfg)
    if cfg.lora_rank is not None:
        terms += lora_acts.per_layer(d, e, cfg)
    layer = sum(t.bytes for t in terms)
    held = _held(d, e, cfg)
    grads, grads_words = _grads(d, cfg)
    reach, values = T * h * e.r, T * q * e.c
    softmax = d.a * d.s * d.s * d.b * 8
    # autocast's 16-bit weight copies of the head, o_proj and the MLP (and of their adapters),
    # freed as they went back
    copies = (int(d.V or 0) * h + q * h + 3 * h * d.f) * 2 if e.amp else 0
    if e.amp and cfg.lora_rank is not None:
        r, t = int(cfg.lora_rank), set(cfg.lora_targets)
        widths = {"lm_head": h + int(d.V or 0), "o": q + h, "gate": h + d.f, "up": h + d.f,
                  "down": d.f + h}  # fmt: skip
        copies += r * sum(w for name, w in widths.items() if name in t) * 2
    value = fwd - gone - layer - copies + held + grads + reach + values + softmax
    calc = (
        f"end of forward − the loss's, the final norm's and the head's kept tensors "
        f"{fmt_bytes(gone)} − the last block's kept tensors {fmt_bytes(layer)}"
        + (
            f" − autocast's 16-bit copies of the head's, o's and the MLP's weights "
            f"(V·h + q·h + 3h·f)·2 {fmt_bytes(copies)}"
            if copies
            else ""
        )
        + " + what it still holds (its first norm's, q and the repeated keys, the fp32 "
        "probabilities"
        + (", the q/k/v adapters'" if cfg.lora_rank is not None else "")
        + f") {fmt_bytes(held)} + the gradients made {grads_words} {fmt_bytes(grads)} + the "
        f"gradient reaching the block s·b·h·{e.r} and the values' s·b·q·{e.c} "
        f"{fmt_bytes(reach + values)} + the probabilities' fp32 gradient and softmax's "
        f"backward output a·s²·b·8 {fmt_bytes(softmax)} = {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


__all__ = ["NAME", "moments"]
