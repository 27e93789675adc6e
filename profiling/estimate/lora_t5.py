"""LoRA on an encoder-decoder (T5, mT5) in closed form: what peft's adapters keep and what a
frozen base no longer keeps, against full training's ``profiling.estimate.t5``, matching the
trace of transformers' module with peft's adapters (``profiling.trace.lora_t5``).

peft adapts the roles in both stacks: the encoder's self-attention, and in the decoder its
self-attention and its cross-attention (whose k and v read the encoder's output: T = s·b
tokens; everything else of the decoder reads U = t·b). Per adapter with input width ``in``:

- its A output (tokens·r in the adapters' dtype); its input — the very tensor its base layer
  was given, or a copy of its own where peft casts it to the fp32 adapters (``mixed``) or
  lora_dropout makes one (``lora_bytes.own_copies``), with dropout's mask beside it;
- frozen layers keep no inputs: a norm's output stays only while an adapter keeps that very
  tensor (q, k or v for the attention norms, cross-attention's q for the decoder's second, up
  or gate for the MLP's, cross-attention's k or v for the encoder's final norm), the gated
  MLP's product only while down's adapter does (ReLU keeps its output itself); no norm keeps
  its normalized values (their weights are frozen), nor the head its input;
- the position tables and the embedding are frozen: no bucket indices kept (int64 s², t²)
  nor the decoder's input (the labels shifted right, int64 t·b), and the decoder's
  causal ``where`` over the bias keeps no mask (t² a block);
- each stack's first block reads the frozen embedding's output, which needs no gradient: its
  first norm keeps nothing, and its q, k and v adapters keep no dropout mask.

Under autocast (``amp-*``) the norms are fp32 (their normalized values too), each adapter keeps
lora_A's 16-bit copy of its input and a 16-bit A output, the frozen layers none of the 16-bit
copies full training's matmuls keep (q, k, v, cross-attention's q, k, v, the MLP's two inputs),
and autocast's weight copies are the adapters' (``_amp_weight_copies``). The CPU target is not
modelled with LoRA yet (``check``). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term, _cuda
from profiling.estimate.lora_bytes import adapter_bytes, mask_bytes, own_copies
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

_QKV = ("q", "k", "v")
_ATTENTION = ("q", "k", "v", "o")


def check(d: Dims, cfg: TrainingConfig) -> str | None:
    """Why the estimate cannot model this LoRA on an encoder-decoder (None: it can)."""
    if not _cuda(cfg):
        return "LoRA on an encoder-decoder on the CPU target; estimate it for CUDA (--target cuda)"
    if "gate" in _roles(cfg) and not d.extra["t5"]["gated"]:
        return "LoRA on gate: this T5's MLP (ReLU, v1.0) has none; adapt up or down"
    if not set(_roles(cfg)) & set(_QKV):
        return (
            "LoRA on an encoder-decoder without q, k or v: the first blocks' attention then "
            "keeps nothing, which the estimate does not model; adapt at least one of q, k, v"
        )
    return None


def _roles(cfg: TrainingConfig) -> list[str]:
    return [t for t in cfg.lora_targets if t != "lm_head"]


def _width(d: Dims, role: str) -> int:
    """A role's input width: h, but q (heads × d_kv) for o and f for down."""
    return {"o": int(d.extra["t5"]["q_dim"]), "down": d.f}.get(role, d.h)


def _t(d: Dims) -> int:
    return int(d.extra["t5"]["target_seq"] or d.s)


def _adapters(tokens: int, roles: list[str], d: Dims, cfg: TrainingConfig, first: bool) -> int:
    """What the adapters on ``roles`` reading ``tokens`` keep: A outputs, their own input copies
    and dropout masks (none for a first block's q, k, v: their input needs no gradient)."""
    e, r = Bytes.of(cfg.precision), int(cfg.lora_rank or 0)
    ac = 2 if e.amp else adapter_bytes(cfg)  # autocast: lora_A's 16-bit input copy and output
    value = tokens * len(roles) * r * ac
    if own_copies(cfg, e):
        value += tokens * sum(_width(d, t) for t in roles) * ac
    if cfg.lora_dropout:
        masked = [t for t in roles if not (first and t in _QKV)]
        value += tokens * sum(_width(d, t) for t in masked) * mask_bytes(cfg)
    return value


def _kept(shared: bool, readers: set[str], roles: list[str]) -> bool:
    """Whether an input stays: an adapter among ``readers`` keeps that very tensor."""
    return shared and bool(readers & set(roles))


