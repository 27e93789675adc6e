"""Activations of GPT-NeoX's kind of decoder (arch ``neox``: GPT-NeoX/Pythia/StableLM-alpha,
Phi-1/2, Falcon) as our blocks run it (``profiling.models.neox_blocks``), op by op, in bytes.

Derived, like ``activations`` and ``variants``, from what the trace shows autograd saving, on
either target. Per layer, with T = s·b tokens, q the query width, k the key/value width, f the
MLP's:

- LayerNorms: each keeps its input (the residual stream's dtype) and a mean and rstd per row
  (fp32 on CUDA, 8 B; the residual dtype on the CPU). Attention and MLP in parallel read the
  same block input, kept once: GPT-NeoX's two norms keep one input and two pairs of statistics,
  Phi's and Falcon-7B's one norm one of each; one after the other (sequential), two inputs.
- matmul inputs: the norm outputs (one per norm; under autocast, one copy per matmul that reads
  them: q/k/v fused or three, and the MLP's first)
- attention: the rotated q and k (a partial rotary concatenates the rotated and passing dims: a
  new tensor either way), v, the output and the logsumexp. A fused q/k/v projection's v is a
  view of its output, which SDPA's saved v keeps whole: T·(q + 2k) more instead of v. On CUDA
  in fp32 (the memory-efficient kernel) grouped or multi-query keys and values are expanded to
  every head first: each q wide, and the fused output is no longer kept.
- MLP: the first matmul's output (GELU's input) and GELU's output, T·2f·c

Once per model: the final LayerNorm and the cos/sin tables of the rotating dims (2·s·r). No
torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import (
    CAUSAL_MASK,
    Bytes,
    Dims,
    Term,
    _cuda,
    _lse,
    attention_extras,
)

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def _norms(d: Dims, e: Bytes, cfg: TrainingConfig) -> Term:
    residual = str(d.extra["neox"]["residual"])
    n = 1 if residual == "parallel_one_norm" else 2
    inputs = 2 if residual == "sequential" else 1
    T, h, tok = d.s * d.b, d.h, f"{d.s}·{d.b}"
    stats, what = (8, "fp32 mean and rstd") if _cuda(cfg) else (2 * e.r, "mean and rstd")
    shared = " (one input, shared)" if inputs < n else ""
    return Term(
        f"norms (LayerNorm ×{n}: input{shared}, {what})",
        T * (inputs * h * e.r + n * stats),
        f"s·b·({inputs}·h·{e.r} + {n}·{stats}) B",
        f"{tok}·({inputs}·{h}·{e.r} + {n}·{stats})",
    )


def _matmul_inputs(d: Dims, e: Bytes) -> Term:
    x = d.extra["neox"]
    if e.amp:
        copies = (1 if x["fused_qkv"] else 3) + 1
        how = ", one copy per matmul"
    else:
        copies = 1 if x["residual"] == "parallel_one_norm" else 2
        how = ""
    T, tok = d.s * d.b, f"{d.s}·{d.b}"
    return Term(
        f"matmul inputs (LayerNorm outputs{how})",
        T * copies * d.h * e.c,
        f"s·b·{copies}h·{e.c} B",
        f"{tok}·{copies}·{d.h}·{e.c}",
    )


def attention_widths(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, int]:
    """One block's attention's kept tensors as ``_attention`` counts them: their width per
    token (elements) and the logsumexp's bytes."""
    width, _, _, _, lse, _ = _widths(d, e, cfg)
    return width, lse


def _attention(d: Dims, e: Bytes, cfg: TrainingConfig) -> Term:
    width, formula, sub, what, lse, lse_sub = _widths(d, e, cfg)
    T, tok, c = d.s * d.b, f"{d.s}·{d.b}", e.c
    return Term(
        f"attention ({what}, logsumexp)",
        T * width * c + lse,
        f"s·b·({formula})·{c} + 4·a·b·s B",
        f"{tok}·({sub})·{c} + {lse_sub}",
    )


def _core(d: Dims, e: Bytes, cfg: TrainingConfig) -> Term:
    """The attention's kept tensors; under ``selective`` transformers' GPT-NeoX and Phi run
    their SDPA call checkpointed (``profiling.trace.selective``), keeping its inputs alone."""
    if cfg.checkpointing == "selective" and d.extra.get("hf_module") in ("gpt_neox", "phi"):
        from profiling.estimate.selective import selective_neox

        x = d.extra["neox"]
        output = _cuda(cfg) and e.c == 4  # no copy of it below: the projection's input
        return Term(*selective_neox(d, e, int(x["q_dim"]), bool(x["fused_qkv"]), output))
    return _attention(d, e, cfg)


