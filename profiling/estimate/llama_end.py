"""Llama's kind of decoder (our blocks, transformers' Llama module, and that module as LitGPT's
own RMSNorm and fused q/k/v run it under ``--loss litgpt``) with a vocabulary small
next to its blocks (128 beside h 128, f 512): the last block's MLP and the final RMSNorm going
back, or under LoRA down's forward, not the loss, hold the step's peak. Under transformers' own
loss, without checkpointing, the estimate read 0.84-0.98 of the trace there; counted here from
the end of forward, as ``estimate.neox_moments`` counts GPT-NeoX's kind (T = s·b tokens).

What the end of forward holds of the loss and the final norm is read from the estimate's own
lines (the log-probabilities, the shifted labels, the final norm's saved tensors and output as
counted, a frozen head's not kept): backward frees all of it before the last block goes back.

- **The final norm's backward** (transformers' RMSNorm of separate ops, or any on the CPU):
  beside the LM head's gradients, the norm's own fp32 temporaries as ``norm_tapes`` runs them
  (the tape holds the norm's saved tensors itself).
- **The last block's MLP going back**: beside the head's and the final norm's gradients, the
  gradient reaching the block (s·b·h in the residual's dtype) and the SwiGLU's three f-wide
  gradients at once (down's input gradient, then ``mul``'s two: SiLU's output's and up's), in the
  matmuls' dtype. By then down has gone back: what it saved is freed (under full training its
  input, the gated product, and its weight's gradient made; under autocast its and the head's
  16-bit weight copies), as an adapted down's adapter frees its input (or its own copy: cast or
  dropped) and its A's output, its A's and B's gradients made. On bitsandbytes' 4-bit base the
  larger of that and down's base going back (``_dequantized``): its weight dequantized beside
  its absmax, then its input gradient, after an adapted down's adapter went back (its
  gradients made, its input's gradient waiting to be summed); an adapted down's A going back
  first (its input's gradient beside the input it kept) if higher. Under autocast
  bitsandbytes' ``Linear4bit`` returns its input's dtype, the RMSNorm's fp32: the MLP's f-wide
  tensors and gradients are fp32 there (``mlp_bytes``).
- **Down's forward under LoRA**: the end of forward less what is made later, plus what the
  block holds unsaved (our blocks: the norms' outputs no layer saves and the attention's
  output; transformers': the embeddings, the layer's input and the residual after attention,
  in 16 bits beside the norms' fp32 copies, and the position indices), down's input where
  nothing keeps it, the base's output and, an adapted down's, at A its input's cast and dropped
  copies where not kept (autocast's), at B its output and the scaled one. Or earlier, an
  adapted up's (or gate's) sum: B's f-wide output and the scaled one in the adapters' dtype
  (the higher where fp32 adapters sit on a 16-bit base, ``mixed``: by 49-74 KB on a wide toy,
  h 256, f 1024, 16 tokens).

Equal to the trace (within its few scalars) where the tensors are exactly these; a bound where
the trace frees earlier than counted (tests/profiling/estimate/test_llama_end.py). Not here:
checkpointing (``estimate.recomputed_eager``), torchao's and Lightning's 4-bit bases, DoRA on
the head, or on down with lora_dropout (on the attention alone it is here, on gate or up with
``llama_dora_mlp``'s moments, on down with ``llama_dora_down``'s forward and the final norm's
alone: down's DoRA layer going back is not read), other losses (``losses.moments``), tensor
parallelism and sharding. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate import eager_mask, llama_dora_down, llama_dora_mlp
from profiling.estimate.activations import Bytes, Dims, _cuda
from profiling.estimate.last_mlp import up_weight_cast
from profiling.estimate.lora_bytes import KERNEL_LOSSES, adapter_bytes, head_adapter, own_copies
from profiling.estimate.recomputed import LITGPT_LLAMA
from profiling.estimate.selective import blocks_keep_saved
from profiling.estimate.step_scalars import LOSS
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

MLP = "backward, the last block's MLP"
NORM = "backward, the final norm"
FORWARD = "forward, the last block's MLP"
_LLAMA = (None, "llama", "mistral", "qwen2")  # our blocks, or transformers' module of Llama's ops
_QWEN2 = {"qkv_bias"}  # Qwen2: q, k and v with biases (the attention's, in the end of forward)
# DoRA adapting the attention alone (peft 0.21 ``LoraModel`` puts a DoRA layer only on the
# target modules: ``lora.layer.LoraLayer.update_layer(use_dora=...)``) leaves the MLP and the
# head frozen base layers: the last block's MLP and the final norm go back as under LoRA, the
# attention's DoRA tensors in the end of forward. DoRA on gate or up: down and the head go back
# as under LoRA, then the DoRA layer (``llama_dora_mlp``). DoRA on down: its sum in the forward
# (``llama_dora_down``) and the final norm going back


def _applies(d: Dims | None, cfg: TrainingConfig, fsdp2: bool = False) -> bool:
    if d is None or d.V is None or d.arch != "llama" or set(d.extra) - LITGPT_LLAMA - _QWEN2:
        return False
    if d.extra.get("hf_module") not in _LLAMA:
        return False
    if not blocks_keep_saved(cfg) or cfg.tp != 1 or (cfg.sharded and not fsdp2):
        return False
    if cfg.dora and llama_dora_mlp.NOT_READ & set(cfg.lora_targets):
        # peft's DoRA layer on the head, or on down with lora_dropout: not read here
        return llama_dora_down.applies(cfg)
    if cfg.activation_offload or cfg.optimizer_in_bwd:
        return False
    # not the other 4-bit bases' dequantization (torchao's, Lightning's)
    return not (cfg.qlora and (cfg.torchao_nf4 or cfg.fabric_bnb))


def released(d: Dims, e: Bytes, cfg: TrainingConfig, lines: Sequence[Any]) -> float:
    """What the loss, the final norm and the head kept, as the estimate counted them: the lines
    of the logits and of the final norm (its RoPE tables aside: every block's, 2·s·(h/a) in
    the tables' dtype), a frozen head's output not kept, an adapted head's adapter's tensors."""
    from profiling.estimate.compiled_backward import HELD

    total = float(head_adapter(d, e, cfg))
    for ln in lines:
        if HELD in ln.name:  # LitGPT's loop: going forward, the previous micro-batch's logits
            continue  # (``neox_moments.HELD_OVER``); its backward's moments are the loss's
        if ln.name.startswith("Logits:") or "frozen LM head" in ln.name:
            total += ln.bytes
        elif "final RMSNorm" in ln.name:
            total += ln.bytes - 2 * d.s * d.hd * e.rope
    return total


def _grads(d: Dims, cfg: TrainingConfig, p: int) -> tuple[int, int]:
    """The gradients the head and the final norm make first, and down's by its backward's
    end: (head and norm, down)."""
    h, f, V = d.h, d.f, int(d.V or 0)
    if cfg.lora_rank is None:
        return (V * h + h) * p, h * f * p
    r, a, t = int(cfg.lora_rank), adapter_bytes(cfg), cfg.lora_targets
    return r * (h + V) * a * ("lm_head" in t), r * (f + h) * a * ("down" in t)


def _down_freed(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, str]:
    """What down's backward frees: its saved input (full training), its adapter's input (or
    own copy) and A output, and under autocast the 16-bit weight copies it and the head kept."""
    T, h, f, V = d.s * d.b, d.h, d.f, int(d.V or 0)
    freed, words = 0, []
    if cfg.lora_rank is None:
        freed += T * f * e.c
        words.append(f"its input s·b·f·{e.c}")
    elif "down" in cfg.lora_targets:
        from profiling.estimate.lora_bytes import mask_bytes

        a, r = adapter_bytes(cfg), int(cfg.lora_rank)
        copy = a if own_copies(cfg, e) and not e.amp else e.c
        if not own_copies(cfg, e) and cfg.qlora and cfg.bnb_keeps_inputs:
            # bitsandbytes <= 0.43.1 keeps that very tensor in its ctx (``ctx.tensors = (A,
            # B)``), which backward never releases: it stays until the graph is freed
            copy = 0
        mask = mask_bytes(cfg) if cfg.lora_dropout else 0
        freed += T * f * (copy + mask) + T * r * (2 if e.amp else a)
        words.append(f"its adapter's input s·b·f·{copy}" + (" and mask" if mask else "")
                     + " and A output s·b·r")  # fmt: skip
        if e.amp and cfg.qlora:  # the 16-bit copies of A and B its matmuls saved
            freed += r * (f + h) * 2
            words.append("autocast's copies of its A and B r·(f + h)·2")
    if e.amp and not cfg.qlora:  # both went back: the copies their matmuls saved
        freed += (h * f + V * h) * 2
        words.append("autocast's 16-bit copies of its and the head's weights (h·f + V·h)·2")
    elif e.amp:  # bitsandbytes' 4-bit down saved no weight copy; the 16-bit head's did
        freed += V * h * 2
        words.append("autocast's 16-bit copy of the head's weight V·h·2")
    return freed, " and ".join(words)


def mlp_bytes(e: Bytes, cfg: TrainingConfig) -> int:
    """The MLP's f-wide tensors' bytes: the matmuls' dtype, but fp32 on bitsandbytes' 4-bit
    base under autocast (``Linear4bit.forward`` returns ``.to(inp_dtype)``, the fp32 norm's
    output's dtype, and ``MatMul4Bit.backward``'s input gradient goes back through that cast)."""
    return 4 if e.amp and cfg.qlora else e.c


def _mlp(d: Dims, e: Bytes, cfg: TrainingConfig, base: float) -> list[tuple[str, float, str]]:
    T, h, f = d.s * d.b, d.h, d.f
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    first, down = _grads(d, cfg, p)
    reach = T * h * e.r
    m = mlp_bytes(e, cfg)
    three = 3 * T * f * m
    freed, freed_words = _down_freed(d, e, cfg)
    value = base + first + reach + down + three - freed
    dora = llama_dora_mlp.moments(d, e, cfg, value, m)  # DoRA's gate or up going back next
    calc = (
        f"the head's and final norm's gradients {fmt_bytes(first)} + the gradient reaching "
        f"the block s·b·h·{e.r} {fmt_bytes(reach)} + the SwiGLU's three gradients s·b·3f·{m} "
        f"{fmt_bytes(three)}"
        + (f" + down's gradients {fmt_bytes(down)}" if down else "")
        + (f" − what down's backward freed ({freed_words}) {fmt_bytes(freed)}" if freed else "")
    )
    up, up_words = up_weight_cast(d, e, cfg)  # later, under autocast: up's weight cast
    if up > 0:
        value += up
        calc += up_words
    if cfg.lora_rank is not None and "down" in cfg.lora_targets:
        # earlier, at down's A going back: its input's gradient in the adapters' dtype beside
        # the input (or copy) it kept and the gradient reaching B (s·b·h; A's output is freed
        # as the gradient reaching A is made)
        a = adapter_bytes(cfg)
        # under autocast lora_dropout's gradient comes beside it, A's 16-bit copy of its input
        # freed by then (a plain A saves the dropped tensor, freed as the mask goes back); the
        # head's 16-bit weight copy went with the head
        n = 2 if e.amp and cfg.lora_dropout else 1
        gone = (T * f * 2 if n == 2 else 0) + (int(d.V or 0) * h * 2 if e.amp else 0)
        at_a = base + first + reach + down + T * (h * e.c + n * f * a) - gone
        if at_a > value:
            value = at_a
            calc = (
                f"the head's and final norm's gradients {fmt_bytes(first)} + the gradient "
                f"reaching the block s·b·h·{e.r} {fmt_bytes(reach)} + down's adapter's "
                f"gradients {fmt_bytes(down)} and, going back through it, s·b·(h·{e.c} + {n}f·{a})"
                + (f" − what its backward and the head's freed {fmt_bytes(gone)}" if gone else "")
            )
    if cfg.qlora:
        at_down, down_words = _dequantized(d, e, cfg, (first, reach, down, freed))
        if base + at_down > value:
            value, calc = base + at_down, down_words
    return [(MLP, value, calc), *dora]


def _dequantized(
    d: Dims, e: Bytes, cfg: TrainingConfig, parts: tuple[int, int, int, int]
) -> tuple[int, str]:
    """Down's 4-bit base going back (bitsandbytes' ``MatMul4Bit.backward``: ``grad_output @
    dequantize_4bit(B).to(grad_output.dtype)``, autograd/_functions.py): its weight dequantized
    in the gradient's dtype beside its absmax, then beside its input gradient — after an
    adapted down's adapter went back (autograd runs the later-made branch first), whose input
    gradient waits to be summed and whose kept tensors are freed. Under autocast the gradient
    reaches it fp32 and ``Linear4bit``'s ``.to(inp_dtype)`` goes back first: its 16-bit copy."""
    from profiling._config_behaviours import double_quant
    from profiling.estimate.bnb import dequant_absmax_bytes

    first, reach, down, freed = parts
    T, h, f = d.s * d.b, d.h, d.f
    adapted = "down" in cfg.lora_targets
    adapter = T * f * mlp_bytes(e, cfg) if adapted else 0
    # the gradient reaching the base: under autocast ``.to(inp_dtype)``'s backward makes its
    # 16-bit copy; under ``mixed`` peft's fp32 sum gives the 16-bit base output a cast of its own
    promoted = adapted and adapter_bytes(cfg) != e.c
    cast = T * h * 2 if e.amp or promoted else 0
    absmax = dequant_absmax_bytes(h * f, double_quant(cfg))
    deq = h * f * e.c + max(absmax, T * f * e.c)
    value = first + reach + down - freed + adapter + cast + deq
    words = (
        f"the head's and final norm's gradients {fmt_bytes(first)} + the gradient reaching the "
        f"block s·b·h·{e.r} {fmt_bytes(reach)}"
        + (f" + down's adapter's gradients {fmt_bytes(down)}" if down else "")
        + (
            f" − what down's adapter's and the head's backward freed {fmt_bytes(freed)}"
            if freed
            else ""
        )
        + (f" + its adapter's input gradient s·b·f·{mlp_bytes(e, cfg)}" if adapter else "")
        + (" + the base's 16-bit output gradient s·b·h·2" if cast else "")
        + f" + its weight dequantized h·f·{e.c} and the larger of its absmax and its input "
        f"gradient s·b·f·{e.c} {fmt_bytes(deq)}"
    )
    return value, words


