"""Activations of transformers' own modules (``--model hf:…`` traced as the real module), op by op.

Derived, like ``activations`` and ``variants``, from what the trace shows autograd saving — here
in transformers' ``…ForCausalLM`` classes (5.x) built from the config, on either target. Where
transformers writes an op as several eager ops, each keeps what its backward needs:

- RMSNorm, Llama's way (Llama, Mistral, Qwen2, Qwen3, Phi-3): the input cast to fp32, squared,
  averaged, ``rsqrt``, multiplied, cast back to the input's dtype, times the weight — it keeps
  the fp32 input (4 B/element), rstd (4 B/row) and the normalized values in the input's dtype
  (the weight's multiplication keeps them): ``(4 + in)·w + 4`` B per row. The same on both
  targets: it never calls ``rms_norm``, so CUDA's fused kernel does not apply.
- RMSNorm, OLMo 2's way (the weight multiplies the fp32 values) and Gemma's (``1 + weight`` in
  fp32): ``8·w + 4`` B per row; Gemma's also keeps ``1 + weight`` (4 B per element of the
  weight, per call).
- q/k norms: Qwen3 per head (Llama's way over the head size: its input is the projection's
  output, in the compute dtype; one rstd per head), OLMo 2 over the whole projection.
- GPT-2's ``gelu_new``, ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``: ``pow`` keeps its input,
  ``tanh`` its output, the last product both factors — with the MLP's second matmul input,
  five f-wide tensors where a fused GELU keeps two: 5·c B per f-wide element (10 B under
  autocast on the CPU). Under autocast on CUDA ``pow`` is on the fp32 list
  (``profiling/trace/cuda_autocast.py``): it keeps an fp32 copy of the fc output (4 B), its
  output and everything after it is fp32 — ``tanh``'s output (4 B), ``1 + tanh`` (4 B) — except
  ``0.5·x`` (x's dtype, c B), and the product, fp32, is cast to c bytes for the second matmul
  (c B): 4 + 4 + c + 4 + c = 16 B per element in bf16/fp16, where the fc output itself (c B)
  is no longer kept. The trace's tests pin it (``tests/profiling/trace/test_cuda_autocast.py``).
- Phi-3 fuses q, k, v into one projection and gate, up into another: under autocast two
  matmul-input copies per block (not five); the value heads SDPA keeps are a view of the fused
  q/k/v output, which therefore stays alive whole, and the attention output's contiguous copy
  (the output projection's input) is a tensor of its own: ``T·(2q + k)·c`` B more per block.
- Eager attention (Gemma 2, whose class refuses SDPA; any model with ``--attention eager``):
  ``q`` and the keys and values repeated to every head (``repeat_kv``), the softmax's fp32
  output and its copy in the compute dtype, the output: ``T·4q·c + a·s²·b·(4 + c)`` B (fp32:
  one s² tensor); Gemma 2's soft-capped scores keep ``tanh``'s output too (``a·s²·b·c``).
- A sliding window shorter than the sequence: transformers builds a mask, so SDPA runs without
  grouped-query heads (``repeat_kv`` expands keys and values: ``2·(q − k)`` more per token); on
  the CPU each windowed layer keeps the mask as an additive ``b·s²`` tensor in the compute
  dtype, on CUDA the memory-efficient kernel keeps the boolean mask once.
- ``--dropout``: GPT-2's and Phi-3's residual branches keep a mask each (1 B on CUDA, the
  output's dtype on the CPU), GPT-2's embeddings one more; eager attention keeps the
  probabilities' mask. SDPA drops inside its kernel: on CUDA nothing s²-sized is kept (on the
  CPU it falls back to its math path, which is not counted: refused: ``estimate.cpu_sdpa``).
- The loss (``ForCausalLMLoss``): the labels shifted by one (``pad`` then a contiguous slice),
  int64 ``s·b·8`` B beside the fp32 log-probabilities.

Mixtures of experts are traced with our blocks (``models.implementation``), so ``variants``
estimates them. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate import litgpt_qkv
from profiling.estimate.activations import Bytes, Dims, Term, _cuda, _lse
from profiling.estimate.activations import _norms as _layer_norms
from profiling.estimate.selective import selective_kept
from profiling.estimate.variants import gated_mlp

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

_LLAMA_NORM = frozenset({"llama", "mistral", "qwen2", "qwen3", "phi3"})
# RMSNorms whose weight multiplies the fp32 normalized values (OLMo 2's; Gemma's 1 + weight)
FP32_NORM = frozenset({"olmo2", "gemma", "gemma2"})


def _module(d: Dims) -> str:
    return str(d.extra["hf_module"])


def _whose(d: Dims) -> str:
    return "LitGPT's" if d.extra.get("litgpt_norm") else "transformers'"


def fp32_norm(d: Dims) -> bool:
    """Whether the model's RMSNorm keeps its fp32 normalized values: OLMo 2's and Gemma's, and
    LitGPT's own (``litgpt_norm``: its RMSNorm multiplies them by the fp32 weight)."""
    return d.extra.get("hf_module") in FP32_NORM or bool(d.extra.get("litgpt_norm"))


