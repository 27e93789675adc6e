"""LoRA on an encoder-decoder (T5, mT5) in the traced step: peft's adapters on transformers'
own ``T5ForConditionalGeneration``, as peft adapts it.

peft's default targets for ``t5`` and ``mt5`` are ``["q", "v"]``, matched as a module name's
last part: every attention's q and v, the encoder's self-attention and both of the decoder's
(its self-attention and its cross-attention, whose v reads the encoder's output). Roles map to
T5's names: q, k, v, o to each attention's own; up to the ReLU MLP's ``wi`` (the linear branch
``wi_1`` of a gated one), gate to ``wi_0``, down to ``wo``. The embedding, the position tables
and the head stay frozen. Imports torch; ``peft`` inside the function.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

from torch import nn

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.trace.lora_encoder import inject

_ATTENTION = ("q", "k", "v", "o")


def _names(model: nn.Module, roles: list[str]) -> list[str]:
    """peft's ``target_modules`` for these roles on this model (the MLP's names depend on its
    kind: ``wi`` for ReLU, ``wi_0``/``wi_1`` for gated GELU)."""
    gated = any(n.endswith(".wi_0") for n, _ in model.named_modules())
    mlp = {"up": "wi_1" if gated else "wi", "gate": "wi_0", "down": "wo"}
    if "gate" in roles and not gated:
        raise ProfilingError("LoRA on gate: this T5's MLP (ReLU) has none; adapt up or down")
    return [r if r in _ATTENTION else mlp[r] for r in roles]


def apply(
    model: nn.Module,
    config: TrainingConfig,
    dtype: Any,
    version: str | None,
    fake_safe_moves: Callable[[], contextlib.AbstractContextManager[None]],
) -> tuple[dict[str, Any], list[str]]:
    """peft's LoRA on both stacks' blocks (the base frozen); what the record says."""
    r, dropout = int(config.lora_rank or 0), config.lora_dropout
    roles = [t for t in config.lora_targets if t != "lm_head"]
    names = _names(model, roles)
    unpacked = sum(p.numel() for p in model.parameters())
    inject(model, names, config, dtype, fake_safe_moves)
    for name, p in model.named_parameters():
        p.requires_grad_("lora_" in name)
    adapted = sum(1 for n, _ in model.named_modules() if n.endswith("lora_A.default"))
    enc = sum(1 for n, _ in model.named_modules() if re.search(r"\bencoder\.block\.\d+$", n))
    dec = sum(1 for n, _ in model.named_modules() if re.search(r"\bdecoder\.block\.\d+$", n))
    attn = len([t for t in roles if t in _ATTENTION])
    expected = enc * len(roles) + dec * (len(roles) + attn)
    if adapted != expected:
        raise ProfilingError(
            f"LoRA on this encoder-decoder found {adapted} of the {expected} layers "
            f"{', '.join(roles)} name; estimate it instead"
        )
    adapters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    notes = [
        f"LoRA by peft: LoraConfig(r={r}, lora_alpha={2 * r}, lora_dropout={dropout:g}, "
        f"target_modules={names}) on both stacks ({adapted} layers: the decoder's "
        "cross-attention too), base weights frozen; adapters in "
        f"{str(dtype).removeprefix('torch.')}"
    ]
    info = {
        "lora": {
            "rank": r,
            "alpha": 2 * r,
            "targets": roles,
            "dropout": dropout,
            "adapted_layers": adapted,
            "adapter_params": adapters,
            "peft": version,
            "base": "frozen",
        },
        "traced_params": unpacked + adapters,
    }
    return info, notes


def own_names(
    model: nn.Module,
    config: TrainingConfig,
    in_model: Callable[[int], int],
    arch: str,
    how: tuple[Any, Callable[[], contextlib.AbstractContextManager[None]], str | None],
) -> tuple[dict[str, Any], list[str]]:
    """peft's LoRA on a transformers module with names of its own: an encoder's (its saved
    classifier: ``trace.lora_encoder``) or an encoder-decoder's (both stacks: ``apply``).
    ``how``: the adapters' dtype, the fake-safe ``.to`` of ``trace.fake_moves``, peft's
    version."""
    dtype, moves, version = how
    if arch == "encoder":
        from profiling.trace import lora_encoder

        return lora_encoder.apply(model, config, in_model, dtype, version, moves)
    return apply(model, config, dtype, version, moves)


__all__ = ["apply", "own_names"]
