"""Activations of an encoder-decoder (arch ``t5``: T5, mT5, Flan-T5) as transformers'
``T5ForConditionalGeneration`` runs it with SDPA, op by op, in bytes; and its shape's keys.

T = s·b input tokens (the encoder's), U = t·b target tokens (the decoder's, ``--target-seq``),
hidden h, attention width q = heads × d_kv, MLP width f, compute bytes c, residual bytes r:

- T5's LayerNorm (RMS, no mean, no bias) as eager ops in fp32: the input's fp32 copy
  (``pow`` keeps it: 4 B, none when the residual is fp32 already), the residual itself and
  ``rsqrt``'s output (4 B per row) for the product, the normalized values in the weight's
  dtype (the weight's product keeps them) and the output the next matmuls read: per norm
  ``(4 + r + 2c)·h + 4`` B a token (fp32: ``3·4·h + 4``)
- attention: q, k, v, SDPA's output and its contiguous copy (the output projection's input);
  the relative position bias — computed once per stack by its first block from a table of
  buckets × heads and kept — is a float mask, so SDPA runs the memory-efficient kernel, and
  each block keeps its own contiguous heads × s × s copy of it; logsumexp (padded to 32 queries
  on CUDA) and the kernel's seed and offset. The decoder's self-attention mask is causal
  (``where`` over the bias: heads × t × t a block). Cross-attention: the decoder's q, its own k
  and v of the encoder's output (T-sized, every decoder block), the output twice, and one
  zero bias of heads × t × s every block shares
- the MLP: ReLU keeps its output (f); gated GELU keeps ``gelu_new``'s eager ops, the linear
  branch and their product (``hf_ops._gelu_new`` + 2f)

Once: the buckets' int64 indices per stack (s², t²), the encoder's output (which every
cross-attention reads), the shifted labels, the final norms, the head's input and the loss's
log-probabilities (U·V in the logits' dtype; fp32 under autocast).

Under autocast (CUDA's lists) the residual stream and the norms are fp32 and every matmul
keeps its own 16-bit copy of the fp32 hidden state it reads (autocast caches weights only:
q, k and v three copies of one norm's output, cross-attention's k and v two of the encoder's
output every decoder block); SDPA casts the float bias to 16 bits too; ReLU's output is cast
to the output weight's fp32 by T5 and back by the matmul (that copy kept); gelu_new runs in
fp32 from ``pow`` on. On the CPU target the trained bias sends self-attention to SDPA's math
path (``_self_attention``); cross-attention's bias needs no gradient (the CPU's flash kernel:
q, k, v, the output, logsumexp unpadded). Full checkpointing: LoRA's backward in
``estimate.t5_ckpt``, a full finetune's in ``estimate.t5_ckpt_full`` (on the CPU target
refused: per_layer says why). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims, Term, _cuda, autocast_weight_copies

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.models.config import WorkloadConfig


def shape_keys(w: WorkloadConfig) -> dict[str, Any]:
    """What this module reads of the shape (``shape['t5']``)."""
    return {"decoder_layers": w.decoder_layers, "gated": w.gated, "q_dim": w.q_dim,
            "target_seq": w.target_seq, "tied": w.tied_embeddings,
            "rel_buckets": w.rel_buckets}  # fmt: skip


def block_matmuls(w: WorkloadConfig) -> int:
    """Every block's matmul weights: both stacks (cross-attention's four in the decoder's)."""
    h, q, mlp = w.hidden, w.q_dim, (3 if w.gated else 2) * w.hidden * w.ffn
    return w.layers * (4 * h * q + mlp) + w.decoder_layers * (8 * h * q + mlp)


def param_dims(w: WorkloadConfig) -> list[tuple[int, ...]]:
    h, q, f, a = w.hidden, w.q_dim, w.ffn, w.heads
    attn: list[tuple[int, ...]] = [(q, h), (q, h), (q, h), (h, q), (h,)]
    mlp: list[tuple[int, ...]] = [(f, h)] * (2 if w.gated else 1) + [(h, f), (h,)]
    table = [(w.rel_buckets, a)]
    enc = [*table, *(attn + mlp) * w.layers, (h,)]
    dec = [*table, *(attn + attn + mlp) * w.decoder_layers, (h,)]
    return [(w.vocab, h), *enc, *dec] + ([] if w.tied_embeddings else [(w.vocab, h)])


