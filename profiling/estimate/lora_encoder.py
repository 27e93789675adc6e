"""LoRA on an encoder (BERT, RoBERTa, ViT) in closed form: what peft's adapters keep and what a
frozen base no longer keeps, against full training's ``profiling.estimate.encoder``, matching
the trace of transformers' module with peft's adapters (``profiling.trace.lora_encoder``).

Read from the trace's saved tensors, per block with T = s·b tokens, hidden h, MLP width f,
rank r, over the roles adapted (q, k, v, o, up, down; input width h, f for down):

- each adapter keeps its A output (T·r, 16-bit under autocast, else the adapters' dtype) and
  its input: the very tensor its base layer was given, or a copy of its own where autocast or
  peft's fp32 cast makes one (``lora_bytes.own_copies``); under autocast also A's and B's
  16-bit weight copies;
- frozen layers keep no matmul inputs: under autocast none of the block input's 16-bit copies
  nor the attention LayerNorm's, nor GELU's output; otherwise the block input stays only while
  a q, k or v adapter keeps that very tensor, the attention LayerNorm's output while an up
  adapter does, GELU's output while a down adapter does;
- once: the frozen embeddings keep nothing (BERT's and RoBERTa's LayerNorm over them and their
  indices; ViT's images' 16-bit copy and the patch projection's weight copy under autocast);
  the first block's q, k, v weight copies and their A's are not kept (no gradient reaches its
  input); the frozen head keeps no input (masked LM's transform and decoder; BERT's pooler —
  RoBERTa's classification head and ViT's classifier train in full, as peft's
  ``modules_to_save``, keeping what full training keeps).

Under full checkpointing the blocks keep only their inputs: of the once-per-model changes only
the embeddings' (and ViT's frozen patch projection's) remain; backward's recomputed blocks are
``profiling.estimate.encoder_ckpt``'s.

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term
from profiling.estimate.lora_bytes import adapter_bytes, own_copies
from profiling.estimate.lora_encoder_first import cached_a, not_kept
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

Moments = list[tuple[str, float, str]]

_QKV = ("q", "k", "v")


def _widths(d: Dims) -> dict[str, tuple[int, int]]:
    """Each role's (input, output) width."""
    h, f = d.h, d.f
    return {"q": (h, h), "k": (h, h), "v": (h, h), "o": (h, h), "up": (h, f), "down": (f, h)}


def check(d: Dims, cfg: TrainingConfig) -> str | None:
    """Why the estimate cannot model this LoRA on an encoder (None: it can): the CPU's
    autocast keeps what is not counted here."""
    if getattr(cfg, "target", "cuda") == "cpu":
        return "LoRA on an encoder on the CPU target; estimate it for CUDA (--target cuda)"
    return None


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """What LoRA changes in one block's saved activations (added to full training's)."""
    T, tok, r, h, f = d.s * d.b, f"{d.s}·{d.b}", int(cfg.lora_rank or 0), d.h, d.f
    roles, width = list(cfg.lora_targets), _widths(d)
    ac = 2 if e.amp else adapter_bytes(cfg)
    n, ins = len(roles), sum(width[t][0] for t in roles)
    terms = [Term(f"LoRA A outputs ({', '.join(roles)})", T * n * r * ac,
                  f"s·b·{n}r·{ac} B", f"{tok}·{n}·{r}·{ac}")]  # fmt: skip
    own = own_copies(cfg, e)
    if own:
        why = "autocast's copies" if e.amp else "peft's fp32 casts"
        terms.append(Term(f"LoRA inputs (each adapter's own: {why})", T * ins * ac,
                          f"s·b·Σ inputs·{ac} B", f"{tok}·{ins}·{ac}"))  # fmt: skip
    if e.amp:
        copies = sum(width[t][0] + width[t][1] for t in roles) * r
        terms.append(Term("frozen layers: no 16-bit input copies (q, k, v, up) nor GELU's output",
                          -T * (4 * h + f) * e.c, f"−s·b·(4h + f)·{e.c} B",
                          f"−{tok}·(4·{h} + {f})·{e.c}"))  # fmt: skip
        terms.append(Term("autocast's 16-bit copies of the adapters' weights", copies * 2,
                          "r·Σ(in + out)·2 B", f"{copies}·2"))  # fmt: skip
        return terms
    lost: list[tuple[str, int, int]] = []
    if own or not set(roles) & set(_QKV):
        lost.append(("block input", h, e.r))
    if own or "up" not in roles:
        lost.append(("attention LayerNorm output", h, e.r))
    if own or "down" not in roles:
        lost.append(("GELU output", f, e.c))
    if lost:
        value = sum(w * b for _, w, b in lost)
        terms.append(Term(f"frozen layers: inputs not kept ({', '.join(x for x, _, _ in lost)})",
                          -T * value, "−s·b·" + " − s·b·".join(
                              f"{'f' if w == f and x == 'GELU output' else 'h'}·{b}"
                              for x, w, b in lost) + " B",
                          f"−{tok}·{value}"))  # fmt: skip
    return terms