def eager(d: Dims, cfg: TrainingConfig) -> bool:
    from profiling.models.implementation import EAGER_ONLY

    return cfg.attention == "eager" or _module(d) in EAGER_ONLY


def _norm_row(d: Dims, e: Bytes, width: int, in_bytes: int) -> tuple[int, str]:
    """Bytes per row one RMSNorm keeps, and its formula, for a ``width``-wide input."""
    if fp32_norm(d):
        return 8 * width + 4, f"(8·{width} + 4)"
    return (4 + in_bytes) * width + 4, f"((4 + {in_bytes})·{width} + 4)"


def _rms_norms(d: Dims, e: Bytes) -> list[Term]:
    n = 4 if d.extra.get("norms") == "sandwich" else 2
    row, sub = _norm_row(d, e, d.h, e.r)
    tok = f"{d.s}·{d.b}"
    how = (
        "fp32 input, rstd, fp32 normalized"
        if fp32_norm(d)
        else f"fp32 input, rstd, normalized in {e.r}-byte"
    )
    terms = [
        Term(
            f"norms (RMSNorm ×{n} as {_whose(d)} eager ops: {how})",
            d.s * d.b * n * row,
            f"s·b·{n}·{'(8h + 4)' if fp32_norm(d) else f'((4 + {e.r})·h + 4)'} B",
            f"{tok}·{n}·{sub}",
        )
    ]
    if fp32_weight(d, e):
        terms.append(_gemma_weights(d, n))
    return terms


def fp32_weight(d: Dims, e: Bytes) -> bool:
    """Whether each norm keeps an fp32 copy of its weight (Gemma's 1 + weight, LitGPT's
    ``weight.float()``): what multiplies the normalized values' gradient. LitGPT's is a copy
    only of a 16-bit weight: ``Tensor.float()`` of an fp32 one (fp32, amp-*) returns the
    weight itself (profiling.models.litgpt_norm)."""
    if d.extra.get("hf_module") in ("gemma", "gemma2"):
        return True
    return bool(d.extra.get("litgpt_norm")) and e.r != 4


def _gemma_weights(d: Dims, n: int) -> Term:
    what = "LitGPT's weight" if d.extra.get("litgpt_norm") else "Gemma's 1 + weight"
    return Term(
        f"norms: {what} in fp32 (×{n})",
        n * d.h * 4,
        f"{n}·h·4 B",
        f"{n}·{d.h}·4",
    )


def _qk_norms(d: Dims, e: Bytes, q: int, qk: str) -> Term:
    """Qwen3 per head (one rstd per head), OLMo 2 over the whole projection (one per row)."""
    k, tok = d.k, f"{d.s}·{d.b}"
    rows = d.a + int(d.extra.get("kv_heads") or d.a) if qk == "head" else 2
    where = "per head" if qk == "head" else "whole width"
    if fp32_norm(d):
        per, formula = 8 * (q + k) + 4 * rows, f"s·b·(8·(q + k) + 4·{rows}) B"
        sub = f"{tok}·(8·({q} + {k}) + 4·{rows})"
    else:
        per = (4 + e.c) * (q + k) + 4 * rows
        formula = f"s·b·((4 + {e.c})·(q + k) + 4·{rows}) B"
        sub = f"{tok}·((4 + {e.c})·({q} + {k}) + 4·{rows})"
    return Term(f"q/k norms ({where}, eager ops)", d.s * d.b * per, formula, sub)


