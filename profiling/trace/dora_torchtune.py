"""DoRA as torchtune's ``DoRALinear`` runs it, in the traced step: peft's DoRA layers (the same
tensors — A r × in, B out × r, one magnitude per output row, the frozen weight) run in
torchtune's order.

Read in torchtune 00a080a6 ``torchtune/modules/peft/dora.py`` (``DoRALinear.forward``):

    base_out = F.linear(x, weight)            # the undropped input
    x = dropout(x)
    lora_out = lora_b(lora_a(x))              # before the norm: alive while it is rebuilt
    lora_weight = lora_b(lora_a(eye(in, dtype=x.dtype))).T
    weight_norm = ‖weight.to(x.dtype) + scaling · lora_weight.detach()‖ (per row), detached
    mns = (magnitude / weight_norm).view(1, -1)
    return (mns − 1) · base_out + mns · lora_out · scaling + base_out

Against peft's ``DoraLinearVariant`` (``profiling.trace.dora``): with dropout nothing is rerun
(peft reruns the base layer on the dropped input and keeps that output); without it the same
tensors are kept, and B's output already exists while the norm is rebuilt. torchtune trains in
its model's dtype (bf16 or fp32, no autocast), so the input, the identity and the adapters share
one dtype and peft's ``get_lora_weight`` (which makes the identity in A's dtype) builds the very
B·A torchtune does — through the same wrapper that frees its dead graph
(``profiling.trace.dora.free_dead_graphs``).

Imports torch.
"""

from __future__ import annotations

from typing import Any

import torch

from profiling._quiet_import import import_quietly


class TorchtuneDoraVariant:
    """Stands in for peft's ``DoraLinearVariant`` in ``lora.Linear.forward``: ``result`` is the
    base layer's output on the undropped input (torchtune's ``base_out``)."""

    @staticmethod
    def forward(module: Any, active_adapter: str, x: torch.Tensor, result: torch.Tensor,
                **kwargs: Any) -> torch.Tensor:  # fmt: skip
        lora_a, lora_b = module.lora_A[active_adapter], module.lora_B[active_adapter]
        scaling = module.scaling[active_adapter]
        lora_out = lora_b(lora_a(module.lora_dropout[active_adapter](x)))
        dora = module.lora_magnitude_vector[active_adapter]
        lora_weight = dora.get_lora_weight(lora_A=lora_a, lora_B=lora_b).to(x.dtype)
        dequantize = import_quietly("peft.tuners.lora.dora").dequantize_module_weight
        weight = dequantize(module.get_base_layer()).to(x.dtype)
        norm = dora.get_weight_norm(weight, lora_weight.detach(), scaling).detach()
        # weight and lora_weight stay alive to the return, as torchtune's locals do
        mns = (dora.weight / norm).view(1, -1)
        return (mns - 1) * result + mns * lora_out * scaling + result


def run_as_torchtune(model: Any) -> int:
    """Every peft DoRA layer of ``model`` run in torchtune's order; how many."""
    count = 0
    for module in model.modules():
        variants = getattr(module, "lora_variant", None)
        if variants and getattr(module, "lora_magnitude_vector", None):
            for name in list(variants):
                variants[name] = TorchtuneDoraVariant()
                count += 1
    return count


__all__ = ["TorchtuneDoraVariant", "run_as_torchtune"]
