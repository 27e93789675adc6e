"""The activation model: what each op of a GPT-2 or Llama block keeps for backward, in bytes.

Derived from what the trace shows autograd saving (``torch.autograd.graph.saved_tensors_hooks``
on the reference models, real and fake tensors alike), op by op. Per layer, with s·b tokens,
hidden h, heads a, key/value width k (grouped-query attention), MLP width f:

GPT-2 block (LayerNorm, fused qkv, GELU MLP)
  LayerNorm ×2: its input x (residual dtype) + mean and rstd (s·b each, residual dtype)
  the LayerNorm outputs the qkv and fc matmuls keep (compute dtype)
  qkv: 3h (SDPA keeps q, k, v as views of it); attention output h; logsumexp a·s·b fp32
  MLP: the fc output (GELU's input) f and GELU's output f
Llama block (RMSNorm, q/k/v/o, RoPE, SwiGLU)
  RMSNorm ×2: computed in fp32 whatever the dtype — its fp32 input and normalized output 2h·4 B,
  rstd s·b·4 B; its output as the matmul input (one copy; under autocast each of q, k, v — and
  gate, up — casts its own 16-bit copy: 3 + 2 copies)
  q h, k and v k each (after RoPE, as SDPA keeps them); attention output h; logsumexp a·s·b fp32
  SwiGLU: gate output, SiLU output, up output, their product: 4f

On the CUDA target (``--target cuda``, the default) the ops CUDA runs differently keep what
CUDA's kernels keep (``profiling.trace.target`` has the evidence): RMSNorm (fused) keeps its
input and one fp32 rstd per row, h·r + 4 B per token; LayerNorm's mean and rstd are fp32,
h·r + 8 B; dropout masks are 1 B per element (on the CPU: the dropped tensor's dtype); fp32
attention runs the memory-efficient kernel, whose logsumexp is padded to 32 queries (and
grouped-query keys/values are expanded to every head first).

Eager attention keeps no logsumexp but the softmax probabilities a·s²·b (fp32 under CUDA's
autocast, then the 16-bit copy the next matmul keeps; 16-bit under CPU autocast) and the
causal mask our blocks build, s² bools; dropout adds a 1-byte mask per dropped element. Full
checkpointing keeps only each block's input; the block being recomputed in backward holds one
layer's activations again. Once per model: the final norm, the fp32 log-probabilities the loss
keeps (s·b·V·4 B), RoPE's cos/sin tables, and under autocast the 16-bit copies of every matmul
weight (autocast casts each weight once per forward; the matmuls keep the copies for backward).

No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from profiling.estimate.gpt2_dropout import embedding_mask
from profiling.estimate.selective import selective_inputs
from profiling.units import fmt_count

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


@dataclass
class Term:
    name: str
    bytes: float
    formula: str
    substituted: str


@dataclass
class Dims:
    arch: str
    L: int
    h: int
    a: int
    k: int  # key/value width: kv_heads × head_dim
    f: int
    V: int | None
    s: int
    b: int
    hd: int
    # The Llama family's variations (Hugging Face configs): ``estimate.variants`` reads them.
    extra: dict[str, Any] = field(default_factory=dict)


# The shape keys that make a block a variation of Llama's (see ``estimate.shape``).
VARIANT_KEYS = (
    "q_dim", "kv_heads", "qk_norm", "norms", "mlp", "qkv_bias", "experts", "experts_per_token",
    "expert_ffn", "capacity_factor", "sliding_window", "sliding_layers", "logit_softcap",
    "hf_module", "attn_softcap", "mla", "neox", "encoder", "t5", "litgpt_norm",
    "litgpt_qkv",
)  # fmt: skip


def dims_of(shape: dict[str, Any], s: int, b: int) -> Dims | None:
    h, L, a = shape.get("hidden"), shape.get("layers"), shape.get("heads")
    if h is None or L is None or a is None:
        return None
    arch = shape.get("arch") or "gpt2"
    k = int(shape.get("kv_dim") or h)
    f = int(shape.get("ffn") or (4 * h if arch == "gpt2" else _llama_ffn(h)))
    hd = int(shape.get("q_dim") or h) // int(a)
    extra = {key: shape[key] for key in VARIANT_KEYS if key in shape}
    return Dims(arch, int(L), int(h), int(a), k, f, shape.get("vocab"), s, b, hd, extra)


def _llama_ffn(h: int) -> int:
    # Llama's default: 2/3 of 4h rounded up to a multiple of 256.
    return -(-(8 * h // 3) // 256) * 256


@dataclass
class Bytes:
    """Element sizes of one precision: residual stream r, matmul inputs c, autocast or not."""

    r: int
    c: int
    amp: bool
    rope: int

    @classmethod
    def of(cls, precision: str) -> Bytes:
        amp = precision.startswith("amp-")
        r = 4 if precision in ("fp32", "amp-bf16", "amp-fp16") else 2
        c = 4 if precision == "fp32" else 2
        # RoPE tables follow the dtype the model is built in (16-bit for mixed and bf16).
        return cls(r=r, c=c, amp=amp, rope=2 if precision in ("mixed", "bf16") else 4)


def own_blocks_why(shape: dict[str, Any]) -> str:
    """Why a Hugging Face config's activations are our blocks' (the estimate's note)."""
    if shape.get("neox", {}).get("litgpt"):
        return (
            "for LitGPT's own Phi modules, as its finetune scripts (--loss litgpt) run them: one "
            "fused q/k/v Linear, heads rotated after the transpose, torch's fused tanh GELU"
        )
    return "without transformers, or for a mixture of experts"


def _cuda(cfg: TrainingConfig) -> bool:
    return getattr(cfg, "target", "cuda") == "cuda"


def _norms(d: Dims, e: Bytes, cfg: TrainingConfig) -> Term:
    """The block's two norms: what each keeps for backward on the target device."""
    sb, h, tok = d.s * d.b, d.h, f"{d.s}·{d.b}"
    if d.arch == "gpt2" and _cuda(cfg):
        return Term(
            "norms (LayerNorm ×2: input, fp32 mean and rstd)",
            sb * 2 * (h * e.r + 8),
            f"s·b·2·(h·{e.r} + 8) B",
            f"{tok}·2·({h}·{e.r} + 8)",
        )
    if d.arch == "gpt2":
        return Term(
            "norms (LayerNorm ×2: input, mean, rstd)",
            sb * (2 * h + 4) * e.r,
            f"s·b·(2h + 4)·{e.r} B",
            f"{tok}·(2·{h} + 4)·{e.r}",
        )
    if _cuda(cfg):
        return Term(
            "norms (RMSNorm ×2, fused: input, fp32 rstd)",
            sb * 2 * (h * e.r + 4),
            f"s·b·2·(h·{e.r} + 4) B",
            f"{tok}·2·({h}·{e.r} + 4)",
        )
    return Term(
        "norms (RMSNorm ×2 in fp32: input, normalized, rstd)",
        sb * (2 * 2 * h * 4 + 2 * 4),
        "s·b·(4h + 2)·4 B",
        f"{tok}·(4·{h} + 2)·4",
    )


# Every tensor-parallel rank builds the whole s² mask (memory's _tp_split never splits it).
CAUSAL_MASK = "eager attention's causal mask (bool)"


def _lse(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, str]:
    """Bytes of the attention's fp32 logsumexp, and its formula: b·a·s, or on CUDA in fp32
    (the memory-efficient kernel) b·a·⌈s/32⌉·32."""
    if _cuda(cfg) and e.c == 4:
        padded = -(-d.s // 32) * 32
        return 4 * d.a * d.b * padded, f"4·{d.a}·{d.b}·{padded}"
    return 4 * d.a * d.s * d.b, f"4·{d.a}·{d.s}·{d.b}"


def blocks_lse(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, str, str, str]:
    """Our blocks' attention beside q, k, v and its output: SDPA's fp32 logsumexp, none under
    eager attention (its softmax keeps the output: ``attention_extras``) nor ``selective``.
    Returns (bytes, the name's, the formula's and the substitution's suffixes)."""
    if cfg.checkpointing == "selective" or cfg.attention == "eager":  # selective: core's inputs
        return selective_inputs(d, e) if cfg.checkpointing == "selective" else (0, "", "", "")
    lse, sub = _lse(d, e, cfg)
    return lse, ", logsumexp", " + 4·a·b·s", f" + {sub}"


def blocks_eager_mask(d: Dims, cfg: TrainingConfig) -> list[Term]:
    """Our blocks' eager attention builds its causal mask on every call, which masked_fill
    keeps (models/blocks.py ``_attend``, hf_blocks.py ``_attend_windowed``): s² bools a block."""
    if cfg.attention != "eager" or cfg.checkpointing == "selective":
        return []
    return [Term(CAUSAL_MASK, d.s * d.s, "s²·1 B", f"{d.s}²")]


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """One transformer block's saved activations, by op family (tensor-parallel split: TP=1)."""
    sb, h, k, f = d.s * d.b, d.h, d.k, d.f
    terms: list[Term] = [_norms(d, e, cfg)]
    tok = f"{d.s}·{d.b}"
    lse, lse_name, lse_f, lse_sub = blocks_lse(d, e, cfg)
    if d.arch == "gpt2":
        terms.append(
            Term(
                "matmul inputs (LayerNorm outputs)",
                sb * 2 * h * e.c,
                f"s·b·2h·{e.c} B",
                f"{tok}·2·{h}·{e.c}",
            )
        )
        terms.append(
            Term(
                f"attention (qkv, output{lse_name})",
                sb * 4 * h * e.c + lse,
                f"s·b·4h·{e.c}{lse_f} B",
                f"{tok}·4·{h}·{e.c}{lse_sub}",
            )
        )
        terms.append(
            Term(
                "MLP (fc output, GELU output)",
                sb * 2 * f * e.c,
                f"s·b·2f·{e.c} B",
                f"{tok}·2·{f}·{e.c}",
            )
        )
    else:
        copies = 5 if e.amp else 2  # autocast: q, k, v and gate, up each cast their own copy
        # CUDA's fp32 SDPA (memory-efficient) and eager attention expand grouped keys/values
        expanded = (_cuda(cfg) and e.c == 4) or cfg.attention == "eager"
        kv = h if expanded and cfg.checkpointing != "selective" else k  # selective: core's inputs
        terms.append(
            Term(
                "matmul inputs (RMSNorm outputs"
                + (", one copy per q, k, v, gate, up)" if e.amp else ")"),
                sb * copies * h * e.c,
                f"s·b·{copies}h·{e.c} B",
                f"{tok}·{copies}·{h}·{e.c}",
            )
        )
        terms.append(
            Term(
                f"attention (q, k, v after RoPE, output{lse_name})",
                sb * (2 * h + 2 * kv) * e.c + lse,
                f"s·b·(2h + 2k)·{e.c}{lse_f} B",
                f"{tok}·(2·{h} + 2·{kv})·{e.c}{lse_sub}",
            )
        )
        terms.append(
            Term(
                "MLP (SwiGLU: gate, SiLU, up, product)",
                sb * 4 * f * e.c,
                f"s·b·4f·{e.c} B",
                f"{tok}·4·{f}·{e.c}",
            )
        )
    return terms + blocks_eager_mask(d, cfg) + attention_extras(d, e, cfg)


def attention_extras(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    terms: list[Term] = []
    sb = d.s * d.b
    if cfg.attention == "eager" and cfg.checkpointing != "selective":
        # CUDA's autocast runs softmax in fp32 (AT_FORALL_FP32_SET_OPT_DTYPE), then the next
        # matmul keeps its 16-bit copy; CPU autocast runs it in the scores' 16 bits
        fp32_probs = e.amp and _cuda(cfg)
        probs = (4 + 2) if fp32_probs else e.c
        terms.append(
            Term(
                "eager attention probabilities (a·s²·b)",
                d.a * d.s * sb * probs,
                f"a·s²·b·{probs} B",
                f"{d.a}·{d.s}²·{d.b}·{probs}",
            )
        )
        if cfg.dropout:
            mask = 1 if _cuda(cfg) else e.c  # CUDA: bool; the CPU: noise in the probabilities'
            # dtype. The dropped probabilities are the matmul's input; with fp32 probabilities
            # its 16-bit copy is the one counted above.
            out = 0 if fp32_probs else e.c
            terms.append(
                Term(
                    "attention dropout (mask" + (" + output)" if out else ")"),
                    d.a * d.s * sb * (mask + out),
                    f"a·s²·b·({mask} + {out}) B",
                    f"{d.a}·{d.s}²·{d.b}·({mask} + {out})",
                )
            )
    if cfg.dropout:
        mask = 1 if _cuda(cfg) else e.c  # CUDA: bool masks; CPU: noise in the output's dtype
        terms.append(
            Term(
                "dropout masks (after attention and MLP)",
                sb * 2 * d.h * mask,
                f"s·b·2h·{mask} B",
                f"{d.s}·{d.b}·2·{d.h}·{mask}",
            )
        )
    return terms


def once_per_model(
    d: Dims, e: Bytes, shape: dict[str, Any], cfg: TrainingConfig, head_input: bool = True
) -> list[Term]:
    """The final norm, the loss's fp32 log-probabilities, RoPE tables, autocast weight copies,
    GPT-2's embedding dropout mask. ``head_input=False``: the final norm's output, which the LM
    head keeps as its input, is left to the loss (``profiling.estimate.losses``)."""
    sb = d.s * d.b
    terms = [final_norm(d, e, cfg, head_input)]
    if d.V is not None:
        terms.append(Term("Logits: the fp32 log-probabilities the loss keeps", sb * d.V * 4,
                          "s·b·V·4 B", f"{d.s}·{d.b}·{d.V}·4"))  # fmt: skip
    if m := embedding_mask(cfg, d.arch, d.extra.get("hf_module"), e.r):
        terms.append(Term("dropout mask of the embeddings", sb * d.h * m, f"s·b·h·{m} B",
                          f"{d.s}·{d.b}·{d.h}·{m}"))  # fmt: skip
    return terms + autocast_weight_copies(e, shape)


def autocast_weight_copies(e: Bytes, shape: dict[str, Any]) -> list[Term]:
    """Autocast's 16-bit copy of every matmul weight, kept for backward (decoders and encoders)."""
    w = int(shape.get("matmul_weights") or 0) if e.amp else 0
    if not w:
        return []
    return [
        Term(
            "autocast's 16-bit weight copies (kept for backward)",
            w * 2,
            "matmul weights · 2 B",
            f"{fmt_count(w)} · 2",
        )
    ]


def autocast_cache(inp: TrainingConfig, shape: dict[str, Any]) -> float:
    """With full checkpointing autocast's cache holds the copies of the fp32 weights that train
    (the blocks', or LoRA's adapters) until the region ends, though nothing saves them."""
    if not (inp.autocast and inp.checkpointing == "full"):
        return 0.0
    if inp.lora_rank is not None:
        return 2 * int(shape.get("lora_adapters") or 0) / inp.tp
    return 2 * (int(shape.get("matmul_weights") or 0) - int(shape.get("head_params") or 0)) / inp.tp


def final_norm(d: Dims, e: Bytes, cfg: TrainingConfig, head_input: bool = True) -> Term:
    """The final norm's saved tensors (+ GPT-2's positions or RoPE's tables) and, with
    ``head_input``, its output as the LM head's input (compute dtype)."""
    sb, h, tok = d.s * d.b, d.h, f"{d.s}·{d.b}"
    out, out_f, out_s = (h * e.c, f" + h·{e.c}", f" + {h}·{e.c}") if head_input else (0, "", "")
    if d.arch == "neox":
        return _final_layer_norm(d, e, cfg, out, out_f, out_s)
    if d.arch == "gpt2":
        pos, pos_f, pos_s = 8 * d.s, " + 8·s B", f" + 8·{d.s}"
        if _cuda(cfg):
            return Term(
                "final LayerNorm (input, fp32 mean and rstd"
                + (", output)" if out else ")")
                + " + positions",
                sb * (h * e.r + 8 + out) + pos,
                f"s·b·(h·{e.r} + 8{out_f})" + pos_f,
                f"{tok}·({h}·{e.r} + 8{out_s})" + pos_s,
            )
        return Term(
            "final LayerNorm (input, mean, rstd" + (", output)" if out else ")") + " + positions",
            sb * ((h + 2) * e.r + out) + pos,
            f"s·b·((h + 2)·{e.r}{out_f})" + pos_f,
            f"{tok}·(({h} + 2)·{e.r}{out_s})" + pos_s,
        )
    rope, rope_f, rope_s = (
        2 * d.s * d.hd * e.rope,
        f" + 2·s·(h/a)·{e.rope} B",
        f" + 2·{d.s}·{d.hd}·{e.rope}",
    )
    if _cuda(cfg):
        return Term(
            "final RMSNorm (fused: input, fp32 rstd"
            + ("; output)" if out else ")")
            + " + RoPE cos/sin",
            sb * (h * e.r + 4 + out) + rope,
            f"s·b·(h·{e.r} + 4{out_f})" + rope_f,
            f"{tok}·({h}·{e.r} + 4{out_s})" + rope_s,
        )
    return Term(
        "final RMSNorm (fp32 input, normalized, rstd"
        + ("; output)" if out else ")")
        + " + RoPE cos/sin",
        sb * ((2 * h + 1) * 4 + out) + rope,
        f"s·b·((2h + 1)·4{out_f})" + rope_f,
        f"{tok}·((2·{h} + 1)·4{out_s})" + rope_s,
    )


def _final_layer_norm(
    d: Dims, e: Bytes, cfg: TrainingConfig, out: int, out_f: str, out_s: str
) -> Term:
    """GPT-NeoX's kind: the final LayerNorm and the rotating dims' cos/sin tables."""
    sb, h, tok, r = d.s * d.b, d.h, f"{d.s}·{d.b}", int(d.extra["neox"]["rotary"])
    stats, stats_f, stats_s = (8, "8", "8") if _cuda(cfg) else (2 * e.r, f"2·{e.r}", f"2·{e.r}")
    rope, rope_f, rope_s = 2 * d.s * r * e.rope, f" + 2·s·r·{e.rope} B", f" + 2·{d.s}·{r}·{e.rope}"
    return Term(
        "final LayerNorm (input, mean and rstd"
        + (", output)" if out else ")")
        + " + rotary cos/sin",
        sb * (h * e.r + stats + out) + rope,
        f"s·b·(h·{e.r} + {stats_f}{out_f})" + rope_f,
        f"{tok}·({h}·{e.r} + {stats_s}{out_s})" + rope_s,
    )


# torchtune's OffloadActivations (torchtune/training/_activation_offloading.py at bd2a0fc)
# under full checkpointing: torch.utils.checkpoint saves a block's inputs through the hooks
# outside it (_CheckpointFrame.save_inputs) and what the block saves through its own, so the
# block inputs are what the offload sees. Each (over min_offload_size, 1,024 B, line 71) is
# copied to pinned host memory (use_pin_memory=True, lines 68, 179-198). The forward keeps the
# last max_fwd_stash_size = 5 packed on the GPU (lines 70, 166-174) until the final norm's
# saved tensors push them out; the backward brings one block's input back (lines 286-297) and
# frees the previous node's once the current node has run (lines 274-279, 349-353): while a
# block is recomputed, its input and the one before are on the GPU.
OFFLOAD_IN_FLIGHT = 2


def checkpointed_layer(d: Dims, e: Bytes, offload: bool = False) -> Term:
    """What full checkpointing keeps per block: its input, in the residual dtype; with
    torchtune's activation offloading, the inputs in flight in backward (the rest in host
    memory: :func:`offloaded_inputs`)."""
    if offload:
        n = min(d.L, OFFLOAD_IN_FLIGHT)
        return Term(
            "block inputs (checkpoints) brought back from host memory",
            n * d.s * d.b * d.h * e.r,
            f"min(L, {OFFLOAD_IN_FLIGHT})·s·b·h·{e.r} B",
            f"{n}·{d.s}·{d.b}·{d.h}·{e.r}",
        )
    return Term(
        "block inputs (checkpoints)",
        d.L * d.s * d.b * d.h * e.r,
        f"L·s·b·h·{e.r} B",
        f"{d.L}·{d.s}·{d.b}·{d.h}·{e.r}",
    )


def offloaded_inputs(cfg: Any, shape: dict[str, Any]) -> Term | None:
    """The host memory torchtune's activation offloading holds per rank: every block's input
    (pinned), split like them under sequence parallelism. None without ``activation_offload``
    or a model's dimensions."""
    d = dims_of(shape, cfg.seq_or_default(), cfg.batch) if cfg.activation_offload else None
    if d is None:
        return None
    e = Bytes.of(cfg.precision)
    t = cfg.tp if cfg.sequence_parallel else 1
    return Term(
        "every block's input (checkpoint), L of them",
        d.L * d.s * d.b * d.h * e.r / t,
        f"L·s·b·h·{e.r} B" + " / t" * (t > 1),
        f"{d.L}·{d.s}·{d.b}·{d.h}·{e.r}" + f" / {t}" * (t > 1),
    )


def head_transient(d: Dims) -> Term | None:
    """Backward's first moments: the loss gradient and log-softmax's gradient, both fp32."""
    if d.V is None:
        return None
    return Term(
        "loss backward: log-softmax gradients (fp32)",
        2 * d.s * d.b * d.V * 4,
        "2·s·b·V·4 B",
        f"2·{d.s}·{d.b}·{d.V}·4",
    )


__all__ = [
    "Bytes",
    "Dims",
    "Term",
    "attention_extras",
    "autocast_cache",
    "autocast_weight_copies",
    "checkpointed_layer",
    "dims_of",
    "final_norm",
    "head_transient",
    "offloaded_inputs",
    "once_per_model",
    "per_layer",
]


def head_copy_only(term: Term, shape: dict[str, Any], blocks: str = "checkpointed") -> Term:
    """Of autocast's weight copies, the LM head's alone: the blocks' copies die with a
    checkpointed region, or are a compiled block's own (``estimate.compiled``)."""
    if not term.name.startswith("autocast"):
        return term
    head = int(shape.get("head_params") or 0)
    return Term(
        f"autocast's 16-bit LM-head weight copy (outside the {blocks} blocks)",
        head * 2,
        "V·h · 2 B",
        f"{fmt_count(head)} · 2",
    )
