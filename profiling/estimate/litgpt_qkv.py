"""LitGPT's own attention in closed form (``WorkloadConfig.litgpt_qkv``: a Llama, Mistral, Qwen2,
Phi-3 or Gemma shape under LitGPT's finetune scripts), matching the trace of
``profiling.models.litgpt_attention`` and, under LoRA, of LitGPT's ``LoRAQKVLinear`` on the fused
q/k/v (``profiling.trace.lora_neox``). What changes against transformers' attention, per block
(T = s·b tokens, q the query width, k one of the key/value widths):

- SDPA keeps q and the keys rotated after their expansion to every head (q wide each) and v as
  LitGPT's reshape gives it: a view of the whole fused output (q + 2k) with one group of keys or
  one query a group, else a copy expanded to every head (q); transformers keeps q, k, v at their
  own widths;
- the output projection reads a copy (SDPA's output is head-major after the ``torch.cat``s): kept
  while that layer keeps its input (trained, 4-bit keeping inputs, or an adapter keeping that
  very tensor);
- the RoPE tables are LitGPT's fp32 ones;
- LoRA: one adapter on the fused q/k/v (one input, one dropout: not one per q, k, v), and with a
  slice disabled LitGPT's ``zero_pad``, whose ``index_copy`` keeps its source (the B output of
  the enabled slices) and the int64 index.

No torch here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term, _cuda
from profiling.estimate.lora_bytes import adapter_compute, mask_bytes, own_copies

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def applies(d: Dims, cfg: TrainingConfig, eager: Callable[[Dims, TrainingConfig], bool]) -> bool:
    """Whether the blocks run LitGPT's attention (``eager``: ``hf_ops.eager``, whether
    transformers' eager attention was asked for, which LitGPT's module never runs). Gemma 2's
    soft-capped scores take LitGPT's explicit path (``capped``), which transformers builds
    eager only."""
    return bool(d.extra.get("litgpt_qkv")) and (capped(d) or not eager(d, cfg))


def capped(d: Dims) -> bool:
    """LitGPT's explicit soft-capped attention (Gemma 2; litgpt/model.py at 00af8b0,
    ``scaled_dot_product_attention``: ``q @ k.mT * scale``, ``tanh``, the mask added, an fp32
    ``softmax`` cast back, ``@ v``): it keeps q and the keys expanded to every head, the tanh
    output, the fp32 softmax and its 16-bit copy, v (a copy under grouped heads) and the
    output's copy — transformers' eager attention's bytes (``hf_ops``: 4q a token, a·s²·b·8),
    so only the LoRA terms and the RoPE tables change."""
    return bool(d.extra.get("litgpt_qkv")) and bool(d.extra.get("attn_softcap"))


def _v_kept(d: Dims, q: int) -> int:
    """v's width as SDPA keeps it: the fused output where LitGPT's reshape views it."""
    groups, heads = d.k // d.hd, q // d.hd
    return q + 2 * d.k if groups in (1, heads) else q


def attention(d: Dims, e: Bytes, cfg: TrainingConfig, q: int) -> Term:
    """Full training's attention under LitGPT's module, against transformers' count
    (``hf_ops._attention``: q, k, v, the output)."""
    kv = q if _cuda(cfg) and e.c == 4 else d.k  # as hf_ops counts it
    extra = (3 * q + _v_kept(d, q)) - (q + 2 * kv)  # q and k expanded, v, the output's copy
    T, tok = d.s * d.b, f"{d.s}·{d.b}"
    v = "the fused output (v a view of it)" if _v_kept(d, q) > q else "v expanded to every head"
    return Term(
        f"attention: LitGPT's (keys expanded and rotated, {v}, the output's copy)",
        T * extra * e.c,
        f"s·b·{extra}·{e.c} B",
        f"{tok}·{extra}·{e.c}",
    )


def tables(d: Dims, e: Bytes, cfg: TrainingConfig) -> Term:
    """LitGPT's fp32 RoPE tables where transformers' are in ``e.rope`` bytes (the final norm's
    line counts those). ``litgpt_attention._fp32`` copies (``copy=True``) transformers' cos/sin
    keyed weakly on them, and rope's products save the copies: without checkpointing
    transformers' die as the model's forward returns and the copies alone stay (4 B a value in
    all); under full checkpointing every checkpoint keeps transformers' as a block argument
    (torch/utils/checkpoint.py), and with them the copies: both (``e.rope`` + 4)."""
    if cfg.checkpointing == "full":
        return Term(
            "RoPE cos/sin: LitGPT's fp32 tables, beside transformers' the checkpoints keep",
            2 * d.s * d.hd * 4,
            "2·s·(h/a)·4 B",
            f"2·{d.s}·{d.hd}·4",
        )
    return Term(
        "RoPE cos/sin: LitGPT's fp32 tables",
        2 * d.s * d.hd * (4 - e.rope),
        f"2·s·(h/a)·(4 − {e.rope}) B",
        f"2·{d.s}·{d.hd}·(4 − {e.rope})",
    )


def _slices(cfg: TrainingConfig) -> list[str]:
    return [t for t in ("q", "k", "v") if t in cfg.lora_targets]


def lora_per_layer(d: Dims, e: Bytes, cfg: TrainingConfig, q: int) -> list[Term]:
    """What LoRA under LitGPT's module changes against ``estimate.lora``'s count of adapters on
    q, k, v apart (a block's)."""
    T, tok, h = d.s * d.b, f"{d.s}·{d.b}", d.h
    terms: list[Term] = []
    slices, own, ac = _slices(cfg), own_copies(cfg, e), adapter_compute(cfg, e)
    n = len(slices)
    if n > 1:  # one input, one dropout for the fused q/k/v
        per = (ac if own else 0) + (mask_bytes(cfg) if cfg.lora_dropout else 0)
        if per:
            terms.append(Term(f"LitGPT's fused q/k/v: one adapter input for {', '.join(slices)}",
                              -T * (n - 1) * h * per, f"−s·b·{n - 1}h·{per} B",
                              f"−{tok}·{n - 1}·{h}·{per}"))  # fmt: skip
    if 0 < n < 3:
        w = sum(q if t == "q" else d.k for t in slices)
        terms.append(Term(f"LitGPT's zero_pad ({', '.join(slices)} of q/k/v: the update's "
                          "copy, the index)", T * w * ac + w * 8, f"s·b·{w}·{ac} + {w}·8 B",
                          f"{tok}·{w}·{ac} + {w}·8"))  # fmt: skip
    keeps = cfg.qlora and cfg.bnb_keeps_inputs  # bitsandbytes keeps every input
    if not keeps and not ("o" in cfg.lora_targets and not own):
        terms.append(Term("LitGPT's attention output copy not kept (its projection frozen)",
                          -T * q * e.c, f"−s·b·q·{e.c} B", f"−{tok}·{q}·{e.c}"))  # fmt: skip
    return terms


def lora_first_block(d: Dims, cfg: TrainingConfig) -> list[Term]:
    """The first block's fused q/k/v dropout keeps no mask (no gradient reaches its input):
    one, where ``estimate.lora`` takes one per q, k, v adapter off."""
    n = len(_slices(cfg))
    if n < 2 or not cfg.lora_dropout:
        return []
    T, tok, m = d.s * d.b, f"{d.s}·{d.b}", mask_bytes(cfg)
    return [Term("first block: LitGPT's fused q/k/v has one dropout mask",
                 T * (n - 1) * d.h * m, f"s·b·{n - 1}h·{m} B",
                 f"{tok}·{n - 1}·{d.h}·{m}")]  # fmt: skip


__all__ = ["applies", "attention", "capped", "lora_first_block", "lora_per_layer", "tables"]
