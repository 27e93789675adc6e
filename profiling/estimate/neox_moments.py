"""The last block's MLP, going forward and going back, on GPT-NeoX's kind of decoder
(transformers' GPT-NeoX/Pythia, Phi, Falcon and BLOOM, and our blocks) under transformers' loss,
without checkpointing: where the vocabulary is small next to the blocks (128 beside h 128,
f 512) these, not the loss, are the step's highest moments. Counted from the end of forward
as ``bloom.moments`` counts full training's (which stays BLOOM's there); T = s·b tokens.

Going back, the last block's MLP is reached once the loss's log-probabilities, the labels and
the final LayerNorm's tensors are freed (its input and statistics, and its output where the
trained head kept it) and the head's and the final norm's gradients made; then, beside the
gradient reaching the block (T·h in the residual's dtype), the MLP's f-wide gradients (the
trace, tiny configs, seq 256 × 2): GELU's two (the gradient of its output and of its input),
Phi's gelu_new of eager ops three, BLOOM's bloom_gelu_back six — with the output projection's
saved input (GELU's output) freed by then under full training (one fewer, and its weight's
gradient made: ``losses.last_mlp``), kept under LoRA until down's adapter has gone back (an
adapted down makes its base's and its adapter's input gradients before it is freed). A 4-bit
base dequantizes down's weight there.

Going forward under LoRA the MLP's output projection is frozen or adapted, so its input (GELU's
output) is a transient unless its adapter keeps that very tensor: at the output projection's
forward the step holds what the end of forward holds, less what is made later (the loss's
log-probabilities and labels, the final LayerNorm's tensors, an adapted head's adapter's), plus
what the forward holds and no backward saves — transformers' inputs_embeds and position ids, the
MLP's input (the norm's output, unless an adapter keeps that very tensor; Falcon-40B's attention
norm's output too, a local of ``FalconDecoderLayer.forward``), GELU's output, the projection's
output (with an adapter: its B output and its scaled copy, and with lora_dropout over fp32
adapters on a 16-bit base its input's fp32 cast beside the dropped copy: peft 0.21
``lora.layer.Linear.forward``) and, attention and MLP in parallel, the attention's output
waiting for the sum. (An older count left the loss's tensors in and these held ones
out: the two balanced only where V·4 = 2h·c, the tests' V = h in 16-bit.) BLOOM's keeps the
older count (its masks and locals not read here).

These are upper bounds where the trace frees earlier than counted (an adapted down with
lora_dropout frees its dropped copy before GELU goes back; Phi's full training: 1.009 of the
trace's moment), equal elsewhere (tests/profiling/trace/test_neox_moments.py). Under autocast,
LoRA on transformers' GPT-NeoX, Falcon, Phi and BLOOM and Phi's full training:
``estimate.neox_amp_moments`` (Phi's fp32 GELU: ``phi_amp``; BLOOM's attention: ``bloom_amp``;
bitsandbytes' 4-bit MLP: ``neox_qlora_amp``); the rest of autocast (GPT-NeoX's and Falcon's
full training) is left to the earlier moments. peft's DoRA on the output projection holds its
own sum there (``dora_neox_down``). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate import bloom_amp, bloom_softmax, dora_neox_down
from profiling.estimate.activations import Bytes, Dims, _cuda
from profiling.estimate.fsdp_lora_scope import lora_fsdp2
from profiling.estimate.lora_bytes import adapter_bytes, head_adapter, mask_bytes, own_copies
from profiling.estimate.selective import blocks_keep_saved
from profiling.estimate.step_inputs import kept_position_ids
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

BACKWARD = "backward, the last block's MLP"
FORWARD = "forward, the last block's MLP"


def _applies(d: Dims | None, cfg: TrainingConfig) -> bool:
    from profiling.estimate.losses import REFERENCE

    if d is None or d.V is None or d.arch != "neox" or d.extra.get("experts"):
        return False
    if not blocks_keep_saved(cfg) or cfg.tp != 1:
        return False
    if cfg.sharded and not lora_fsdp2(cfg):  # under LoRA on FSDP2: fsdp_lora_neox
        return False
    # BLOOM after LitGPT's loss: losses.moments' last MLP equals the trace (test_loss_last_mlp_lora)
    if cfg.loss in HELD_OVER and d.extra.get("hf_module") == "bloom":
        return False
    if cfg.compile:  # a compiled block's backward is its graph's (estimate.compiled_backward)
        return False
    other = cfg.loss != REFERENCE  # another loss: LoRA on GPT-NeoX, Falcon, Phi, BLOOM, no ckpt
    if other and (cfg.lora_rank is None or cfg.checkpointing != "none"):
        return False  # (``released`` reads its plan)
    if cfg.autocast_adapters:
        return False  # the Trainer's autocast over a 16-bit model: not modelled here
    if cfg.precision.startswith("amp-"):  # LoRA; Phi's full training (estimate.neox_amp_moments)
        from profiling.estimate import neox_amp_moments

        return neox_amp_moments.applies(d, cfg)
    if cfg.lora_rank is None:  # full training: BLOOM's own moment (bloom.moments)
        return d.extra.get("hf_module") != "bloom"
    return True


def f_wide(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """The MLP's f-wide gradients at their highest going back: under full training net of the
    output projection's saved input (GELU's output), freed first; under LoRA that input is a
    transient kept only by an adapted down, which frees it (its own copy, cast or dropped, it
    frees instead: not counted) — but down's backward makes two at once, its base's and its
    adapter's input gradients."""
    module = d.extra.get("hf_module")
    full = 5 if module == "bloom" else 2 if module == "phi" else 1
    if cfg.lora_rank is None:
        return full
    if "down" in cfg.lora_targets and not own_copies(cfg, e):
        return max(2, full)
    return full + 1


