"""GPT-NeoX's kind's last block's MLP under autocast (``amp-*``) and LoRA, where the vocabulary is
small next to the blocks (``estimate.neox_moments``'s moments, which read 0.87-0.97 of the trace
under autocast: transformers' GPT-NeoX and Falcon, LoRA q,v / o,v,down / k,up,lm_head).

Read off the trace's live storages at each peak (h 128, f 512, V 128, seq 256 × 2), under
autocast the residual stream and the norms' outputs are fp32, the matmuls' outputs 16-bit:

- **Forward**, at the output projection: what the end of forward holds less what is made
  later (the loss's and the final LayerNorm's tensors, the head's 16-bit weight copy, an adapted
  head's adapter's tensors), plus what the forward holds unsaved: the embeddings (fp32), the
  position indices (s·8), autocast's cached copies of the first block's adapters' A where
  their input needs no gradient (nothing saves them: ``first_block_a_copies``), the attention's
  output (parallel blocks), the MLP's input (the norm's fp32 output; Falcon-40B's two norms' both),
  GELU's output, the output projection's bias copy and output and, down adapted, its input's
  fp32 cast beside the dropped copy (A) or B's output and the scaled one (B). An adapted up's
  forward (its base output and the scaled sum, before the output projection's weight copy) if
  higher.
- **Backward**: ``neox_moments``'s count less the head's 16-bit weight copy and its adapter's
  tensors (freed as the head went back); down adapted, its A going back first if higher: its
  fp32 input gradient (and lora_dropout's), beside the gradient reaching the block and its
  16-bit cast. bitsandbytes' 4-bit MLP (QLoRA), down adapted or not: ``neox_qlora_amp``.

Equal to the trace within its scalars on those configs, a bound where down is adapted (+2 KB).
LitGPT's own Phi (our blocks, ``--loss litgpt``) runs torch's fused tanh GELU in 16 bits:
GPT-NeoX's count, with its own held tensors (``forward``); it read 0.908 of the trace going
forward while this module read only transformers' modules. Transformers' Phi's ``gelu_new``
runs in fp32 under autocast: its MLP's tensors are ``phi_amp``'s (LoRA and full training).
BLOOM's eager attention peaks elsewhere, and GPT-NeoX's and Falcon's full training's forward:
not modelled (``applies``).
No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate import (
    bloom_amp,
    dora_neox_amp,
    dora_neox_down,
    eager_mask,
    neox_qlora_amp,
    phi_amp,
)
from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.lora_bytes import KERNEL_LOSSES, head_adapter
from profiling.estimate.lora_neox_amp import bnb_amp, first_block_a_copies
from profiling.estimate.step_inputs import kept_position_ids
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

_MODULES = ("gpt_neox", "falcon", "phi", "bloom")


def applies(d: Dims, cfg: TrainingConfig) -> bool:
    """Autocast's LoRA on transformers' GPT-NeoX, Falcon, Phi or BLOOM on CUDA (QLoRA: GPT-NeoX's
    and Falcon's, ``neox_qlora_amp``), and Phi's full training (``phi_amp``); BLOOM's attention:
    ``bloom_amp``."""
    if cfg.qlora and not bnb_amp(cfg):
        return False  # torchao's NF4: not modelled
    return (
        (cfg.lora_rank is not None or phi_amp.applies(d))
        and getattr(cfg, "target", "cuda") == "cuda"
        and (d.extra.get("hf_module") in _MODULES or _ours(d, cfg))
    )


def _ours(d: Dims, cfg: TrainingConfig) -> bool:
    """LitGPT's own Phi as our blocks run it (``--loss litgpt``), under LoRA."""
    return bool(d.extra["neox"].get("litgpt")) and cfg.lora_rank is not None


def head_copies(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """The head's 16-bit weight copy and an adapted head's adapter's tensors. Liger's and CCE's
    kernels cast the head's weight themselves: the step's autocast line holds no copy of it
    (``losses.without_head_copy``), so none is taken off."""
    copy = 0 if cfg.loss in KERNEL_LOSSES else int(d.V or 0) * d.h * 2
    return copy + head_adapter(d, e, cfg)


def backward(
    d: Dims, e: Bytes, cfg: TrainingConfig, after: float, value: float
) -> tuple[float, str]:
    """``value`` (``neox_moments``' count) less the head's copies; down's A going back if
    higher. ``after``: the end of forward less the loss's tensors, plus the gradients made."""
    T, h, f = d.s * d.b, d.h, d.f
    head = head_copies(d, e, cfg)
    value -= head
    words = f" − the head's 16-bit copies {fmt_bytes(head)}"
    if bnb_amp(cfg):  # 4-bit layers hand back their fp32 input's dtype: fp32 f-wide gradients
        return neox_qlora_amp.backward(d, e, cfg, after - head)
    if phi_amp.applies(d):  # gelu_new's fp32 gradients in place of the 16-bit count
        f_wide, what = phi_amp.going_back(d, cfg)
        value = after - head + T * h * (e.r + 2) - h * f * 2 + f_wide
        words = (
            f" − the head's 16-bit copies {fmt_bytes(head)}; on Phi: the gradient reaching the "
            f"block and its 16-bit cast s·b·h·({e.r} + 2) − fc2's 16-bit weight copy h·f·2 + "
            f"{what} {fmt_bytes(f_wide)} in place of the f-wide ones"
        )
    if d.extra.get("hf_module") == "bloom":  # down's 16-bit weight copy, freed as it went back
        value -= h * f * 2
        words += f" − down's 16-bit weight copy h·f·2 {fmt_bytes(h * f * 2)}"
    if "down" in cfg.lora_targets:
        n = 2 if cfg.lora_dropout else 1  # lora_dropout's gradient beside A's
        at_a = after - head + T * h * (e.r + 2) + n * T * f * 4
        at_a -= T * f * 2 if cfg.lora_dropout else 0  # A's 16-bit input copy, freed
        if at_a > value:
            return at_a, (
                f" − the head's 16-bit copies; at down's A going back instead: the gradient "
                f"reaching the block and its 16-bit cast s·b·h·({e.r} + 2) and {n} fp32 input "
                f"gradient(s) s·b·f·4"
            )
    return value, words


def forward(d: Dims, e: Bytes, cfg: TrainingConfig, fwd: float, gone: float) -> tuple[float, str]:
    """The forward moment (bytes, calculation); ``gone``: the loss's and the final
    LayerNorm's tensors (``neox_moments.released``)."""
    T, h, f, t = d.s * d.b, d.h, d.f, cfg.lora_targets
    later = gone + head_copies(d, e, cfg)
    # transformers' inputs_embeds (fp32) and position ids; our blocks (LitGPT's Phi,
    # ``profiling.models.neox_blocks``) rebind ``x`` and take no position ids, but hold the
    # residual sum ``x + a`` (fp32) through ``self._mlp(y)``: the same s·b·h·4
    # (under selective the checkpoints keep the position ids: in ``fwd`` already)
    ids = 0 if _ours(d, cfg) or kept_position_ids(d, cfg) else d.s * 8
    held = T * h * 4 + ids + first_block_a_copies(d, cfg)
    held += eager_mask.held_in_forward(d, e, cfg)  # the model's local 4-D mask, eager
    if d.extra.get("hf_module") == "bloom":  # ALiBi's bias and the causal mask, no positions
        held += bloom_amp.masks(d) - d.s * 8 + bloom_amp.dropped_probs(d, cfg)
        later += T * h * 1 if bloom_amp.dropped_probs(d, cfg) else 0  # dropout_add's mask
    neox = d.extra["neox"]
    attn = T * h * 2 if neox["residual"] != "sequential" else 0
    two = d.extra.get("hf_module") == "falcon" and neox["residual"] == "parallel"
    norms = T * h * 4 * (2 if two else 1)
    bias = h * 2 if neox.get("bias") else 0
    at_down = T * f * 2 + bias + T * h * 2
    down_words = "GELU's output, the output projection's outputs "
    if bnb_amp(cfg):  # GELU's fp32 output, down's weight dequantized or its sum's tensors
        at_down, down_words = neox_qlora_amp.at_down(d, cfg)
    elif dora_neox_down.applies(d, cfg):  # peft's DoRA sum at down (``dora_neox_down``)
        at_down, down_words = dora_neox_down.at_down(d, e, cfg)
    elif "down" in t:  # its input's fp32 cast, beside the dropped copy or B's outputs; the
        # base's 16-bit bias copy is freed by then (autocast caches casts of leaves that require
        # grad alone: aten/src/ATen/autocast_mode.cpp cached_cast; addmm saves no bias)
        at_down -= bias
        at_down += T * f * 4 + max(T * f * 4 if cfg.lora_dropout else 0, 2 * T * h * 2)
    at_up = 2 * T * f * 2 - h * f * 2 if "up" in t else 0
    if phi_amp.applies(d) and not bnb_amp(cfg):  # gelu_new's fp32 output (phi_amp)
        at_down += phi_amp.forward_extra(d, cfg)
    value = fwd - later + held + attn + norms + max(at_down, at_up)
    qkv = dora_neox_amp.at_qkv(d, e, cfg) if dora_neox_amp.applies(d, cfg) else None
    if qkv is not None and fwd - later + held + qkv > value:  # at the fused q/k/v's DoRA
        value = fwd - later + held + qkv
        calc = (
            f"end of forward − what is made later {fmt_bytes(later)} + the embeddings, position "
            f"indices and the first block's A copies {fmt_bytes(held)} + the input norm's fp32 "
            f"output and query_key_value's DoRA (B·A and its weight in fp32, the identity's "
            f"graph, three fp32 products) less the block's later kept tensors {fmt_bytes(qkv)} "
            f"= {fmt_bytes(value)}"
        )
        return value, calc
    calc = (
        f"end of forward − what is made later {fmt_bytes(later)} + the embeddings, position "
        f"indices and the first block's A copies {fmt_bytes(held)}"
        + (" + the attention's output s·b·h·2" if attn else "")
        + f" + the MLP's input(s) {fmt_bytes(norms)} + "
        + (
            f"up's base output and scaled sum s·b·2f·2 − down's weight copy {fmt_bytes(at_up)}"
            if at_up > at_down
            else f"{down_words}{fmt_bytes(at_down)}"
        )
        + f" = {fmt_bytes(value)}"
    )
    return value, calc


__all__ = ["applies", "backward", "forward", "head_copies"]