def once_per_model(
    d: Dims, e: Bytes, cfg: TrainingConfig, embeddings: list[Term], stats: tuple[int, str]
) -> list[Term]:
    """What LoRA changes once per model: the frozen embeddings (full training's ``embeddings``
    terms; ``stats``: a LayerNorm's per row) and first block's weight copies, the frozen head's
    inputs."""
    T, tok, h = d.s * d.b, f"{d.s}·{d.b}", d.h
    enc = d.extra["encoder"]
    terms: list[Term] = []
    ckpt = cfg.checkpointing == "full"  # the blocks keep only their inputs: nothing to remove
    if enc["pixels"]:
        stats_n, stats_s = stats  # pre-norm: the first block's first LayerNorm reads
        if not ckpt:
            terms.append(Term("first block's first LayerNorm keeps nothing (the frozen "
                              "embeddings need no gradient)", -T * (h * e.r + stats_n),
                              f"−s·b·(h·{e.r} + {stats_s}) B",
                              f"−{tok}·({h}·{e.r} + {stats_s})"))  # fmt: skip
        if e.amp:  # the frozen patch projection: no gradient reaches the images
            pixels = int(enc["pixels"]) * d.b
            conv = int(enc["conv"])
            terms.append(Term("frozen patch projection: the images' 16-bit copy and its weight "
                              "copy not kept", -(pixels + conv) * 2, "−(b·C·H·W + h·C·p²)·2 B",
                              f"−({pixels} + {conv})·2"))  # fmt: skip
    else:
        for term in embeddings:
            terms.append(Term(f"frozen embeddings: {term.name} not kept", -term.bytes,
                              f"−({term.formula})", f"−({term.substituted})"))  # fmt: skip
    less, less_f = not_kept(d, e, cfg)
    if less and not ckpt:
        terms.append(Term("first block: nothing kept before its first adapted projection, nor "
                          "the weight copies there", -less, f"−({less_f}) B",
                          f"−{less}"))  # fmt: skip
    c = 2 if e.amp else e.c
    if enc["head"] == "mlm":
        terms.append(Term("frozen masked-LM head: its transform's and decoder's inputs not kept",
                          -2 * T * h * c, f"−2·s·b·h·{c} B", f"−2·{tok}·{h}·{c}"))  # fmt: skip
    elif enc["kind"] == "bert":  # the frozen pooler's input: the first token (or, without
        # autocast, the last hidden state its view keeps whole)
        rows, rows_f = (d.b, "b") if e.amp else (T, "s·b")
        terms.append(Term("frozen pooler: its input not kept", -rows * h * c,
                          f"−{rows_f}·h·{c} B", f"−{rows}·{h}·{c}"))  # fmt: skip
    return terms


