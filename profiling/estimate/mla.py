"""Activations of DeepSeek-V2's blocks (``profiling.models.mla``): multi-head latent attention,
shared experts, dense first layers — what our blocks keep for backward, in bytes.

Per block, with T = s·b tokens, H heads, a query/key head of n + p (without position, rotary),
v the value head, r the key/value latent, f_s the shared experts' width (shared · expert):

- the block's two norms, as the Llama family's, and the latent's RMSNorm: on CUDA its input
  (a view of the kv_a output, whose storage of T·(r + p) is kept) and an fp32 rstd; under
  autocast CUDA casts the norm's input to fp32 first (``profiling/trace/cuda_autocast.py``), so
  the fp32 copy T·r·4 is kept instead (the query latent's too)
- matmul inputs: the first norm's output for q_proj and kv_a (under autocast one copy each),
  the latent norm's output for kv_b, the second norm's output for the router and the shared
  experts' gate and up (under autocast one copy each)
- attention: the query and key after RoPE and concatenation T·H·(n + p) each, the kv_b output
  (the values are a view of it) T·H·(n + v), the output T·H·v, and the memory-efficient
  kernel's fp32 logsumexp, padded to 32 queries (CUDA's flash kernel needs one head size for
  q/k and v; 192 and 128 here)
- the routed experts as the mixture of experts has them, and the shared experts' gated MLP
  T·4·f_s
- the first dense layers: a dense gated MLP of ffn instead of the experts (a correction once
  per model)

On the CPU target SDPA with two head sizes falls back to its math path (s² probabilities kept),
which this does not model: the note says so. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term, _cuda
from profiling.estimate.variants import _experts, _norms

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def _dims(d: Dims) -> dict[str, int]:
    return {k: int(v or 0) for k, v in d.extra["mla"].items()}


def _moe_mlp(d: Dims, e: Bytes) -> list[Term]:
    m = _dims(d)
    T, fs = d.s * d.b, int(d.extra["expert_ffn"]) * m["shared"]
    terms = _experts(d, e)
    if fs:
        name = "shared experts (gated MLP: gate, activation, up, product)"
        numbers = f"{d.s}·{d.b}·4·{fs}·{e.c}"
        terms.append(Term(name, T * 4 * fs * e.c, f"s·b·4·{fs}·{e.c} B", numbers))
    return terms


def _mlp_inputs(d: Dims, e: Bytes, dense: bool) -> int:
    """Copies of the second norm's output the MLP keeps: one without autocast; under it one
    per matmul (gate and up; or the router and the shared experts' gate and up)."""
    if not e.amp:
        return 1
    return 2 if dense else 1 + (2 if _dims(d)["shared"] else 0)


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    m = _dims(d)
    T, tok, H, h = d.s * d.b, f"{d.s}·{d.b}", d.a, d.h
    qk, r, p, ql = m["nope"] + m["rope"], m["rank"], m["rope"], m["q_rank"]
    terms = [_norms(d, e, cfg, 2)]
    if _cuda(cfg) and e.amp:  # CUDA's autocast casts rms_norm's input: the fp32 copy is kept
        latent = T * (r * 4 + 4) + (T * (ql * 4 + 4) if ql else 0)
        how = "fused, under autocast: the fp32 copy of its input, fp32 rstd"
        formula, numbers = "s·b·(4r + 4) B", f"{tok}·(4·{r} + 4)"
    elif _cuda(cfg):
        latent = T * ((r + p) * e.c + 4) + (T * (ql * e.c + 4) if ql else 0)
        how = "fused: the kv_a output it views, fp32 rstd"
        formula, numbers = "s·b·((r + p)·c + 4) B", f"{tok}·(({r} + {p})·{e.c} + 4)"
    else:
        latent = T * (2 * r + 1) * 4 + (T * (2 * ql + 1) * 4 if ql else 0)
        how = "fp32: input, normalized, rstd"
        formula, numbers = "s·b·(2r + 1)·4 B", f"{tok}·(2·{r} + 1)·4"
    if ql:
        formula, numbers = formula + " + the query latent's", numbers + f" + {ql}-wide"
    terms.append(Term(f"latent norm{'s' if ql else ''} ({how})", latent, formula, numbers))
    attn_copies = 2 if e.amp else 1  # q_proj (or q_a) and kv_a share the first norm's output
    mlp_copies = _mlp_inputs(d, e, dense=False)
    width = (attn_copies + mlp_copies) * h + r + ql
    terms.append(Term(
        "matmul inputs (norm outputs for q/kv_a and the MLP, the latents for kv_b"
        + (" and q_b" if ql else "") + ")",
        T * width * e.c,
        f"s·b·(({attn_copies} + {mlp_copies})·h + r{' + q_r' if ql else ''})·{e.c} B",
        f"{tok}·({attn_copies + mlp_copies}·{h} + {r}{f' + {ql}' if ql else ''})·{e.c}",
    ))  # fmt: skip
    padded = -(-d.s // 32) * 32 if _cuda(cfg) else d.s
    lse = 4 * H * d.b * padded
    n, v = m["nope"], m["v"]
    terms.append(Term(
        "latent attention (q, k after RoPE, kv_b output holding v, output, logsumexp)",
        T * H * (2 * qk + n + 2 * v) * e.c + lse,
        f"s·b·H·(2(n + p) + n + 2v)·{e.c} + 4·H·b·s B",
        f"{tok}·{H}·(2·{qk} + {n} + 2·{v})·{e.c} + 4·{H}·{d.b}·{padded}",
    ))  # fmt: skip
    return terms + _moe_mlp(d, e)


def once_per_model(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """The dense first layers' MLP in place of the experts; RoPE's tables of the rotary part."""
    m = _dims(d)
    T = d.s * d.b
    terms = []
    if m["dense"]:
        moe = sum(t.bytes for t in _moe_mlp(d, e)) + _mlp_inputs(d, e, False) * T * d.h * e.c
        dense = T * 4 * d.f * e.c + _mlp_inputs(d, e, True) * T * d.h * e.c
        terms.append(Term(
            f"first {m['dense']} dense layer(s): a gated MLP of {d.f} instead of the experts",
            m["dense"] * (dense - moe),
            "dense layers · (dense MLP − experts) B",
            f"{m['dense']} · ({dense} − {round(moe)})",
        ))  # fmt: skip
    # The once-per-model RoPE tables counted the value head; the rotary part is p wide.
    extra = 2 * d.s * (m["rope"] - d.hd) * e.rope
    if extra:
        numbers = f"2·{d.s}·({m['rope']} − {d.hd})·{e.rope}"
        name = "RoPE cos/sin: the rotary part's width, not the value head's"
        terms.append(Term(name, extra, "2·s·(p − v)·rope B", numbers))
    return terms


__all__ = ["once_per_model", "per_layer"]
