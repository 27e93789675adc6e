"""A classifier encoder's (BERT, RoBERTa, ViT) backward under full checkpointing (transformers'
``gradient_checkpointing_enable``: non-reentrant, each block's input kept): backward first
recomputes the last block, then goes back through it as without checkpointing.

Read from the trace (``tests/profiling/trace/test_encoder_ckpt.py``), with T = s·b tokens:

- the recomputed block holds what it saves without checkpointing (``encoder.per_layer`` and
  LoRA's ``lora_encoder.per_layer``) less its input, which is the checkpoint itself where a
  saved tensor is that very tensor (ViT's first LayerNorm reads it; BERT's q, k, v without
  autocast), and under autocast the 16-bit copies of its six weights (full checkpointing drops
  them from the model's count: ``activations.head_copy_only``);
- BERT's, RoBERTa's post-norm block peaks as its output LayerNorm writes its output: its frames
  still hold the attention LayerNorm's output and GELU's where nothing saves them (autocast, a
  frozen layer), the output projection's output and, under autocast, the biases' cached 16-bit
  copies (trained biases only); the gradient reaching the block (the first token's, written
  into a zero s·b·h tensor) is there, the head gone back;
- once recomputed, the block's backward is ``encoder.moments``' without checkpointing, from
  the end of forward plus that block (the frames' tensors freed).

No torch here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

Moments = list[tuple[str, float, str]]
Backward = Callable[["Dims", "TrainingConfig", float], Moments]
Full = tuple[list[Term], tuple[float, float], int]


def _block(d: Dims, e: Bytes, cfg: TrainingConfig, terms: list[Term]) -> tuple[float, str]:
    """The last block recomputed: what it saves (``terms``: full training's per block), less
    the checkpoint it reads, plus its weights' 16-bit copies under autocast."""
    terms = list(terms)
    lost = False
    if cfg.lora_rank is not None:
        from profiling.estimate import lora_encoder

        extra = lora_encoder.per_layer(d, e, cfg)
        terms += extra
        lost = any("block input" in t.name for t in extra)
    T, h, f = d.s * d.b, d.h, d.f
    value = float(sum(t.bytes for t in terms))
    calc = f"its saved tensors {fmt_bytes(value)}"
    if d.extra["encoder"]["pixels"] or not (e.amp or lost):
        value -= T * h * e.r
        calc += f" − its input, the checkpoint s·b·h·{e.r}"
    if e.amp:
        value += (4 * h * h + 2 * h * f) * 2
        calc += " + its weights' 16-bit copies (4h² + 2hf)·2"
    return value, calc


def recomputed(d: Dims, cfg: TrainingConfig, fwd: float, backward: Backward, full: Full) -> Moments:
    """The moments of a classifier's backward under full checkpointing (``fwd``: the end of
    forward; ``backward``: ``encoder``'s moments without checkpointing; ``full``: full
    training's saved tensors per block, its head's saved tensors and gradients once back, the
    loss's gradient)."""
    from profiling.estimate import lora_encoder

    e = Bytes.of(cfg.precision)
    terms, (saved, grads), seed = full
    block, block_calc = _block(d, e, cfg, terms)
    out: Moments = []
    for name, value, calc in backward(d, cfg, fwd + block):
        if not name.startswith("forward"):  # the forward's moments are the blocks' own
            out.append((f"{name} (recomputed)", value,
                        f"the last block recomputed: {block_calc}; then {calc}"))  # fmt: skip
    vit = bool(d.extra["encoder"]["pixels"])
    if vit and (cfg.lora_rank is None or not (e.amp or "up" in cfg.lora_targets)):
        return out + _first(d, e, cfg, out)  # its peak is the MLP's backward (or the step's)
    reach = d.s * d.b * d.h * e.r
    alive, alive_calc = _vit_frames(d, e, cfg) if vit else lora_encoder.frames(d, e, cfg)
    value = fwd - saved + seed + grads + reach + block + alive
    f = fmt_bytes
    out.append((
        "backward, the last block recomputed",
        value,
        f"end of forward {f(fwd)} − the head's saved tensors and weight copies {f(saved)} + the "
        f"loss's gradient {seed} B + the head's gradients {f(grads)} + the gradient reaching "
        f"the block s·b·h·{e.r} {f(reach)} + the block recomputed ({block_calc}) {f(block)} + "
        f"{alive_calc} {f(alive)} = {f(value)}",
    ))  # fmt: skip
    if e.amp and "down" in cfg.lora_targets:  # at its down adapter (lora_encoder.amp_down)
        delta, delta_f = lora_encoder.down_delta(d, e, cfg)
        if vit and "up" in cfg.lora_targets:  # from the second matmul's moment, not the up's
            delta -= alive - _vit_frames(d, e, cfg, up=False)[0]
        text = f"the last block recomputed {f(value)} {delta_f} = {f(value + delta)}"
        out.append(("backward, the last block's down adapter recomputed", value + delta, text))
    return out + _first(d, e, cfg, out)


def _first(d: Dims, e: Bytes, cfg: TrainingConfig, last: Moments) -> Moments:
    """The first block's backward, where higher than the last's: the same moments with the
    gradients of the L − 1 blocks above made and their checkpoints freed; under LoRA the first
    block saves less, its input needing no gradient (ViT's first LayerNorm's statistics; under
    autocast BERT's q, k, v weight copies and their A copies)."""
    if d.L < 2 or not last:
        return []
    from profiling.estimate.lora_bytes import adapter_bytes

    T, h, f, r = d.s * d.b, d.h, d.f, int(cfg.lora_rank or 0)
    if cfg.lora_rank is None:
        p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
        grads, grads_f = (4 * h * h + 2 * h * f + 9 * h + f) * p, f"(4h² + 2hf + 9h + f)·{p}"
        less, less_f = 0, ""
    else:
        width = {"up": h + f, "down": f + h}
        n = sum(width.get(t, 2 * h) for t in cfg.lora_targets)
        grads, grads_f = n * r * adapter_bytes(cfg), f"r·Σ(in + out)·{adapter_bytes(cfg)}"
        from profiling.estimate.lora_encoder_first import not_kept

        less, less_f = 0, ""
        if d.extra["encoder"]["pixels"]:
            less, less_f = T * 8, " − its first LayerNorm's statistics s·b·8"
        first, first_f = not_kept(d, e, cfg)
        if first:
            less += first
            less_f += f" − what it keeps less ({first_f})"
    shift = (d.L - 1) * (grads - T * h * e.r) - less
    if shift <= 0:
        return []
    name, value, _ = max(last, key=lambda m: m[1])
    calc = (
        f"{name} {fmt_bytes(value)} + the {d.L - 1} blocks above: their gradients {grads_f} less "
        f"their checkpoints s·b·h·{e.r}{less_f} = {fmt_bytes(value + shift)}"
    )
    return [("backward, the first block recomputed", value + shift, calc)]


def _vit_frames(d: Dims, e: Bytes, cfg: TrainingConfig, up: bool = True) -> tuple[float, str]:
    """ViT's block under autocast with LoRA, recomputed up to its frozen second MLP matmul's
    weight copy (its last saved tensor); with an adapted up projection, to that adapter's
    output scaled, if higher: alive though unsaved, the gradient's 16-bit copy its MLP's
    branch got first (the residual sum's backward ran before the recomputation), the second
    LayerNorm's fp32 output, GELU's output and the bias copy."""
    T, h, f = d.s * d.b, d.h, d.f
    if not e.amp:  # an adapted up projection's B output and its scaled copy
        return 2 * T * f * e.c, f"the up adapter's B output and its scaled copy 2·s·b·f·{e.c}"
    value = T * h * (e.c + 4) + T * f * e.c + h * 2
    calc = (
        f"the gradient's 16-bit copy and the second LayerNorm's output s·b·h·({e.c} + 4), "
        f"GELU's output s·b·f·{e.c} and the output projection's bias copy h·2"
    )
    if up and "up" in cfg.lora_targets and T * f * e.c > h * f * 2 + h * 2:
        # at the up adapter: B's output and its scaled copy, not yet GELU's output nor the
        # second matmul's copies
        value += T * f * e.c - (h * f + h) * 2
        calc += f" + the up adapter's second s·b·f·{e.c} − the second matmul's (h·f + h)·2"
    return value, calc
