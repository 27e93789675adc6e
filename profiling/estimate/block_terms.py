"""One block's activation terms, by the block's kind: the dispatch ``memory`` counts every block
with, here apart so the moment modules that rebuild a block (``llama_first_mlp``) call the same
reading without importing ``memory``, which imports them through ``step_moments``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate import activations as acts
from profiling.estimate import compiled, encoder, hf_ops, mla, neox, t5, variants

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def per_layer(d: acts.Dims, e: acts.Bytes, inp: TrainingConfig) -> list[acts.Term]:
    """What one block keeps for backward, as its kind's module counts it."""
    if inp.compile:  # what torch.compile's partitioner keeps (estimate/compiled.py)
        return compiled.per_layer(d, inp)
    if d.arch in ("encoder", "t5"):  # BERT, RoBERTa, T5: transformers' module (estimate.t5)
        return (t5 if d.arch == "t5" else encoder).per_layer(d, e, inp)
    if d.arch == "neox":  # GPT-NeoX's kind: our blocks or transformers' (estimate.neox)
        return neox.per_layer(d, e, inp)
    if d.extra.get("hf_module"):  # transformers' own module (models.implementation)
        return hf_ops.per_layer(d, e, inp)
    if d.extra.get("mla"):  # DeepSeek-V2's blocks
        return mla.per_layer(d, e, inp) + acts.attention_extras(d, e, inp)
    if not d.extra:
        return acts.per_layer(d, e, inp)
    return variants.per_layer(d, e, inp) + acts.attention_extras(d, e, inp)


__all__ = ["per_layer"]
