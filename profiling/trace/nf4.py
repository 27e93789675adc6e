"""QLoRA's 4-bit base in the traced step: bitsandbytes' kernels need CUDA and the trace runs on
fake cpu tensors, so each Linear layer of the blocks becomes :class:`NF4Linear`, holding what
bitsandbytes' ``Linear4bit`` holds after ``quantize_4bit`` (the sizes are
``profiling.estimate.bnb``'s), and a mixture's experts hold 4-bit weights behind
:func:`quantize_experts`. ``profiling.trace.lora`` puts peft's adapters on top.

Imports torch.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from profiling.errors import ProfilingError
from profiling.estimate.bnb import (
    DYNAMIC_MAP_BYTES,
    NESTED_BLOCK,
    NF4_BLOCK,
    NF4_CODE_BYTES,
    dequant_absmax_bytes,
)


class _DequantizedMatMul(torch.autograd.Function):
    """``x @ dequantize(W)ᵀ`` that keeps nothing for backward but the (already held) quantized
    weight: the 16-bit weight is rebuilt for the gradient of ``x``, as bitsandbytes does."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, layer: NF4Linear) -> torch.Tensor:  # type: ignore[override]  # autograd.Function's forward takes the layer as a plain argument
        ctx.layer = layer
        if layer.keeps_inputs and x.requires_grad:  # bitsandbytes <= 0.43.1: ctx.tensors = (A, B)
            ctx.save_for_backward(x)
            # A ctx attribute there, which backward never releases: the input lives as long as
            # the graph does. HF's loop drops the graph with the loss; LitGPT's holds it through
            # the next forward (profiling.models.losses._litgpt holds it by this mark).
            ctx.held_by_graph = True
        return torch.nn.functional.linear(x, layer.dequantize(x.dtype))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]  # autograd.Function's backward signature
        return grad @ ctx.layer.dequantize(grad.dtype), None


