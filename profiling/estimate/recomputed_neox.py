"""A block of GPT-NeoX's kind (transformers' GPT-NeoX/Pythia, Phi, Falcon, BLOOM; our blocks)
recomputed in backward under ``--checkpointing full``, eager: an upper bound on what is alive
while its MLP goes back, as ``estimate.recomputed_eager`` bounds Llama's kind's LoRA blocks.

The earlier bound — the end of forward and one block's kept tensors (``estimate.recomputed``)
— misses what the block's backward makes and, under full training, the gradients of the blocks
above: fp32 full training read 0.975–0.998 of the trace on the Falcon kinds and Phi (vocab 512,
h 64, seq 64 × 2). At block i (0-based, of L; the highest at the last or the first):

- the end of forward, less the loss's log-probabilities and labels, the final LayerNorm's
  tensors (``neox_moments.released``) and the checkpoints of the blocks above (each T·h in the
  residual's dtype); the other once-per-model tensors stay counted;
- the gradients made by then: the head's (tied: the embedding's) and the final norm's, the
  L − 1 − i blocks' above, and the block's own output projection's; under LoRA
  the adapters' (all of them: a bound);
- the block's kept tensors, recomputed, and the gradient reaching it (T·h, the residual's dtype);
- the MLP's f-wide gradients as ``estimate.neox_moments`` counts the last block's (GELU's,
  Phi's gelu_new's), in the compute dtype (Phi's under autocast fp32);
- under autocast, the 16-bit copies of the block's weights and adapters the recomputation
  casts again;
- on bitsandbytes' 4-bit base, where higher than the MLP's f-wide gradients: an MLP weight
  dequantized (MatMul4Bit, not cached) beside the larger of its fp32 absmax and one f-wide
  tensor (the matmul's output or input gradient): Falcon-7B QLoRA all-linear bf16 read 0.88
  of the trace without it; and the decoder layer's locals the recomputation holds meanwhile
  (``_recomputing_locals``: its attention output; 0.989 without them on Falcon-40B q,o,v).

Under autocast with down adapted (not 4-bit), the recomputation's own end at down's adapter —
peft's fp32 cast of GELU's output and the layer's locals beside the block's recomputed tensors —
if higher (``estimate.recomputed_neox_amp``: 0.913-0.971 of the trace without it).

With ``--attention eager`` (transformers' modules but BLOOM's, whose own attention bloom.py
counts) the block's attention goes back after its MLP, softmax's backward holding two s²
gradients beside the recomputed probabilities (``_eager_back``): the MLP's moment alone read
0.869-0.923 of the trace on the Falcon kinds and GPT-NeoX at seq 128 (D57); this bound reads
1.02-1.19 (every recomputed tensor counted, the s² gradients in fp32). Trained whole without
autocast or dropout on transformers' GPT-NeoX and Phi the moment is exact instead
(``recomputed_neox_softmax``: what is alive then, read from the trace; not Falcon, whose
recomputation's own softmax can be higher). Falcon-40B's forward under checkpointing at batch
2 (the trace's peak there): ``falcon_eager_forward``.

Any loss: PyTorch's, or another stack's through its plan (LitGPT's, Liger's, CCE's, the chunked
ones fell back to the end of forward and one block's kept tensors: 0.77 of the trace).

Every term is one the trace holds in that block's backward, not all at once: an upper bound.
No torch here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from profiling.estimate import recomputed_neox_softmax, recomputed_qkv
from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.lora_bytes import head_adapter
from profiling.estimate.ranks import one_gpu_step
from profiling.estimate.recomputed import checkpoints, end_of_forward, total
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, a recomputed block's MLP gradients"


def modelled(inp: TrainingConfig, d: Dims | None) -> bool:
    """Eager, fully checkpointed GPT-NeoX-kind blocks on one GPU, no offloading, after any loss:
    ``neox_moments.released`` reads another stack's loss from its plan (LitGPT's logits, held
    by its loop, stay counted)."""
    return (
        d is not None
        and d.arch == "neox"
        and inp.checkpointing == "full"
        and not inp.compile
        and not inp.activation_offload
        and one_gpu_step(inp)
        and inp.tp == 1
        and not inp.sharded
        and not inp.optimizer_in_bwd
    )


def _recomputing_locals(d: Dims, e: Bytes, inp: TrainingConfig) -> tuple[int, str]:
    """What the decoder layer holds as locals while the recomputation runs its first MLP matmul
    again (beside the dequantized weight), beyond the kept tensors ``recompute`` counts: torch's
    non-reentrant checkpoint stops the recomputation only at the last saved tensor (GELU's
    input: torch/utils/checkpoint.py, _StopRecomputationError), so the layer's forward is still
    running. Its attention output is a local until the residual sum (transformers'
    GPTNeoXLayer ``attn_output``, PhiDecoderLayer ``attn_outputs``); our blocks (LitGPT's Phi:
    profiling.models.neox_blocks._Block.forward ``x + a + self._mlp(y)``, as litgpt/model.py
    Block.forward adds ``attention_output + x`` first) hold the residual sum as well. Falcon's
    attention output stands in the place of the o-projection input the kept count holds (a
    frozen o keeps none), but its new decoder architecture computes both norms first
    (FalconDecoderLayer.forward ``attention_layernorm_out``, ``mlp_layernorm_out``): the
    attention norm's output, which a frozen q/k/v keeps not, is alive too."""
    from profiling.estimate.lora_neox import attention_norm_kept

    T, h = d.s * d.b, d.h
    module = d.extra.get("hf_module")
    if module == "falcon":
        two = d.extra["neox"]["residual"] != "parallel_one_norm"
        if not two or attention_norm_kept(d, e, inp):
            return 0, ""
        return T * h * e.c, f", the attention norm's output s·b·h·{e.c}"
    if module:
        return T * h * e.c, f", the layer's attention output s·b·h·{e.c}"
    words = f", the layer's attention output and residual sum s·b·h·({e.c} + {e.r})"
    return T * h * (e.c + e.r), words


