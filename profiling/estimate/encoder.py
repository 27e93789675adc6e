"""Activations of an encoder (arch ``encoder``: BERT, RoBERTa) as transformers' own module runs
it (``BertForMaskedLM``, ``RobertaForSequenceClassification`` …), op by op, in bytes.

Derived, like ``activations`` and ``neox``, from what the trace shows autograd saving. Per
layer, with T = s·b tokens, hidden h, MLP width f (post-LayerNorm blocks, biases on every
Linear, SDPA without a mask: every token sees every token):

- matmul inputs: the block input, which q, k and v read — once, or under autocast one 16-bit
  copy each (three) — and the first LayerNorm's output the MLP's first matmul reads (a copy
  under autocast)
- attention: q, k and v (three projections: SDPA keeps each), its output (the output
  projection's input, a view) and the logsumexp
- LayerNorm ×2: each keeps its input (the residual sum) and a mean and rstd per row (fp32 on
  CUDA, 8 B; the residual dtype on the CPU)
- MLP: GELU's input and output (the second matmul's input), T·2f·c

Once per model: the embeddings' LayerNorm (its input, the sum of the word, position and token
type embeddings, and its statistics); masked LM's head — the transform's dense input, GELU's
input and output, its LayerNorm (an fp32 copy of its input under autocast), the decoder's
input — then the logits' fp32 log-probabilities (s·b·V·4: transformers' loss runs over every
position); classification's — the first token's hidden state, the dense layer's tanh output
and the classifier's input, b-sized. Every moment holds the step's inputs and the embeddings'
buffers (``step_inputs``); a classifier's peak falls beyond the end of forward (``moments``).
No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate import encoder_amp, encoder_first
from profiling.estimate.activations import Bytes, Dims, Term, _cuda, _lse, autocast_weight_copies
from profiling.estimate.activations import head_transient as acts_head_transient
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def _logp_bytes(e: Bytes) -> int:
    return 4 if e.amp else e.c


def _stats(e: Bytes, cfg: TrainingConfig) -> tuple[int, str]:
    """A LayerNorm's mean and rstd per row: fp32 on CUDA, the residual dtype on the CPU."""
    return (8, "8") if _cuda(cfg) else (2 * e.r, f"2·{e.r}")


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """One block's saved activations (tensor-parallel split: TP=1)."""
    T, tok, h, f = d.s * d.b, f"{d.s}·{d.b}", d.h, d.f
    stats, stats_s = _stats(e, cfg)
    lse, lse_sub = _lse(d, e, cfg)
    # CUDA's kernels keep their dropout generator's seed and offset, dropout or not: flash
    # (16-bit) a (2,) and a () uint64, the memory-efficient kernel (fp32) two () ones
    rng = (16 if e.c == 4 else 24) if _cuda(cfg) else 0
    if e.amp:
        ins = Term(
            "matmul inputs (block input, one 16-bit copy per q, k, v; attention's LayerNorm "
            "output, a copy)",
            T * 4 * h * e.c,
            f"s·b·4h·{e.c} B",
            f"{tok}·4·{h}·{e.c}",
        )
    else:
        ins = Term(
            "matmul inputs (block input, attention's LayerNorm output)",
            T * 2 * h * e.r,
            f"s·b·2h·{e.r} B",
            f"{tok}·2·{h}·{e.r}",
        )
    return [
        Term(
            f"norms (LayerNorm ×2: input, {'fp32 ' if _cuda(cfg) else ''}mean and rstd)",
            T * 2 * (h * e.r + stats),
            f"s·b·2·(h·{e.r} + {stats_s}) B",
            f"{tok}·2·({h}·{e.r} + {stats_s})",
        ),
        ins,
        Term(
            "attention (q, k, v, output, logsumexp"
            + (", the kernel's seed and offset)" if rng else ")"),
            T * 4 * h * e.c + lse + rng,
            f"s·b·4h·{e.c} + 4·a·b·s" + (f" + {rng}" if rng else "") + " B",
            f"{tok}·4·{h}·{e.c} + {lse_sub}" + (f" + {rng}" if rng else ""),
        ),
        Term(
            "the MLP (GELU's input and output)",
            T * 2 * f * e.c,
            f"s·b·2f·{e.c} B",
            f"{tok}·2·{f}·{e.c}",
        ),
    ]


