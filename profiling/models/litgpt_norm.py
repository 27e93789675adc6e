"""LitGPT's RMSNorm, put in place of transformers' in a model its finetune scripts run
(``--loss litgpt`` on a Llama, Mistral, Qwen2 or Phi-3 shape: ``WorkloadConfig.litgpt_norm``).

litgpt/model.py at 00af8b0 (lines 550-571), the norm of every RMSNorm model LitGPT builds::

    x = x.float()
    norm_x = torch.mean(x * x, dim=self.dim, keepdim=True)
    x_normed = x * torch.rsqrt(norm_x + self.eps)
    weight = (1 + self.weight) if self.add_unit_offset else self.weight
    return (x_normed * weight.float()).to(dtype=dtype)

For backward it keeps the fp32 input, rstd, the fp32 normalized values (when the weight is
trained) and the weight's fp32 copy (when a gradient reaches the input), where transformers'
LlamaRMSNorm casts the normalized values back to 16 bits before its weight multiplies them and
keeps that 16-bit copy. Imports torch.
"""

from __future__ import annotations

import types

import torch
from torch import nn


def _forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    eps: float = self.variance_epsilon  # type: ignore[assignment]  (transformers' name for eps)
    weight: torch.Tensor = self.weight  # type: ignore[assignment]
    dtype = x.dtype
    x = x.float()
    norm_x = torch.mean(x * x, dim=-1, keepdim=True)
    x_normed = x * torch.rsqrt(norm_x + eps)
    return (x_normed * weight.float()).to(dtype=dtype)


def use_litgpt_norms(model: nn.Module) -> int:
    """Run every transformers RMSNorm of ``model`` as LitGPT's; how many there are."""
    count = 0
    for module in model.modules():
        if type(module).__name__.endswith("RMSNorm") and hasattr(module, "variance_epsilon"):
            module.forward = types.MethodType(_forward, module)
            count += 1
    return count