def moment(
    lines: Sequence[Any], inp: TrainingConfig, shape: dict[str, Any], d: Dims, inputs: float,
    recompute: float,
) -> tuple[str, float, str]:  # fmt: skip
    """The bound (name, bytes, calculation) at the last and the first block, the higher.
    ``inputs``: what the step holds of its inputs throughout."""
    from profiling.estimate.neox_moments import f_wide, released

    e = Bytes.of(inp.precision)
    T, h, f = d.s * d.b, d.h, d.f
    p = 4 if inp.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    lora = inp.lora_rank is not None

    grads = total(lines, "gradients")
    fwd = end_of_forward(lines, inputs)
    fwd += grads if inp.grads_kept else 0.0
    ckpt = checkpoints(lines)
    each = ckpt / d.L
    g_blk = 0.0 if lora else float(shape.get("block_params") or 0) * p
    rest = grads - d.L * g_blk  # the head's, the embedding's, the norms' (LoRA: every adapter's)
    if not lora and not shape.get("tied"):  # an untied embedding's is made after the blocks'
        rest -= int(d.V or 0) * h * p
    down = 0 if lora else (h * f + h) * p  # the output projection's weight gradient, made first
    n = f_wide(d, e, inp)
    gone, what = released(d, e, inp) if d.V else (0.0, "")
    # Phi's gelu_new under autocast: fp32 from pow on (its gradients too)
    c = 4 if e.amp and d.extra.get("hf_module") == "phi" else e.c
    mlp = T * h * e.r + n * T * f * c
    if d.extra.get("hf_module") == "bloom":  # recompute holds its GeLUFunction's backward
        # already (bloom.per_layer: the gradient reaching the block, the output weight's
        # gradient, five f-wide temporaries): the rest of the moment is what is counted here
        mlp -= T * h * e.r + 5 * T * f * e.c
        down = 0
    copies = 0.0
    if e.amp:  # autocast's cache, filled again by the recomputation
        copies = 2 * float(shape.get("block_params") or 0)
    # bitsandbytes' 4-bit base: the recomputation's and the backward's MatMul4Bit dequantize
    # the frozen weight (not cached), one MLP weight h·f at a time beside its fp32 absmax under
    # double quantization (freed before the matmul) and then the matmul's f-wide output or
    # input gradient — in place of the MLP's f-wide gradients where that is higher
    deq, deq_words = 0.0, ""
    if inp.qlora:
        from profiling._config_behaviours import double_quant
        from profiling.estimate.bnb import dequant_absmax_bytes

        absmax = dequant_absmax_bytes(h * f, double_quant(inp))
        local, local_words = _recomputing_locals(d, e, inp)
        deq = max(0, h * f * e.c + max(absmax, T * f * e.c) + local - n * T * f * c)
        deq_words = (
            f" + a dequantized MLP weight h·f·{e.c}, the larger of its absmax and one f-wide "
            f"tensor s·b·f·{e.c}{local_words}, less the MLP's "
            "f-wide gradients (if higher)"
        )
    best: tuple[float, str] = (0.0, "")
    at_down = _at_down(d, e, inp, fwd - gone + recompute + copies, grads)
    qkv = recomputed_qkv.adapted(d, inp)  # a fused q/k/v partly adapted (recomputed_qkv)
    for i in sorted({d.L - 1, 0}, reverse=True):
        if at_down is not None:  # the recomputation's end at down's adapter, if higher
            value, calc = at_down(i, (d.L - 1 - i) * each)
            if value > best[0]:
                best = (value, calc)
        fewer = (d.L - 1 - i) * each
        above = (d.L - 1 - i) * g_blk
        if qkv:
            held, words = recomputed_qkv.transient(d, e, inp, qkv, i == d.L - 1)
            later = recomputed_qkv.not_made(d, inp, grads, i) + head_adapter(d, e, inp)
            at_sum = fwd - gone - fewer + rest - later + T * h * e.r + held
            at_sum += recomputed_qkv.dpo_released(d, e, inp)  # DPO's tape frees less
            waiting, waiting_words = recomputed_qkv.down_waiting(d, e, inp)
            at_sum += waiting
            words += waiting_words
            if at_sum > best[0]:
                best = (at_sum, f"block {i + 1} of {d.L} at its q/k/v adapter's sum: end of "
                        f"forward {fmt_bytes(fwd)} − {what} {fmt_bytes(gone)} − the checkpoints "
                        f"above {fmt_bytes(fewer)} + the gradients made by then (not this "
                        f"block's adapters', nor the blocks' below), less an adapted head's kept "
                        f"tensors {fmt_bytes(rest - later)} + "
                        f"the gradient reaching it s·b·h·{e.r} + {words} = "
                        f"{fmt_bytes(at_sum)}")  # fmt: skip
        value = fwd - gone - fewer + rest + above + down + recompute + mlp + copies + deq
        calc = (
            f"block {i + 1} of {d.L}: end of forward {fmt_bytes(fwd)}"
            + (f" − {what} {fmt_bytes(gone)}" if gone else "")
            + (f" − the checkpoints above {fmt_bytes(fewer)}" if fewer else "")
            + f" + the gradients made by then {fmt_bytes(rest + above + down)} + its kept "
            f"tensors recomputed {fmt_bytes(recompute)} + the gradient reaching it s·b·h·{e.r} "
            f"and its MLP's {n} f-wide gradients s·b·{n}f·{c} {fmt_bytes(mlp)}"
            + (f" + autocast's 16-bit copies of its weights {fmt_bytes(copies)}" if copies else "")
            + (f"{deq_words} {fmt_bytes(deq)}" if deq else "")
            + f" = {fmt_bytes(value)}"
        )
        if value > best[0]:
            best = (value, calc)
        # the recomputation's own moment at up's adapter, if higher
        best = max(best, _at_up(d, e, inp, value - n * T * f * c - deq, calc), key=itemgetter(0))
        # its attention's softmax going back, after the MLP (BLOOM's own attention: bloom.py)
        if recomputed_neox_softmax.applies(d, e, inp):  # exact (recomputed_neox_softmax)
            base = fwd - gone - fewer + rest + above
            at, words = recomputed_neox_softmax.at_softmax(d, e, inp, p)
            if base + at > best[0]:
                best = (base + at, f"block {i + 1} of {d.L} at its softmax's backward: end of "
                        f"forward less the loss's tensors and the checkpoints above, the "
                        f"gradients made by then {fmt_bytes(base)} + {words} = "
                        f"{fmt_bytes(base + at)}")  # fmt: skip
        elif inp.attention == "eager" and d.extra.get("hf_module") != "bloom":
            base = fwd - gone - fewer + rest + above + recompute + copies
            made, back, words = _eager_back(d, e, inp, 0 if lora else p)
            if base + made + back > best[0]:
                best = (base + made + back, f"block {i + 1} of {d.L}: end of forward less the "
                        f"loss's tensors and the checkpoints above, the gradients made by then "
                        f"and its kept tensors recomputed {fmt_bytes(base)} + {words} "
                        f"{fmt_bytes(made + back)} = {fmt_bytes(base + made + back)}")  # fmt: skip
    name = recomputed_qkv.NAME if " at its q/k/v adapter's sum" in best[1] else NAME
    return name, best[0], best[1]