def _windowed(d: Dims) -> int:
    """How many layers attend through a window shorter than the sequence (0: none)."""
    w = d.extra.get("sliding_window")
    if w is None or w >= d.s:
        return 0
    return d.L if d.extra.get("sliding_layers") != "alternate" else (d.L + 1) // 2


def _attention(d: Dims, e: Bytes, cfg: TrainingConfig, q: int) -> list[Term]:
    T, tok, c = d.s * d.b, f"{d.s}·{d.b}", e.c
    if eager(d, cfg):
        tanh = c if d.extra.get("attn_softcap") else 0
        probs = 4 + (c if c != 4 else 0) + tanh  # softmax(dtype=float32), then .to(q.dtype)
        if _module(d) == "gpt2":  # softmax in the scores' dtype (fp32 under autocast)
            probs = 4 + c if e.amp else c
        kept = Term(
            "attention, eager (q, keys and values repeated to every head, output)",
            T * 4 * q * c,
            f"s·b·4q·{c} B",
            f"{tok}·4·{q}·{c}",
        )
        if cfg.checkpointing == "selective":  # the core checkpointed: its inputs kept alone
            return [Term(*selective_kept(d, e, q))]
        return [
            kept,
            Term(
                "eager attention probabilities (a·s²·b: softmax"
                + (f", its {c}-byte copy" if probs - tanh > 4 else "")
                + (", soft-capping's tanh" if tanh else "")
                + ")",
                d.a * d.s * T * probs,
                f"a·s²·b·{probs} B",
                f"{d.a}·{d.s}²·{d.b}·{probs}",
            ),
        ]
    lse, lse_sub = _lse(d, e, cfg)
    kv = q if _cuda(cfg) and c == 4 else d.k  # CUDA's fp32 attention expands grouped heads
    kept = Term(
        "attention (q, k, v after RoPE, output, logsumexp)",
        T * (2 * q + 2 * kv) * c + lse,
        f"s·b·(2q + 2k)·{c} + 4·a·b·s B",
        f"{tok}·(2·{q} + 2·{kv})·{c} + {lse_sub}",
    )
    terms = [Term(*selective_kept(d, e, q)) if cfg.checkpointing == "selective" else kept]
    if litgpt_qkv.applies(d, cfg, eager):  # LitGPT's module (estimate.litgpt_qkv)
        terms.append(litgpt_qkv.attention(d, e, cfg, q))
    elif _module(d) == "phi3":
        terms.append(
            Term(
                "attention: Phi-3's fused q/k/v output (v is a view of it), output copy",
                T * (2 * q + d.k) * c,
                f"s·b·(2q + k)·{c} B",
                f"{tok}·(2·{q} + {d.k})·{c}",
            )
        )
    return terms


def _window(d: Dims, e: Bytes, cfg: TrainingConfig, q: int) -> list[Term]:
    """transformers' mask for windowed layers: grouped heads expanded, the mask kept."""
    n = _windowed(d)
    if not n or eager(d, cfg):
        return []
    terms = []
    kv = q if _cuda(cfg) and e.c == 4 else d.k  # already expanded there
    if q != kv:
        terms.append(
            Term(
                f"windowed layers' keys/values repeated to every head ({n} layers)",
                n * d.s * d.b * 2 * (q - kv) * e.c,
                f"layers with a window · s·b·2·(q − k)·{e.c} B",
                f"{n} · {d.s}·{d.b}·2·({q} − {kv})·{e.c}",
            )
        )
    w = d.extra["sliding_window"]
    if _cuda(cfg):
        terms.append(
            Term(f"sliding-window mask (window {w} < seq {d.s})", d.s * d.s, "s²·1 B", f"{d.s}²")
        )
    else:
        terms.append(
            Term(
                f"sliding-window masks (window {w} < seq {d.s}; {n} windowed layers, per row)",
                n * d.b * d.s * d.s * e.c,
                f"layers with a window · b·s²·{e.c} B",
                f"{n} · {d.b}·{d.s}²·{e.c}",
            )
        )
    return terms