# LitGPT's loops hold the previous micro-batch's logits through this forward — as the end of
# forward's line of this one's (``released`` leaves it in) — and, under bitsandbytes <= 0.43.1,
# its 4-bit layers' inputs (losses.held_over): there the forward moment is not read here
HELD_OVER = ("litgpt", "litgpt-full")


def released(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[float, str]:
    """What the loss and the final LayerNorm free before the last block goes back (and what
    they make after its forward): PyTorch's log-probabilities and labels, or another stack's
    loss's kept tensors as its tape ran (``losses.plan``) less the frozen head's input the LoRA
    lines took off (``lora_bytes.head_input_not_kept``: kept by the tape, saved by nothing)."""
    from profiling.estimate.hf_ops import _shifted_labels
    from profiling.estimate.losses import REFERENCE

    T, h, V = d.s * d.b, d.h, int(d.V or 0)
    stats = 8 if _cuda(cfg) else 2 * e.r
    head_in = T * h * e.c if cfg.lora_rank is None else 0  # a frozen head keeps no input
    norm = T * (h * e.r + stats) + head_in
    if cfg.loss == REFERENCE:
        value = T * V * 4 + _shifted_labels(d).bytes + norm
        return value, "the log-probabilities, labels and final LayerNorm's tensors"
    from profiling.estimate.lora_bytes import head_input_not_kept
    from profiling.estimate.losses import plan

    loss = plan(d, e, cfg).released - T * h * head_input_not_kept(d, e, cfg)
    return loss + norm, f"the {cfg.loss} loss's kept tensors and the final LayerNorm's"


def _backward(d: Dims, e: Bytes, cfg: TrainingConfig, fwd: float) -> tuple[str, float, str]:
    T, h, f, V = d.s * d.b, d.h, d.f, int(d.V or 0)
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    lora = cfg.lora_rank is not None
    gone, what = released(d, e, cfg)
    bias = h if d.extra["neox"].get("bias") else 0
    if lora:  # the adapters' gradients made by then (the head's, down's): a bound
        r, a = int(cfg.lora_rank or 0), adapter_bytes(cfg)
        t = cfg.lora_targets
        grads = r * ((h + V) * ("lm_head" in t) + (f + h) * ("down" in t)) * a
    else:  # the head's (and its bias'), the final norm's, the output projection's
        head_bias = V if d.extra.get("hf_module") == "phi" else 0
        grads = (V * h + head_bias + 2 * h + h * f + bias) * p
    # (an adapted head's adapter's tensors, freed as the head went back, are left in: a bound
    # that also covers Falcon's q/k/v sum with lora_dropout under ``mixed``, not counted here —
    # 4,728 B under the trace on the wide toy with q,v,lm_head without them)
    n = f_wide(d, e, cfg)
    mlp = T * h * e.r + n * T * f * e.c
    up_words = ""
    t_up = lora and "up" in cfg.lora_targets and "down" not in cfg.lora_targets
    if t_up and not e.amp and adapter_bytes(cfg) != e.c:
        # an adapted up going back under ``mixed``: peft's ``result.to(torch_result_dtype)``
        # hands GELU's input gradient back in fp32 beside the scaled update's gradient (its
        # B output's), GELU's saved input freed by then: s·b·2f·4 net, if higher (down adapted
        # too: its adapter's tensors freed before, not taken off here — not counted there)
        at_up = T * h * e.r + 2 * T * f * adapter_bytes(cfg)
        if at_up > mlp:
            mlp, up_words = at_up, " (at up's adapter: two fp32 f-wide gradients net)"
    if lora and "down" in cfg.lora_targets and not e.amp and adapter_bytes(cfg) != e.c:
        # down's A going back (fp32 adapters on a 16-bit base): its fp32 input gradient and its
        # output's gradient beside the block's and down's 16-bit output gradient, which waits
        # for the base (few tokens beside h: above the f-wide count; wide toy, 16 tokens)
        r, a = int(cfg.lora_rank or 0), adapter_bytes(cfg)
        at_a = T * h * (e.r + e.c) + T * f * a + T * r * a
        if at_a > mlp:
            mlp, up_words = at_a, " (at down's A: its fp32 input gradient, down's output's)"
    drop, drop_words = _dropout(d, e, cfg, n)
    mlp += drop
    up_words += drop_words
    deq, deq_words = 0, ""
    if cfg.qlora:  # bitsandbytes dequantizes down's weight for its input's gradient
        from profiling._config_behaviours import double_quant
        from profiling.estimate.bnb import dequant_absmax_bytes

        deq = h * f * e.c + dequant_absmax_bytes(h * f, double_quant(cfg))
        deq_words = f" + down's weight dequantized {fmt_bytes(deq)}"
    value = fwd - gone + grads + mlp + deq
    amp_words = ""
    if e.amp:  # the head's 16-bit copies freed; down's A going back (estimate.neox_amp_moments)
        from profiling.estimate import neox_amp_moments

        value, amp_words = neox_amp_moments.backward(d, e, cfg, fwd - gone + grads, value)
    calc = (
        f"end of forward − {what} {fmt_bytes(gone)} + the gradients made by then "
        f"{fmt_bytes(grads)} + the gradient reaching the block s·b·h·{e.r} and the MLP's "
        f"{n} f-wide gradients s·b·{n}f·{e.c}{up_words} {fmt_bytes(mlp)}{deq_words}{amp_words} = "
        f"{fmt_bytes(value)}"
    )
    return BACKWARD, value, calc


def _dropout(d: Dims, e: Bytes, cfg: TrainingConfig, n: int) -> tuple[int, str]:
    """``--dropout`` going back through the last block's MLP (transformers 5.24): the MLP's
    dropout went back first — its mask freed (a bool on CUDA, the noise in the output's dtype on
    the CPU), its input's gradient ``native_dropout_backward`` made (s·b·h in the activations'
    dtype). GPT-NeoX's ``post_mlp_dropout`` and Phi's ``resid_dropout`` drop the MLP's output
    alone: that gradient is freed once the output projection has gone back, so under full
    training the peak is there (its saved input, GELU's output, still held beside its input's
    gradient: one f-wide) where GELU's own backward (``n`` f-wide net) is not higher; under
    LoRA GELU's (two f-wide, its output a transient no frozen projection keeps). Falcon's
    ``dropout_add`` drops the MLP's and the attention's sum: the attention reads that gradient
    too, so it stays through GELU's backward (one mask a block: ``neox.dropout_masks``).
    BLOOM's: ``bloom.moments``."""
    if not cfg.dropout or d.extra.get("hf_module") == "bloom":
        return 0, ""
    T, h, f = d.s * d.b, d.h, d.f
    mask = T * h * (1 if _cuda(cfg) else e.c)
    grad = T * h * e.c
    if d.extra.get("hf_module") == "falcon":
        return grad - mask, " + the dropout's input gradient, its mask freed"
    extra = max(grad - (n - 1) * T * f * e.c, 0) - mask
    return extra, " + at the output projection the dropout's input gradient, its mask freed"


def _forward(d: Dims, e: Bytes, cfg: TrainingConfig, fwd: float) -> tuple[str, float, str]:
    """At the output projection's sum (an adapted up's, if higher: its base output kept for
    GELU, its B output and the scaled copy beside it, in the adapters' dtype)."""
    T, h, f, a = d.s * d.b, d.h, d.f, adapter_bytes(cfg)
    t, residual = set(cfg.lora_targets), d.extra["neox"]["residual"]
    if d.extra.get("hf_module") == "bloom":  # its masks and locals not read here: as before
        later = T * (h * e.r + (8 if _cuda(cfg) else 2 * e.r))  # the final LayerNorm's
        later_words, held = "the final LayerNorm's input and statistics", 0
    else:  # the loss's and the final LayerNorm's tensors, an adapted head's: made later
        later, later_words = released(d, e, cfg)
        later += head_adapter(d, e, cfg)
        # held, not saved: the model's inputs_embeds and position ids (int64, one row) and the
        # MLP's input, the norm's output (``self.mlp(self.post_attention_layernorm(...))``'s
        # argument; transformers' Falcon and Phi bind it to a local) unless an adapter keeps
        # that very tensor
        readers = {"q", "k", "v", "up"} if residual == "parallel_one_norm" else {"up"}
        kept = not own_copies(cfg, e) and bool(readers & t)
        ids = 0 if kept_position_ids(d, cfg) else d.s * 8  # else the checkpoints keep them
        held = T * h * e.r + ids + (0 if kept else T * h * e.c)
    down = "down" in t
    gelu = 0 if down and not own_copies(cfg, e) else T * f * e.c  # kept by down's adapter
    outs = h * e.c + (2 * h * a if down else 0)  # adapted: its B output and the scaled one
    attn = T * h * e.c if residual != "sequential" else 0
    # peft (0.21 ``lora.layer.Linear.forward``) rebinds ``x = self._cast_input_dtype(x, ...)``
    # before ``lora_B(lora_A(dropout(x)))``: with lora_dropout the fp32 cast of the input is no
    # saved tensor, but it lives beside the dropped copy until the adapter returns
    cast = cfg.lora_dropout > 0 and a != e.c
    # Falcon-40B's two norms: ``FalconDecoderLayer.forward`` (transformers 5.24) keeps
    # ``attention_layernorm_out`` a local through ``self.mlp(...)``; an adapter reading it that
    # keeps its own copy leaves it out of the end of forward
    two = d.extra.get("hf_module") == "falcon" and residual == "parallel"
    norm = T * h * e.c if two and own_copies(cfg, e) else 0
    at_down = gelu + T * outs + (T * f * a if down and cast else 0) + norm
    if dora_neox_down.applies(d, cfg):  # peft's DoRA sum at down, not LoRA's
        at_down = dora_neox_down.at_down(d, e, cfg)[0] + norm
    # up's: its B output and the scaled one (its input's fp32 cast beside the dropped copy),
    # less what down's adapter keeps, not made yet (its own copy and mask, or GELU's output)
    at_up = T * (2 * f * a + (h * a if cast else 0)) + norm if "up" in t else 0
    if at_up and down:
        r, m = int(cfg.lora_rank or 0), mask_bytes(cfg) if cfg.lora_dropout else 0
        at_up -= T * (f * (a + m) + r * a) if own_copies(cfg, e) else T * (f * e.c + r * a)
    value = fwd - later + held + max(at_down, at_up) + attn
    calc = (
        f"end of forward − {later_words} {fmt_bytes(later)} + "
        + (f"inputs_embeds, position ids and the MLP's input {fmt_bytes(held)} + " if held else "")
        + (
            f"up's adapter's B output and its scaled copy s·b·2f·{a}"
            + (" less down's adapter's tensors" if down else "")
            + f" {fmt_bytes(at_up)}"
            if at_up > at_down
            else f"{dora_neox_down.at_down(d, e, cfg)[1]}{fmt_bytes(at_down)}"
            if dora_neox_down.applies(d, cfg)
            else (f"GELU's output s·b·f·{e.c} + " if gelu else "")
            + (f"its fp32 cast beside the dropped copy s·b·f·{a} + " if down and cast else "")
            + (f"the attention norm's output s·b·h·{e.c} + " if norm else "")
            + f"the output projection's outputs s·b·{outs // h}h {fmt_bytes(at_down)}"
        )
        + (f" + the attention's output s·b·h·{e.c}" if attn else "")
        + f" = {fmt_bytes(value)}"
    )
    return FORWARD, value, calc


def moments(d: Dims | None, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """The last block's MLP going back (and, under LoRA, going forward); none where they do not
    apply (checkpointing, autocast but for LoRA and Phi's full training, another loss, tensor
    parallelism, sharding)."""
    if not _applies(d, cfg):
        return []
    assert d is not None
    e = Bytes.of(cfg.precision)
    out = [_backward(d, e, cfg, fwd)]
    if cfg.loss in HELD_OVER and cfg.qlora and cfg.bnb_keeps_inputs:
        return out  # going back only: forward is not read here (``HELD_OVER``)
    if cfg.lora_rank is not None and e.amp:
        from profiling.estimate import neox_amp_moments

        value, calc = neox_amp_moments.forward(d, e, cfg, fwd, released(d, e, cfg)[0])
        out.append((FORWARD, value, calc))
        if bloom_amp.applies(d, cfg):  # BLOOM's eager attention's fp32 scores
            out.append(bloom_amp.moment(d, e, cfg, fwd, released(d, e, cfg)[0]))
    elif cfg.lora_rank is not None:
        out.append(_forward(d, e, cfg, fwd))
        if bloom_softmax.applies(d, cfg):  # BLOOM's eager attention's fp32 softmax
            out.append(bloom_softmax.moment(d, e, cfg, fwd, released(d, e, cfg)[0]))
    return out


__all__ = ["BACKWARD", "FORWARD", "HELD_OVER", "f_wide", "moments", "released"]