def _eager_back(d: Dims, e: Bytes, inp: TrainingConfig, p: int) -> tuple[float, float, str]:
    """A recomputed block's eager attention going back, at its softmax's backward: the MLP has
    gone back first (the parallel block's MLP is created after the attention, so the autograd
    engine, highest sequence number first, runs it first: its weight and bias gradients made,
    (2·h·f + h + f)·p; ``p`` 0 under LoRA) and its two f-wide kept tensors freed (s·b·2f: the
    first matmul's and GELU's outputs; Phi's gelu_new keeps more, still counted: a bound), the
    block's other kept tensors beside the
    gradient reaching the block and the MLP branch's input gradient, the attention output's
    gradient (s·b·q) and the two s² tensors softmax's backward holds — the probabilities'
    gradient and the scores' (transformers' eager_attention_forward: softmax in fp32, 4 B a
    bound in every precision). Returns (gradients made, the rest, words)."""
    T, h, f, q = d.s * d.b, d.h, d.f, int(d.extra["neox"]["q_dim"])
    made = (2 * h * f + h + f) * p
    s2 = 2 * d.a * d.s * d.s * d.b * 4
    back = T * h * e.r + T * (h + q) * e.c + s2 - T * 2 * f * e.c
    words = (
        f"its MLP's weight gradients (2·h·f + h + f)·{p}, the gradient reaching it s·b·h·{e.r}, "
        f"the MLP branch's and the attention output's gradients s·b·(h + q)·{e.c} and "
        f"softmax's two s² gradients 2·a·s²·b·4, less the MLP's kept s·b·2f·{e.c}"
    )
    return made, back, words


