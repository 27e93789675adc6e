"""LoRA on GPT-NeoX's kind of decoder (GPT-NeoX/Pythia/StableLM-alpha, Phi-1/2, Falcon) in the
traced step: the modules each role names, and the adapter of a fused q/k/v projection.

Roles to modules: q, k, v are Phi's ``q_proj``, ``k_proj``, ``v_proj`` (peft's adapters, one
each) or a slice of GPT-NeoX's and Falcon's fused ``query_key_value``; o is the attention's
``dense``; up and down the MLP's two matrices (``dense_h_to_4h``/``dense_4h_to_h``, Phi's
``fc1``/``fc2``, our blocks' ``fc_in``/``fc_out``); lm_head the head (``lm_head``, our blocks'
``embed_out``). These MLPs have no gate: a ``gate`` role (LitGPT's ``lora_mlp``, peft's
``all-linear``) names nothing here.

A fused projection is adapted as LitGPT's ``LoRAQKVLinear`` adapts it (litgpt/lora.py): one
dropout of the input, one A of ``r × n`` rows for the n enabled slices, B applied per slice by a
grouped ``conv1d`` (or, where the slices differ in width — multi-query or grouped keys — one
``conv1d`` per slice and a ``cat``), the update zero-padded into the disabled slices by
``index_copy``, scaled and added. peft's adapter on the whole ``query_key_value`` (its
``target_modules`` naming the module) is this with all three slices enabled, except that its A
has r rows where this has 3r: s·b·2r more kept per layer and 2·r·h more parameters
(under DoRA the trace adapts it so: LitGPT's layer has no DoRA; ``peft_names``).
The adapters are in the dtype peft's are (``profiling.trace.lora.adapter_dtype``), the input
cast to it first as peft does.

Imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from profiling.config import TrainingConfig

# The leaf module names each role names on these models (transformers' and our blocks').
ROLE_MODULES = {
    "q": ("q_proj",), "k": ("k_proj",), "v": ("v_proj",), "o": ("dense",),
    "up": ("dense_h_to_4h", "fc1", "fc_in"), "down": ("dense_4h_to_h", "fc2", "fc_out"),
    "lm_head": ("lm_head", "embed_out"),
}  # fmt: skip
FUSED = "query_key_value"


class FusedQKVLoRA(nn.Module):
    """LitGPT's ``LoRAQKVLinear`` around a fused q/k/v Linear (see the module doc)."""

    def __init__(
        self,
        base: nn.Linear,
        widths: tuple[int, int, int],
        enabled: tuple[bool, bool, bool],
        rank: int,
        dropout: float,
        dtype: torch.dtype,
    ) -> None:
        super().__init__()
        self.base_layer = base
        self.widths = [w for w, on in zip(widths, enabled, strict=True) if on]
        n, device = len(self.widths), base.weight.device
        self.lora_A = nn.Parameter(
            torch.empty(n * rank, base.in_features, dtype=dtype, device=device)
        )
        self.lora_B = nn.Parameter(torch.empty(sum(self.widths), rank, dtype=dtype, device=device))
        self.lora_dropout = nn.Dropout(dropout) if dropout else nn.Identity()
        self.scaling = 2.0  # lora_alpha / r with alpha = 2r, as the peft adapters here
        starts = [0, widths[0], widths[0] + widths[1]]
        self.columns = [
            c
            for s, w, on in zip(starts, widths, enabled, strict=True)
            if on
            for c in range(s, s + w)
        ]
        self.everything = all(enabled)
        # torchtune's disable_adapter (torchtune/modules/peft/_utils.py) sets ``disabled`` on
        # every adapter module and LoRALinear.forward then returns the base's output alone: the
        # DPO recipes' reference forward (profiling.trace.preference.adapters_off)
        self.disabled = False

    def _grouped(self, after_a: torch.Tensor) -> torch.Tensor:
        weight = self.lora_B.unsqueeze(-1)
        if len(set(self.widths)) == 1:  # equal slices: one grouped conv1d
            return F.conv1d(after_a, weight, groups=len(self.widths))
        parts = zip(after_a.chunk(len(self.widths), dim=1), weight.split(self.widths), strict=True)
        return torch.cat([F.conv1d(a, b) for a, b in parts], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base_layer(x)
        if self.disabled:
            return out
        after_a = F.linear(self.lora_dropout(x.to(self.lora_A.dtype)), self.lora_A)
        after_b = self._grouped(after_a.transpose(-2, -1)).transpose(-2, -1)
        if not self.everything:  # LitGPT's zero_pad: the update into the enabled columns
            flat = after_b.transpose(0, 1)
            padded = flat.new_zeros((*flat.shape[:-1], self.base_layer.out_features))
            index = torch.tensor(self.columns, device=padded.device)
            padded = padded.view(-1, self.base_layer.out_features).index_copy(
                1, index, flat.reshape(-1, sum(self.widths))
            )
            after_b = padded.view((*flat.shape[:-1], -1)).transpose(0, 1)
        return (out + after_b * self.scaling).to(out.dtype)


def _leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def peft_names(model: nn.Module, config: TrainingConfig) -> list[str]:
    """The module names peft's ``target_modules`` gets for the roles ``config`` adapts on this
    model. A fused q/k/v projection is adapted apart, by :func:`adapt_fused_qkv`, except under
    DoRA: LitGPT's ``LoRAQKVLinear`` has none, so peft adapts the whole ``query_key_value``
    (``use_dora`` with ``target_modules`` naming it, as peft's users adapt GPT-NeoX, Falcon and
    BLOOM; ``trace.dora.problem`` asks for all three slices)."""
    roles = list(config.lora_targets)
    present = {_leaf(n) for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    names = [m for role in roles for m in ROLE_MODULES.get(role, ()) if m in present]
    if config.dora and FUSED in present and set(roles) & {"q", "k", "v"}:
        names.insert(0, FUSED)  # peft's layer is no nn.Linear: adapt_fused_qkv passes it by
    return list(dict.fromkeys(names))


def adapt_fused_qkv(
    model: nn.Module,
    roles: list[str],
    widths: tuple[int, int],
    rank: int,
    dropout: float,
    dtype: torch.dtype,
) -> int:
    """Every fused q/k/v Linear (``widths``: q's and one of k, v's columns) adapted on the
    slices ``roles`` enables; how many."""
    enabled = (("q" in roles), ("k" in roles), ("v" in roles))
    if not any(enabled):
        return 0
    q, kv = widths
    count = 0
    for parent in list(model.modules()):
        base = getattr(parent, FUSED, None)
        if not isinstance(base, nn.Linear):  # a plain or 4-bit Linear, not adapted yet
            continue
        setattr(parent, FUSED, FusedQKVLoRA(base, (q, kv, kv), enabled, rank, dropout, dtype))
        count += 1
    return count


def record(
    model: nn.Module,
    config: TrainingConfig,
    in_model: Callable[[int], int],
    counts: tuple[int, int, int, list[str]],
    notes: list[str],
    versions: tuple[torch.dtype, str | None],
) -> tuple[dict[str, Any], list[str]]:
    """What the record and the notes say of LoRA on this model (as ``apply_lora`` does for the
    Llama family); ``counts``: parameters before, 4-bit weights, fused adapters, peft's names;
    ``versions``: the adapters' dtype and peft's version."""
    unpacked, quantized, fused, modules = counts
    r, dropout = int(config.lora_rank or 0), config.lora_dropout
    peft = sum(1 for n, _ in model.named_modules() if n.endswith("lora_A.default"))
    adapted = fused + peft  # at least q, k or v's: lora_problem asks for one
    adapters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    head = [
        p.numel()
        for n, p in model.named_parameters()
        if p.requires_grad and n.startswith(("lm_head.", "embed_out."))
    ]
    whole_layers = in_model(adapted - bool(head)) + bool(head)
    whole_params = in_model(adapters - sum(head)) + sum(head)
    slices = [t for t in ("q", "k", "v") if t in config.lora_targets]
    names = [f"{FUSED} ({', '.join(slices)} slices, LitGPT's LoRAQKVLinear)"] if fused else []
    names += modules
    dtype = str(versions[0]).removeprefix("torch.")
    gate = " (its MLP has no gate)" if "gate" in config.lora_targets else ""
    notes.append(
        f"LoRA (r={r}, alpha={2 * r}, dropout={dropout:g}) on {', '.join(names)}{gate} "
        f"({whole_layers} layers; peft's adapters"
        + (", the fused projection's as LitGPT adapts it" if fused else "")
        + f"), base weights frozen (no gradients, no optimizer state); adapters in {dtype}"
    )
    info = {
        "lora": {
            "rank": r,
            "alpha": 2 * r,
            "targets": names,
            "dropout": dropout,
            "adapted_layers": whole_layers,
            "adapter_params": whole_params,
            "peft": versions[1],
            "base": "NF4 (represented: bitsandbytes needs CUDA)" if config.qlora else "frozen",
            "quantized_layers": in_model(quantized),
            "bnb_keeps_inputs": config.bnb_keeps_inputs,
            "dora": config.dora,
        },
        "traced_params": unpacked + adapters,
    }
    return info, notes


__all__ = ["FUSED", "ROLE_MODULES", "FusedQKVLoRA", "adapt_fused_qkv", "peft_names", "record"]
