"""peft's DoRA on the output projection of GPT-NeoX's kind's MLP (GPT-NeoX's dense_4h_to_h,
Falcon's, Phi's fc2) under autocast over a 16-bit-computing fp32 base (LoRA's ``amp-*``, not
QLoRA: ``dora_neox_amp``): the last block's DoRA sum at down, in the forward, holds the step's
peak on a vocabulary small next to the blocks (V 128 beside h 128, f 512, 256 × 2 tokens),
where ``neox_amp_moments`` counted LoRA's sum (0.94 of the trace on GPT-NeoX).

The same ops as on a Llama's down (``llama_dora_down``; peft 0.21 tuners/lora/layer.py
``Linear.forward``, variants.py ``DoraLinearVariant.forward``, dora.py ``DoraLinearLayer.
forward``), beside what ``neox_amp_moments.forward`` holds at the output projection
(the embeddings, position indices, the first block's A copies, the attention's output, the
MLP's input) — at the sum's allocation, for down of in f, out h (T = s·b tokens):

- GELU's 16-bit output, down's input (lora_A keeps autocast's 16-bit cast of peft's fp32 cast,
  not it) and peft's fp32 cast s·b·f·4 (a local of ``Linear.forward``);
- the norm rebuild's leftovers (``llama_dora_down.leftovers``: the identity's graph, B·A in fp32);
- where the layer has a bias, the base layer's 16-bit output waits for ``result + …`` beside
  ``base_result − bias`` (fp32, kept for the magnitude: in the end of forward);
- ``(mns − 1)·base_result``, the scaled ``mns·lora_result`` and their sum, s·b·h·4 each;
- with lora_dropout peft reruns the base layer on the dropped input (fp32, a local: A keeps its
  16-bit cast), the first output unused beside it.

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.llama_dora_down import at_sum

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Bytes, Dims


def applies(d: Dims, cfg: TrainingConfig) -> bool:
    """DoRA on down, but on a 4-bit base under autocast (``dora_neox_amp``'s) or torchao's, and
    but BLOOM's (``neox_moments`` keeps its older count there: its masks and locals not read)."""
    if cfg.qlora and (cfg.precision.startswith("amp-") or cfg.torchao_nf4):
        return False
    if d.extra.get("hf_module") == "bloom":
        return False
    return bool(cfg.dora and "down" in cfg.lora_targets)


def at_down(d: Dims, e: Bytes, cfg: TrainingConfig) -> tuple[int, str]:
    """What the output projection's DoRA holds at its sum beyond the end of forward and the
    block's held tensors (``llama_dora_down.at_sum``, GELU's output for down's input, 16-bit
    under autocast): bytes and words."""
    m = 2 if e.amp else e.c
    value, words = at_sum(d, e, cfg, m, bias=bool(d.extra["neox"].get("bias")))
    return value, "GELU's output and down's DoRA" + words + " "


__all__ = ["applies", "at_down"]