def _pooler_input(d: Dims, e: Bytes) -> int:
    """BERT's frozen pooler's input, which full training keeps and LoRA does not: the first
    token's 16-bit copy under autocast, else the last hidden state its view keeps whole."""
    if d.extra["encoder"]["kind"] != "bert":
        return 0
    return (d.b if e.amp else d.s * d.b) * d.h * (2 if e.amp else e.c)


def head_back(d: Dims, e: Bytes, cfg: TrainingConfig, saved: float) -> tuple[float, float]:
    """A classifier's head gone back under LoRA: what full training's head saved, less BERT's
    pooler input, freed; gradients of the classifier's trained copy only."""
    from profiling.estimate.states import saved_classifier

    shape = {"arch": "encoder", "encoder": d.extra["encoder"], "hidden": d.h}
    return saved - _pooler_input(d, e), saved_classifier(shape)[0] * adapter_bytes(cfg)


def last_norm(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, int, str]:
    """Under autocast, alive at the last block's output LayerNorm beyond full training's count
    (frozen biases are not cached): GELU's 16-bit output (a frozen down keeps none of it, an
    adapted one its own copy, but the block still holds it) and the first block's A weight
    copies autocast cached though nothing saves them; and the frozen pooler's input, not among
    the head's tensors yet to be made. (bytes, that input, what they are)"""
    a, a_f = cached_a(d, cfg)
    value = d.s * d.b * d.f * e.c + a
    return (
        value,
        _pooler_input(d, e),
        (f"GELU's output s·b·f·{e.c} and the first block's cached A copies {a_f}"),
    )