# transformers' blocks that drop their sublayers' outputs (resid_pdrop): two per block
_RESIDUAL_DROPOUT = frozenset({"gpt2", "phi3"})


def _dropout(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """Masks of ``--dropout``: the two residual branches (GPT-2, Phi-3) and, in eager attention,
    the probabilities (whose dropped copy then replaces the 16-bit copy as the matmul's input:
    only the mask is more). SDPA drops inside its kernel: on CUDA only an RNG state is kept."""
    if not cfg.dropout:
        return []
    terms = []
    if _module(d) in _RESIDUAL_DROPOUT:
        mask = 1 if _cuda(cfg) else e.c  # CUDA: bool masks; CPU: noise in the output's dtype
        terms.append(
            Term(
                "dropout masks (after attention and MLP)",
                d.s * d.b * 2 * d.h * mask,
                f"s·b·2h·{mask} B",
                f"{d.s}·{d.b}·2·{d.h}·{mask}",
            )
        )
    if eager(d, cfg) and cfg.checkpointing != "selective":
        # The CPU's noise has the probabilities' dtype: the queries' (fp32 under autocast after
        # RoPE with fp32 tables; GPT-2 casts to the values' dtype, OLMo 2 back to q's).
        fp32_q = e.amp and _module(d) not in ("gpt2", "olmo2")
        mask = 1 if _cuda(cfg) else (4 if fp32_q else e.c)
        # Where no cast sits between the softmax and the dropout (GPT-2 outside autocast, fp32
        # elsewhere), the softmax keeps its output and the matmul the dropped one: one more.
        copy = not e.amp if _module(d) == "gpt2" else e.c == 4
        out = e.c if copy else 0
        terms.append(
            Term(
                "attention dropout (a·s²·b: masks" + (", dropped probabilities)" if out else ")"),
                d.a * d.s * d.s * d.b * (mask + out),
                f"a·s²·b·({mask} + {out}) B",
                f"{d.a}·{d.s}²·{d.b}·({mask} + {out})",
            )
        )
    return terms


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """One block of transformers' module: what it keeps for backward (TP=1)."""
    return _block(d, e, cfg) + _dropout(d, e, cfg)


def _block(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    if d.arch == "gpt2":
        return _gpt2_layer(d, e, cfg)
    x, tok, T = d.extra, f"{d.s}·{d.b}", d.s * d.b
    q = int(x.get("q_dim") or d.h)
    terms = _rms_norms(d, e)
    if x.get("qk_norm"):
        terms.append(_qk_norms(d, e, q, str(x["qk_norm"])))
    fused = _module(d) == "phi3"
    # under autocast each matmul casts its input: one copy for LitGPT's fused q/k/v, not three
    qkv = 1 if litgpt_qkv.applies(d, cfg, eager) else 3
    copies = (2 if fused else qkv + 2) if e.amp else 2
    terms.append(
        Term(
            "matmul inputs (norm outputs" + (", one copy per matmul)" if e.amp else ")"),
            T * copies * d.h * e.c,
            f"s·b·{copies}h·{e.c} B",
            f"{tok}·{copies}·{d.h}·{e.c}",
        )
    )
    terms += _attention(d, e, cfg, q)
    terms.append(gated_mlp(d, e))
    return terms


def _gpt2_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    T, tok, h, c = d.s * d.b, f"{d.s}·{d.b}", d.h, e.c
    lse, lse_sub = _lse(d, e, cfg)
    terms = [_layer_norms(d, e, cfg)]  # nn.LayerNorm: the kernels our blocks' run
    terms.append(
        Term(
            "matmul inputs (LayerNorm outputs)", T * 2 * h * c, f"s·b·2h·{c} B", f"{tok}·2·{h}·{c}"
        )
    )
    if eager(d, cfg) or cfg.checkpointing == "selective":
        terms += _attention(d, e, cfg, h)
    else:
        terms.append(
            Term(
                "attention (qkv, output, logsumexp)",
                T * 4 * h * c + lse,
                f"s·b·4h·{c} + 4·a·b·s B",
                f"{tok}·4·{h}·{c} + {lse_sub}",
            )
        )
    terms.append(_gelu_new(d, e, cfg))
    return terms


def _gelu_new(d: Dims, e: Bytes, cfg: TrainingConfig) -> Term:
    """GPT-2's MLP: the fc output and ``gelu_new`` as eager ops (see the module docstring)."""
    T, tok, f, c = d.s * d.b, f"{d.s}·{d.b}", d.f, e.c
    if e.amp and _cuda(cfg):  # CUDA's autocast runs pow in fp32: all after it is fp32
        return Term(
            "MLP (gelu_new as eager ops, fp32 from pow on: pow's fp32 input, tanh, 0.5·x, "
            f"1 + tanh; the product's {c}-byte copy)",
            T * f * (4 + 4 + c + 4 + c),
            f"s·b·f·(4 + 4 + {c} + 4 + {c}) B",
            f"{tok}·{f}·(4 + 4 + {c} + 4 + {c})",
        )
    return Term(
        "MLP (fc output; gelu_new as eager ops: pow's input, tanh, 0.5·x, 1 + tanh; the product)",
        T * 5 * f * c,
        f"s·b·5f·{c} B",
        f"{tok}·5·{f}·{c}",
    )


def once_per_model(
    d: Dims, e: Bytes, shape: dict[str, Any], cfg: TrainingConfig, head_input: bool = True
) -> list[Term]:
    """The final norm, RoPE's tables, the loss's log-probabilities and shifted labels, Gemma 2's
    soft-capped logits, windowed layers' masks, autocast's weight copies (``head_input``: as
    ``activations.once_per_model``)."""
    from profiling.estimate.activations import once_per_model as reference_once

    tok, T = f"{d.s}·{d.b}", d.s * d.b
    terms = reference_once(d, e, shape, cfg, head_input)
    if d.arch == "llama":
        row, sub = _norm_row(d, e, d.h, e.r)
        rope = 4 if _module(d) == "olmo2" else e.rope  # OLMo 2 keeps its tables in fp32
        out, out_f, out_s = (d.h * e.c, f" + h·{e.c}", f" + {d.h}·{e.c}") if head_input else (
            0, "", "")  # fmt: skip
        final = Term(
            "final RMSNorm (eager ops" + ("; output)" if out else ")") + " + RoPE cos/sin",
            T * (row + out) + 2 * d.s * d.hd * rope,
            f"s·b·({sub}{out_f}) + 2·s·(h/a)·{rope} B",
            f"{tok}·({sub}{out_s}) + 2·{d.s}·{d.hd}·{rope}",
        )
        terms = [final, *terms[1:]]
        if fp32_weight(d, e):
            terms.append(_gemma_weights(d, 1))
        if litgpt_qkv.applies(d, cfg, eager):
            terms.append(litgpt_qkv.tables(d, e, cfg))
    q = int(d.extra.get("q_dim") or d.h)
    terms += _window(d, e, cfg, q)
    if d.extra.get("logit_softcap") and d.V is not None:
        terms.append(
            Term(
                "Logits: soft-capping's tanh output (Gemma 2)",
                T * d.V * e.c,
                f"s·b·V·{e.c} B",
                f"{tok}·{d.V}·{e.c}",
            )
        )
    if d.V is not None:
        terms.append(_shifted_labels(d))
    # embd_pdrop: GPT-2's embeddings' sum, Phi's embeddings (residual dtype); GPT-NeoX's
    # emb_dropout (transformers 5.24.0 modeling_gpt_neox.py ``GPTNeoXModel``: hidden_dropout),
    # its mask saved only where the embedding trains (full training)
    neox_full = _module(d) == "gpt_neox" and cfg.lora_rank is None
    neox_full = neox_full and not (d.extra.get("neox") or {}).get("litgpt")
    if cfg.dropout and (_module(d) in ("gpt2", "phi") or neox_full):
        mask = 1 if _cuda(cfg) else e.r
        terms.append(
            Term(
                "dropout mask of the embeddings",
                T * d.h * mask,
                f"s·b·h·{mask} B",
                f"{tok}·{d.h}·{mask}",
            )
        )
    return terms


SHIFTED = "(int64, transformers' loss)"  # the shifted labels' lines end so (step_inputs)


def _shifted_labels(d: Dims) -> Term:
    """``pad(labels, (0, 1))[..., 1:].contiguous()``: one row is contiguous already, so the
    loss keeps the padded labels; several rows are copied."""
    if d.b == 1:
        return Term(
            f"Logits: the labels padded by one {SHIFTED}",
            (d.s + 1) * 8,
            "(s + 1)·8 B",
            f"({d.s} + 1)·8",
        )
    return Term(
        f"Logits: the labels shifted by one {SHIFTED}",
        d.s * d.b * 8,
        "s·b·8 B",
        f"{d.s}·{d.b}·8",
    )


_HOMES = {"neox": "neox", "encoder": "encoder"}  # the estimate's module for each kind


def _home(d: Dims) -> str:
    return "bloom" if _module(d) == "bloom" else _HOMES.get(d.arch, "hf_ops")


def assumption(d: Dims, cfg: TrainingConfig) -> str:
    """The implementation the activations describe, for the record's notes."""
    attention = "eager" if eager(d, cfg) else "sdpa"
    text = (
        f"activations of transformers' own {_module(d)} module (attn_implementation="
        f"{attention}; its norms, activations and loss as its eager ops keep them: "
        f"profiling/estimate/{_home(d)}.py), the module the trace builds "
        "with transformers installed" + (" (and only then)" if d.arch == "encoder" else "")
    )
    if _module(d) == "falcon" and not _cuda(cfg):
        text += (
            "; not counted: on the CPU target SDPA with Falcon's mask and one key/value head "
            "falls back to its math path (fp32 scores and probabilities kept); --target cuda "
            "counts what a GPU keeps"
        )
    if _module(d) == "bloom" and cfg.checkpointing == "full":
        text += (
            "; with full checkpointing a recomputed BLOOM block's backward (GeLUFunction's "
            "eager temporaries beside the recomputed block) is counted as an upper bound, not "
            "op by op (2-19 % over the trace's peak on tiny configs); trace it for that moment"
        )
    return text


def unfused_norms(d: Dims, cfg: TrainingConfig) -> bool:
    """Whether the norms are ops that keep their normalized output for the weight's gradient:
    the CPU's, and transformers' RMSNorm (eager ops in fp32) on either target."""
    return getattr(cfg, "target", "cuda") == "cpu" or bool(d.extra.get("hf_module"))


def normalized_bytes(d: Dims, e: Bytes) -> int:
    """The normalized output the norm weight's gradient needs: fp32 in our blocks' CPU norm and
    in OLMo 2's and Gemma's RMSNorm, cast back to the model's dtype in Llama's."""
    module = d.extra.get("hf_module")
    return e.r if module and not fp32_norm(d) else 4


def normalized_kept(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """Bytes a token's normalized row the final norm would keep for its weight's gradient, which
    under LoRA (the weight frozen) it does not: the eager (or the CPU's) RMSNorm's; 0 where the
    norm is fused or the weight trained. Here, beside ``fp32_norm``, for ``lora`` and
    ``losses`` both (``losses`` may not import ``lora``, which imports it through
    ``encoder``)."""
    if cfg.lora_rank is None or not unfused_norms(d, cfg):
        return 0
    return normalized_bytes(d, e)


__all__ = ["assumption", "eager", "once_per_model", "per_layer"]