def _at_up(d: Dims, e: Bytes, inp: TrainingConfig, base: float, calc: str) -> tuple[float, str]:
    """Without autocast, fp32 adapters over a 16-bit base (``mixed``) with up adapted: going
    back, the recomputation runs the block's forward again to its last saved tensor, and at
    up's adapter (transformers' GPTNeoXMLP.dense_h_to_4h, FalconMLP.dense_h_to_4h) peft's
    ``lora.layer.Linear.forward`` holds B's fp32 output and its scaled copy (s·b·f·4 each)
    beside the base's output, before the MLP's gradients exist — while an adapted down's input
    copy and A output are not recomputed yet. ``base``: the MLP's moment (``calc``) less
    its f-wide gradients; returns the moment (a bound: every other kept tensor counted as
    recomputed: 1.04 of the trace), or (0, "") where not modelled. GPT-NeoX LoRA all-linear
    mixed full checkpointing read 0.993 of the trace without it (−18,432 B), Falcon-40B 0.991
    (−22,528 B)."""
    from profiling.estimate.lora_bytes import adapter_bytes

    a, c = adapter_bytes(inp), e.c
    if inp.lora_rank is None or "up" not in inp.lora_targets or e.amp or inp.qlora or a == c:
        return 0.0, ""
    if d.extra.get("hf_module") not in ("gpt_neox", "falcon") or inp.dora or inp.lora_dropout:
        return 0.0, ""
    if inp.dropout:  # the MLP's output mask is then the last saved tensor (recomputed_neox_amp)
        return 0.0, ""
    T, f, r = d.s * d.b, d.f, int(inp.lora_rank)
    # an adapted down's own input copy (peft's fp32 cast) and A's output, counted among the
    # kept tensors, are not recomputed yet (the cast at least s·b·f·c: GELU's output's bytes)
    down = T * (f * c + r * a) if "down" in inp.lora_targets else 0
    value = 2 * T * f * a - down
    words = (
        f"{calc} − its MLP's f-wide gradients, at up's adapter in the recomputation: + up's B "
        f"output and its scaled copy s·b·2f·{a}"
        + (
            f" − down's input copy and A output, not recomputed yet, s·b·(f·{c} + r·{a})"
            if down
            else ""
        )
        + f" {fmt_bytes(value)} = {fmt_bytes(base + value)}"
    )
    return base + value, words