def logit_dims(d: Dims | None) -> Dims | None:
    """The dims the step's moments read: an encoder-decoder's logits are the decoder's, t·b
    tokens (``--target-seq``); any other model's as they are."""
    if d is None or d.arch != "t5":
        return d
    extra = {**d.extra, "t5": {**d.extra["t5"], "source_seq": d.s}}
    return Dims(**{**d.__dict__, "s": _t(d), "extra": extra})


def step_inputs(d: Dims) -> Term:
    """What the whole step holds beside the model: the input's token ids and the target's
    (int64), read from ``logit_dims`` (its s is the target's)."""
    s, t, b = int(d.extra["t5"]["source_seq"]), d.s, d.b
    return Term("the input's and the target's token ids", (s + t) * b * 8, "(s + t)·b·8 B",
                f"({s} + {t})·{b}·8")  # fmt: skip


def _t(d: Dims) -> int:
    return int(d.extra["t5"]["target_seq"] or d.s)


def _norm(tokens: int, d: Dims, e: Bytes) -> int:
    """One T5LayerNorm's kept bytes (module docstring). Under autocast the residual, rsqrt's
    output and the normalized values, all fp32; its fp32 output is kept by nothing: each
    matmul reading it keeps a 16-bit copy of its own (``_casts``)."""
    if e.amp:
        return tokens * (8 * d.h + 4)
    copy = 0 if e.r == 4 else 4
    return tokens * ((copy + e.r + 2 * e.c) * d.h + 4)


def _casts(tokens: int, readers: int, d: Dims, e: Bytes) -> int:
    """Autocast's 16-bit copies of an fp32 hidden state, one per matmul that reads it (the
    cache holds weights only); none without autocast."""
    return readers * tokens * d.h * e.c if e.amp else 0


