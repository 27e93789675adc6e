"""Activations of the Llama family's variations (Hugging Face configs), op by op, in bytes.

Derived, like ``activations``, from what the trace shows autograd saving in our own blocks
(``profiling.models.hf_blocks``), on either target (``--target cuda``: what CUDA's kernels keep,
``profiling.trace.target``; ``cpu``: the CPU's). Per layer, with T = s·b tokens, q the query
width (heads × head size, which Qwen3 and Gemma 2 set apart from h), k the key/value width:

- norms: 2 RMSNorms (Llama pre-norm, OLMo 2 post-norm) or 4 (Gemma 2 on both sides); on the
  CPU each keeps its fp32 input, normalized output and rstd, T·(2h + 1)·4 B; CUDA's fused kernel
  its input (the residual stream's dtype, or the sublayer output's for a norm after a sublayer;
  fp32 under autocast, which casts ``rms_norm``'s input to fp32 on CUDA) and an fp32 rstd
- q/k norms: per head (Qwen3: one rstd per head) or over the whole projection (OLMo 2, OLMoE):
  T·(2q + 2k + rows)·4 B
- matmul inputs: the norm outputs (under autocast, one copy per q, k, v, gate, up — and router)
- attention: q, k, v after RoPE, the output, logsumexp: T·((2q + 2k)·c + 4a) B
- MLP: SwiGLU or GeGLU, both four f-wide tensors (gate, activation, up, product): T·4f·c B
- mixture of experts, P = E·⌈k·T/E⌉ routed slots (balanced routing, capacity factor 1): the
  router's fp32 probabilities T·E·4, the top-k weights and their sum, three index tensors of the
  k·T choices (8 B each), the routed tokens (one copy, or one per expert matmul under autocast),
  the experts' gated MLP P·4f·c, their outputs and the weighted outputs 2·k·T·h·c (the
  combining ``index_add`` keeps its source) and the per-slot weights k·T·c

Once per model: Gemma 2's soft-capped logits keep tanh's output (T·V·c); a sliding window
shorter than the sequence: SDPA keeps, in each windowed layer, the boolean mask turned into an
additive s×s one in the activations' dtype (a CUDA flash kernel with a window keeps none).
Under autocast the weighted expert outputs are fp32 (the slot weights are). No torch here.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term, _cuda, blocks_eager_mask, blocks_lse

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """One variant block's saved activations (tensor-parallel split: TP=1)."""
    x = d.extra
    T, h, k, _a = d.s * d.b, d.h, d.k, d.a
    q = int(x.get("q_dim") or h)
    tok = f"{d.s}·{d.b}"
    n = 4 if x.get("norms") == "sandwich" else 2
    terms = [_norms(d, e, cfg, n)]
    qk = x.get("qk_norm")
    if qk:
        terms.append(_qk_norms(d, e, cfg, q, qk))
    moe = bool(x.get("experts"))
    # Under autocast each matmul casts its own copy: q, k, v and gate, up (or the router).
    copies = (4 if moe else 5) if e.amp else 2
    terms.append(
        Term(
            "matmul inputs (norm outputs" + (", one copy per matmul)" if e.amp else ")"),
            T * copies * h * e.c,
            f"s·b·{copies}h·{e.c} B",
            f"{tok}·{copies}·{h}·{e.c}",
        )
    )
    lse, lse_name, lse_f, lse_sub = blocks_lse(d, e, cfg)
    # CUDA's fp32 attention (memory-efficient) gets grouped-query keys/values expanded;
    # eager attention expands them too (repeat_interleave), and its matmuls keep them.
    kv = q if (_cuda(cfg) and e.c == 4) or cfg.attention == "eager" else k
    terms.append(
        Term(
            f"attention (q, k, v after RoPE, output{lse_name})",
            T * (2 * q + 2 * kv) * e.c + lse,
            f"s·b·(2q + 2k)·{e.c}{lse_f} B",
            f"{tok}·(2·{q} + 2·{kv})·{e.c}{lse_sub}",
        )
    )
    terms += blocks_eager_mask(d, cfg)
    if moe:
        terms += _experts(d, e)
    else:
        terms.append(gated_mlp(d, e))
    return terms


def gated_mlp(d: Dims, e: Bytes) -> Term:
    """A gated MLP's saved tensors (SwiGLU, or GeGLU as Gemma has it): gate, activation, up and
    their product, each s·b·f elements; the same in our blocks and in transformers' modules."""
    name = "GeGLU" if d.extra.get("mlp") == "geglu" else "SwiGLU"
    return Term(
        f"MLP ({name}: gate, activation, up, product)",
        d.s * d.b * 4 * d.f * e.c,
        f"s·b·4f·{e.c} B",
        f"{d.s}·{d.b}·4·{d.f}·{e.c}",
    )


def _norms(d: Dims, e: Bytes, cfg: TrainingConfig, n: int) -> Term:
    h, tok = d.h, f"{d.s}·{d.b}"
    if _cuda(cfg):
        # Norms of the residual stream keep it (residual dtype); norms after a sublayer (OLMo 2,
        # Gemma 2) keep the sublayer's output (compute dtype; fp32 under autocast, which runs
        # rms_norm in fp32 on CUDA).
        post = {"post": 2, "sandwich": 2}.get(str(d.extra.get("norms")), 0)
        pre, pc = n - post, _fp32_under_amp(e)
        return Term(
            f"norms (RMSNorm ×{n}, fused: input, fp32 rstd)",
            d.s * d.b * (pre * h * e.r + post * h * pc + 4 * n),
            f"s·b·({pre}·h·{e.r} + {post}·h·{pc} + 4·{n}) B",
            f"{tok}·({pre}·{h}·{e.r} + {post}·{h}·{pc} + 4·{n})",
        )
    return Term(
        f"norms (RMSNorm ×{n} in fp32: input, normalized, rstd)",
        d.s * d.b * n * (2 * h + 1) * 4,
        f"s·b·{n}·(2h + 1)·4 B",
        f"{tok}·{n}·(2·{h} + 1)·4",
    )