def _mlp_lost(tokens: int, d: Dims, e: Bytes, shared: bool, roles: list[str]) -> int:
    """The MLP's norm output and the gated product, unless an adapter keeps them."""
    lost = 0 if _kept(shared, {"up", "gate"}, roles) else tokens * d.h * e.c
    if d.extra["t5"]["gated"] and not _kept(shared, {"down"}, roles):
        lost += tokens * d.f * e.c
    return lost


def _nv(e: Bytes) -> int:
    """A norm's normalized values' element size: fp32 under autocast (T5 norms in fp32)."""
    return 4 if e.amp else e.c


def _mlp_lost_amp(tokens: int, d: Dims, e: Bytes) -> int:
    """Under autocast: the frozen MLP's 16-bit copies of its input (wi, or wi_0 and wi_1) and
    of wo's input (ReLU's output cast back, or the fp32 gated product), kept by nothing."""
    return ((2 if d.extra["t5"]["gated"] else 1) * d.h + d.f) * tokens * e.c


def _first_norm(tokens: int, d: Dims, e: Bytes) -> int:
    """A first block's first norm, all of which full training keeps beside its output."""
    return tokens * ((0 if e.r == 4 else 4) * d.h + e.r * d.h + 4)


def encoder_block(d: Dims, cfg: TrainingConfig) -> int:
    """One encoder block's change (a later block: ``once_per_model`` corrects the first)."""
    e, roles, T = Bytes.of(cfg.precision), _roles(cfg), d.s * d.b
    shared = not own_copies(cfg, e)
    value = _adapters(T, roles, d, cfg, False) - 2 * T * d.h * _nv(e)  # the normalized values
    if e.amp:  # the frozen q, k, v keep no 16-bit copies of the norm's output
        return value - 3 * T * d.h * e.c - _mlp_lost_amp(T, d, e)
    value -= 0 if _kept(shared, set(_QKV), roles) else T * d.h * e.c
    return value - _mlp_lost(T, d, e, shared, roles)


def decoder_block(d: Dims, cfg: TrainingConfig) -> int:
    """One decoder block's change: its self-attention's and MLP's adapters as the encoder's,
    cross-attention's q and o over U tokens, k and v over the encoder's T; the causal mask."""
    e, roles, T, t = Bytes.of(cfg.precision), _roles(cfg), d.s * d.b, _t(d)
    U = t * d.b
    shared = not own_copies(cfg, e)
    cross = [x for x in roles if x in _ATTENTION]
    value = _adapters(U, roles, d, cfg, False) - 3 * U * d.h * _nv(e) - t * t
    value += _adapters(U, [x for x in cross if x in ("q", "o")], d, cfg, False)
    value += _adapters(T, [x for x in cross if x in ("k", "v")], d, cfg, False)
    if e.amp:  # no 16-bit copies for the frozen q, k, v, cross q (U) and cross k, v (T)
        return value - (4 * U + 2 * T) * d.h * e.c - _mlp_lost_amp(U, d, e)
    value -= 0 if _kept(shared, set(_QKV), roles) else U * d.h * e.c
    value -= 0 if _kept(shared, {"q"}, roles) else U * d.h * e.c
    return value - _mlp_lost(U, d, e, shared, roles)


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """What LoRA changes in one encoder block's saved activations (added to full training's)."""
    if cfg.checkpointing == "full":
        return []
    value = encoder_block(d, cfg)
    return [Term(f"LoRA on {', '.join(_roles(cfg))}: A outputs, adapters' own inputs and "
                 "dropout masks; frozen layers' inputs and norms' normalized values not kept",
                 value, "r·A outputs + copies − frozen inputs", f"{value}")]  # fmt: skip