def _mlp(tokens: int, d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """The MLP's kept bytes and its input's autocast copies (one per input matmul)."""
    if not d.extra["t5"]["gated"]:
        # ReLU's output (the second matmul's input); under autocast T5 casts it to the output
        # weight's fp32 and the matmul back to 16 bits: that copy is what it keeps
        return tokens * d.f * e.c * (2 if e.amp else 1) + _casts(tokens, 1, d, e)
    from profiling.estimate.hf_ops import _gelu_new

    # gelu_new's (its product is the gate's factor), the linear branch and the gate's product;
    # under CUDA's autocast gelu_new is fp32 from pow on: the product keeps its fp32 output
    # and the output matmul a 16-bit copy of the (fp32) product (the CPU's keeps pow 16-bit)
    gelu = int(_gelu_new(Dims(**{**d.__dict__, "s": tokens, "b": 1}), e, cfg).bytes)
    if e.amp and _cuda(cfg):
        return gelu + tokens * d.f * (4 + e.c) + _casts(tokens, 2, d, e)
    return gelu + 2 * tokens * d.f * e.c + _casts(tokens, 2, d, e)


def _attention(q_tok: int, kv_tok: int, q_len: int, kv_len: int, d: Dims, e: Bytes,
               cfg: TrainingConfig, own_kv: bool = True) -> int:  # fmt: skip
    """SDPA's memory-efficient kernel: q (k, v), its output (laid out token-major: the output
    projection reads it without a copy), logsumexp (padded to 32 queries on CUDA), seed and
    offset."""
    q = int(d.extra["t5"]["q_dim"])
    b = q_tok // q_len
    pad = -(-q_len // 32) * 32 if _cuda(cfg) else q_len
    kv = 2 * kv_tok * q * e.c if own_kv else 0
    return q_tok * 2 * q * e.c + kv + 4 * d.a * b * pad + (16 if _cuda(cfg) else 0) + 0 * kv_len


def _self_attention(tokens: int, length: int, d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """A self-attention's kept bytes beside its mask. On CUDA the memory-efficient kernel with
    its own contiguous copy of the position bias (a·s², every block). On the CPU the bias
    needs a gradient, which the CPU's flash kernel does not give, so SDPA runs the math path:
    q, k and v copied to fp32 heads-major (the two bmm read them), the fp32 softmax
    probabilities, and the output's token-major copy the output projection reads."""
    if _cuda(cfg):
        return _attention(tokens, tokens, length, length, d, e, cfg) + d.a * length**2 * e.c
    q = int(d.extra["t5"]["q_dim"])
    return 3 * tokens * q * 4 + 4 * d.a * tokens * length + tokens * q * e.c


def _encoder_block(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    T = d.s * d.b
    value = 2 * _norm(T, d, e) + _casts(T, 3, d, e) + _self_attention(T, d.s, d, e, cfg)
    return value + _mlp(T, d, e, cfg)


def _decoder_block(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    t = _t(d)
    T, U = d.s * d.b, t * d.b
    # where(causal, bias, min): its bool mask (the bias's copy: _self_attention's)
    block = 3 * _norm(U, d, e) + _self_attention(U, t, d, e, cfg) + t * t
    block += _casts(U, 4, d, e) + _casts(T, 2, d, e)  # q, k, v; cross q; cross k, v (encoder's)
    return block + _attention(U, T, t, d.s, d, e, cfg) + _mlp(U, d, e, cfg)


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """An encoder block's kept tensors (``d.L`` of them); the decoder's are counted once."""
    modelled = cfg.lora_rank is not None or _cuda(cfg)
    if cfg.checkpointing == "full" and modelled:
        return []  # only the blocks' inputs kept; backward's moments: estimate.t5_ckpt(_full)
    if cfg.checkpointing != "none":
        from profiling.errors import ProfilingError

        # what the step keeps after forward is the trace's to the byte (t5_ckpt.once_per_model),
        # but a full finetune's backward on the CPU target is not modelled: the CPU's math
        # attention beside each recomputed block
        raise ProfilingError(
            "the estimate does not model an encoder-decoder's (T5, mT5) full finetune under "
            "checkpointing on the CPU target yet; trace this step instead (journal-agent trace "
            "runs transformers' module exactly), or estimate it on CUDA"
        )
    from profiling.estimate import t5_dropout

    value = _encoder_block(d, e, cfg)
    return [
        *t5_dropout.encoder_block(d, cfg),
        Term(
            "encoder block (2 T5 norms; q, k, v, output ×2, logsumexp; its copy of the "
            "position bias a·s²; the MLP)",
            value,
            "2·norm + s·b·5q·c + a·s²·c + MLP",
            f"{value}",
        ),
    ]


def once_per_model(d: Dims, e: Bytes, shape: dict[str, Any], cfg: TrainingConfig) -> list[Term]:
    if cfg.checkpointing == "full":
        return _ckpt_once(d, e, shape, cfg)
    t, L = _t(d), int(d.extra["t5"]["decoder_layers"])
    T, U = d.s * d.b, t * d.b
    block = _decoder_block(d, e, cfg)
    shared = d.a * t * d.s * e.c  # cross-attention's zero bias, one for all blocks
    terms = [
        Term(
            f"decoder blocks ×{L} (3 T5 norms; self-attention as the encoder's with its causal "
            "copy of the bias a·t²; cross-attention: q, k and v of the encoder's output, "
            "output ×2; the MLP)",
            L * block,
            "L_dec·(3·norm + U·5q·c + a·t²·c + U·3q·c + T·2q·c + MLP)",
            f"{L}·{block}",
        )
    ]  # fmt: skip
    terms.append(
        Term(
            "position buckets (int64 s² and t²), the zero cross-attention bias, the shifted "
            "labels, the final norms, the encoder's output",
            8 * (d.s * d.s + t * t) + shared + U * 8 + _norm(T, d, e) + _norm(U, d, e)
            + _casts(U, 1, d, e),  # the head's input
            "8·(s² + t²) + a·t·s·c + U·8 + 2 norms",
            "",
        )
    )  # fmt: skip
    from profiling.estimate.t5_dropout import once

    return [*terms, _logits(d, e, U), *autocast_weight_copies(e, shape), *once(d, cfg, t, L)]


def output_held(d: Dims, cfg: TrainingConfig) -> Term | None:
    """Under autocast, what T5's forward holds while its loss runs though nothing saves it (the
    head's matmul saved a 16-bit copy): the decoder's fp32 output (its output object holds
    it) and, where the head is tied, its d_model**-0.5 scaled copy; under LoRA the decoder's
    input ids too. ``d``: ``logit_dims``'."""
    if not Bytes.of(cfg.precision).amp:
        return None
    n, U = 2 if d.extra["t5"]["tied"] else 1, d.s * d.b
    # under LoRA the frozen embedding keeps no decoder input ids, but the forward holds them;
    # and the encoder's fp32 output and the first blocks' cached A copies (lora_held)
    ids, ids_f = (U * 8, " + t·b·8") if cfg.lora_rank is not None else (0, "")
    more, more_f = lora_held(d, cfg)
    ids, ids_f = ids + more, ids_f + (f" + {more_f}" if more else "")
    return Term("the decoder's fp32 output" + (" and its scaled copy" if n == 2 else "")
                + (" and input ids, the encoder's output, the first blocks' cached A copies"
                   if more else " and input ids" if ids else "") + ", which the forward holds",
                n * U * d.h * 4 + ids, f"{n}·t·b·h·4{ids_f} B",
                f"{n}·{d.s}·{d.b}·{d.h}·4{ids_f}")  # fmt: skip


def lora_held(d: Dims, cfg: TrainingConfig) -> tuple[int, str]:
    """What LoRA's forward under autocast holds that no backward keeps beyond the decoder's
    output: the encoder's fp32 output (``T5ForConditionalGeneration.forward``'s
    ``hidden_states``; each cross-attention k, v keeps its own 16-bit copy) and autocast's
    cached 16-bit copies of the first blocks' lora_A on q, k, v (aten autocast_mode.cpp
    ``cached_cast`` caches a leaf fp32 weight that requires grad until autocast exits; mm saves
    none: the frozen embedding's output needs no gradient). ``d``: ``logit_dims``' (s is the
    target's). (0, "") where it does not apply (``estimate.t5_forward_amp``)."""
    # Under full checkpointing the decoder's checkpoints already hold the encoder's output
    # and no cached copy outlives its block (test_t5_ckpt: exactly this term above the trace)
    if cfg.lora_rank is None or not Bytes.of(cfg.precision).amp or cfg.checkpointing == "full":
        return 0, ""
    T = int(d.extra["t5"]["source_seq"]) * d.b
    n = sum(1 for x in cfg.lora_targets if x in ("q", "k", "v"))
    value = T * d.h * 4 + 2 * n * int(cfg.lora_rank) * d.h * 2
    return value, f"s·b·h·4 + 2·{n}·r·h·2"


def _logits(d: Dims, e: Bytes, U: int) -> Term:
    """The log-probabilities the loss keeps over the decoder's ``U`` tokens (fp32 under
    autocast), with the loss and its weight."""
    assert d.V is not None
    p = 4 if e.amp else e.c
    return Term(
        f"Logits: the {p}-byte log-probabilities the loss keeps (and the loss, its weight)",
        U * d.V * p + 2 * p,
        f"t·b·V·{p} + 2·{p} B",
        f"{U}·{d.V}·{p} + 2·{p}",
    )


def _table(e: Bytes, cfg: TrainingConfig) -> int:
    """The position tables' element size: the parameters' dtype (fp32 under autocast)."""
    return 4 if e.amp or cfg.precision == "fp32" else 2


def _ckpt_once(d: Dims, e: Bytes, shape: dict[str, Any], cfg: TrainingConfig) -> list[Term]:
    """What the step keeps after forward beside the encoder blocks' inputs (the memory module
    adds those: ``activations.checkpointed_layer``), full training's count (``lora_t5`` takes
    LoRA's frozen layers off)."""
    t, L = _t(d), int(d.extra["t5"]["decoder_layers"])
    T, U = d.s * d.b, t * d.b
    tb = _table(e, cfg)
    # each stack's first block returns its biases; only later blocks' checkpoints hold them
    biases = (d.a * d.s * d.s * tb if d.L > 1 else 0) + (
        d.a * t * (t * tb + d.s * e.c) if L > 1 else 0
    )
    out = T * d.h * 4 if e.amp else 0  # the encoder's fp32 output, held by the checkpoints
    norms = _norm(T, d, e) + out + _norm(U, d, e) + _casts(U, 1, d, e) + U * 8
    terms = [
        Term(f"decoder block inputs ×{L} (checkpoints)", L * U * d.h * e.r, "L_dec·t·b·h·r B",
             f"{L}·{U}·{d.h}·{e.r}"),
        Term("position biases the first blocks hand on (a·s², a·t² in the tables' dtype, the "
             "zero cross-attention bias a·t·s)", biases, f"a·(s² + t²)·{tb} + a·t·s·{e.c} B",
             f"{d.a}·({d.s}² + {t}²)·{tb} + {d.a}·{t}·{d.s}·{e.c}"),
        Term("final norms (the encoder's output among them), the shifted labels", norms,
             "norm(s·b) + norm(t·b) + t·b·8 B", f"{norms}"),
    ]  # fmt: skip
    return [*terms, _logits(d, e, U), *autocast_weight_copies(e, shape)]


__all__ = [
    "block_matmuls",
    "logit_dims",
    "lora_held",
    "once_per_model",
    "output_held",
    "param_dims",
    "per_layer",
    "shape_keys",
    "step_inputs",
]
