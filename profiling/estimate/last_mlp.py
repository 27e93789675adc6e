"""The last block's MLP going back after another stack's loss (``losses.moments``), and after
PyTorch's on the architectures whose own moments call it (``encoder``, ``bloom``): the gradient
reaching the block, the output projection's gradients and the MLP's input gradients. No torch
here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling._config_behaviours import double_quant
from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.bnb import dequant_absmax_bytes
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

# Blocks with LayerNorm (weight and bias) and a plain GELU MLP: GPT-2's, GPT-NeoX's kind
LAYER_NORM = ("gpt2", "neox", "encoder")


def norm_row_bytes(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """Bytes per token one h-wide norm saves (as ``activations`` and ``hf_ops`` count them)."""
    if d.extra.get("hf_module") and d.arch not in LAYER_NORM:
        from profiling.estimate.hf_ops import _norm_row

        return _norm_row(d, e, d.h, e.r)[0]
    cuda = cfg.target == "cuda"
    if d.arch in LAYER_NORM:
        return d.h * e.r + 8 if cuda else (d.h + 2) * e.r
    return d.h * e.r + 4 if cuda else (2 * d.h + 1) * 4


def last_mlp(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[float, str] | None:
    """The last block's MLP backward beside it: the gradient reaching the block (residual
    dtype), the output projection's weight gradient, and the MLP's input gradients less its
    saved output (a gated MLP: two, GELU's: one); None where not modelled (experts, MLA)."""
    if d.extra.get("experts") or d.extra.get("mla"):
        return None
    T, h, f = d.s * d.b, d.h, d.f
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    gated = d.arch not in LAYER_NORM  # GPT-2's and GPT-NeoX's kind: one GELU
    weight = (h * f + (0 if gated else h)) * p if cfg.lora_rank is None else 0
    # BLOOM's GeLUFunction backward (bloom_gelu_back): eager ops, 5 f-wide tensors at once
    bloom = d.extra.get("hf_module") == "bloom"
    n = 5 if bloom else 2 if gated else 1
    value = T * h * e.r + weight + n * T * f * e.c
    calc = (
        f"the gradient reaching the last block s·b·h·{e.r} + "
        + (f"its output projection's weight gradient {fmt_bytes(weight)} + " if weight else "")
        + f"the MLP's input gradients less its saved output {n}·s·b·f·{e.c}"
    )
    if e.amp and weight:
        # Under autocast the output projection's backward frees its weight's 16-bit copy before
        # the fp32 gradient is made; first it casts the gradient reaching it to 16 bits and makes
        # its own gradients in 16 bits, its saved input not yet freed — the higher moment where
        # GELU's MLP is trained (ViT-B/16: 13 MB at batch 64; GELU's MLPs at tiny sizes)
        value -= h * f * e.c
        calc += f" − the weight's 16-bit copy h·f·{e.c}"
        cast = T * h * e.c + T * f * e.c + (h * f + (0 if gated else h)) * e.c
        if T * h * e.r + cast > value:
            value = T * h * e.r + cast
            calc = (
                f"the gradient reaching the last block s·b·h·{e.r}, its 16-bit copy s·b·h·{e.c}, "
                f"the output projection's input gradient s·b·f·{e.c} and its 16-bit weight and "
                f"bias gradients (h·f + h)·{e.c}"
            )
    up, up_words = up_weight_cast(d, e, cfg)
    if up > 0:
        value += up
        calc += up_words
    # a norm after the MLP went back first (BERT's, RoBERTa's post-norm blocks too)
    encoder = d.arch == "encoder" and not d.extra["encoder"]["pixels"]
    if d.extra.get("norms") in ("post", "sandwich") or encoder:
        row, w = norm_row_bytes(d, e, cfg), (2 if d.arch in LAYER_NORM else 1)
        value += w * h * p - T * row
        calc += f" − the norm after the MLP s·b·{row} (its gradients {w}·h·{p} added)"
    if cfg.qlora:  # the frozen 4-bit weight dequantized for the backward's matmul
        if cfg.torchao_nf4:  # get_original_weight's locals at their highest (nf4_torchao)
            from profiling.estimate.nf4_torchao import dequant_formula, dequant_peak

            value += dequant_peak(h * f, e.c)
            calc += " + torchao's dequantization of the output projection, n = h·f: " + (
                dequant_formula(e.c)
            )
        elif cfg.fabric_bnb:  # quantized from fp16: dequantized to fp16, then cast (both alive;
            # the absmax is freed before the cast)
            value += h * f * (2 + e.c)
            calc += f" + the dequantized weight h·f·2 (fp16) and its cast h·f·{e.c}"
        else:
            absmax = dequant_absmax_bytes(h * f, double_quant(cfg))
            value += h * f * e.c + absmax
            calc += f" + the dequantized weight h·f·{e.c}" + (
                " and its fp32 absmax" if absmax else ""
            )
    return value, calc


def up_weight_cast(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, str]:
    """transformers' Llama MLP trained whole under autocast: how far up's weight gradient cast
    rises above the SwiGLU's product going back (bytes, the calculation's words; ≤ 0 where it
    does not, 0 elsewhere). ``LlamaMLP.forward`` (models/llama/modeling_llama.py) runs
    ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``; autograd runs up's branch before SiLU's
    (the later-made node first). By up's weight cast, mul's backward has freed its saved SiLU
    and up outputs and its two gradients but the one waiting for SiLU, and up's matmul's
    backward its saved 16-bit input and weight copies (autocast's ``cached_cast``); then
    ``_to_copy``'s backward (derivatives.yaml: ``grad.to(self.options())``) casts up's 16-bit
    weight gradient to fp32 beside it, with up's input gradient cast back to fp32: + h·f·4 +
    s·b·h·(4 − c) − s·b·4f·c against the product's moment. Read from the trace's live storages:
    llama-wide (h 256, f 1024) amp-bf16 64 × 2, 8-bit Adam or SGD, Liger's loss or PyTorch's:
    −65,536 B before (0.997), now equal."""
    if not e.amp or cfg.lora_rank is not None or d.arch != "llama":
        return 0, ""
    if d.extra.get("hf_module") not in ("llama", "mistral"):
        return 0, ""
    T, h, f = d.s * d.b, d.h, d.f
    up = h * f * 4 + T * h * (4 - e.c) - 4 * T * f * e.c
    words = (
        f", then at up's weight gradient cast: its 16-bit and fp32 weight gradients and its "
        f"input's gradient in fp32, less mul's saved SiLU and up outputs, two of the three "
        f"gradients and up's 16-bit input and weight copies: h·f·4 + s·b·h·(4 − {e.c}) − "
        f"s·b·4f·{e.c} {fmt_bytes(up)}"
    )
    return up, words


def unsaved_down_input(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """Under LoRA a frozen down saved no input (its weight needs no gradient; the LoRA lines
    take it off the forward), so its input's gradient is not offset by that input's freeing:
    one more f-wide gradient at once than ``last_mlp``'s n (the SwiGLU's three, as
    recomputed_llama counts them, GELU's two). Added by the moment that reads ``last_mlp``
    (``losses.moments``); an encoder classifier's own moment (``encoder._backward``) adds
    GELU's unsaved output itself, so ``last_mlp`` counts it for neither. BLOOM's too
    (bloom_gelu_back's five beside down's input gradient: 0.94-0.99 of the trace after
    another loss without it); 4-bit bases and BLOOM under autocast aside."""
    if cfg.lora_rank is None or cfg.qlora or "down" in cfg.lora_targets:
        return 0
    if e.amp and d.extra.get("hf_module") == "bloom":  # its autocast MLP: bloom_amp's, not here
        return 0
    return d.s * d.b * d.f * e.c


def down_adapter(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """An adapted down going back (the newest node first: B, then A): B's and A's weight
    gradients made, A's output (what B saved) freed by B's backward — the trace's peak there
    is A's backward, its input gradient beside both gradients (``last_mlp``'s n·s·b·f)."""
    from profiling.estimate.lora_bytes import adapter_bytes, adapter_compute

    if cfg.lora_rank is None or cfg.qlora or "down" not in cfg.lora_targets:
        return 0
    if e.amp and d.extra.get("hf_module") == "bloom":  # as unsaved_down_input
        return 0
    r = int(cfg.lora_rank or 0)
    return max(0, r * (d.f + d.h) * adapter_bytes(cfg) - d.s * d.b * r * adapter_compute(cfg, e))


__all__ = ["LAYER_NORM", "down_adapter", "last_mlp", "norm_row_bytes", "unsaved_down_input"]