def _norm(d: Dims, e: Bytes, cfg: TrainingConfig, base: float) -> tuple[str, float, str] | None:
    """transformers' RMSNorm of separate ops (and any on the CPU): its backward's fp32
    temporaries (``norm_tapes``; the tape holds its saved tensors and its output's gradient)."""
    from profiling.estimate.hf_ops import fp32_norm
    from profiling.estimate.norm_tapes import NormShape, backward_peak

    module = d.extra.get("hf_module")
    if not module and getattr(cfg, "target", "cuda") == "cuda":
        return None  # CUDA's fused rms_norm: one kernel
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    head = _grads(d, cfg, p)[0] - (d.h * p if cfg.lora_rank is None else 0)
    cast = bool(module) and not fp32_norm(d)
    tape = backward_peak(NormShape(d.s * d.b, d.h, e.r, p, cast, trained=cfg.lora_rank is None))
    copy = d.h * int(d.V or 0) * 2 if e.amp else 0  # the head's, freed
    value = base + head + tape.peak - copy
    calc = (
        f"the LM head's gradient {fmt_bytes(head)} + the norm's backward at its peak "
        f"{fmt_bytes(tape.peak)}"
        + (
            f" − autocast's 16-bit copy of the head's weight V·h·2 {fmt_bytes(copy)}"
            if copy
            else ""
        )
    )
    return NORM, value, calc


