"""DoRA as torchtune's ``DoRALinear`` runs it (``--torchtune-dora``, set with ``--dora`` by a
torchtune recipe's ``use_dora``): what the estimate counts, and where it stops.

Read in torchtune 00a080a6 ``torchtune/modules/peft/dora.py`` (``DoRALinear.forward``): the
base output from the undropped input, reused for the magnitude's gradient (nothing rerun under
dropout, unlike peft's ``DoraLinearVariant``); the adapters' output ``lora_b(lora_a(dropout
(x)))`` made before the weight's norm is rebuilt (alive through it); the norm from
``weight.to(x.dtype) + scaling · lora_b(lora_a(eye)).T`` detached; the output
``(mns − 1)·base_out + mns·lora_out·scaling + base_out``.

torchtune trains in its model's dtype (bf16 or fp32: no autocast, no fp32 adapters on a 16-bit
model), so the input, the identity, the adapters and the base weight share one dtype. There the
tensors kept are peft's (``profiling.estimate.dora``): the base output (s·b·o, the model's
dtype: peft's rerun on the dropped input gives the same bytes), B's output, the norm, ``mns``
and ``mns − 1``, and no weight copy (peft's rerun casts none in one dtype). What differs is the
forward's order — B's output and A's exist while the norm is rebuilt — and the estimate's
moment (``dora.moments``: the end of forward, which holds the last block's kept outputs, plus
the largest norm rebuild) already counts them. The trace runs torchtune's order
(``profiling.trace.dora_torchtune``); the tests compare the two per category and at the peak.

Not modelled (one sentence each): torchtune's DoRA on its NF4 base (``quantize_base``:
torchao's ``linear_nf4`` and ``NF4Tensor.to``), another precision, another kind of model.

No torch here.
"""

from __future__ import annotations

from typing import Any


def problem(cfg: Any, arch: str | None) -> str | None:
    """Why torchtune's DoRA is not modelled here (None: it is, or it is not asked for)."""
    if not (cfg.dora and cfg.torchtune_dora):
        return None
    if cfg.precision not in ("bf16", "fp32") or cfg.autocast_adapters:
        return "--precision bf16 or fp32 for torchtune's DoRA (torchtune trains in its dtype)"
    if cfg.qlora:
        # (the caller says "the estimate cannot model …": the clause names what is not modelled)
        return "torchtune's DoRA on torchao's NF4 base (QDoRA; DoRA on a 16-bit base is modelled)"
    if arch != "llama":
        return "torchtune's DoRA on a Llama-family model (its builders' kind)"
    return None


__all__ = ["problem"]
