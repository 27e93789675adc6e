"""The last block's fused q/k/v adapter going forward, under LoRA with fp32 adapters on a 16-bit
base (``mixed``), on transformers' GPT-NeoX (parallel and sequential residual): where the MLP is
wide next to the vocabulary (h 256, f 1024, V 256, 16 tokens) its sum, not the MLP's, is the
step's peak. The estimate read 0.9918 (parallel) / 0.9939 (sequential) of the trace there,
32,600 / 24,408 B short. T = s·b tokens.

At the sum ``result + lora_B(...) * scaling`` (the adapter's update over the fused 3h columns,
zero-padded where only some of q, k, v are adapted: ``trace.lora``'s fused adapter) the step
holds what the end of forward holds, less what is made later: the loss's and the final
LayerNorm's tensors (``neox_moments.released``) and an adapted head's, the last block's
attention's rotated q and k, its output and logsumexp (the fused q/k/v output is the base's
result, there already), the MLP's first matmul output (GELU's input), the MLP LayerNorm's
statistics and, the sequential block's, its input (the residual after attention); plus, beside
them, three 3h-wide tensors in the adapters' dtype (the update or its padded copy, the scaled
one and the sum), the attention LayerNorm's output where the adapter keeps a cast copy of its
own, transformers' inputs_embeds and position ids (the model's locals, held the whole forward;
the first block's norms keep none) and, zero-padded with more than one sequence, the update's
contiguous copy.

Exact where the trace's tensors are these (tests/profiling/estimate/test_neox_qkv.py), with
q, k, v and the head adapted; with o, up or down adapted too, what their adapters keep (made
after the sum: each its input's fp32 copy, lora_dropout's mask, its A output) is taken off
(o,v with lora_dropout at 256 x 2: 0.935 of the trace before, now equal); not with one block
(the first block's adapters keep fewer). 16-bit and fp32
adapters make it smaller than the MLP's moments; autocast (``neox_amp_moments``), 4-bit bases,
DoRA, BLOOM's q/k/v layout and Phi's separate projections are not counted here. Falcon's fused
q + 2k output (``_falcon``: Falcon-40B q,v 0.9315, k 0.974 of the trace before) is.
No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, _cuda
from profiling.estimate.lora_bytes import adapter_bytes, head_adapter, mask_bytes, own_copies
from profiling.estimate.selective import blocks_keep_saved
from profiling.estimate.step_inputs import kept_position_ids
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "forward, the last block's q/k/v adapter"


def _applies(d: Dims | None, cfg: TrainingConfig) -> bool:
    from profiling.estimate.neox_moments import HELD_OVER

    if d is None or d.V is None or d.arch != "neox":
        return False
    if d.extra.get("hf_module") not in ("gpt_neox", "falcon"):
        return False
    # any loss but LitGPT's (its loop's held logits): ``released`` reads another's plan
    if cfg.lora_rank is None or cfg.precision != "mixed" or cfg.loss in HELD_OVER:
        return False
    if cfg.loss != "cross-entropy" and cfg.checkpointing != "none":
        return False  # another loss under selective checkpointing: not read here
    if not blocks_keep_saved(cfg) or cfg.tp != 1 or cfg.sharded or cfg.compile:
        return False
    if cfg.qlora or cfg.dora or cfg.autocast_adapters or cfg.activation_offload:
        return False
    if cfg.optimizer_in_bwd or getattr(cfg, "deepspeed", False):
        return False
    # an adapted o, up or down keeps its own tensors after the sum (``_later_adapters``); the
    # first block's (one block: the last) keep fewer, not taken off here: not counted there
    t = set(cfg.lora_targets)
    return bool({"q", "k", "v"} & t) and (d.L > 1 or t <= {"q", "k", "v", "lm_head"})


def _later_adapters(d: Dims, cfg: TrainingConfig) -> int:
    """What the last block's o, up and down adapters keep, made after the q/k/v sum: under
    ``mixed`` each its input's own fp32 copy (the cast, or the dropped one) and lora_dropout's
    mask, and its A output (``lora_neox.per_layer``'s terms, one block's)."""
    T, r, a = d.s * d.b, int(cfg.lora_rank or 0), adapter_bytes(cfg)
    width = {"o": int(d.extra["neox"]["q_dim"]), "up": d.h, "down": d.f}
    m = mask_bytes(cfg) if cfg.lora_dropout else 0
    return sum(T * (w * (a + m) + r * a) for n, w in width.items() if n in cfg.lora_targets)


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """The last block's fused q/k/v adapter's sum; none where it does not apply."""
    if not _applies(d, cfg):
        return []
    assert d is not None
    from profiling.estimate.neox_moments import released

    if d.extra.get("hf_module") == "falcon":
        return [_falcon(d, cfg, fwd)]
    e = Bytes.of(cfg.precision)
    T, h, f, a = d.s * d.b, d.h, d.f, adapter_bytes(cfg)
    gone, gone_words = released(d, e, cfg)
    gone += head_adapter(d, e, cfg)  # an adapted head's copy of its input, mask and A output
    sequential = d.extra["neox"]["residual"] == "sequential"
    later, later_words = _core_later(d, e, cfg)
    # a parallel first block's MLP reads the frozen embedding: it keeps nothing (one block)
    if sequential or d.L > 1:
        later += T * f * e.c + T * (8 if _cuda(cfg) else 2 * e.r)  # GELU input, statistics
    if sequential:
        later += T * h * e.r
    adapters = _later_adapters(d, cfg)
    later += adapters
    # the model's locals: inputs_embeds and the position ids (int64, one row for the batch)
    # (under selective the checkpoints keep the position ids: counted in ``fwd`` already)
    ids = 0 if kept_position_ids(d, cfg) else d.s * 8
    held = (T * h * e.c if own_copies(cfg, e) else 0) + T * h * e.r + ids
    sums = 3 * T * 3 * h * a
    clone = _clone(d, cfg, {"q": h, "k": h, "v": h})
    value = fwd - gone - later + held + sums + clone
    mlp = sequential or d.L > 1
    n = len({"q", "k", "v"} & set(cfg.lora_targets))
    calc = (
        f"end of forward − {gone_words} {fmt_bytes(gone)} − the last block's tensors made "
        f"later ({later_words}"
        + (f", GELU's input s·b·f·{e.c}, the MLP norm's statistics" if mlp else "")
        + (f", the MLP norm's input s·b·h·{e.r}" if sequential else "")
        + (f", o's, up's and down's adapters' {fmt_bytes(adapters)}" if adapters else "")
        + f") {fmt_bytes(later)} + the attention norm's output, inputs_embeds and position ids "
        f"{fmt_bytes(held)} + the update, its scaled copy and the sum s·b·3·3h·{a} "
        f"{fmt_bytes(sums)}"
        + (f" + the update's contiguous copy s·b·{n}h·{a} {fmt_bytes(clone)}" if clone else "")
        + f" = {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


def _core_later(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, str]:
    """What the last block's attention makes after its q/k/v adapter and keeps: rotated q and k,
    SDPA's output and logsumexp; under ``selective`` the checkpointed call keeps its inputs alone
    (``selective.selective_neox``): rotated q and k (under autocast fp32), and the output
    where the output projection reads it uncopied (CUDA's fp32 kernel). (bytes, words)"""
    T, h = d.s * d.b, d.h
    if cfg.checkpointing != "selective":
        return T * 3 * h * e.c + d.a * T * 4, (
            f"rotated q and k and the attention's output s·b·3h·{e.c}, its logsumexp"
        )
    from profiling.estimate.selective import core_qk_bytes

    qk, out = core_qk_bytes(d, e), T * h * e.c if _cuda(cfg) and e.c == 4 else 0
    words = f"rotated q and k s·b·2h·{qk}"
    words += f", the attention's output s·b·h·{e.c}" if out else ""
    return T * 2 * h * qk + out, words


def _clone(d: Dims, cfg: TrainingConfig, widths: dict[str, int]) -> int:
    """Zero-padded (not all of q, k, v adapted), the update's (token-major) columns copied
    contiguous before ``index_copy`` when there is more than one sequence."""
    on = [w for t, w in widths.items() if t in cfg.lora_targets]
    return d.s * d.b * sum(on) * adapter_bytes(cfg) if len(on) < 3 and d.b > 1 else 0


def _falcon(d: Dims, cfg: TrainingConfig, fwd: float) -> tuple[str, float, str]:
    """Falcon's fused query_key_value (q + 2k wide: multi-query or grouped keys) at its
    adapter's sum. transformers' ``FalconAttention`` copies q, k, v apart (Falcon-40B's new
    decoder architecture broadcasting k and v to every head first, ``neox._attention``), so
    the fused output is not kept: the base's output is a transient beside the adapter's. Made
    later: those copies and the attention's output, the logsumexp, GELU's input and the later
    adapters' tensors (Falcon-40B's MLP norm runs before the attention, its output held:
    ``FalconDecoderLayer.forward``'s ``mlp_layernorm_out``, transformers 5.24)."""
    from profiling.estimate.neox import attention_widths
    from profiling.estimate.neox_moments import released

    e = Bytes.of(cfg.precision)
    T, h, f, a = d.s * d.b, d.h, d.f, adapter_bytes(cfg)
    q, k = int(d.extra["neox"]["q_dim"]), d.k
    width, lse = attention_widths(d, e, cfg)
    gone, gone_words = released(d, e, cfg)
    gone += head_adapter(d, e, cfg)
    two = d.extra["neox"]["residual"] == "parallel"  # Falcon-40B's two norms
    later = T * width * e.c + lse + _later_adapters(d, cfg)
    later += T * f * e.c if d.L > 1 else 0  # GELU's input (a lone first block's keeps none)
    norms = (T * h * e.c if own_copies(cfg, e) else 0) + (T * h * e.c if two else 0)
    held = norms + T * h * e.r + d.s * 8
    W = q + 2 * k
    sums = T * W * e.c + 3 * T * W * a + _clone(d, cfg, {"q": q, "k": k, "v": k})
    value = fwd - gone - later + held + sums
    calc = (
        f"end of forward − {gone_words} {fmt_bytes(gone)} − the last block's tensors made later "
        f"(the attention's q, k, v copies and output s·b·{width}·{e.c}, its logsumexp, GELU's "
        f"input, the later adapters') {fmt_bytes(later)} + the norms' outputs, inputs_embeds and "
        f"position ids {fmt_bytes(held)} + the base's output s·b·(q + 2k)·{e.c}, the update, its "
        f"scaled copy and the sum s·b·3·(q + 2k)·{a} (and the update's contiguous copy) "
        f"{fmt_bytes(sums)} = {fmt_bytes(value)}"
    )
    return NAME, value, calc


__all__ = ["NAME", "moments"]