def frames(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[float, str]:
    """BERT's, RoBERTa's block at its output LayerNorm: alive in its frames though unsaved (in
    forward too, without autocast: ``plain_moments``; recomputed: ``encoder_ckpt``)."""
    T, h, f = d.s * d.b, d.h, d.f
    lost: set[str] = set()
    if cfg.lora_rank is not None:
        names = " ".join(t.name for t in per_layer(d, e, cfg))
        lost = {x for x in ("attention LayerNorm", "GELU") if e.amp or x in names}
    elif e.amp:
        lost = {"attention LayerNorm"}
    value = T * h * (e.c + e.r)
    calc = f"the output projection's output and the LayerNorm's s·b·h·({e.c} + {e.r})"
    if "attention LayerNorm" in lost:
        value += T * h * e.r
        calc += f" + the attention LayerNorm's output s·b·h·{e.r}"
    if "GELU" in lost:
        value += T * f * e.c
        calc += f" + GELU's output s·b·f·{e.c}"
    if e.amp and cfg.lora_rank is None:
        value += (5 * h + f) * 2
        calc += " + the biases' cached copies (5h + f)·2"
    return value, calc


def plain_moments(
    d: Dims, e: Bytes, cfg: TrainingConfig, fwd: float, mlp_head: tuple[float, float]
) -> list[tuple[str, float, str]]:
    """A classifier without autocast: BERT's, RoBERTa's last output LayerNorm writing its
    output in forward (its frames' unsaved tensors, ``encoder_ckpt.frames``; the head's
    tensors, not made yet), and an adapted up projection's backward after GELU's (its B's
    gradient scaled, in place of GELU's input gradient; B's weight gradient and A's output
    gradient). ``mlp_head``: the last block's MLP moment, the classifier's term."""
    T, r, f = d.s * d.b, int(cfg.lora_rank or 0), d.f
    out: list[tuple[str, float, str]] = []
    mlp, head = mlp_head
    vit = bool(d.extra["encoder"]["pixels"])
    if "down" in cfg.lora_targets:  # its adapter's backward: A's and B's weight gradients made,
        # A's input gradient summed with the base's; B's output gradient gone
        ab = adapter_bytes(cfg)
        down = mlp + r * (f + d.h) * ab - T * r * e.c
        text = (
            f"the last block's MLP {fmt_bytes(mlp)} + A's and B's weight gradients r·(f + h)·{ab} "
            f"− B's output gradient s·b·r·{e.c} = {fmt_bytes(down)}"
        )
        out.append(("backward, the last block's down adapter", down, text))
    if "up" in cfg.lora_targets and not vit:  # ViT's MLP moment is the higher (the trace's)
        ab = adapter_bytes(cfg)
        value = mlp + r * f * ab + T * r * e.c
        out.append(("backward, the last block's up adapter", value,
                    f"the last block's MLP {fmt_bytes(mlp)} + B's weight gradient r·f·{ab} + A's "
                    f"output gradient s·b·r·{e.c} = {fmt_bytes(value)}"))  # fmt: skip
    if vit:
        return out + _vit_plain(d, e, cfg, fwd, head)
    later = head - _pooler_input(d, e)
    alive, calc = frames(d, e, cfg)
    if "block input" in " ".join(t.name for t in per_layer(d, e, cfg)):  # no q, k, v adapted:
        # unsaved, the last block's input and the embeddings' output, which BertModel's frame
        # holds while its encoder runs
        alive += 2 * T * d.h * e.r
        calc += f" + the last block's input and the embeddings' output 2·s·b·h·{e.r}"
    value = fwd - later + alive
    text = (
        f"end of forward {fmt_bytes(fwd)} − the head's tensors, not made yet {fmt_bytes(later)} "
        f"+ {calc} {fmt_bytes(alive)} = {fmt_bytes(value)}"
    )
    out.append(("forward, the last block's output LayerNorm", value, text))
    if "up" in cfg.lora_targets:  # earlier, the up adapter's B output and its scaled copy; not
        # yet GELU's output, the output projection's, the residual sum, the LayerNorm's
        h = d.h
        up = value + T * f * e.c - T * h * (e.c + 2 * e.r) - T * 8
        out.append(("forward, the last block's up adapter", up,
                    f"the last output LayerNorm's {fmt_bytes(value)} + B's output and its scaled "
                    f"copy, less GELU's output s·b·f·{e.c} − the output projection's output, the "
                    f"residual sum, the LayerNorm's output and statistics s·b·(h·({e.c} + "
                    f"2·{e.r}) + 8) = {fmt_bytes(up)}"))  # fmt: skip
    return out


def _vit_plain(
    d: Dims, e: Bytes, cfg: TrainingConfig, fwd: float, later: float
) -> list[tuple[str, float, str]]:
    """ViT without autocast, its last block's MLP in forward: beyond what is saved, the
    embeddings' output (the model holds it; the first LayerNorm, frozen upstream, keeps
    nothing), the second LayerNorm's output where no up adapter keeps it, and either the up
    adapter's B output and its scaled copy or GELU's output and the second matmul's; not made
    yet, the final LayerNorm's, the classifier's and the loss's tensors."""
    T, h, f, c = d.s * d.b, d.h, d.f, e.c
    base = fwd - later + T * h * e.r
    names = " ".join(t.name for t in per_layer(d, e, cfg))
    if "attention LayerNorm" in names:  # no up adapter keeps it
        base += T * h * e.r
    if "down" in cfg.lora_targets:  # GELU's output saved: the second matmul's, its adapter's
        value = base + 3 * T * h * c  # B output and scaled copy
        what = f"the second matmul's output, its adapter's B output and scaled copy 3·s·b·h·{c}"
    else:
        value = base + T * (f + h) * c
        what = f"GELU's output and the second matmul's s·b·(f + h)·{c}"
    if "up" in cfg.lora_targets and 2 * T * f * c > value - base:
        value = base + 2 * T * f * c
        what = f"the up adapter's B output and its scaled copy 2·s·b·f·{c}"
    calc = (
        f"end of forward {fmt_bytes(fwd)} − the final LayerNorm's, the classifier's and the "
        f"loss's tensors, not made yet {fmt_bytes(later)} + the embeddings' output (and the "
        f"second LayerNorm's where unsaved) s·b·h·{e.r} + {what} = {fmt_bytes(value)}"
    )
    return [("forward, the last block's MLP", value, calc)]


def vit_last_mlp(
    d: Dims, e: Bytes, cfg: TrainingConfig, fwd: float, head: float
) -> tuple[str, float, str]:
    """ViT under autocast, its last block's second MLP matmul writing its output: alive beyond
    what is saved, the embeddings' output (the model holds it; the first LayerNorm, frozen
    upstream, keeps nothing), the LayerNorm's fp32 output the MLP reads, GELU's output, the
    bias's 16-bit copy and the first block's cached A copies; not made yet, the final
    LayerNorm's saved tensors, the classifier's input and weight copy and the loss (``head``:
    full training's term of them)."""
    T, h, f = d.s * d.b, d.h, d.f
    n = int(d.extra["encoder"]["labels"])
    a, a_f = cached_a(d, cfg)
    alive = 2 * T * h * 4 + T * f * e.c + h * 2 + T * h * e.c + a
    later = head + h * n * 2
    value = fwd + alive - later
    calc = (
        f"end of forward {fmt_bytes(fwd)} + the embeddings' output and the LayerNorm's "
        f"2·s·b·h·4, GELU's output s·b·f·{e.c}, the output and its bias's copy (s·b + 1)·h·"
        f"{e.c}, the first block's cached A copies {a_f} = {fmt_bytes(alive)} − the "
        f"final LayerNorm's, the classifier's and the loss's tensors, not made yet "
        f"{fmt_bytes(later)} = {fmt_bytes(value)}"
    )
    return "forward, the last block's MLP output", value, calc


def down_delta(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, str]:
    """``amp_down``'s forward moment less the moment it follows (BERT's, RoBERTa's output
    LayerNorm; ViT's second MLP matmul): also, recomputed under full checkpointing."""
    T, h, c = d.s * d.b, d.h, e.c
    ab = adapter_bytes(cfg)
    cast = ab if ab != c else 0  # peft's cast is a copy only to another dtype
    text = f"+ the fp32 cast s·b·f·{cast} + B's output and its scaled copy 2·s·b·h·{c} − "
    if d.extra["encoder"]["pixels"]:
        return T * d.f * cast + 2 * T * h * c - 2 * h, text + "the bias copy h·2"
    value = T * d.f * cast + 2 * T * h * c - 2 * T * h * e.r - 8 * T
    return value, text + f"the residual sum, LayerNorm's output and statistics s·b·(2h·{e.r} + 8)"


def amp_down(d: Dims, e: Bytes, cfg: TrainingConfig, out: Moments) -> Moments:
    """A classifier's adapted down projection under autocast: peft casts its 16-bit input
    (GELU's output, s·b·f) to the fp32 adapters' dtype before lora_A, whose autocast copy is
    what it saves. In forward, at the last block's down adapter writing B's scaled output: the
    base's output, B's output and its scaled copy and that fp32 cast, where the output
    LayerNorm's moment (``out``'s forward one) had the MLP's output, the residual sum, the
    statistics and the LayerNorm's output (ViT's: its bias copy, freed). In backward, in lora_A's:
    its input gradient and that cast back to fp32, the gradient reaching the block's 16-bit
    copy, A's and B's fp32 weight gradients (their 16-bit copies freed), A's and B's saved
    tensors freed; the LayerNorm's output gradient (BERT's, RoBERTa's: its saved tensors) gone,
    against "backward, the last LayerNorm"."""
    if not e.amp or "down" not in cfg.lora_targets:
        return []
    T, h, f, r, c = d.s * d.b, d.h, d.f, int(cfg.lora_rank or 0), e.c
    ab = adapter_bytes(cfg)
    cast = ab if ab != c else 0  # peft's cast is a copy only to another dtype
    vit = bool(d.extra["encoder"]["pixels"])
    found = {name: value for name, value, _ in out}
    fwd_name = next(n for n in found if n.startswith("forward"))
    delta, delta_f = down_delta(d, e, cfg)
    fwd = found[fwd_name] + delta
    norm = found["backward, the last LayerNorm"]
    freed = T * (h * e.r + (0 if vit else h * e.r + 8))
    saved = T * f * c + T * r * c + r * (f + h) * 2
    back = norm - freed + T * h * c + T * f * (c + cast) + r * (f + h) * ab - saved
    f_ = fmt_bytes
    return [
        ("forward, the last block's down adapter", fwd,
         f"{fwd_name} {f_(found[fwd_name])} {delta_f} = {f_(fwd)}"),
        ("backward, the last block's down adapter", back,
         f"the last LayerNorm's backward {f_(norm)} − its output gradient"
         + ("" if vit else f" and saved input and statistics s·b·(2h·{e.r} + 8)")
         + f" + the gradient's 16-bit copy s·b·h·{c} + A's input gradient and its fp32 cast "
         f"s·b·f·({c} + {cast}) + A's and B's weight gradients r·(f + h)·{ab} − A's and B's "
         f"saved inputs and weight copies s·b·(f + r)·{c} + r·(f + h)·2 = {f_(back)}"),
    ]  # fmt: skip


def amp_up(d: Dims, e: Bytes, cfg: TrainingConfig, out: Moments) -> Moments:
    """BERT's, RoBERTa's adapted up projection under autocast (no down adapter), its adapter's
    backward after GELU's (``out``'s "backward, the last block's MLP", whose tensors stay):
    in lora_B's, B's 16-bit weight gradient r·f·c and its input gradient s·b·r·c; in lora_A's,
    A's input gradient and its cast back to the LayerNorm output's fp32 s·b·h·(c + 4), B's
    fp32 weight gradient made and its 16-bit weight copy freed r·f·(4 − c), the scaled output
    gradient and B's saved input (A's output) gone s·b·(f + r)·c. Read from the trace's
    per-module peaks of the last block's lora_A and lora_B across rank, hidden size, MLP width
    and batch (the highest moment of backward by up to 16 KB; tests/profiling/trace/
    test_lora_encoder_amp_up.py). ViT's pre-norm block keeps its MLP's moment the higher."""
    vit = bool(d.extra["encoder"]["pixels"])
    if not e.amp or vit or "up" not in cfg.lora_targets or "down" in cfg.lora_targets:
        return []
    T, h, f, r, c = d.s * d.b, d.h, d.f, int(cfg.lora_rank or 0), e.c
    ab = adapter_bytes(cfg)
    mlp = next(v for n, v, _ in out if n == "backward, the last block's MLP")
    b_up = mlp + r * f * c + T * r * c
    a_up = mlp + T * h * (c + e.r) + r * f * (ab - c) - T * (f + r) * c
    f_ = fmt_bytes
    return [
        ("backward, the last block's up adapter's B", b_up,
         f"the last block's MLP {f_(mlp)} + B's 16-bit weight gradient r·f·{c} and input "
         f"gradient s·b·r·{c} = {f_(b_up)}"),
        ("backward, the last block's up adapter's A", a_up,
         f"the last block's MLP {f_(mlp)} + A's input gradient and its fp32 cast s·b·h·({c} + "
         f"{e.r}) + B's fp32 weight gradient less its 16-bit copy r·f·({ab} − {c}) − the scaled "
         f"output gradient and B's saved input s·b·(f + r)·{c} = {f_(a_up)}"),
    ]  # fmt: skip


__all__ = [
    "amp_down",
    "amp_up",
    "check",
    "down_delta",
    "frames",
    "head_back",
    "last_norm",
    "once_per_model",
    "per_layer",
    "plain_moments",
    "vit_last_mlp",
]
