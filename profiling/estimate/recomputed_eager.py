"""An eager LoRA block recomputed in backward (``--checkpointing full``, no ``--compile``): an
upper bound on what is alive while it runs again and goes back, safe where the vocabulary is
small next to the hidden size (there the loss's moment no longer leads).

The estimate's earlier bound for this moment — the end of forward and one block's kept tensors
(``estimate.recomputed``) — holds the loss's log-probabilities, which are freed before any
block is recomputed, but misses what the block's backward makes: with a vocabulary of h's size
it came out 0.86–0.97 of the trace (transformers' Llama and ours, bf16 to autocast). Read from
the trace's per-block segments (the tracker's ``block_prefix``), the highest point of a
recomputed block's backward is in its MLP (or at the end of the recomputation, its last
adapter's forward), beside:

- the model's states (and the token inputs), the checkpoints of this block and those below,
  RoPE's cos/sin (each block's input), the trained adapters' gradients of the blocks above;
- the gradient reaching the block (s·b·h in the residual's dtype);
- the block's own kept tensors, recomputed (``recompute``: the estimate's count of one block);
- under autocast, the 16-bit copies of the block's weights and adapters the recomputation casts
  again (autocast's cache lives as long as the checkpointed region's recomputation);
- the MLP's backward: down's input gradient and the gradients of both factors of the product
  (3·s·b·f in the compute dtype); where down is adapted, its A's
  input gradient (and with lora_dropout the dropout's), in the adapters' dtype, and the
  gradients the block's adapters have made;
- DoRA: the largest adapted layer's weight norm rebuilt as the recomputation runs it again
  (``dora.weight_norm_peak``): beside the MLP's gradients where an MLP layer is adapted (the
  trace holds both at once: its norm is rebuilt last, beside the gradients the block above
  left), else the larger of the two (attention's norms are rebuilt before the MLP runs again).

Every term is one the trace holds at some point of that block's backward; not all at once, so
this is an upper bound: 1.003–1.065 of the trace on small-vocabulary Llama configs
(tests/profiling/estimate/test_recomputed_eager.py), exact-to-the-op is not attempted.
On bitsandbytes' 4-bit base (QLoRA) the base weights have no autocast copies (a 4-bit weight
is dequantized, never cached), the MLP's backward dequantizes the weight it computes with, and
under autocast the MLP's gradients are fp32 (``_mlp_backward``): 1.009–1.161 of the trace on
small-vocabulary Llama configs, LoRA and DoRA, mixed, bf16 and autocast
(tests/profiling/estimate/test_recomputed_4bit.py; the earlier bound was 0.74–0.95 there).
Applies to Llama's kind of block (ours or transformers', as LitGPT's modules too: 0.789
of the trace before on LitGPT's v,down amp-bf16), one GPU, eager LoRA or DoRA without
an adapted head, a 16-bit, fp32 or bitsandbytes 4-bit base; elsewhere the earlier bound
stands. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate import dora
from profiling.estimate.activations import Bytes, Dims, dims_of
from profiling.estimate.lora_bytes import adapter_bytes
from profiling.estimate.recomputed import (
    checkpoints,
    end_of_forward,
    llama_lora_recomputed,
    total,
)
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, a recomputed block's MLP gradients"


def modelled(inp: TrainingConfig, shape: dict[str, Any]) -> Dims | None:
    """The dims where the bound applies: eager, fully checkpointed LoRA (no adapted head, a
    16-bit, fp32 or bitsandbytes 4-bit base) on Llama's kind of block, one GPU, no offloading
    (None elsewhere)."""
    d = dims_of(shape, inp.seq_or_default(), inp.batch)
    # --optimizer-in-bwd: each adapter is stepped as its gradient is made and its gradient freed
    # (the bound keeps counting them: a bound still)
    plain = inp.model_copy(update={"optimizer_in_bwd": False}) if inp.optimizer_in_bwd else inp
    ok = (
        llama_lora_recomputed(plain, shape, compiled=False)
        and not inp.activation_offload
        # torchao's NF4 and Fabric's fp16-quantized 4-bit base: their own dequantization moments
        and not (inp.qlora and (inp.torchao_nf4 or inp.fabric_bnb))
    )
    return d if ok else None


def _block_weights(d: Dims) -> int:
    """One block's matmul weights: q, k, v, o and the gated MLP's three."""
    q = d.a * d.hd
    return d.h * q + 2 * d.h * d.k + q * d.h + 3 * d.h * d.f


def _block_adapters(d: Dims, inp: TrainingConfig) -> int:
    """One block's LoRA A and B values (r·(in + out) per adapted layer)."""
    ins, outs = dora.in_widths(d), dora.out_widths(d)
    r = int(inp.lora_rank or 0)
    return sum(r * (ins[t] + outs[t]) for t in inp.lora_targets if t in ins)


