"""LoRA on an encoder-decoder (T5, mT5) under full checkpointing, in closed form: what the
step keeps after forward, and the backward of its recomputed blocks, matching the trace of
peft's adapters on transformers' ``T5ForConditionalGeneration`` with every block of both stacks
checkpointed (``trace.build``: non-reentrant, as ``gradient_checkpointing_enable`` does).

After forward (``t5._ckpt_once``, ``lora_t5._ckpt_once``): every block's input (the
encoder's T = s·b tokens, the decoder's U = t·b), the position biases each stack's first
block returns and the later blocks read (a·s² and a·t² in the tables' dtype, the zero
cross-attention bias a·t·s), both final norms' kept tensors (the encoder's output, which
every decoder block reads, among them), the loss's log-probabilities.

In backward (``moments``), read op by op from the trace (each block's recomputation entered,
the allocations summed): the loss's and the decoder's final norm's tensors are freed, then each
block is recomputed and goes back beside what the step still holds: the checkpoints of the
blocks below it, the adapters' gradients of the blocks gone back, the gradient reaching it, and
in the decoder the encoder's output's gradient summed over the blocks (T·h·c) and, below the
second block, one more t·b·h gradient. Its rise above that: its kept tensors recomputed
(``estimate.t5``'s and ``estimate.lora_t5``'s count of one block, less its input: the checkpoint
itself) and the larger of
- the gated MLP going back: down's input gradient and both factors' gradients (3·N·f·c);
- in the decoder, its cross-attention over the encoder's tokens: the kernel's q, k and v
  gradients (k's and v's T-sized), k's or v's adapter going back (B's gradient cast to the
  adapters' dtype and scaled), or the recomputation's forward at that adapter (B's output and
  its scaled copy over T tokens: ``lora_t5.moments``' moment, inside the block).
A first block's input needs no gradient (its first norm keeps nothing, its q, k, v adapters no
dropout masks) and it makes the biases again. Each stack's final norm going back holds four
N·h fp32 gradients (T5's norm runs in fp32).

Checked equal to the trace at the peak and per category on Flan-T5 and mT5 (q ≠ d_model), fp32,
mixed and bf16, q/v to all four attention layers, dropout, 2–5 blocks a stack, targets shorter
and much shorter than the input (tests/profiling/trace/test_t5_ckpt.py), and on T5 v1.0's ReLU MLP,
where the MLP's norm going back (four fp32 N·h gradients) leads when d_ff is small (``_rise``).
Under autocast (``_rise_amp``, as ``t5_ckpt_full`` reads a full finetune's): the recomputed
block's 16-bit copies of its frozen weights and of its adapters (a first block's frozen q, k, v
none), the fp32 log-probabilities and encoder output, the gated MLP going back in fp32 (three
N·f·4 gradients), and the recomputation's end (``_end_amp``): the MLP's 16-bit output
gradient, its norm's fp32 output, the frozen wo's input copy alive as its weight's copy is
saved last (with the gated MLP's fp32 product; ReLU's fp32 cast), a first block's bias.
Adapters on the MLP (up, gate, down; ``estimate.t5_mlp_ckpt``): the MLP recomputed and going
back is walked op by op — peft's adapter transients inside the recomputation (up's or gate's B
output and its scaled copy), down's first gradients made before the recomputation starts, the
recomputation's end with down's frozen output, the adapters' gradients — and, on ReLU, the
MLP's norm goes back once all the MLP kept is freed; under autocast ``estimate.t5_mlp_amp``
walks it with the matmuls' 16-bit copies. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate import lora_t5, t5, t5_ckpt_full, t5_mlp_amp, t5_mlp_ckpt
from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.t5 import _table
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def _adapters(d: Dims, cfg: TrainingConfig, cross: bool) -> int:
    """One block's LoRA parameters (r·(in + out) per adapted layer; a decoder block's
    cross-attention too)."""
    from profiling.estimate.lora_t5 import _ATTENTION, _roles, _width

    r, q = int(cfg.lora_rank or 0), int(d.extra["t5"]["q_dim"])
    outs = {"q": q, "k": q, "v": q, "o": d.h, "gate": d.f, "up": d.f, "down": d.h}
    roles = _roles(cfg)
    n = sum(r * (_width(d, x) + outs[x]) for x in roles)
    return n + (sum(r * (_width(d, x) + outs[x]) for x in roles if x in _ATTENTION) if cross else 0)


def _rise(
    tokens: int, d: Dims, e: Bytes, cfg: TrainingConfig, kept: int, encoder: bool = False
) -> int:
    """A later block's backward above its start: its kept tensors recomputed (less its input,
    which is the checkpoint itself) and the MLP's gradients; on T5 v1.0's ReLU MLP, where it
    is larger, the MLP's norm going back: ReLU's output freed, four fp32 N·h gradients (rsqrt's
    N·4 freed) — it leads where d_ff < 2·d_model (the tiny test models; no published T5). In
    an encoder block one N·h·c more is freed by then (read from the trace: 60·N B lower there
    in 16 bits, where the MLP leads instead)."""
    base = kept - tokens * d.h * e.r
    if e.amp:
        return _rise_amp(tokens, d, e, cfg, base, not encoder)
    # the MLP going back: its gradients, or its adapters walked (all it kept freed by the end)
    mlp, end = (3 if d.extra["t5"]["gated"] else 2) * tokens * d.f * e.c, -tokens * d.f * e.c
    if {"up", "gate", "down"} & set(cfg.lora_targets):
        _, mlp, end = t5_mlp_ckpt.rise(tokens, d, e, cfg)
    if d.extra["t5"]["gated"]:
        return base + mlp
    norm = base + end + tokens * (16 * d.h - 4)
    norm -= tokens * d.h * e.c if encoder else 0
    return max(base + mlp, norm)


def _rise_amp(tokens: int, d: Dims, e: Bytes, cfg: TrainingConfig, base: int, dec: bool) -> int:
    """Under autocast (``t5_ckpt_full``'s reading, the weights frozen): the recomputed block's
    16-bit copies of its frozen weights and of its adapters; the gated MLP going back in fp32
    (three fp32 N·f gradients), or the recomputation's end on ReLU."""
    from profiling.estimate.t5_ckpt_full import _copies

    base += _copies(d, dec) + 2 * _adapters(d, cfg, dec)
    end = _end_amp(tokens, d, e, cfg, base, dec)
    if {"up", "gate", "down"} & set(cfg.lora_targets):  # the MLP's adapters walked
        return max(end, base + t5_mlp_amp.rise(tokens, d, e, cfg)[1])
    if d.extra["t5"]["gated"]:
        return max(base + 3 * tokens * d.f * 4, end)  # frozen wo kept no input copy
    return end


def _end_amp(tokens: int, d: Dims, e: Bytes, cfg: TrainingConfig, base: int, dec: bool) -> int:
    """Under autocast, the recomputation's end above the block's start (``base``: its kept
    tensors less its input, with its weights' and adapters' 16-bit copies), as
    ``t5_ckpt_full._recomputed`` reads it; the frozen wo saves its weight's copy last, made
    after its input's 16-bit copy, which nothing keeps but is alive as it stops (and the gated
    MLP's fp32 product it was cast from: the frozen wo keeps neither)."""
    from profiling.estimate.t5_ckpt_full import _copies, _recomputed

    if {"up", "gate", "down"} & set(cfg.lora_targets):
        return base + t5_mlp_amp.rise(tokens, d, e, cfg)[0]
    end = _recomputed(tokens, d, e, base + tokens * d.h * e.r, dec) - _copies(d, dec)
    return end + tokens * d.f * (e.c + (4 if d.extra["t5"]["gated"] else 0))


def _cross_rise(d: Dims, e: Bytes, cfg: TrainingConfig, t: int, kept: int) -> int:
    """A later decoder block's backward at its cross-attention's kernel: the block's kept
    tensors less what its MLP, its MLP's norm and o kept (freed by then), the gradient of the
    attention's output and the kernel's q, k and v gradients (k's and v's over the encoder's
    T tokens)."""
    from profiling.estimate.lora_bytes import adapter_bytes, own_copies
    from profiling.estimate.lora_t5 import _after_cross_kv, _first_norm, _roles

    U, T, q = t * d.b, d.s * d.b, int(d.extra["t5"]["q_dim"])
    assert d.V is not None
    own = U * q * e.c + 4 * d.a * d.b * (-(-t // 32) * 32) + 16  # output, logsumexp, seed
    later = _after_cross_kv(d, cfg, t) - own - _first_norm(U, d, e) - U * d.V * e.c - 2 * e.c
    at = kept - U * d.h * e.r - later + U * q * e.c  # and the attention output's gradient
    kernel = at + (U + 2 * T) * q * e.c
    # then k's or v's adapter going back over T tokens, the kernel's saved tensors freed: B's
    # output gradient scaled (and first cast to the adapters' dtype where it differs)
    saved = own + (U + 2 * T) * q * e.c
    a = adapter_bytes(cfg)
    adapter = T * q * a * (2 if a != e.c else 1) if {"k", "v"} & set(_roles(cfg)) else 0
    back = at - saved + 2 * T * q * e.c + adapter
    roles = _roles(cfg)
    last = "v" if "v" in roles else "k" if "k" in roles else None
    if last is None:
        return max(kernel, back)
    # the recomputation's forward at that adapter (``lora_t5.moments``' moment, in the block):
    # B's output and its scaled copy over T tokens beside the base layer's output; the block's
    # second norm's output alive unless cross-attention's q adapter keeps it
    shared = not own_copies(cfg, e)
    made = at - U * q * e.c - own - (T * q * e.c if last == "k" else 0) + 2 * T * q * a
    made += 0 if shared and "q" in roles else U * d.h * e.c
    if a != e.c and cfg.lora_dropout:  # peft's cast of the input, alive beside dropout's output
        made += T * d.h * a
    return max(kernel, back, made)


def _first(tokens: int, d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """A first block's rise less a later one's: its input needs no gradient (the frozen
    embedding's), so its first norm keeps nothing and its q, k, v adapters no dropout masks."""
    from profiling.estimate.lora_bytes import mask_bytes
    from profiling.estimate.lora_t5 import _QKV, _first_norm, _roles, _width

    value = tokens * d.h * e.r - _first_norm(tokens, d, e)
    if e.amp:  # nothing of the frozen q, k, v needs a gradient: no 16-bit copy of theirs
        value -= 2 * 3 * d.h * int(d.extra["t5"]["q_dim"])
    if cfg.lora_dropout:
        value -= tokens * sum(_width(d, x) for x in _roles(cfg) if x in _QKV) * mask_bytes(cfg)
    return value


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """Backward under full checkpointing with LoRA: each stack's final norm going back, and
    the highest recomputed block of each stack (name, bytes, calculation). ``d``: the logits'
    dims (``t5.logit_dims``: s is the target's); ``fwd``: the end of forward."""
    if d is None or d.arch != "t5" or cfg.checkpointing != "full" or cfg.lora_rank is None:
        return []
    from profiling.estimate.lora_bytes import adapter_bytes

    t, s = d.s, int(d.extra["t5"]["source_seq"])
    src = Dims(**{**d.__dict__, "s": s})
    e, T, U = Bytes.of(cfg.precision), s * d.b, t * d.b
    L, Ld, h = d.L, int(d.extra["t5"]["decoder_layers"]), d.h
    tb = _table(e, cfg)
    assert d.V is not None
    # the log-probabilities (fp32 under autocast, the head's 16-bit weight copy with them)
    logits = U * d.V * (4 if e.amp else e.c) + (d.V * h * 2 if e.amp else 0)
    # frozen: no normalized values, no head input (under autocast: no 16-bit output kept)
    f_dec = t5._norm(U, src, e) - (U * h * 4 if e.amp else 2 * U * h * e.c)
    # its output stays: the encoder's output (fp32 under autocast, where _norm omits it)
    f_enc = t5._norm(T, src, e) - (0 if e.amp else T * h * e.c)
    o = 4 if e.amp else e.c  # the encoder's output's (and its gradient's) bytes
    b_dec = (d.a * t * t * tb + d.a * t * s * e.c) if Ld > 1 else 0
    b_enc = d.a * s * s * tb if L > 1 else 0
    g = adapter_bytes(cfg)
    g_dec, g_enc = _adapters(src, cfg, True) * g, _adapters(src, cfg, False) * g
    k_dec = t5._decoder_block(src, e, cfg) + lora_t5.decoder_block(src, cfg)
    k_enc = t5._encoder_block(src, e, cfg) + lora_t5.encoder_block(src, cfg)
    r_mlp, r_cross = _rise(U, src, e, cfg, k_dec), _cross_rise(src, e, cfg, t, k_dec)
    r_enc = _rise(T, src, e, cfg, k_enc, encoder=True)
    end_dec = end_enc = 0
    if e.amp:
        from profiling.estimate.t5_ckpt_full import _copies

        end_dec, end_enc = (_end_amp(n, src, e, cfg, k - n * h * e.r + _copies(src, dec)
                                     + 2 * _adapters(src, cfg, dec), dec)
                            for n, k, dec in ((U, k_dec, True), (T, k_enc, False)))  # fmt: skip
    elif {"up", "gate", "down"} & set(cfg.lora_targets):
        # the MLP's adapters recomputed, up to the recomputation's end (its locals alive)
        end_dec, end_enc = (k - n * h * e.r + t5_mlp_ckpt.rise(n, src, e, cfg)[0]
                            for n, k in ((U, k_dec), (T, k_enc)))  # fmt: skip
    ends = e.amp or {"up", "gate", "down"} & set(cfg.lora_targets)
    f = fmt_bytes
    top = fwd - logits - f_dec + U * h * e.r
    norm = 16 * h - 4  # T5's norm going back in fp32: four N·h·4 gradients; its rsqrt freed
    out = [
        (
            "backward, the decoder's final norm",
            top - U * h * e.r + f_dec + U * (h * e.c + norm),
            f"end of forward {f(fwd)} − the log-probabilities t·b·V·{e.c} {f(logits)} + the "
            f"head's input gradient t·b·h·{e.c} and the norm's four fp32 gradients t·b·16h",
        )
    ]

    def dec(k: int) -> tuple[float, float]:  # k: blocks gone back already
        # below the top: its checkpoint freed, the encoder's output's gradient summed; each
        # block below the second holds one more t·b·h gradient (the one before's stays)
        start = top + k * g_dec + ((T * h * o - U * h * e.r) if k else 0)
        # below the top block, the cross-attention goes back beside one more t·b·h gradient
        rise = max(r_mlp, r_cross + (U * h * e.r if k else 0))
        if k < Ld - 1:
            return start, rise
        # the first block: the biases freed, recomputed inside; its input needs no gradient;
        # its bias alive in the tables' dtype until the recomputation ends
        rise = max(rise, end_dec + d.a * t * t * tb) if ends else rise
        return start - b_dec, rise + _first(U, src, e, cfg) + d.a * t * s * e.c

    best = t5_ckpt_full.highest_block(Ld, dec)
    out.append(("backward, a recomputed decoder block", best[0], _words(fwd, best[1], "t")))
    enc_top = fwd - logits - f_dec - Ld * U * h * e.r - b_dec - f_enc + T * h * e.r + Ld * g_dec
    out.append(("backward, the encoder's final norm",
                enc_top - T * h * e.r + f_enc - T * h * e.c + T * (h * e.c + norm),
                f"the encoder's start {f(enc_top)} less its gradient s·b·h·{e.r} + the norm's "
                "kept tensors, the gradient reaching it and its four fp32 gradients"))  # fmt: skip

    def enc(k: int) -> tuple[float, float]:
        first = k == L - 1
        start = enc_top - k * T * h * e.r + k * g_enc - (b_enc if first else 0)
        if not first:
            return start, r_enc
        rise = max(r_enc, end_enc + d.a * s * s * tb) if ends else r_enc
        return start, rise + _first(T, src, e, cfg)

    best = t5_ckpt_full.highest_block(L, enc)
    out.append(("backward, a recomputed encoder block", best[0], _words(fwd, best[1], "s")))
    return out


def _words(fwd: float, block: str, n: str) -> str:
    return (f"end of forward {fmt_bytes(fwd)}, the loss's log-probabilities, the final norms' "
            "tensors and the checkpoints of the blocks gone back freed, their adapters' "
            f"gradients and the gradients reaching it (the encoder's output's too) added; "
            f"{block}: its kept tensors recomputed less its input (the checkpoint itself) and "
            f"its backward's largest transients (the MLP's gradients 3·{n}·b·f·c, or the "
            "cross-attention's q, k, v gradients over the encoder's tokens)")  # fmt: skip


def t5_moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """An encoder-decoder's own moments: LoRA's cross-attention without checkpointing
    (``lora_t5.moments``), the recomputed blocks with it (``moments``; a full finetune's:
    ``t5_ckpt_full.moments``)."""
    from profiling.estimate.lora_t5 import moments as lora_moments

    return lora_moments(d, cfg, fwd) + moments(d, cfg, fwd) + t5_ckpt_full.moments(d, cfg, fwd)
