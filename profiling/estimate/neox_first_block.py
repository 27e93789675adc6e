"""GPT-NeoX's kind of decoder as transformers runs it (GPT-NeoX/Pythia, Falcon), trained whole
without checkpointing: with few tokens beside its blocks the first block going back, not the
last (``neox_moments``) nor the embedding (``neox_embedding``), holds the step's peak. By then
every later block has gone back (its saved tensors freed, its gradients made) and the
optimizer's state of the last step is alive, so where a block's gradients outweigh its saved
tensors (the small toy, V 128, h 128, f 512, 64 × 1 tokens) the estimate read 0.97 of the
trace (fp32 −134,160 B, bf16 −83,992 B; Falcon-7B's and -40B's −143,904 and −151,584 B).

autograd's engine runs the node made last first: the MLP (run after the attention in
``GPTNeoXLayer.forward`` and ``FalconDecoderLayer.forward``, transformers 5.24, parallel or
not) goes back before the attention's output projection, which goes back before SDPA. Three
instants, whichever is higher, each the weights, gradients, optimizer state and inputs less the
gradients not made yet, plus what the first block still keeps (its kept tensors as ``neox``
counts them, less those freed), RoPE's tables, Falcon's mask and index tensors, the first
block's SDPA seed and the loss's scalars, plus the gradients in flight:

- **GELU going back**: the output projection's gradients made, its saved input (GELU's output)
  freed; GELU's input gradient beside its output's (``neox_moments.f_wide``) and the gradient
  reaching the block (s·b·h in the residual's dtype).
- **The MLP's first matmul going back**: its weight's gradient made, the MLP's saved tensors
  freed, GELU's input gradient still alive beside the matmul's input gradient (s·b·h·c).
- **SDPA going back**: the output projection's gradients made and its input's copy freed,
  GPT-NeoX's MLP norm gone back (its statistics freed, and its input where the block is
  sequential); beside SDPA's saved tensors: the residual's summed gradient (s·b·h in its
  dtype), the output projection's input gradient (s·b·q·c) and SDPA's dq, dk and dv
  (s·b·(q + 2k)·c). Falcon runs its norms before its attention, so its MLP's input gradient
  (s·b·h·c) waits for the attention's, its MLP norm (Falcon-40B's ``ln_mlp``) not gone back;
  and it broadcasts k and v to every head: dq, dk, dv s·b·3q·c, Falcon-7B's multi-query dk
  summed back (s·b·k·c) while they are alive.

Under ``--checkpointing full`` (eager) the first block is recomputed as it goes back: its MLP's
instants are ``recomputed_neox``'s (exact there); SDPA's is counted here with what the
recomputation adds — the checkpoint's position ids (s·8), the block's SDPA seed and Falcon's
index tensors made again — and without Falcon-7B's k-wide sum (the recomputed saved tensors die
with the kernel's call, before it): GPT-NeoX fp32 −3,072 B, Falcon-7B fp32 −65,024 B,
Falcon-40B fp32 −32,256 B below the trace before, equal now.

Under amp-bf16 a bound, not op by op: the first block's 16-bit weight copies its matmuls saved
counted whole at each instant, the weight gradients' 16-bit forms and fp32 casts not apart
(64 × 1: 0.972–0.976 of the trace before, 1.010–1.013 now; at 128 × 1 the trace's backward peak
is still above every moment, 0.990: left).

Under ``--checkpointing selective`` the block keeps its SDPA call's inputs, not its output nor
logsumexp: the call runs again as SDPA goes back (``_selective_redo``). GPT-NeoX 64 × 1 SGD
fp32 −134,672 B (0.975), bf16 −68,376 B, amp-bf16 −164,352 B below the trace before.

Not here: LoRA (``neox_moments``), amp-fp16, dropout, eager attention,
another loss, kept gradients, optimizer steps in backward, sharding, tensor parallelism,
torch.compile, our own blocks, Phi's and BLOOM's modules. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims, _cuda
from profiling.estimate.step_inputs import kept_position_ids
from profiling.estimate.step_scalars import LOSS, falcon_index, recomputed_scalars, sdpa_rng
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

GELU = "backward, the first block's GELU"
UP = "backward, the first block's MLP input matmul"
ATTENTION = "backward, the first block's attention"
_MODULES = ("gpt_neox", "falcon")


def _applies(d: Dims | None, cfg: TrainingConfig) -> bool:
    from profiling.estimate.losses import REFERENCE

    if d is None or d.V is None or d.arch != "neox" or d.extra.get("experts"):
        return False
    if d.extra.get("hf_module") not in _MODULES or cfg.lora_rank is not None:
        return False
    if cfg.grads_kept or cfg.optimizer_in_bwd or cfg.tp != 1 or cfg.sharded:
        return False
    if cfg.compile or cfg.activation_offload:
        return False
    if cfg.precision == "amp-fp16" or cfg.dropout or cfg.attention == "eager":
        return False
    if d.extra["neox"].get("alibi"):
        return False
    return cfg.loss == REFERENCE and not cfg.dpo and not cfg.kd_teacher


def _sdpa_grads(d: Dims, cfg: TrainingConfig) -> tuple[int, str]:
    """SDPA going back: the output projection's input gradient and dq, dk, dv, in elements per
    token. transformers' Falcon broadcasts k and v to every head (Falcon-40B's before SDPA,
    Falcon-7B's multi-query ones inside it), so its three are q wide, Falcon-7B's k-wide sum of
    dk made while they are alive — but where the block was recomputed: its saved tensors die
    with the kernel's call, before the sum, as no node holds them (the trace)."""
    q, k = int(d.extra["neox"]["q_dim"]), d.k
    if d.extra.get("hf_module") != "falcon":
        return 2 * q + 2 * k, "(2q + 2k)"
    recomputed = cfg.checkpointing == "full"
    if k != q and d.extra["neox"]["residual"] != "parallel" and not recomputed:
        return 4 * q + k, "(4q + k)"
    return 4 * q, "4q"