def _mlp_backward(d: Dims, e: Bytes, inp: TrainingConfig) -> tuple[int, str]:
    """The MLP's backward transients beyond the block's kept tensors (bytes, formula); on a
    4-bit base the weight computing dequantized (``_dequantized``)."""
    sb, a = d.s * d.b, adapter_bytes(inp)
    adapter, adapter_words = 0, ""
    if "down" in inp.lora_targets:
        n = 2 if inp.lora_dropout else 1
        adapter, adapter_words = n * sb * d.f * a, f" + {n}·s·b·f·{a} (down's adapter)"
    deq, deq_words = _dequantized(d, e, inp)
    if inp.qlora and e.amp:
        # bitsandbytes under autocast hands fp32 back (lora._fp32_mlp_backward): the SwiGLU's
        # three fp32 gradients (gate's, up's, SiLU's outputs) come after down's backward (its
        # 16-bit input gradient cast back to fp32, its adapter's, its dequantized weight),
        # whose tensors are freed by then: the larger of the two
        silu = 3 * sb * d.f * 4
        down = sb * d.f * (e.c + 4) + adapter + deq
        words = (
            f"s·b·h·{e.c} + the larger of the SwiGLU's fp32 gradients s·b·3f·4 and down's "
            f"backward s·b·f·({e.c} + 4){adapter_words}{deq_words}"
        )
        return sb * d.h * e.c + max(silu, down), words
    # the gradient reaching the block (s·b·h) is the bound's own term (``reach``), not an MLP
    # transient: no h-sized copy beside the three (T5's recomputed blocks, read op by op in the
    # trace, go back with exactly these: estimate.t5_ckpt)
    value = sb * 3 * d.f * e.c + adapter + deq
    return value, f"s·b·3f·{e.c}{adapter_words}{deq_words}"


def _dequantized(d: Dims, e: Bytes, inp: TrainingConfig) -> tuple[int, str]:
    """A 4-bit base: bitsandbytes' ``MatMul4Bit.backward`` dequantizes the frozen weight for
    the input's gradient (in the compute dtype, after its fp32 absmax under double
    quantization), not cached: one MLP weight h·f at a time, as ``losses.last_mlp`` counts
    it."""
    if not inp.qlora:
        return 0, ""
    from profiling._config_behaviours import double_quant
    from profiling.estimate.bnb import dequant_absmax_bytes

    absmax = dequant_absmax_bytes(d.h * d.f, double_quant(inp))
    return d.h * d.f * e.c + absmax, f" + a dequantized weight h·f·{e.c}" + (
        " and its fp32 absmax" if absmax else ""
    )


def _dora_norm(d: Dims, e: Bytes, inp: TrainingConfig) -> int:
    """DoRA: the largest adapted layer's weight norm, rebuilt as the recomputation runs the
    layer again (``dora.weight_norm_peak``); 0 without DoRA."""
    if not inp.dora:
        return 0
    ins, outs = dora.in_widths(d), dora.out_widths(d)
    return max(dora.weight_norm_peak(e, inp, ins[t], outs[t]) for t in inp.lora_targets
               if t in ins)  # fmt: skip


def _litgpt_held(lines: Sequence[Any], d: Dims) -> tuple[float, str]:
    """LitGPT's modules (``--loss litgpt``): what they hold beside a recomputed block's backward
    (bytes, the calculation's words; none elsewhere). ``litgpt_attention._fp32`` keeps an fp32
    copy (``copy=True``, at every precision) of transformers' cos/sin keyed weakly on them, so
    it lives as long as the checkpoints keep transformers' tables: 2·s·(h/a)·4; and LitGPT's
    loop holds this micro-batch's logits through backward (litgpt/finetune/lora.py ``fit``:
    ``logits`` is rebound only by the next forward; the estimate's line ``HELD``)."""
    from profiling.estimate.compiled_backward import HELD

    if not d.extra.get("litgpt_qkv"):
        return 0.0, ""
    tables = 2 * d.s * d.hd * 4
    loop = sum(ln.bytes for ln in lines if HELD in ln.name)
    words = f" + LitGPT's fp32 copies of them 2·s·(h/a)·4 B {fmt_bytes(tables)}"
    if loop:
        words += f" + the logits held by LitGPT's loop {fmt_bytes(loop)}"
    return tables + loop, words