def _nf4_storage(
    module: nn.Module, rows: int, cols: int, device: torch.device, double_quant: bool
) -> None:
    """What bitsandbytes keeps for one 4-bit weight of rows × cols, as frozen parameters."""
    n = rows * cols
    blocks = -(-n // NF4_BLOCK)

    def frozen(*shape: int, dtype: torch.dtype) -> nn.Parameter:
        return nn.Parameter(torch.empty(shape, dtype=dtype, device=device), False)

    module.weight = frozen((n + 1) // 2, 1, dtype=torch.uint8)  # two 4-bit codes a byte
    # bitsandbytes' QuantState: the NF4 code, and the absmax per block — in fp32, or double
    # quantized: uint8, their offset, the nested state's fp32 absmax per 256 blocks and its
    # own copy of the 256-value dynamic map (profiling.estimate.bnb).
    stats = [("weight_code", frozen(NF4_CODE_BYTES // 4, dtype=torch.float32))]
    if not double_quant:
        stats.append(("weight_absmax", frozen(blocks, dtype=torch.float32)))
    else:
        stats += [
            ("weight_absmax", frozen(blocks, dtype=torch.uint8)),
            ("weight_offset", frozen(dtype=torch.float32)),
            ("weight_absmax2", frozen(-(-blocks // NESTED_BLOCK), dtype=torch.float32)),
            ("weight_code2", frozen(DYNAMIC_MAP_BYTES // 4, dtype=torch.float32)),
        ]
    for name, param in stats:
        module.register_parameter(name, param)


def _dequantize(module: NF4Weight | NF4Linear, dtype: torch.dtype) -> torch.Tensor:
    """The 16-bit weight bitsandbytes writes, as ``dequantize_4bit`` makes it: a double-quantized
    absmax first dequantized to fp32 (one value per 64-value block), alive while the weight is
    written, then the full-shape weight."""
    from torch._subclasses.fake_tensor import FakeTensor

    weight = module.weight
    if not isinstance(weight, FakeTensor):
        raise ProfilingError(
            "NF4Linear stands in for bitsandbytes' 4-bit kernels under the trace's fake "
            "tensors only; train QLoRA for real with bitsandbytes on a GPU"
        )
    n = module.nf4_shape[0] * module.nf4_shape[1]
    absmax = torch.empty(dequant_absmax_bytes(n, module.double_quant) // 4, dtype=torch.float32)
    if getattr(module, "from_fp16", False):
        # Lightning's _Linear4bit.quantize: ``weight.to(dtype=torch.half)`` before
        # quantize_4bit, so the QuantState's dtype is fp16: dequantize_4bit writes fp16 and
        # MatMul4Bit's ``.to(A.dtype)`` copies it (bitsandbytes 0.42.0, autograd/_functions.py).
        half = torch.empty(module.nf4_shape, dtype=torch.float16)
        del absmax
        return half.to(dtype)
    out = torch.empty(module.nf4_shape, dtype=dtype)
    del absmax
    return out


class NF4Weight(nn.Module):
    """One expert's 4-bit weight: the storage bitsandbytes keeps for it (see the module doc)."""

    def __init__(self, rows: int, cols: int, device: torch.device, double_quant: bool) -> None:
        super().__init__()
        self.nf4_shape = (rows, cols)
        self.double_quant: bool = double_quant
        self.from_fp16 = False  # Lightning converts Linear layers only
        _nf4_storage(self, rows, cols, device, double_quant)

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        return _dequantize(self, dtype)


class _DequantizedExperts(torch.autograd.Function):
    """Every expert's ``x[e] @ dequantize(W[e])ᵀ``, one expert's 16-bit weight at a time, as
    transformers' per-expert Linear4bit layers run it; keeps nothing but what bitsandbytes keeps
    (the input, with ``--bnb-keeps-inputs``)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weights: list[NF4Weight], keep: bool) -> torch.Tensor:  # type: ignore[override]  # autograd.Function's forward takes the weights as a plain argument
        ctx.weights = weights
        if keep and x.requires_grad:
            ctx.save_for_backward(x)
        rows = weights[0].nf4_shape[0]
        out = x.new_empty(x.shape[0], x.shape[1], rows)
        for i, w in enumerate(weights):
            out[i] = x[i] @ w.dequantize(x.dtype).t()
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]  # autograd.Function's backward signature
        weights = ctx.weights
        out = grad.new_empty(grad.shape[0], grad.shape[1], weights[0].nf4_shape[1])
        for i, w in enumerate(weights):
            out[i] = grad[i] @ w.dequantize(grad.dtype)
        return out, None, None


def quantize_experts(experts: nn.Module, keeps_inputs: bool, double_quant: bool = True) -> int:
    """A mixture of experts' stacked gate, up and down weights (``hf_blocks``' experts) as one
    4-bit weight per expert, as bitsandbytes quantizes each expert's Linear layers; returns how
    many weights."""
    count = 0
    lists: dict[str, list[NF4Weight]] = {}
    for name in ("gate", "up", "down"):
        stacked = getattr(experts, name)
        e, rows, cols = stacked.shape
        lists[name] = [NF4Weight(rows, cols, stacked.device, double_quant) for _ in range(e)]
        delattr(experts, name)
        experts.add_module(f"{name}_nf4", nn.ModuleList(lists[name]))
        count += e

    def project(x: torch.Tensor, which: str) -> torch.Tensor:
        return _DequantizedExperts.apply(x, lists[which], keeps_inputs)

    # The experts' grouped matmul, over 4-bit weights (an instance attribute: nn.Module's
    # __setattr__ takes only tensors and modules).
    experts.__dict__["project"] = project
    return count


class NF4Linear(nn.Linear):
    """What bitsandbytes' ``Linear4bit`` holds, for the trace's fake tensors (see the module
    doc): a frozen packed weight and its quantization constants, all counted as parameters."""

    def __init__(
        self,
        linear: nn.Linear,
        compute_dtype: torch.dtype,
        keeps_inputs: bool = False,
        double_quant: bool = True,
        from_fp16: bool = False,
    ) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.compute_dtype = compute_dtype
        self.keeps_inputs = keeps_inputs
        self.nf4_shape = (self.out_features, self.in_features)
        self.double_quant: bool = double_quant
        self.from_fp16 = from_fp16  # quantized from fp16 (Lightning's BitsandbytesPrecision)
        _nf4_storage(self, self.out_features, self.in_features, linear.weight.device, double_quant)
        self.bias = linear.bias
        if self.bias is not None:
            self.bias.requires_grad_(False)

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        return _dequantize(self, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Linear4bit: the input in the compute dtype, the output back in the input's.
        out = _DequantizedMatMul.apply(x.to(self.compute_dtype), self)
        if self.bias is not None:
            out = out + self.bias.to(out.dtype)
        return out.to(x.dtype)


def quantize_linears(
    model: nn.Module,
    compute_dtype: torch.dtype,
    keeps_inputs: bool = False,
    double_quant: bool = True,
    fabric: bool = False,
) -> int:
    """Every Linear of the blocks an :class:`NF4Linear`, every expert's weights 4-bit; returns
    how many. The head and embeddings stay 16-bit: transformers keeps the output embeddings
    whatever their name (GPT-NeoX's ``embed_out``: quantizers/base.py get_keys_to_not_convert,
    5.24.0). ``fabric``: Lightning's BitsandbytesPrecision, every ``nn.Linear`` from fp16."""
    count = 0
    for name, parent in list(model.named_modules()):
        if all(isinstance(getattr(parent, w, None), nn.Parameter) for w in ("gate", "up", "down")):
            count += quantize_experts(parent, keeps_inputs, double_quant)
        for child_name, child in list(parent.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            # any Linear (Falcon's FalconLinear too: bitsandbytes' and Lightning's replacement
            # test isinstance), not one already 4-bit
            if not isinstance(child, nn.Linear) or isinstance(child, NF4Linear):
                continue
            if fabric or not full.endswith(("lm_head", "embed_out")):
                nf4 = NF4Linear(child, compute_dtype, keeps_inputs, double_quant, fabric)
                setattr(parent, child_name, nf4)
                count += 1
    if double_quant:  # quantize_blockwise's dynamic map (name2qmap), made once per device
        code = torch.empty(DYNAMIC_MAP_BYTES // 4, dtype=torch.float32)
        model.register_parameter("nf4_nested_code", nn.Parameter(code, False))
    return count


STATS = ("weight_code", "weight_absmax", "weight_offset", "weight_absmax2", "weight_code2")


def stats_as_buffers(model: nn.Module) -> int:
    """Before FSDP2's ``fully_shard``: every 4-bit weight's quantization constants (its
    ``QuantState``: the NF4 code, the absmax, the nested state) and the shared map made buffers,
    so that only the packed uint8 storage is sharded and gathered, as bitsandbytes runs under
    FSDP — the QuantState is an attribute of ``Params4bit``, not a parameter, kept whole on
    every rank; ``fully_shard`` refuses a 0-d parameter anyway (the offset). Returns how many."""
    count = 0
    for module in model.modules():
        names = [n for n, _ in module.named_parameters(recurse=False)]
        for name in names:
            if name in STATS or name == "nf4_nested_code":
                param = module._parameters.pop(name)
                assert param is not None
                module.register_buffer(name, param.data)
                count += 1
    return count


__all__ = ["NF4Linear", "NF4Weight", "quantize_experts", "quantize_linears", "stats_as_buffers"]