def _selective_redo(d: Dims, e: Bytes, cfg: TrainingConfig, q: int) -> tuple[int, str]:
    """Under ``selective`` the first block's SDPA call runs again as it goes back
    (``profiling.trace.selective``): beside the inputs it kept, what the call saves anew — its
    output, logsumexp and seed, under autocast q's and k's 16-bit casts — less the output the
    block kept for its output projection where that was the call's own (CUDA's fp32 kernel),
    freed as the projection went back. (bytes, its words for the calculation)."""
    if cfg.checkpointing != "selective":
        return 0, ""
    from profiling.estimate.activations import _lse
    from profiling.estimate.step_scalars import sdpa_seed_each

    T = d.s * d.b
    made = T * q * e.c + _lse(d, e, cfg)[0] + sdpa_seed_each(d, cfg)
    made += T * (q + d.k) * 2 if e.amp else 0
    made -= T * q * e.c if _cuda(cfg) and e.c == 4 else 0
    return made, f" (with its SDPA call made again, {fmt_bytes(made)})"


def moments(
    d: Dims | None, cfg: TrainingConfig, held: float, tied: bool, lines: Sequence[Any]
) -> list[tuple[str, float, str]]:
    """The three instants (name, bytes, calculation), or none where they do not apply.
    ``held``: the weights, gradients, optimizer state and the step's inputs, as the optimizer
    step counts them; ``tied``: the head's gradient is the embedding's (made by then)."""
    if not _applies(d, cfg):
        return []
    assert d is not None
    from profiling.estimate.neox import per_layer
    from profiling.estimate.neox_moments import f_wide

    e = Bytes.of(cfg.precision)
    p = 4 if cfg.precision in ("fp32", "amp-bf16") else 2
    w16 = 2 * e.amp  # autocast's 16-bit weight copies each matmul saved
    x = d.extra["neox"]
    T, h, f, k, q = d.s * d.b, d.h, d.f, d.k, int(x["q_dim"])
    bias = 1 if x.get("bias") else 0
    sequential, two_norms = x["residual"] == "sequential", x["residual"] != "parallel_one_norm"
    falcon = d.extra.get("hf_module") == "falcon"
    # the parameters whose gradients are made last: the first block's and the embedding's
    embedding = 0 if tied else int(d.V or 0) * h
    qkv, dense, up = (h + bias) * (q + 2 * k), (q + bias) * h, (h + bias) * f
    attn_norm, mlp_norm = 2 * h, 2 * h if two_norms else 0
    # what the first block keeps, by ``neox.per_layer``'s terms
    terms = {t.name.split(" (")[0]: int(t.bytes) for t in per_layer(d, e, cfg)}
    norms, inputs, mlp = terms.pop("norms"), terms.pop("matmul inputs"), terms.pop("the MLP")
    copy = terms.pop("attention output's copy", 0)  # the output projection's input
    attention = sum(terms.values())  # SDPA's saved tensors
    block = norms + inputs + attention + copy + mlp
    once = 2 * d.s * int(x["rotary"] or 0) * e.rope + falcon_index(d, cfg) + sdpa_rng(d, cfg)
    once += d.s * d.s if falcon else 0  # its causal mask, which every layer's SDPA keeps
    once += sum(ln.bytes for ln in lines if ln.name == LOSS)
    # recomputed: the checkpoint's position ids, the block's SDPA seed and Falcon's indices again
    once += kept_position_ids(d, cfg) + recomputed_scalars(d, cfg)
    reach = T * h * e.r
    head = f"weights, gradients, optimizer and inputs {fmt_bytes(held)} − the gradients not made"
    tail = f" + RoPE's tables, the mask and the scalars {fmt_bytes(once)} + the gradient reaching"
    # GELU going back: the output projection's own gradients made
    later = (embedding + qkv + dense + attn_norm + mlp_norm + up) * p
    n = f_wide(d, e, cfg)
    at_gelu = held - later + block + once + reach + n * T * f * e.c + (qkv + dense + up) * w16
    gelu = (
        f"{head} yet (the first block's but its output projection's) {fmt_bytes(later)} + the "
        f"first block's saved tensors {fmt_bytes(block)}{tail} the block s·b·h·{e.r} and "
        f"GELU's gradients s·b·{n}f·{e.c} = {fmt_bytes(at_gelu)}"
    )
    # the MLP's first matmul: its gradients made, the MLP's saved tensors freed; GELU's input
    # gradient beside the matmul's
    later -= up * p
    at_up = held - later + block - mlp + once + reach + T * (f + h) * e.c + (qkv + dense + up) * w16
    up_calc = (
        f"{head} yet (the first block's attention's and norms') {fmt_bytes(later)} + the first "
        f"block's saved tensors less its MLP's {fmt_bytes(block - mlp)}{tail} the block "
        f"s·b·h·{e.r}, GELU's and the matmul's input gradients s·b·(f + h)·{e.c} = "
        f"{fmt_bytes(at_up)}"
    )
    # SDPA: the output projection gone back, GPT-NeoX's MLP norm too (its statistics freed,
    # its input where sequential). Falcon's norms run before its attention
    # (``FalconDecoderLayer.forward``): its MLP's input gradient waits for the attention's,
    # its MLP norm's statistics and gradients too (Falcon-40B's ``ln_mlp``)
    later -= (dense + (0 if falcon else mlp_norm)) * p
    kept = norms + T * h * e.c + attention  # the attention norm's output, SDPA's saved tensors
    if not falcon:
        stats = 8 if _cuda(cfg) else 2 * e.r
        kept -= T * stats * two_norms + T * h * e.r * sequential
    waiting = T * h * e.c * falcon  # the MLP's input gradient
    width, formula = _sdpa_grads(d, cfg)
    redo, redo_calc = _selective_redo(d, e, cfg, q)
    kept += redo
    at_attn = held - later + kept + once + reach + waiting + T * width * e.c + qkv * w16
    attn = (
        f"{head} yet (the first block's q/k/v's and attention norm's"
        + (", its MLP norm's" if falcon and two_norms else "")
        + f") {fmt_bytes(later)} + what its attention keeps {fmt_bytes(kept)}{redo_calc}{tail} the "
        f"residual s·b·h·{e.r}"
        + (f" and the MLP's input gradient s·b·h·{e.c}" if falcon else "")
        + f", the output projection's input gradient and dq, dk, dv s·b·{formula}·{e.c} = "
        f"{fmt_bytes(at_attn)}"
    )
    if cfg.checkpointing == "full":  # its MLP going back: ``recomputed_neox``'s, exact there
        return [(ATTENTION, at_attn, attn)]
    return [(GELU, at_gelu, gelu), (UP, at_up, up_calc), (ATTENTION, at_attn, attn)]


__all__ = ["ATTENTION", "GELU", "UP", "moments"]