def _fp32_under_amp(e: Bytes) -> int:
    """Bytes per element of a compute-dtype input that CUDA's autocast casts to fp32 (rms_norm)."""
    return 4 if e.amp else e.c


def _qk_norms(d: Dims, e: Bytes, cfg: TrainingConfig, q: int, qk: str) -> Term:
    """q and k normalized per head (rows: the heads) or over their whole width (one row)."""
    k, tok = d.k, f"{d.s}·{d.b}"
    rows = d.a + int(d.extra.get("kv_heads") or d.a) if qk == "head" else 2
    where = "per head" if qk == "head" else "whole width"
    if _cuda(cfg):  # fused: its input (the projection's output, fp32 under autocast), fp32 rstd
        c = _fp32_under_amp(e)
        return Term(
            f"q/k norms ({where}, fused: input, fp32 rstd)",
            d.s * d.b * ((q + k) * c + 4 * rows),
            f"s·b·((q + k)·{c} + 4·{rows}) B",
            f"{tok}·(({q} + {k})·{c} + 4·{rows})",
        )
    return Term(
        f"q/k norms ({where}, fp32)",
        d.s * d.b * (2 * q + 2 * k + rows) * 4,
        f"s·b·(2q + 2k + {rows})·4 B",
        f"{tok}·(2·{q} + 2·{k} + {rows})·4",
    )


def routed_slots(d: Dims) -> int:
    """P: the experts' slots under balanced routing, E·⌈capacity · k·T/E⌉."""
    x = d.extra
    E, K = int(x["experts"]), int(x["experts_per_token"])
    cf = float(x.get("capacity_factor") or 1.0)
    return E * math.ceil(d.s * d.b * K * cf / E)


def _experts(d: Dims, e: Bytes) -> list[Term]:
    x = d.extra
    T, h = d.s * d.b, d.h
    E, K, fe = int(x["experts"]), int(x["experts_per_token"]), int(x["expert_ffn"])
    P = routed_slots(d)
    routed = 2 if e.amp else 1
    return [
        Term(
            f"router (fp32 probabilities over {E} experts, top-{K} weights, choices)",
            T * (E * 4 + K * 4 + 4 + 3 * K * 8),
            "s·b·(4E + 4k + 4 + 3·8k) B",
            f"{d.s}·{d.b}·(4·{E} + 4·{K} + 4 + 24·{K})",
        ),
        Term(
            f"experts (balanced: P = E·⌈k·T/E⌉ = {P} slots; routed tokens, gated MLP)",
            P * (routed * h + 4 * fe) * e.c,
            f"P·({routed}h + 4f_e)·{e.c} B",
            f"{P}·({routed}·{h} + 4·{fe})·{e.c}",
        ),
        Term(
            "experts' outputs, weighted outputs (kept by the combining index_add), slot weights",
            T * K * (h * e.c + (h + 1) * e.r),
            f"s·b·k·(h·{e.c} + (h + 1)·{e.r}) B",
            f"{d.s}·{d.b}·{K}·({h}·{e.c} + ({h} + 1)·{e.r})",
        ),
    ]


def _window_cuda(d: Dims, e: Bytes, n: int, w: int) -> list[Term]:
    """A mask rules flash attention out on CUDA: the memory-efficient kernel keeps the boolean
    mask (once: every windowed layer gets the same one) and, in 16 bits, grouped-query keys and
    values expanded to every head (fp32 attention expands them anyway)."""
    terms = [Term(f"sliding-window mask (window {w} < seq {d.s})", d.s * d.s, "s²·1 B", f"{d.s}²")]
    q = int(d.extra.get("q_dim") or d.h)
    if e.c == 2 and q != d.k:
        terms.append(
            Term(
                f"windowed layers' keys/values expanded to every head ({n} layers)",
                n * d.s * d.b * 2 * (q - d.k) * e.c,
                f"layers with a window · s·b·2·(q − k)·{e.c} B",
                f"{n} · {d.s}·{d.b}·2·({q} − {d.k})·{e.c}",
            )
        )
    return terms


def once_per_model(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """Gemma 2's soft-capped logits; a sliding window's mask."""
    x = d.extra
    terms = []
    if x.get("logit_softcap") and d.V is not None:
        terms.append(
            Term(
                "Logits: soft-capping's tanh output (Gemma 2)",
                d.s * d.b * d.V * e.c,
                f"s·b·V·{e.c} B",
                f"{d.s}·{d.b}·{d.V}·{e.c}",
            )
        )
    w = x.get("sliding_window")
    # Eager attention keeps each windowed layer's negated mask (``blocks_eager_mask``), not SDPA's
    if w is not None and w < d.s and not blocks_eager_mask(d, cfg):
        n = d.L if x.get("sliding_layers") != "alternate" else (d.L + 1) // 2
        if _cuda(cfg):
            terms += _window_cuda(d, e, n, w)
            return terms
        # The CPU's SDPA turns the boolean mask into an additive one in the activations' dtype,
        # per call.
        terms.append(
            Term(
                f"sliding-window masks (window {w} < seq {d.s}; {n} windowed layers)",
                n * d.s * d.s * e.c,
                f"layers with a window · s²·{e.c} B",
                f"{n} · {d.s}²·{e.c}",
            )
        )
    return terms


__all__ = ["once_per_model", "per_layer", "routed_slots"]