def _embeddings(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    stats, stats_s = _stats(e, cfg)
    # The token types' lookup indices, gathered from the all-zero buffer at the positions:
    # BERT's positions are one row (s), RoBERTa's are numbered per sequence from the ids (s·b
    # int64 its position embedding keeps, and the token types gathered at them)
    rows, rows_f = (2 * d.b, f"2·{d.b}") if d.extra["encoder"]["kind"] == "roberta" else (1, "1")
    return [
        Term(
            "embeddings' LayerNorm (input: words + positions + token types; mean and rstd)",
            d.s * d.b * (d.h * e.r + stats),
            f"s·b·(h·{e.r} + {stats_s}) B",
            f"{d.s}·{d.b}·({d.h}·{e.r} + {stats_s})",
        ),
        Term(
            "embeddings' position and token-type indices (int64)",
            rows * d.s * 8,
            ("2·b·" if rows_f != "1" else "") + "s·8 B",
            f"{rows_f}·{d.s}·8",
        ),
    ]


def _mlm_head(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    T, tok, h = d.s * d.b, f"{d.s}·{d.b}", d.h
    stats, stats_s = _stats(e, cfg)
    # GELU's output is the LayerNorm's input; under autocast layer_norm runs in fp32 and
    # keeps its fp32 copy instead
    ln = 4 if e.amp else e.c
    head = Term(
        "masked-LM head (the transform's input, GELU's input, LayerNorm's input and "
        "statistics, the decoder's input)",
        T * (h * (3 * e.c + ln) + stats),
        f"s·b·(h·(3·{e.c} + {ln}) + {stats_s}) B",
        f"{tok}·({h}·{3 * e.c + ln} + {stats_s})",
    )
    assert d.V is not None
    # the loss: CrossEntropyLoss on the logits as they are (fp32 under autocast, whose list
    # has cross_entropy; 16-bit otherwise: transformers does not upcast them here)
    p = _logp_bytes(e)
    logits = Term(
        f"Logits: the {'fp32' if p == 4 else f'{p}-byte'} log-probabilities the loss keeps "
        "(and the loss, its total weight)",
        T * d.V * p + 2 * p,
        f"s·b·V·{p} + 2·{p} B",
        f"{d.s}·{d.b}·{d.V}·{p} + 2·{p}",
    )
    return [head, logits]


def _classifier(d: Dims, e: Bytes) -> Term:
    """The first token's hidden state through the h×h layer and tanh, the classifier, the
    loss: b-sized, except that without autocast the dense layer's input is a view of the last
    hidden state (``[:, 0]``), which it keeps whole."""
    n, b, h, c = int(d.extra["encoder"]["labels"]), d.b, d.h, e.c
    p = _logp_bytes(e)
    # one label: a regression, mean-squared error (its input and the loss; no total weight)
    loss, loss_f = (2 * p, f"2·{p}") if n > 1 else (p, f"{p}")
    if e.amp:
        first, first_f, first_s = b * h * c, f"b·h·{c}", f"{b}·{h}·{c}"
        what = "its 16-bit copy of the first token"
    else:
        first, first_f, first_s = d.s * b * h * c, f"s·b·h·{c}", f"{d.s}·{b}·{h}·{c}"
        what = "the last hidden state, which its first-token view keeps whole"
    return Term(
        f"classification head ({what}; tanh's output; the loss's "
        + (
            f"{n} log-probabilities per sequence, the loss and its total weight)"
            if n > 1
            else "input and the loss)"
        ),
        first + b * h * c + b * n * p + loss,
        f"{first_f} + b·h·{c} + b·n·{p} + {loss_f} B",
        f"{first_s} + {b}·{h}·{c} + {b}·{n}·{p} + {loss_f}",
    )


def _vit(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """ViT: the images' 16-bit copy the patch projection keeps under autocast (the images
    themselves are the step's input), the final LayerNorm, the classifier on the class token
    (without autocast its view keeps the final norm's output whole), the loss."""
    b, c, n, p = d.b, e.c, int(d.extra["encoder"]["labels"]), _logp_bytes(e)
    pixels = int(d.extra["encoder"]["pixels"])
    stats, stats_s = _stats(e, cfg)
    terms = []
    if e.amp:
        terms.append(
            Term(
                "the images' 16-bit copy (the patch projection's input)",
                b * pixels * c,
                f"b·C·H·W·{c} B",
                f"{b}·{pixels}·{c}",
            )
        )
    first, first_f, first_s = (
        (b * d.h * c, f"b·h·{c}", f"{b}·{d.h}·{c}")
        if e.amp
        else (d.s * b * d.h * c, f"s·b·h·{c}", f"{d.s}·{b}·{d.h}·{c}")
    )
    terms.append(
        Term(
            "final LayerNorm (input, statistics) and the classifier's input ("
            + ("the class token's 16-bit copy" if e.amp else "the norm's output, kept whole by "
               "its class-token view")
            + f"), the loss's {n} log-probabilities per image, the loss and its total weight",
            d.s * b * (d.h * e.r + stats) + first + b * n * p + 2 * p,
            f"s·b·(h·{e.r} + {stats_s}) + {first_f} + b·n·{p} + 2·{p} B",
            f"{d.s}·{b}·({d.h}·{e.r} + {stats_s}) + {first_s} + {b}·{n}·{p} + 2·{p}",
        )
    )  # fmt: skip
    return terms


def lm_logits(d: Dims) -> bool:
    """Whether the model ends in s·b·V logits (every decoder, masked LM; not a classifier)."""
    return d.arch != "encoder" or d.extra["encoder"]["head"] == "mlm"


def head_transient(d: Dims, precision: str) -> Term | None:
    """Backward's first moment: the loss's gradient and log-softmax's — a decoder's in fp32
    (``activations.head_transient``), an encoder's in its log-probabilities' dtype (a
    classifier's are b-sized: none; an encoder-decoder's as an encoder's, T5 not upcasting)."""
    if d.arch not in ("encoder", "t5"):
        return acts_head_transient(d)
    if not lm_logits(d) or d.V is None:
        return None
    p = _logp_bytes(Bytes.of(precision))
    return Term(
        f"loss backward: log-softmax gradients ({'fp32' if p == 4 else f'{p}-byte'})",
        2 * d.s * d.b * d.V * p,
        f"2·s·b·V·{p} B",
        f"2·{d.s}·{d.b}·{d.V}·{p}",
    )


def output_held(d: Dims, cfg: TrainingConfig) -> Term | None:
    """Masked LM under autocast: its forward holds the last hidden state (fp32) while the loss
    runs — the head's matmul saved a 16-bit copy of it, not it (without autocast: counted)."""
    if d.arch == "t5":
        from profiling.estimate.t5 import output_held as t5_output

        return t5_output(d, cfg)
    if d.arch == "neox":  # LoRA under autocast on transformers' modules
        from profiling.estimate.neox_loss_held import loss_held

        return loss_held(d, cfg)
    if d.arch == "llama":  # transformers' Llama-kind modules under autocast
        from profiling.estimate import llama_loss_held

        return llama_loss_held.loss_held(d, cfg)
    if d.arch != "encoder" or not lm_logits(d) or not Bytes.of(cfg.precision).amp:
        return None
    return Term("the last hidden state, which the forward holds", d.s * d.b * d.h * 4,
                "s·b·h·4 B", f"{d.s}·{d.b}·{d.h}·4")  # fmt: skip


def step_inputs(d: Dims | None, cfg: TrainingConfig) -> Term | None:
    """What the whole step holds beside the model: its inputs — token ids and the task's labels
    (a label per token for masked LM, per sequence otherwise: int64, a regression's in the
    parameters' dtype), or the images (the parameters' dtype) and their classes — and the
    embeddings' position and token-type buffers. None for a decoder (not counted there)."""
    if d is not None and d.arch == "t5":  # the input's and the target's ids (estimate.t5)
        from profiling.estimate.t5 import step_inputs as t5_inputs

        return t5_inputs(d)
    if d is None or d.arch != "encoder":
        return None
    enc, T, b = d.extra["encoder"], d.s * d.b, d.b
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    label, label_f = (p, f"b·{p}") if int(enc["labels"]) == 1 else (8, "b·8")
    if enc["pixels"]:
        value = b * int(enc["pixels"]) * p + b * 8
        return Term("the images and their classes", value, f"b·C·H·W·{p} + b·8 B",
                    f"{b}·{enc['pixels']}·{p} + {b}·8")  # fmt: skip
    if enc["head"] == "mlm":
        label, label_f = T * 8, "s·b·8"
    bufs = int(enc["buffers"])
    return Term(
        "the token ids, the labels and the position and token-type buffers",
        T * 8 + (label if enc["head"] == "mlm" else b * label) + bufs,
        f"s·b·8 + {label_f} + buffers {bufs} B",
        f"{d.s}·{d.b}·8 + {label if enc['head'] == 'mlm' else f'{b}·{label}'} + {bufs}",
    )


def head_back(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[float, float]:
    """A classifier's head once back: what it saved and autocast's copies of its weights, freed
    (the loss itself stays: the loop holds it), and its parameters' gradients — pooler and
    classifier, or ViT's final LayerNorm and classifier."""
    n, h, p = int(d.extra["encoder"]["labels"]), d.h, 4 if e.r == 4 else 2
    vit = bool(d.extra["encoder"]["pixels"])
    # under autocast its matmuls' 16-bit weight copies go too: the classifier's (and the pooler's)
    copies = ((0 if vit else h * h) + h * n) * 2 if e.amp else 0
    if vit:  # the last term: the final norm, the classifier, the loss
        saved, grads = _vit(d, e, cfg)[-1].bytes - _logp_bytes(e) + copies, (2 * h + h * n + n) * p
    else:
        saved, grads = (
            _classifier(d, e).bytes - _logp_bytes(e) + copies,
            (h * h + h + h * n + n) * p,
        )
    if cfg.lora_rank is not None:  # only the classifier's trained copy; BERT's frozen pooler
        from profiling.estimate.lora_encoder import head_back as lora_back  # kept no input

        return lora_back(d, e, cfg, saved)
    return saved, grads


def loss_seed(e: Bytes) -> int:
    """The loss's gradient, backward's first tensor."""
    return _logp_bytes(e)


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """A classifier's peak in backward: its small head through, the last block's MLP
    (``losses.last_mlp``: the gradient reaching the block, the output projection's weight
    gradient, GELU's input gradient; BERT's post-norm gone back first)."""
    if d is None or d.arch != "encoder" or lm_logits(d) or cfg.checkpointing == "selective":
        return []
    if cfg.checkpointing == "full":  # the last block's saved tensors recomputed first
        from profiling.estimate.encoder_ckpt import recomputed

        e = Bytes.of(cfg.precision)
        full = (per_layer(d, e, cfg), head_back(d, e, cfg), loss_seed(e))
        return recomputed(d, cfg, fwd, _backward, full)
    return _backward(d, cfg, fwd)


def _backward(d: Dims, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """``moments`` without checkpointing (``fwd``: the end of forward)."""
    from profiling.estimate.last_mlp import last_mlp

    e = Bytes.of(cfg.precision)
    saved, grads = head_back(d, e, cfg)
    mlp = last_mlp(d, e, cfg)
    assert mlp is not None
    seed = loss_seed(e)
    value = fwd - saved + seed + grads + mlp[0]
    f = fmt_bytes
    lora = ""
    if cfg.lora_rank is not None:  # GELU's output was not saved (nothing of it to free); the
        # frozen output projection's 16-bit weight copy is freed (lora_encoder.check: not down);
        # the frozen post-norm makes no gradients (last_mlp counted its weight's and bias's)
        T, p = d.s * d.b, 4 if e.r == 4 else 2
        norm = 0 if d.extra["encoder"]["pixels"] else 2 * d.h * p
        value += T * d.f * e.c - (d.h * d.f * 2 if e.amp else 0) - norm
        lora = (
            f" + GELU's output, not saved s·b·f·{e.c}"
            + (" − the frozen weight's 16-bit copy h·f·2" if e.amp else "")
            + (f" − the frozen LayerNorm's gradients 2·h·{p}" if norm else "")
        )
    calc = (
        f"end of forward {f(fwd)} − the head's saved tensors but the loss, and its weight "
        f"copies {f(saved)} + the loss's gradient {seed} B + the head's gradients {f(grads)} + "
        f"{mlp[1]}{lora} = {f(value)}"
    )
    out = [("backward, the last block's MLP", value, calc), *_last_norm(d, e, cfg, fwd)]
    # its input projection, the first block's (estimate.encoder_first; autocast: encoder_amp)
    kept = sum(t.bytes for t in per_layer(d, e, cfg))
    out += encoder_first.moments(d, cfg, value, kept) + encoder_amp.moments(d, cfg, value, kept)
    if cfg.lora_rank is not None and not e.amp:
        from profiling.estimate.lora_encoder import plain_moments

        vit = d.extra["encoder"]["pixels"]  # the head's tensors: ViT's final norm's onwards
        head = _vit(d, e, cfg)[-1].bytes if vit else _classifier(d, e).bytes
        out += plain_moments(d, e, cfg, fwd, (value, head))
    if cfg.lora_rank is not None:  # no weight gradients in the MLP: the last LayerNorm's higher
        norm = fwd - saved + seed + grads + 2 * d.s * d.b * d.h * e.r
        text = (
            f"end of forward {f(fwd)} − the head's saved tensors and weight copies {f(saved)} "
            f"+ the loss's gradient {seed} B + the classifier's gradients {f(grads)} + the "
            f"gradients of the LayerNorm's output and input 2·s·b·h·{e.r} = {f(norm)}"
        )
        out.append(("backward, the last LayerNorm", norm, text))
        if d.extra["encoder"]["pixels"] and cfg.checkpointing != "full":
            out.append(_vit_final_norm(d, e, cfg, norm))
        if d.extra["encoder"]["pixels"] and e.amp:
            from profiling.estimate.lora_encoder import vit_last_mlp

            out.append(vit_last_mlp(d, e, cfg, fwd, _vit(d, e, cfg)[-1].bytes))
        from profiling.estimate.lora_encoder import amp_down, amp_up

        out += amp_down(d, e, cfg, out) + amp_up(d, e, cfg, out)
    return out


def _vit_final_norm(d: Dims, e: Bytes, cfg: TrainingConfig, norm: float) -> tuple[str, float, str]:
    """ViT's last LayerNorm is the head's final norm: its saved input and statistics, counted
    among the head's saved tensors, are freed only once its backward has run (``norm``: the
    last LayerNorm's moment without them; BERT's, RoBERTa's is a block's post-norm)."""
    stats, stats_f = _stats(e, cfg)
    value = norm + d.s * d.b * (d.h * e.r + stats)
    text = (
        f"the last LayerNorm's {fmt_bytes(norm)} + its saved input and statistics "
        f"s·b·(h·{e.r} + {stats_f}) = {fmt_bytes(value)}"
    )
    return "backward, ViT's final LayerNorm", value, text


def _last_norm(d: Dims, e: Bytes, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """BERT's, RoBERTa's last block under autocast, its output LayerNorm writing its fp32
    output (which the model's output holds to the end of forward): the block's fp32 input and
    attention output (q, k, v and the MLP keep 16-bit copies), the residual sum and the MLP's
    16-bit output are still referenced; autocast's cached copies of the blocks' biases live;
    the head's tensors and weight copies are not made yet."""
    if not e.amp or d.extra["encoder"]["pixels"]:
        return []
    T, h, f, L = d.s * d.b, d.h, d.f, d.L
    n = int(d.extra["encoder"]["labels"])
    biases = L * (5 * h + f) * 2
    head = _classifier(d, e).bytes + (h * h + h * n) * 2
    lora = ""
    if cfg.lora_rank is not None:  # frozen biases are not cached (lora_encoder.last_norm)
        from profiling.estimate.lora_encoder import last_norm

        biases, extra = 0, last_norm(d, e, cfg)
        head -= extra[1]
        lora = f" + {extra[2]} {fmt_bytes(extra[0])}"
        biases = extra[0]
    value = fwd + biases + T * h * (4 * e.r + e.c) - head
    calc = (
        f"end of forward {fmt_bytes(fwd)}"
        + (lora or f" + the blocks' bias copies L·(5h + f)·2 {fmt_bytes(biases)}")
        + " + the last block's fp32 tensors and its MLP's output "
        f"s·b·h·(4·{e.r} + {e.c}) {fmt_bytes(T * h * (4 * e.r + e.c))} − the head's tensors "
        f"and weight copies, not made yet {fmt_bytes(head)} = {fmt_bytes(value)}"
    )
    return [("forward, the last block's output LayerNorm", value, calc)]


def lora_once(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """LoRA's once-per-model changes (``lora_encoder``), from full training's embeddings."""
    from profiling.estimate import lora_encoder

    return lora_encoder.once_per_model(d, e, cfg, _embeddings(d, e, cfg), _stats(e, cfg))


def once_per_model(d: Dims, e: Bytes, shape: dict[str, Any], cfg: TrainingConfig) -> list[Term]:
    """The embeddings' LayerNorm, the task's head and loss, autocast's weight copies."""
    if d.extra["encoder"]["pixels"]:
        terms = _vit(d, e, cfg)
    else:
        terms = _embeddings(d, e, cfg)
        terms += _mlm_head(d, e, cfg) if lm_logits(d) else [_classifier(d, e)]
    return terms + autocast_weight_copies(e, shape)


__all__ = [
    "head_transient",
    "lm_logits",
    "lora_once",
    "moments",
    "once_per_model",
    "output_held",
    "per_layer",
    "step_inputs",
]