def once_per_model(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """The decoder's blocks, both first blocks, the final norms, the head's input, the buckets."""
    if cfg.checkpointing == "full":
        return _ckpt_once(d, e, cfg)
    roles, T, t = _roles(cfg), d.s * d.b, _t(d)
    U, L = t * d.b, int(d.extra["t5"]["decoder_layers"])
    dec = decoder_block(d, cfg)
    terms = [Term(f"LoRA in the decoder's blocks ×{L} (cross-attention's adapters too)", L * dec,
                  f"L_dec·{dec}", f"{L}·{dec}")]  # fmt: skip
    first = -_first_norm(T, d, e) - _first_norm(U, d, e)
    if cfg.lora_dropout:  # no mask where the input needs no gradient
        qkv = sum(_width(d, x) for x in roles if x in _QKV)
        first -= (T + U) * qkv * mask_bytes(cfg)
    terms.append(Term("both first blocks: the first norm keeps nothing, q, k, v no dropout "
                      "masks (the frozen embedding needs no gradient)", first, "",
                      f"{first}"))  # fmt: skip
    shared = not own_copies(cfg, e)
    final = -(T + U) * d.h * _nv(e) - U * d.h * e.c  # normalized values ×2, the head's input
    # the encoder's output (under autocast each cross-attention k, v keeps its own copy)
    final -= 0 if e.amp or _kept(shared, {"k", "v"}, roles) else T * d.h * e.c
    terms.append(Term("final norms' normalized values, the frozen head's input (and the "
                      "encoder's output unless cross-attention's k or v adapter keeps it)",
                      final, "", f"{final}"))  # fmt: skip
    if e.amp:
        terms.append(_amp_weight_copies(d, cfg))
    frozen = -8 * (d.s * d.s + t * t + U)
    terms.append(Term("frozen position tables and embedding: no bucket indices nor shifted "
                      "labels kept", frozen, "−8·(s² + t² + t·b) B",
                      f"−8·({d.s}² + {t}² + {U})"))  # fmt: skip
    return terms


def _ckpt_once(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """LoRA's change to ``t5._ckpt_once``: frozen final norms keep no normalized values, the
    frozen head no input (nor its autocast copy), the frozen embedding no labels."""
    T, U = d.s * d.b, _t(d) * d.b
    nv = 4 if e.amp else e.c
    value = -(T + U) * d.h * nv - U * d.h * e.c - U * 8
    return [Term("LoRA: frozen final norms keep no normalized values, the frozen head no input, "
                 "the frozen embedding no labels", value,
                 f"−(s + t)·b·h·{nv} − t·b·h·{e.c} − t·b·8 B", f"{value}")]  # fmt: skip


def _amp_weight_copies(d: Dims, cfg: TrainingConfig) -> Term:
    """Autocast's 16-bit weight copies under LoRA (full training's count keeps every matmul
    weight's): the adapters' A and B are cached and kept too, but not the first blocks' A on q,
    k, v (their input, the frozen embedding's, needs no gradient); those first blocks' frozen
    q, k and v keep no copy (nothing of theirs needs a gradient)."""
    r, q, L = int(cfg.lora_rank or 0), int(d.extra["t5"]["q_dim"]), d.L
    roles, dec = _roles(cfg), int(d.extra["t5"]["decoder_layers"])
    cross = [x for x in roles if x in _ATTENTION]
    ends = {"o": (q, d.h), "gate": (d.h, d.f), "up": (d.h, d.f), "down": (d.f, d.h)}
    size = {x: r * sum(ends.get(x, (d.h, q))) for x in roles}
    adapters = L * sum(size.values()) + dec * (sum(size.values()) + sum(size[x] for x in cross))
    first = 2 * r * d.h * sum(1 for x in roles if x in _QKV)  # the first blocks' A on q, k, v
    value = 2 * (adapters - first) - 2 * 6 * d.h * q
    return Term("autocast's 16-bit copies of the adapters (cached, kept), not of the first "
                "blocks' frozen q, k, v nor their A", value, "2·(adapters − first A) − 2·6·h·q",
                f"2·({adapters} − {first}) − 2·6·{d.h}·{q}")  # fmt: skip


def _after_cross_kv(d: Dims, cfg: TrainingConfig, t: int) -> int:
    """What the step keeps that is made after the last decoder block's cross-attention has
    projected k and v: that attention's output and logsumexp (the kernel's seed and offset), o's
    adapter, the MLP's norm and the MLP, the final norm and the loss's log-probabilities."""
    from profiling.estimate.t5 import _mlp

    e, roles, U = Bytes.of(cfg.precision), _roles(cfg), t * d.b
    shared, q = not own_copies(cfg, e), int(d.extra["t5"]["q_dim"])
    value = U * q * e.c + 4 * d.a * d.b * (-(-t // 32) * 32) + 16
    value += _adapters(U, [x for x in roles if x == "o"], d, cfg, False)
    norms = 2 * _first_norm(U, d, e) + (
        U * d.h * e.c if _kept(shared, {"up", "gate"}, roles) else 0
    )
    mlp = _mlp(U, d, e, cfg) + _adapters(
        U, [x for x in roles if x not in _ATTENTION], d, cfg, False
    )
    if d.extra["t5"]["gated"] and not _kept(shared, {"down"}, roles):
        mlp -= U * d.f * e.c  # the product: down's frozen matmul keeps none of it
    assert d.V is not None
    return value + norms + mlp + U * d.V * e.c + 2 * e.c


def _alive_in_decoder(d: Dims, cfg: TrainingConfig, t: int) -> int:
    """Held by the forward while the decoder runs but kept by nothing for backward under LoRA:
    the encoder's output (unless cross-attention's k or v adapter keeps that very tensor), the
    decoder's input ids (the labels shifted right, int64) and their embeddings, the decoder's
    position bias (a·t², handed from block to block), and the block's second norm's output
    (unless cross-attention's q adapter keeps it)."""
    e, roles, U = Bytes.of(cfg.precision), _roles(cfg), t * d.b
    shared = not own_copies(cfg, e)
    value = U * 8 + U * d.h * e.c + d.a * t * t * e.c
    value += 0 if _kept(shared, {"k", "v"}, roles) else d.s * d.b * d.h * e.c
    return value + (0 if _kept(shared, {"q"}, roles) else U * d.h * e.c)


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """The last decoder block's cross-attention adapting the encoder's T tokens late in the
    forward: at its v adapter (k's when v is not adapted) the base layer's output, B's output
    and its scaled copy are alive, T·q each (B's and the copy in the adapters' dtype), where
    the step keeps only the sum; what the step makes after it is not made yet. Where the target
    is much shorter than the input (T ≫ t·b) this is the forward's peak. ``d``: the logits'
    dims (``t5.logit_dims``: s is the target's)."""
    if d is None or d.arch != "t5" or cfg.lora_rank is None or cfg.checkpointing == "full":
        return []
    roles = _roles(cfg)
    last = "v" if "v" in roles else "k" if "k" in roles else None
    if last is None:
        return []
    t, s = d.s, int(d.extra["t5"]["source_seq"])
    src = Dims(**{**d.__dict__, "s": s})
    e, T, q = Bytes.of(cfg.precision), s * d.b, int(d.extra["t5"]["q_dim"])
    later = _after_cross_kv(src, cfg, t) + (T * q * e.c if last == "k" else 0)  # v's output
    transient = 2 * T * q * adapter_bytes(cfg)
    alive = _alive_in_decoder(src, cfg, t)
    value = fwd - later + transient + alive
    calc = (f"end of forward {fmt_bytes(fwd)} − what is kept after it, not made yet "
            f"{fmt_bytes(later)} + B's output and its scaled copy 2·s·b·q·{adapter_bytes(cfg)} "
            f"{fmt_bytes(transient)} + what the forward holds that no backward keeps (the "
            f"encoder's output, the decoder's input ids and embeddings, its position bias, the "
            f"block's second norm's output) {fmt_bytes(alive)} = {fmt_bytes(value)}")  # fmt: skip
    out = [(f"forward, the last decoder block's cross-attention {last} adapter", value, calc)]
    return [*out, _cross_backward(src, cfg, t, fwd, later)]


def _cross_backward(
    d: Dims, cfg: TrainingConfig, t: int, fwd: float, later: int
) -> tuple[str, float, str]:
    """Backward at the last decoder block's cross-attention: what the step kept after it is
    freed (but the attention's own saved tensors and the loss the loop holds), the gradients
    reaching it (the residual stream's, the attention output's), the kernel's q, k and v
    gradients (k's and v's over the encoder's T tokens, whether or not k needs one) and the
    weight gradients of the adapters backward has passed (the block's o and MLP)."""
    e, q, U, T = Bytes.of(cfg.precision), int(d.extra["t5"]["q_dim"]), t * d.b, d.s * d.b
    own = U * q * e.c + 4 * d.a * d.b * (-(-t // 32) * 32) + 16  # output, logsumexp, seed
    freed = later - own - 2 * e.c
    grads = U * d.h * e.r + 2 * U * q * e.c + 2 * T * q * e.c
    sides = {"o": q + d.h, "up": d.h + d.f, "gate": d.h + d.f, "down": d.f + d.h}
    made = int(cfg.lora_rank or 0) * sum(sides.get(x, 0) for x in _roles(cfg))
    grads += made * adapter_bytes(cfg)  # the adapters gone back already: o's, the MLP's
    value = fwd - freed + grads
    calc = (f"end of forward {fmt_bytes(fwd)} − what backward has freed {fmt_bytes(freed)} + "
            f"the residual's and the output's gradients, q's, k's and v's s·b·h·{e.r} + "
            f"2·t·b·q·{e.c} + 2·s·b·q·{e.c}, the passed adapters' weight gradients "
            f"{fmt_bytes(grads)} = {fmt_bytes(value)}")  # fmt: skip
    return "backward, the last decoder block's cross-attention", value, calc


__all__ = ["check", "decoder_block", "encoder_block", "moments", "once_per_model", "per_layer"]