def _held(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, str]:
    """What the last block's forward holds at its MLP beyond what it saves: our blocks hold
    the input norm's and the attention's outputs (on the CPU in 16 bits also the block's input
    and the residual after attention: the norms saved fp32 copies), transformers' the
    embeddings, the layer's input, the residual after attention (16-bit: the norms saved fp32
    copies; in fp32 one of the three) and the position indices (s·8) — and both the MLP norm's
    output where no layer saves it (none trained, an adapter's own copy)."""
    T, h, t = d.s * d.b, d.h, cfg.lora_targets
    copies = own_copies(cfg, e) or cfg.qlora  # a 4-bit base: counted held (a bound)
    post = T * h * e.r if copies or not {"gate", "up"} & set(t) else 0
    if d.extra.get("hf_module"):  # fp32 residuals: the norms' fp32 inputs are these, saved
        n = 3 if e.r == 2 else 1
        # LitGPT's attention (profiling.models.litgpt_attention ``_fp32``) keeps its own fp32
        # copies of the tables (counted in the end of forward as the tables): transformers'
        # cos/sin, ``LlamaModel.forward``'s ``position_embeddings``, are held beside them
        tables = 2 * d.s * d.hd * e.rope if d.extra.get("litgpt_qkv") else 0
        # under eager attention ``LlamaModel.forward``'s 4-D causal mask, a local until it
        # returns (``eager_mask.held_in_forward``)
        mask = eager_mask.held_in_forward(d, e, cfg)
        words = (
            "the embeddings, the layer's input and residual"
            + (", transformers' RoPE tables" if tables else "")
            + (", the model's eager 4-D causal mask" if mask else "")
        )
        return n * T * h * e.r + d.s * 8 + post + tables + mask, words
    attn_in = T * h * e.r if copies or not {"q", "k", "v"} & set(t) else 0
    if not _cuda(cfg) and e.r == 2:
        # rms_norm's ops on the CPU keep fp32 copies of a 16-bit residual, not it: the block's
        # input (the caller's) and the residual after attention are locals no norm saves
        ins = 2 * T * h * e.r
        return attn_in + T * h * e.c + post + ins, "the norms' inputs and outputs, the attention's"
    return attn_in + T * h * e.c + post, "the norms' and the attention's outputs"