def _at_down(
    d: Dims, e: Bytes, inp: TrainingConfig, base: float, grads: float
) -> Callable[[int, float], tuple[float, str]] | None:
    """Under autocast with down adapted (``recomputed_neox_amp``): block i's moment at the
    recomputation's end, given ``base`` (the end of forward less the loss's tensors, the block's
    kept tensors and weight copies) and the step's adapter gradients; None where not modelled."""
    from profiling.estimate import recomputed_neox_amp, recomputed_neox_mixed
    from profiling.estimate.lora_bytes import adapter_bytes, head_adapter
    from profiling.estimate.neox_amp_moments import head_copies

    amp = recomputed_neox_amp.applies(d, e, inp)
    if not amp and not recomputed_neox_mixed.applies(d, e, inp):
        return None
    module = recomputed_neox_amp if amp else recomputed_neox_mixed
    extra, words = module.held(d, e, inp)
    # the head's autocast copy (none without autocast) and an adapted head's kept tensors
    head = head_copies(d, e, inp) if amp else head_adapter(d, e, inp)
    rank, V = int(inp.lora_rank or 0), int(d.V or 0)
    head_g = rank * (d.h + V) * adapter_bytes(inp) if "lm_head" in inp.lora_targets else 0
    each_g = (grads - head_g) / d.L  # one block's adapters' gradients
    # autocast caches the adapters' 16-bit copies (leaves that require grad) with the base's;
    # the kept tensors' block input is its checkpoint, counted in the end of forward already
    extra += (each_g / adapter_bytes(inp) * 2 if amp else 0) - d.s * d.b * d.h * e.r

    def at(i: int, fewer: float) -> tuple[float, str]:
        made = 0.0 if inp.grads_kept else head_g + (d.L - 1 - i) * each_g
        value = base - head - fewer + made + extra
        calc = (
            f"block {i + 1} of {d.L}, its recomputation's end at down's adapter: end of forward "
            f"less the loss's tensors, with its kept tensors recomputed"
            + (" and autocast's weight copies" if amp else "")
            + f" {fmt_bytes(base)} − the head's "
            + ("16-bit copies" if amp else "adapter's kept tensors")
            + f" {fmt_bytes(head)}"
            + (f" − the checkpoints above {fmt_bytes(fewer)}" if fewer else "")
            + " − its input (the checkpoint)"
            + (" + the adapters' 16-bit copies" if amp else "")
            + (f" + the adapters' gradients made by then {fmt_bytes(made)}" if made else "")
            + f" + {words} {fmt_bytes(extra)} = {fmt_bytes(value)}"
        )
        return value, calc

    return at


__all__ = ["NAME", "modelled", "moment"]
