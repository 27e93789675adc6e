"""Activations of transformers' BLOOM (``BloomForCausalLM``, 5.x), op by op, in bytes.

BLOOM is GPT-NeoX's sequential block with its own attention: no rotary, ALiBi's per-head biases
added to the scores by ``baddbmm``, and always eager (its class refuses SDPA). Read in
transformers/models/bloom/modeling_bloom.py; what autograd saves, per block, with T = s·b tokens,
h the width, a the heads, f = 4h, c the matmuls' bytes and r the residual stream's:

- LayerNorms (``input_layernorm``, ``post_attention_layernorm``): each its input (r) and a mean
  and rstd per row (fp32 on CUDA, 8 B; r each on the CPU).
- matmul inputs: the two LayerNorms' outputs (one 16-bit copy each under autocast).
- q, k, v: ``_reshape`` takes strided views of the fused output and ``reshape`` flattens batch
  and heads: a copy each when b > 1, and when b = 1 views that keep the fused output whole —
  3·T·h·c either way; ``baddbmm`` keeps q and the keys, ``bmm`` the values.
- the probabilities: ``softmax(dtype=float32)`` keeps its fp32 output, ``.to(q.dtype)`` makes the
  c-byte copy the values' ``bmm`` keeps (the same tensor in fp32): a·s²·b·(4 + c) B (4 in fp32).
  The scores, the mask added to them and the bias are not kept.
- ``_merge_heads``' permute and reshape: the output projection's input is a copy, T·h·c.
- the MLP: ``GeLUFunction`` saves its input (the first matmul's output) and its output is the
  second matmul's input: 2·T·f·c, as a fused GELU's.
- ``--dropout``: the probabilities' mask (1 B on CUDA, noise in their dtype on the CPU; in fp32
  the dropped probabilities are a tensor beside the softmax's output) and ``dropout_add``'s two
  masks on the sublayers' outputs.

Once per model: the embeddings' LayerNorm (``word_embeddings_layernorm``: its input, the
embedding's output, and statistics). The bias tensor itself (``alibi``: b·a·s in the hidden
states' dtype, built once per forward) and the causal mask (b·s² in the same dtype: the eager
mask) are kept only by full checkpointing, which saves every block's inputs: one tensor each,
shared by all blocks. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term, _cuda
from profiling.estimate.selective import blocks_keep_saved
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def _stats(e: Bytes, cfg: TrainingConfig) -> tuple[int, str]:
    return (8, "8") if _cuda(cfg) else (2 * e.r, f"2·{e.r}")


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """One BLOOM block: what it keeps for backward (TP = 1)."""
    T, tok, h, c = d.s * d.b, f"{d.s}·{d.b}", d.h, e.c
    stats, stats_s = _stats(e, cfg)
    probs = 4 if c == 4 else 4 + c
    terms = [
        Term(
            "norms (LayerNorm ×2: input, mean and rstd)",
            T * 2 * (h * e.r + stats),
            f"s·b·2·(h·{e.r} + {stats_s}) B",
            f"{tok}·2·({h}·{e.r} + {stats_s})",
        ),
        Term(
            "matmul inputs (LayerNorm outputs" + (", one copy each)" if e.amp else ")"),
            T * 2 * h * c,
            f"s·b·2h·{c} B",
            f"{tok}·2·{h}·{c}",
        ),
        Term(
            "attention (q, keys, values, the output projection's input copy)",
            T * 4 * h * c,
            f"s·b·4h·{c} B",
            f"{tok}·4·{h}·{c}",
        ),
    ]
    if cfg.checkpointing != "selective":
        terms.append(
            Term(
                "attention probabilities (a·s²·b: fp32 softmax"
                + (f", its {c}-byte copy)" if c != 4 else ")"),
                d.a * d.s * T * probs,
                f"a·s²·b·{probs} B",
                f"{d.a}·{d.s}²·{d.b}·{probs}",
            )
        )
    terms.append(
        Term(
            "the MLP (the first matmul's output GeLUFunction saves, its output)",
            T * 2 * d.f * c,
            f"s·b·2f·{c} B",
            f"{tok}·2·{d.f}·{c}",
        )
    )
    if cfg.checkpointing == "full":  # counted only in the recomputed block's moment
        # GeLUFunction's backward beside the recomputed block, as losses.last_mlp counts the
        # last block's: the gradient reaching it, its MLP's output weight gradient, five f-wide
        # eager temporaries (without it a tiny fp32 run was 20 % under the trace's peak)
        p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
        w = (h * d.f + h) * p if cfg.lora_rank is None else 0
        terms.append(
            Term(
                "GeLUFunction's backward beside the recomputed block (the gradient reaching "
                "it, the output weight's gradient, five f-wide eager temporaries)",
                T * h * e.r + w + T * 5 * d.f * c,
                f"s·b·h·{e.r} + {w} + s·b·5f·{c} B",
                f"{tok}·{h}·{e.r} + {w} + {tok}·5·{d.f}·{c}",
            )
        )
    return terms + _dropout(d, e, cfg)


def _dropout(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    if not cfg.dropout:
        return []
    T = d.s * d.b
    mask = 1 if _cuda(cfg) else e.c  # CUDA: bool masks; the CPU: noise in the input's dtype
    terms = [
        Term(
            "dropout masks (dropout_add after attention and the MLP)",
            T * 2 * d.h * mask,
            f"s·b·2h·{mask} B",
            f"{d.s}·{d.b}·2·{d.h}·{mask}",
        )
    ]
    if cfg.checkpointing != "selective":
        out = 4 if e.c == 4 else 0  # fp32: the dropped probabilities beside softmax's output
        terms.append(
            Term(
                "attention dropout (a·s²·b: mask" + (", dropped probabilities)" if out else ")"),
                d.a * d.s * T * (mask + out),
                f"a·s²·b·({mask} + {out}) B",
                f"{d.a}·{d.s}²·{d.b}·({mask} + {out})",
            )
        )
    return terms


def once_per_model(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """The embeddings' LayerNorm; under full checkpointing the ALiBi bias and causal mask every
    checkpointed block keeps as its inputs (one tensor each, in the residual stream's dtype)."""
    T, tok = d.s * d.b, f"{d.s}·{d.b}"
    stats, stats_s = _stats(e, cfg)
    terms = [
        Term(
            "the embeddings' LayerNorm (input, mean and rstd)",
            T * (d.h * e.r + stats),
            f"s·b·(h·{e.r} + {stats_s}) B",
            f"{tok}·({d.h}·{e.r} + {stats_s})",
        )
    ]
    if cfg.checkpointing == "full":
        terms.append(
            Term(
                "ALiBi's bias and the causal mask (the checkpointed blocks' inputs)",
                d.b * d.a * d.s * e.r + d.b * d.s * d.s * e.r,
                f"b·a·s·{e.r} + b·s²·{e.r} B",
                f"{d.b}·{d.a}·{d.s}·{e.r} + {d.b}·{d.s}²·{e.r}",
            )
        )
    return terms


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """GPT-NeoX's kind's last block's MLP (``neox_moments``: LoRA on BLOOM too), and BLOOM's
    under full training (``_full``)."""
    from profiling.estimate import neox_moments

    return neox_moments.moments(d, cfg, fwd) + _full(d, cfg, fwd)


def _full(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """The last block's MLP backward under transformers' own loss, which BLOOM's GeLUFunction
    makes the step's highest in fp32 (``losses.last_mlp``: its five f-wide temporaries): end of
    forward less what the loss, the final LayerNorm and the MLP's dropout mask kept, plus the head's
    (tied: pending) and the final norm's gradients."""
    from profiling.estimate.hf_ops import _shifted_labels
    from profiling.estimate.last_mlp import last_mlp
    from profiling.estimate.losses import REFERENCE

    if d is None or d.V is None or d.extra.get("hf_module") != "bloom":
        return []
    if cfg.loss != REFERENCE or not blocks_keep_saved(cfg) or cfg.lora_rank is not None:
        return []
    e = Bytes.of(cfg.precision)
    mlp = last_mlp(d, e, cfg)
    assert mlp is not None, "BLOOM has no experts"
    T, h, p = d.s * d.b, d.h, 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    stats = _stats(e, cfg)[0]
    released = T * d.V * 4 + _shifted_labels(d).bytes + T * (h * e.r + stats + h * e.c)
    if cfg.dropout:  # the MLP's dropout_add mask went back first
        released += T * h * (1 if _cuda(cfg) else e.c)
    grads = (d.V * h + 2 * h) * p
    value = fwd - released + grads + mlp[0]
    calc = (
        f"end of forward − the log-probabilities, labels, final LayerNorm's tensors and output "
        f"{fmt_bytes(released)} + the head's and final norm's gradients {fmt_bytes(grads)} + "
        f"{mlp[1]} = {fmt_bytes(value)}"
    )
    return [("backward, the last block's MLP", value, calc)]


__all__ = ["moments", "once_per_model", "per_layer"]