def _widths(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, str, str, str, int, str]:
    """(width, its formula, its numbers, what is kept, the logsumexp's bytes, its numbers)."""
    x = d.extra["neox"]
    q, k, c = int(x["q_dim"]), d.k, e.c
    lse, lse_sub = _lse(d, e, cfg)
    falcon = d.extra.get("hf_module") == "falcon"  # transformers' copies q, k, v apart
    if falcon and _cuda(cfg):
        # its explicit mask rules the flash kernel out in 16 bits too: the memory-efficient
        # kernel's logsumexp is b·a·⌈s/32⌉·32 (torch 2.13 _meta_registrations.py
        # meta__scaled_dot_product_efficient_attention; 896 B under the trace at s 100, b 1)
        padded = -(-d.s // 32) * 32
        lse, lse_sub = 4 * d.a * d.b * padded, f"4·{d.a}·{d.b}·{padded}"
    # Falcon's new decoder architecture (its two norms) broadcasts k, v to every head first
    broadcast = falcon and x["residual"] == "parallel"
    if broadcast or (
        k != q and not falcon and ((_cuda(cfg) and c == 4) or cfg.attention == "eager")
    ):
        width, formula, sub = 4 * q, "4q", f"4·{q}"
        what = "q, keys and values expanded to every head, output"
    elif x["fused_qkv"] and not falcon:
        width, formula, sub = 3 * q + 3 * k, "(q + 2k) + 2q + k", f"({q} + 2·{k}) + 2·{q} + {k}"
        what = "the fused q/k/v output v is a view of, rotated q and k, output"
    else:
        width, formula, sub = 2 * q + 2 * k, "2q + 2k", f"2·{q} + 2·{k}"
        what = "rotated q and k, v, output"
    return width, formula, sub, what, lse, lse_sub


def _eager(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """``--attention eager``: transformers' modules as ``hf_ops`` counts its eager attention;
    our blocks' matmuls copy q, k and v (the rotated heads are not contiguous; grouped ones are
    repeated first) and keep the causal mask, the output projection a copy of the output."""
    q, k, T, tok = int(d.extra["neox"]["q_dim"]), d.k, d.s * d.b, f"{d.s}·{d.b}"
    extras = dropout_masks(d, attention_extras(d, e, cfg))
    if d.extra.get("hf_module"):
        from profiling.estimate.hf_ops import _attention as hf_attention

        probs = "eager attention probabilities"
        terms = hf_attention(d, e, cfg, q)
        if d.extra["hf_module"] == "falcon" and not e.amp and e.c == 2:
            # Falcon's softmax runs in the hidden states' dtype: 16-bit, no fp32 copy
            n = d.a * d.s * T
            terms = [t for t in terms if not t.name.startswith(probs)] + [
                Term(
                    f"{probs} (a·s²·b, Falcon's softmax in 16 bits)",
                    n * 2,
                    "a·s²·b·2 B",
                    f"{d.a}·{d.s}²·{d.b}·2",
                )
            ]
        return (
            terms
            + _fused_value_view(d, e, cfg)
            + [t for t in extras if not t.name.startswith(probs)]
        )
    width, formula = (4 * q, f"4·{q}") if k != q else (2 * q + 2 * k, f"2·{q} + 2·{k}")
    kept = Term(
        "attention, eager (the matmuls' copies of q, k, v; the output's copy)",
        T * width * e.c,
        f"s·b·{'4q' if k != q else '(2q + 2k)'}·{e.c} B",
        f"{tok}·({formula})·{e.c}",
    )
    mask = Term(CAUSAL_MASK, d.s * d.s, "s²·1 B", f"{d.s}²")
    return [kept, mask, *extras]


def _fused_value_view(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """transformers' GPT-NeoX eager attention on one sequence keeps the whole fused q/k/v
    output: ``eager_attention_forward``'s ``torch.matmul(attn_weights, value)`` reshapes the
    4-D ``value`` (a ``chunk`` of ``qkv.view(...).transpose(1, 2)``) to ``b·a × s × d`` for
    ``bmm`` (ATen LinearAlgebra.cpp ``_matmul_impl``: ``expand`` then ``reshape``). With b = 1
    that reshape is a view, so ``bmm`` saves the fused output's storage (q + 2k wide) where
    ``hf_ops`` counts a v-wide copy: s·b·2q more (transformers 5.24.0 modeling_gpt_neox.py,
    ``GPTNeoXAttention.forward``; b > 1 copies v and keeps k wide, as counted). Under autocast
    a QLoRA base's output is fp32 (bitsandbytes nn/modules.py ``Linear4bit.forward`` returns
    its input's dtype, the LayerNorm's fp32): ``matmul`` reads autocast's 16-bit copy of v."""
    if d.extra.get("hf_module") != "gpt_neox" or d.b != 1 or (e.amp and cfg.qlora):
        return []
    q, T = int(d.extra["neox"]["q_dim"]), d.s * d.b
    return [
        Term(
            "eager attention: the fused q/k/v output v's view keeps (one sequence: q + k more)",
            T * (q + d.k) * e.c,
            f"s·b·(q + k)·{e.c} B",
            f"{d.s}·{d.b}·({q} + {d.k})·{e.c}",
        )
    ]


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """One block's saved activations (tensor-parallel split: TP=1)."""
    T, tok, f = d.s * d.b, f"{d.s}·{d.b}", d.f
    mlp = Term(
        "the MLP (first matmul's output, GELU's output)",
        T * 2 * f * e.c,
        f"s·b·2f·{e.c} B",
        f"{tok}·2·{f}·{e.c}",
    )
    module = d.extra.get("hf_module")
    if module == "bloom":  # its own attention (ALiBi, always eager) and GELU
        from profiling.estimate import bloom

        return bloom.per_layer(d, e, cfg)
    if module == "phi":  # gelu_new as eager ops (hf_ops: five f-wide tensors, or CUDA's fp32)
        from profiling.estimate.hf_ops import _gelu_new

        mlp = _gelu_new(d, e, cfg)
    if cfg.attention == "eager":
        return [_norms(d, e, cfg), _matmul_inputs(d, e), *_eager(d, e, cfg), mlp]
    terms = [_norms(d, e, cfg), _matmul_inputs(d, e), _core(d, e, cfg), mlp]
    litgpt = bool(d.extra["neox"].get("litgpt"))  # LitGPT's Phi: rotated head-major too
    if (module in ("gpt_neox", "phi") or litgpt) and not (_cuda(cfg) and e.c == 4):
        # transformers rotates after the transpose and concatenates: q is laid out head-major,
        # so is SDPA's output (a flash kernel's follows q's), and the output projection's
        # input is a copy of it (CUDA's fp32 kernel writes token-major whatever q's layout)
        terms.append(
            Term(
                "attention output's copy (transformers' rotated q is head-major)",
                T * int(d.extra["neox"]["q_dim"]) * e.c,
                f"s·b·q·{e.c} B",
                f"{tok}·{d.extra['neox']['q_dim']}·{e.c}",
            )
        )
    return terms + dropout_masks(d, attention_extras(d, e, cfg))


MASKS = "dropout masks (after attention and MLP)"  # activations.attention_extras' line


def dropout_masks(d: Dims, terms: list[Term]) -> list[Term]:
    """Falcon's parallel attention (Falcon-7B's, the new decoder architecture's) adds the MLP's
    output to the attention's before its one ``dropout_add`` (transformers 5.24.0
    ``FalconDecoderLayer.forward``: ``mlp_output += attention_output``, then
    ``dropout_add(mlp_output, residual, hidden_dropout)``): one mask a block, not two."""
    falcon = d.extra.get("hf_module") == "falcon"
    if not falcon or d.extra["neox"]["residual"] == "sequential":
        return terms
    out = []
    for t in terms:
        if t.name == MASKS:
            mask = int(t.bytes) // (d.s * d.b * 2 * d.h)  # per element: 1 on CUDA, else e.c
            t = Term(
                "dropout mask (after the attention and MLP's sum)",
                d.s * d.b * d.h * mask,
                f"s·b·h·{mask} B",
                f"{d.s}·{d.b}·{d.h}·{mask}",
            )
        out.append(t)
    return out


def once_per_model(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """transformers' Falcon always builds its causal mask (``allow_is_causal_skip=False``):
    one boolean s² tensor (expanded over the batch) every layer's SDPA keeps; BLOOM's
    embeddings' LayerNorm."""
    if d.extra.get("hf_module") == "bloom":
        from profiling.estimate import bloom

        return bloom.once_per_model(d, e, cfg)
    if d.extra.get("hf_module") != "falcon":
        return []
    from profiling.estimate.hf_ops import eager

    if eager(d, cfg):  # eager_mask turns it into a float one at once: the boolean is freed
        return []
    # transformers' sdpa_mask (src/transformers/masking_utils.py @ 00c4411c; 5.24.0 the same)
    # builds it by broadcasting the mask function over the batch's arange and expand()s it to
    # b rows: one s² storage without a padding mask (the trace: s² bytes at b = 2)
    return [Term("Falcon's causal mask (bool)", d.s * d.s, "s²·1 B", f"{d.s}²")]


__all__ = ["once_per_model", "per_layer"]
