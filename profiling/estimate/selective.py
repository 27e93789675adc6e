"""What ``--checkpointing selective`` (Megatron-style: the core attention's s² tensors
recomputed in backward, Korthikanti et al.'s "selective activation recomputation") changes of a
one-GPU step: eager attention's probabilities, and their dropout masks, are dropped from what
each block keeps (``activations``, ``hf_ops``, ``bloom``) and made again as that block's
attention goes back. Nothing else is recomputed: every block keeps the rest of what it saves to
its backward, as without checkpointing. Under SDPA (flash or memory-efficient) the fused call
is the core: its logsumexp and seed are dropped (``step_scalars``), its inputs kept. The trace
runs the same step (``profiling.trace.selective``): the checkpointed core keeps its inputs (q,
k, v not repeated for grouped heads), and transformers' 4-D eager mask and position ids once
(``eager_mask``, ``step_inputs``).

So the moments counted from the end of forward without checkpointing — the loss's held tensors
(``llama_loss_held``, ``neox_loss_held``), the last block's MLP going forward or back
(``llama_end``, ``neox_moments``, ``neox_qkv``, ``bloom``, ``losses``), a 4-bit weight
dequantized going back (``llama_dequant``, ``llama_first_mlp``) — are moments of a selective
step too: they come before the last block's attention goes back, and the end of forward they
start from already lacks the dropped s² tensors. Gated on "none" alone, they left the loss's
moment leading under ``selective``: 0.81-0.99 of the trace on small-vocabulary Llama, GPT-NeoX,
Phi and Falcon toys (the trace runs no selective step; under SDPA it is the step without
checkpointing, which these moments equal). Under eager attention a block's recomputed
probabilities going back are a later moment, not counted here. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


class _Shape(Protocol):  # activations.Dims, read here without importing it (activations does)
    arch: str
    s: int
    b: int
    h: int
    k: int


class _Widths(Protocol):  # activations.Bytes
    c: int
    rope: int
    amp: bool


Suffixes = tuple[int, str, str, str]  # bytes, the name's, the formula's, the substitution's


def blocks_keep_saved(cfg: TrainingConfig) -> bool:
    """Whether every block keeps what it saves from its forward to its backward (no forward
    runs again in backward): no checkpointing, or ``selective``, which recomputes eager
    attention's s² tensors alone."""
    return cfg.checkpointing in ("none", "selective")


def selective_kept(d: _Shape, e: _Widths, q: int) -> tuple[str, int, str, str]:
    """transformers' attention under ``selective`` (a ``Term``'s fields): its attention function
    (eager's or SDPA's) runs checkpointed (``profiling.trace.selective``), keeping its inputs q,
    k, v as they came (grouped heads not repeated: ``repeat_kv`` is inside; under autocast q and
    k in RoPE's dtype, fp32: the cast to 16 bits is inside too) and the output projection the
    output; no scores, logsumexp nor seed (q: the query width)."""
    qk = core_qk_bytes(d, e)
    return (
        "attention, core recomputed (its inputs q, k after RoPE, v; the output)",
        d.s * d.b * ((q + d.k) * qk + (q + d.k) * e.c),
        f"s·b·((q + k)·{qk} + (q + k)·{e.c}) B",
        f"{d.s}·{d.b}·(({q} + {d.k})·{qk} + ({q} + {d.k})·{e.c})",
    )


def core_qk_bytes(d: _Shape, e: _Widths) -> int:
    """The bytes of q and k as the core receives them: RoPE's output dtype (its tables' under
    autocast: fp32) on a rotary model, else the compute dtype."""
    return max(e.rope, e.c) if d.arch != "gpt2" and e.amp else e.c


def selective_inputs(d: _Shape, e: _Widths) -> Suffixes:
    """Our blocks' attention beside the s·b·(2h + 2k)·c they keep under ``selective``: under
    autocast q and k as RoPE made them (fp32), the core's inputs; as ``activations.blocks_lse``
    returns its suffixes."""
    more = core_qk_bytes(d, e) - e.c
    if not more:
        return 0, "", "", ""
    return (d.s * d.b * (d.h + d.k) * more, ", q and k in fp32 (RoPE's)",
            f" + s·b·(h + k)·{more}", f" + {d.s}·{d.b}·({d.h} + {d.k})·{more}")  # fmt: skip


def selective_neox(
    d: _Shape, e: _Widths, q: int, fused: bool, output: bool
) -> tuple[str, int, str, str]:
    """transformers' GPT-NeoX and Phi attention under ``selective`` (a ``Term``'s fields): the
    checkpointed SDPA call keeps its inputs — q and k rotated (a partial rotary concatenates:
    under autocast fp32, RoPE's tables' dtype, where SDPA saved 16-bit casts), v (GPT-NeoX's a
    view of the fused q/k/v output, which it keeps whole) — and no logsumexp (without
    checkpointing ``neox._attention``'s; GPT-NeoX amp-bf16 256 × 2: +240 B a token, bf16
    −272 B, the trace). ``output``: the output projection's input is the core's output itself,
    not a copy (CUDA's fp32 kernel writes it token-major), kept here."""
    qk, v = core_qk_bytes(d, e), (q + 2 * d.k) if fused else d.k
    what = "the fused q/k/v output v is a view of" if fused else "v"
    vf, vs = ("(q + 2k)", f"({q} + 2·{d.k})") if fused else ("k", str(d.k))
    if output:
        v, what, vf, vs = v + q, f"{what}; its output", f"{vf} + q", f"{vs} + {q}"
    return (
        f"attention, core recomputed (its inputs q, k after RoPE, {what})",
        d.s * d.b * ((q + d.k) * qk + v * e.c),
        f"s·b·((q + k)·{qk} + {vf}·{e.c}) B",
        f"{d.s}·{d.b}·(({q} + {d.k})·{qk} + {vs}·{e.c})",
    )


__all__ = [
    "blocks_keep_saved",
    "core_qk_bytes",
    "selective_inputs",
    "selective_kept",
    "selective_neox",
]