_BRANCH = (
    "an adapted up's (or gate's) sum: B's output and its scaled copy s·b·2f, less what comes later"
)


def _branch(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """An adapted up's (or gate's) sum, before the product and down's forward: peft's
    ``result + lora_B(lora_A(dropout(x))) * scaling`` holds B's f-wide output and the scaled one
    in the adapters' dtype beside the base's output (which stands for the layer's output the
    product keeps), and where dropout copies peft's cast input that cast, a local (peft 0.21.2
    tuners/lora/layer.py Linear.forward). What down's adapter keeps is not made yet; at gate's
    sum neither are SiLU's output nor up's, both kept for the product's backward. Not autocast's
    (its 16-bit sums are below down's)."""
    t = set(cfg.lora_targets)
    if e.amp or not {"gate", "up"} & t:
        return 0
    T, h, f, r, a = d.s * d.b, d.h, d.f, int(cfg.lora_rank or 0), adapter_bytes(cfg)
    value = 2 * T * f * a + (T * h * a if a != e.c and cfg.lora_dropout else 0)
    if "up" not in t:
        value -= 2 * T * f * e.c
    if "down" in t:
        from profiling.estimate.lora_bytes import mask_bytes

        kept = T * f * (a + (mask_bytes(cfg) if cfg.lora_dropout else 0))
        value -= (kept if own_copies(cfg, e) else T * f * e.c) + T * r * a
    return value


def _forward(d: Dims, e: Bytes, cfg: TrainingConfig, base: float) -> tuple[str, float, str]:
    """Under LoRA, down's forward: its input (the gated product, unless an adapter keeps that
    very tensor), the base's output and, down adapted, at A the input's cast and dropped copies
    (autocast's: neither kept), at B its output and the scaled one (16 bits under autocast).
    Under autocast the head's 16-bit weight copy (and at A, B's) is made later."""
    T, h, f, r, V = d.s * d.b, d.h, d.f, int(cfg.lora_rank or 0), int(d.V or 0)
    a, copies, t = adapter_bytes(cfg), own_copies(cfg, e), cfg.lora_targets
    adapted = "down" in t
    held, held_words = _held(d, e, cfg)
    m = mlp_bytes(e, cfg)  # down's input's and its base's output's dtype
    product = T * f * m if copies or not adapted else 0
    # peft casts down's input to the fp32 adapters (a local unless lora_A keeps it); autocast
    # QLoRA's input is fp32 already
    cast = T * f * a if adapted and a != m and (cfg.lora_dropout or e.amp) else 0
    dropped = T * f * a if adapted and cfg.lora_dropout and e.amp else 0
    o = 2 if e.amp else a
    later = 0
    if e.amp:  # autocast's cache keeps the first block's A copies its frozen input never saved
        held += r * h * 2 * len({"q", "k", "v"} & set(t))
        # (an adapted head's A and B copies: in ``released`` already); Liger's and CCE's
        # kernels cast the head's weight themselves: the step counts no copy of it to take off
        later = 0 if cfg.loss in KERNEL_LOSSES else V * h * 2
    at_a = held + product + T * h * m + cast + dropped - later - (r * h * 2 * e.amp * adapted)
    # B's output, then the scaled one beside the sum (fp32 where the base's output is: peft's
    # ``result + lora_B(...) * scaling`` promotes), B's freed by then
    add = T * h * o + max(T * h * o, T * h * max(m, o)) if m != e.c else 2 * T * h * o
    at_b = held + product + T * h * m + cast + add - later if adapted else 0
    branch = _branch(d, e, cfg)
    if branch and held + branch > max(at_a, at_b):
        value = base + held + branch
        return FORWARD, value, f"{held_words} {fmt_bytes(held)} + {_BRANCH} {fmt_bytes(branch)}"
    value = base + max(at_a, at_b)
    b_words = (
        f" + B's output and the scaled one s·b·2h·{o}"
        if m == e.c
        else f" + the scaled output s·b·h·{o} and the sum s·b·h·{max(m, o)}"
    )
    calc = (
        f"{held_words} {fmt_bytes(held)} + "
        + (f"its input s·b·f·{m} + " if product else "")
        + f"the base's output s·b·h·{m}"
        + (f" + its cast copy s·b·f·{a}" if cast else "")
        + (
            f" + the dropped copy s·b·f·{a}"
            if at_a >= at_b and dropped
            else b_words
            if at_b > at_a
            else ""
        )
        + (f" − autocast's copies made later {fmt_bytes(later)}" if later else "")
    )
    return FORWARD, value, calc


def moments(
    d: Dims | None, cfg: TrainingConfig, fwd: float, lines: Sequence[Any], fsdp2: bool = False
) -> list[tuple[str, float, str]]:
    """Llama's kind's last block's MLP and final norm going back, and under LoRA its MLP going
    forward; none where they do not apply. ``fsdp2``: LoRA under FSDP2, whose caller
    (``fsdp_lora_moments``) gives as ``fwd`` the shards and the top block gathered."""
    from profiling.estimate.losses import REFERENCE

    out: list[tuple[str, float, str]] = []
    if not _applies(d, cfg, fsdp2):
        return out
    assert d is not None
    e = Bytes.of(cfg.precision)
    gone = released(d, e, cfg, lines)
    base = fwd - gone
    where = (
        f"end of forward − the loss's, the final norm's and the head's kept tensors "
        f"{fmt_bytes(gone)} + "
    )
    # Another stack's loss goes back through its own moments (``losses.moments``: the final
    # norm's and the last MLP's); down's forward comes before any loss runs, so it is the same
    if cfg.loss != REFERENCE and cfg.checkpointing != "none":
        return out  # another loss with selective checkpointing: not read here
    if cfg.loss != REFERENCE:
        found = []
    elif cfg.compile:  # the final norm is eager; the blocks' moments are their graphs'
        found = [_norm(d, e, cfg, base)]  # (estimate.compiled_backward)
    elif llama_dora_down.applies(cfg):  # down's DoRA layer goes back first: not read here
        found = [_norm(d, e, cfg, base)]
    else:
        found = [*_mlp(d, e, cfg, base), _norm(d, e, cfg, base)]
    if cfg.lora_rank is not None and not cfg.compile:
        # in forward the loss has not run: its scalars (``step_scalars``) are not made yet
        loss = sum(ln.bytes for ln in lines if ln.name == LOSS)
        if llama_dora_down.applies(cfg):  # peft's DoRA sums, not the LoRA sums read here
            m = mlp_bytes(e, cfg)
            found += llama_dora_down.forward(d, e, cfg, base - loss, _held(d, e, cfg), m)
        elif llama_dora_mlp.applies(cfg):
            found += llama_dora_mlp.forward(d, e, cfg, base - loss, _held(d, e, cfg))
        else:
            found.append(_forward(d, e, cfg, base - loss))
    for moment in found:
        if moment is not None:
            name, value, calc = moment
            out.append((name, value, f"{where}{calc} = {fmt_bytes(value)}"))
    return out


__all__ = ["FORWARD", "MLP", "NORM", "mlp_bytes", "moments", "released"]
