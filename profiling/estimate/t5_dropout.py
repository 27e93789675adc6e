"""The model's dropout (``--dropout``) on an encoder-decoder (T5, mT5) without checkpointing: the
masks its ``nn.Dropout`` modules keep for backward, 1 B an element (CUDA's bool mask).

transformers' modules (models/t5/modeling_t5.py) drop out, each keeping its mask for backward
(torch ``native_dropout``: the mask is saved, the dropped tensor replaces its input where the
next op saves one — no more bytes):

- every block: after each attention (``T5LayerSelfAttention``, ``T5LayerCrossAttention``:
  ``hidden_states + self.dropout(attention_output[0])``), inside the MLP
  (``T5DenseGatedActDense``/``T5DenseActDense``: over the product or ReLU's output, f wide)
  and after it (``T5LayerFF``): an encoder block s·b·(2h + f), a decoder block t·b·(3h + f);
- each stack once: ``T5Stack.forward`` drops out its input embeddings and its final norm's
  output, h wide each. The embeddings' mask is kept only where they need a gradient: a full
  finetune (under LoRA the frozen embedding's output needs none, so dropout saves no mask).

Attention's own dropout runs inside SDPA's memory-efficient kernel, which keeps only its seed
and offset (counted, dropout or not). Read from the trace's kept tensors (t5-small toy, h 128,
f 512, 2 + 3 blocks, 32 input and 24 target tokens): a full finetune +128,000 B, LoRA q, v
+120,832 B over the same step without dropout, which the estimate had not counted (LoRA fp32
q, v SGD: 0.973 of the trace). On the CPU target the masks are not modelled (the CPU's
dropout noise is the dropped tensor's dtype). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Dims, Term, _cuda

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def _applies(cfg: TrainingConfig) -> bool:
    return bool(cfg.dropout) and cfg.checkpointing == "none" and _cuda(cfg)


def encoder_block(d: Dims, cfg: TrainingConfig) -> list[Term]:
    """One encoder block's masks (``d``: the encoder's dims, s its input's)."""
    if not _applies(cfg):
        return []
    T = d.s * d.b
    return [Term("dropout masks (after attention, in and after the MLP: bool)",
                 T * (2 * d.h + d.f), "s·b·(2h + f) B", f"{T}·(2·{d.h} + {d.f})")]  # fmt: skip


def once(d: Dims, cfg: TrainingConfig, t: int, layers: int) -> list[Term]:
    """The decoder's blocks' masks and each stack's own (``t``: the target's tokens a
    sequence, ``layers``: the decoder's blocks)."""
    if not _applies(cfg):
        return []
    T, U = d.s * d.b, t * d.b
    # the final norms' outputs', and the input embeddings' where the embedding trains
    ends = (T + U) * d.h * (2 if cfg.lora_rank is None else 1)
    value = layers * U * (3 * d.h + d.f) + ends
    return [Term(f"dropout masks: decoder blocks ×{layers} (after self- and cross-attention, in "
                 "and after the MLP), each stack's final norm's output"
                 + (" and input embeddings" if cfg.lora_rank is None else "") + " (bool)",
                 value, "L_dec·t·b·(3h + f) + (s + t)·b·h" + ("·2" if cfg.lora_rank is None
                                                             else "") + " B",
                 f"{value}")]  # fmt: skip


__all__ = ["encoder_block", "once"]
