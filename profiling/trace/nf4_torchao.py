"""torchao's NF4 base (``--torchao-nf4``) in the traced step, without torchao: each Linear of the
blocks (the LM head and embeddings stay in the model's dtype, as torchtune's QLoRA builders leave
them) holds what ``NF4Tensor`` holds, and its matmul runs ``LinearNF4``'s forward and backward with
``get_original_weight``'s ops, one for one, on that storage (the sizes and the source read:
``profiling.estimate.nf4_torchao``). Real ops on the trace's fake tensors, so every transient is
the tracker's own count; nothing of the input is saved. Imports torch.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from profiling.errors import ProfilingError
from profiling.estimate.nf4_torchao import BLOCK, CODE_VALUES, MULTIPLE, SCALER_BLOCK


def _original_weight(storage: tuple[torch.Tensor, ...], shape: tuple[int, int]) -> torch.Tensor:
    """``NF4Tensor.get_original_weight`` (with ``dequantize_scalers``), op for op; torchao's
    ``.to`` after it makes no copy in the same dtype."""
    data, scalers, factor, mean, code = storage
    first_elements = (data >> 4).to(torch.long)
    second_elements = (data & 0b1111).to(torch.long)
    dequantized_first = code[first_elements]
    dequantized_second = code[second_elements]
    n_scaler_blocks = scalers.numel() // SCALER_BLOCK
    blocks = scalers.view(n_scaler_blocks, SCALER_BLOCK)
    dequantized = (blocks / factor.unsqueeze(-1)).flatten().to(code.dtype) + mean
    repeated = dequantized.unsqueeze(-1).expand(dequantized.size(0), BLOCK // 2)
    scaled_first = dequantized_first * repeated.flatten()
    scaled_second = dequantized_second * repeated.flatten()
    scaled_first = scaled_first.unsqueeze(-1).transpose(0, 1)
    scaled_second = scaled_second.unsqueeze(-1).transpose(0, 1)
    return torch.stack([scaled_first, scaled_second], dim=-1).reshape(shape)


class _LinearNF4(torch.autograd.Function):
    """torchao's ``LinearNF4``: ``F.linear(input, weight.to(input.dtype))``, saving only the NF4
    weight (its storage is the module's: saving it costs nothing); backward
    ``grad_output @ weight.to(grad_output.dtype)``. Tensors only, so torch.compile traces it."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, shape: Any, *storage: torch.Tensor) -> torch.Tensor:  # type: ignore[override]  # autograd.Function's forward: the storage as plain tensors
        ctx.save_for_backward(*storage)
        ctx.shape = shape
        return torch.nn.functional.linear(x, _original_weight(storage, shape).to(x.dtype))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]  # autograd.Function's backward signature
        storage = ctx.saved_tensors  # unpacked once (checkpointing allows no second time)
        weight = _original_weight(storage, ctx.shape).to(grad.dtype)
        return (grad @ weight, None, *(None for _ in storage))


class TorchaoNF4Linear(nn.Linear):
    """What torchtune's ``FrozenNF4Linear`` holds: the weight as ``NF4Tensor``'s five tensors,
    frozen parameters (the trace counts them as parameters)."""

    def __init__(self, linear: nn.Linear) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.nf4_shape = (self.out_features, self.in_features)
        n = self.out_features * self.in_features
        if n % MULTIPLE:
            raise ProfilingError(
                f"torchao's NF4Tensor cannot quantize a {self.out_features} × {self.in_features} "
                f"weight: its values must be a multiple of {MULTIPLE:,}"
            )
        device, dtype = linear.weight.device, linear.weight.dtype

        def frozen(*shape: int, kind: torch.dtype) -> nn.Parameter:
            return nn.Parameter(torch.empty(shape, dtype=kind, device=device), False)

        self.weight = frozen(n // 2, kind=torch.uint8)  # quantized_data
        self.quantized_scalers = frozen(n // BLOCK, kind=torch.int8)
        self.quantization_factor = frozen(n // MULTIPLE, kind=dtype)
        self.scaler_mean = frozen(kind=dtype)
        self.nf4 = frozen(CODE_VALUES, kind=dtype)
        self.bias = linear.bias
        if self.bias is not None:
            self.bias.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        storage = (self.weight, self.quantized_scalers, self.quantization_factor,
                   self.scaler_mean, self.nf4)  # fmt: skip
        out = _LinearNF4.apply(x, self.nf4_shape, *storage)
        if self.bias is not None:
            out = out + self.bias
        return out


def quantize_torchao(model: nn.Module) -> int:
    """Every Linear layer of the repeated blocks as a :class:`TorchaoNF4Linear` (not the LM head:
    torchtune's builders keep ``output`` in the model's dtype, or tie it to the embedding);
    returns how many weights."""
    count = 0
    for name, parent in list(model.named_modules()):
        if all(isinstance(getattr(parent, w, None), nn.Parameter) for w in ("gate", "up", "down")):
            raise ProfilingError(
                "--torchao-nf4 on a mixture of experts: torchtune's QLoRA builders quantize "
                "dense Linear layers only"
            )
        for child_name, child in list(parent.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if not isinstance(child, nn.Linear) or isinstance(child, TorchaoNF4Linear):
                continue
            if not full.endswith("lm_head"):
                setattr(parent, child_name, TorchaoNF4Linear(child))
                count += 1
    return count


def note(weights: int) -> str:
    """What the record says of the traced NF4 base (``weights``: the whole model's count)."""
    return (
        f"QLoRA as torchtune runs it: {weights} Linear weights of the blocks hold torchao's "
        "NF4Tensor storage (packed uint8 n/2 bytes, int8 scalers per 64 values, a factor per 256 "
        "scalers, their mean and the 16-value code in the model's dtype) and run LinearNF4's "
        "dequantization op for op in forward and backward, keeping no input; the LM head and "
        "embeddings stay in the model's dtype"
    )


__all__ = ["TorchaoNF4Linear", "note", "quantize_torchao"]
