"""DoRA (peft's ``use_dora``) on GPT-NeoX's kind of decoder with q, k, v apart (Phi-1/2): each
role's widths, and the first block's layers whose base output needs no gradient.

peft's ``DoraLinearLayer`` is the same on any ``nn.Linear`` (``profiling.estimate.dora``); what
differs is which layers a role names (``profiling.trace.lora_neox.ROLE_MODULES``: no gate; o
the attention's ``dense``; up, down the MLP's ``fc1``, ``fc2``) and, in the first block, which
of them read only the frozen embedding's LayerNorm: with attention and MLP in parallel (Phi's
one norm) up reads it as q, k, v do, and where up is not adapted GELU's output needs no
gradient, so down's input needs none either (``profiling.estimate.lora_neox._first_block``
counts the same layers' dropout masks). A fused ``query_key_value`` (GPT-NeoX, Falcon, BLOOM,
LitGPT's) is adapted as LitGPT's ``LoRAQKVLinear``, which has no DoRA: refused
(``profiling.estimate.dora.check``).

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Dims


def fused(d: Dims) -> bool:
    """Whether q, k, v are one ``query_key_value`` layer (GPT-NeoX, Falcon, BLOOM)."""
    return bool(d.extra["neox"]["fused_qkv"])


def roles(d: Dims, cfg: TrainingConfig) -> list[str]:
    """The adapted layers of a block by role: a fused q/k/v one ``qkv`` (all three slices:
    ``dora.check``), no gate."""
    apart = [t for t in cfg.lora_targets if t in ("o", "up", "down")]
    if not fused(d):
        return [t for t in cfg.lora_targets if t in ("q", "k", "v")] + apart
    return (["qkv"] if set(cfg.lora_targets) & {"q", "k", "v"} else []) + apart


def out_widths(d: Dims) -> dict[str, int]:
    """Each adaptable layer's output width (no gate on these MLPs)."""
    q = int(d.extra["neox"]["q_dim"])
    qkv = {"qkv": q + 2 * d.k} if fused(d) else {"q": q, "k": d.k, "v": d.k}
    return {**qkv, "o": d.h, "up": d.f, "down": d.h}


def in_widths(d: Dims) -> dict[str, int]:
    """Each adaptable layer's input width."""
    q = int(d.extra["neox"]["q_dim"])
    qkv = {"qkv": d.h} if fused(d) else {"q": d.h, "k": d.h, "v": d.h}
    return {**qkv, "o": q, "up": d.h, "down": d.f}


def first_block(d: Dims, cfg: TrainingConfig) -> list[str]:
    """The first block's adapted layers whose input (so base output) needs no gradient."""
    parallel = str(d.extra["neox"]["residual"]) != "sequential"
    reading = {"qkv", "q", "k", "v"} | ({"up"} if parallel else set())
    if parallel and "up" not in cfg.lora_targets:
        reading.add("down")  # GELU reads up's frozen output: no gradient reaches it
    return [t for t in roles(d, cfg) if t in reading]


__all__ = ["first_block", "fused", "in_widths", "out_widths", "roles"]