def _late(mlp: float, norm: int, inp: TrainingConfig) -> float:
    """The MLP's gradients and DoRA's weight norm: both at once where an MLP layer is adapted
    (its norm is rebuilt at the end of the recomputation, beside the gradients the block above
    left), the larger where only attention's layers are (rebuilt before the MLP runs again)."""
    if set(inp.lora_targets) & {"gate", "up", "down"}:
        return mlp + norm
    return max(mlp, norm)


def moment(
    lines: Sequence[Any], inp: TrainingConfig, shape: dict[str, Any], inputs: float,
    recompute: float,
) -> tuple[str, float, str] | None:  # fmt: skip
    """The bound (name, bytes, calculation) at the last and the second block, the higher; None
    where not ``modelled``. ``inputs``: what the step holds of its inputs throughout."""
    from profiling.estimate import recomputed_gpt2, recomputed_llama, recomputed_neox

    neox = dims_of(shape, inp.seq_or_default(), inp.batch)
    if recompute and neox is not None and recomputed_neox.modelled(inp, neox):
        return recomputed_neox.moment(lines, inp, shape, neox, inputs, recompute)
    if recompute and neox is not None and recomputed_llama.modelled(inp, neox):
        return recomputed_llama.moment(lines, inp, shape, neox, inputs, recompute)
    if recompute and neox is not None and recomputed_gpt2.modelled(inp, neox):
        if inp.optimizer_in_bwd:
            from profiling.estimate import recomputed_gpt2_in_bwd

            return recomputed_gpt2_in_bwd.moment(lines, inp, shape, neox, inputs, recompute)
        fwd, each = end_of_forward(lines, inputs), checkpoints(lines) / neox.L
        block = float(shape.get("block_params") or 0)
        return recomputed_gpt2.moment(inp, neox, fwd, each, block, recompute)
    d = modelled(inp, shape)
    if d is None or not recompute:
        return None
    e = Bytes.of(inp.precision)

    ckpt = checkpoints(lines)
    each = ckpt / d.L
    grads = total(lines, "gradients")
    g_blk = 0.0 if inp.grads_kept else grads / d.L
    held = (
        total(lines, "parameters")
        + total(lines, "optimizer")
        + inputs
        + (grads if inp.grads_kept else 0)
    )
    rope = 2 * d.s * d.hd * e.rope
    litgpt = _litgpt_held(lines, d)
    reach = d.s * d.b * d.h * e.r
    copies = 0
    if e.amp:  # autocast's cache, filled again by the recomputation (a 4-bit weight: never)
        copies = 2 * ((0 if inp.qlora else _block_weights(d)) + _block_adapters(d, inp))
    mlp, words = _mlp_backward(d, e, inp)
    norm = _dora_norm(d, e, inp)
    best: tuple[float, str] = (0.0, "")
    for i in sorted({d.L - 1, min(1, d.L - 1)}, reverse=True):
        alive = ckpt - (d.L - 1 - i) * each
        above = (d.L - 1 - i) * g_blk
        late = _late(mlp + g_blk, norm, inp)
        value = held + alive + rope + litgpt[0] + above + reach + recompute + copies + late
        calc = (
            f"block {i + 1} of {d.L}: weights and optimizer {fmt_bytes(held)} + checkpoints "
            f"{fmt_bytes(alive)} + RoPE's cos/sin 2·s·(h/a)·{e.rope} B {fmt_bytes(rope)}"
            + litgpt[1]
            + (f" + the blocks' adapter gradients above {fmt_bytes(above)}" if above else "")
            + f" + the gradient reaching it s·b·h·{e.r} {fmt_bytes(reach)} + its kept tensors "
            f"recomputed {fmt_bytes(recompute)}"
            + (f" + autocast's 16-bit copies of its weights and adapters {fmt_bytes(copies)}"
               if copies else "")
            + f" + its MLP's backward {words} {fmt_bytes(mlp)} + its adapters' gradients "
            f"{fmt_bytes(g_blk)}"
            + (f" {'+' if late > max(norm, mlp + g_blk) else 'or, the larger,'} the largest DoRA "
               f"weight norm rebuilt {fmt_bytes(norm)}" if norm else "")
            + f"; the loss's and the final norm's tensors freed by then = {fmt_bytes(value)}"
        )  # fmt: skip
        if value > best[0]:
            best = (value, calc)
    return NAME, best[0], best[1]


__all__ = ["NAME", "modelled", "moment"]
