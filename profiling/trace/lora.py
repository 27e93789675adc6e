"""LoRA and QLoRA in the traced step: peft's own adapters on the model, the base frozen.

With ``peft`` installed (``pip install 'journal-agent[lora]'``), ``--lora-rank R`` puts peft's
``LoraConfig(r=R, lora_alpha=2R, lora_dropout=0, target_modules=q_proj, k_proj, v_proj,
o_proj)`` on the model the trace built — the real Hugging Face module or our own blocks — with
``inject_adapter_in_model``: peft's ``lora.Linear`` layers run their own forward, the base weights
are frozen (no gradients, no optimizer state), and only the adapters train. The adapters are
fp32, as ``PeftModel`` casts them (``autocast_adapter_dtype``), except under pure bf16.

``--qlora``: bitsandbytes' 4-bit kernels need CUDA, and the trace runs on fake cpu tensors, so
each Linear layer of the blocks (the LM head and embeddings stay 16-bit, as bitsandbytes leaves
them) becomes :class:`NF4Linear`, which holds what bitsandbytes' ``Linear4bit`` holds after
``quantize_4bit(quant_type="nf4", compress_statistics=double_quant)`` (the sizes are
``profiling.estimate.bnb``'s): the packed weight (uint8, n/2 bytes), the 16-value NF4 code, and
an fp32 absmax per 64-value block or, double-quantized, a uint8 one, its offset, the fp32 absmax
of those per 256 blocks and the nested state's copy of the 256-value map, with the map itself
once for the model. Its forward dequantizes the whole weight to the compute dtype for the
matmul and again for backward, saving no input (bitsandbytes' ``MatMul4Bit`` does the same when
the weight needs no gradient). The record says which was traced.

Imports torch; ``peft`` only inside the functions that need it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from profiling._config_behaviours import double_quant
from profiling._config_lora import trains_16bit
from profiling._quiet_import import import_quietly
from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.bnb import (
    DYNAMIC_MAP_BYTES,
    NESTED_BLOCK,
    NF4_BLOCK,
    NF4_CODE_BYTES,
    dequant_absmax_bytes,
)
from profiling.estimate.fsdp_lora import lora_fsdp2
from profiling.trace.dora import problem as dora_problem
from profiling.trace.fake_moves import fake_safe_moves

# The module names of each role ``lora_targets`` names (transformers' and our blocks').
MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj",
           "up": "up_proj", "down": "down_proj", "lm_head": "lm_head"}  # fmt: skip
TARGETS = tuple(MODULES[t] for t in ("q", "k", "v", "o"))
# What peft adds to an adapted layer: A, B, and DoRA's magnitude (cast as PeftModel casts them).
ADAPTER_MODULES = ("lora_A.default", "lora_B.default", "lora_magnitude_vector.default")
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def peft_version() -> str | None:
    try:
        peft = import_quietly("peft")  # torchao, when installed, logs on peft's import
    except ImportError:
        return None
    return str(peft.__version__)


# ---------------------------------------------------------------- QLoRA's 4-bit base


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


# ---------------------------------------------------------------- peft's adapters


def adapter_dtype(config: TrainingConfig) -> torch.dtype:
    """fp32 adapters (``PeftModel``'s ``autocast_adapter_dtype``), bf16 under pure bf16."""
    return torch.bfloat16 if trains_16bit(config) else torch.float32


def apply_lora(
    model: nn.Module, config: TrainingConfig, in_model: Callable[[int], int] = int
) -> tuple[dict[str, Any], list[str]]:
    """peft's LoRA adapters on ``model`` (QLoRA: on an NF4 base first); what the record says.

    ``in_model`` turns a count of the built model's blocks (adapted layers, adapter parameters)
    into the whole model's, when a sample of its blocks is built (block- and layer-scaled
    traces): the notes and the record describe the model, not the sample."""
    peft = import_quietly("peft")  # torchao, when installed, logs on peft's import
    LoraConfig, inject_adapter_in_model = peft.LoraConfig, peft.inject_adapter_in_model

    r = int(config.lora_rank or 0)
    unpacked = sum(p.numel() for p in model.parameters())
    notes: list[str] = []
    quantized = 0
    if config.qlora and config.torchao_nf4:  # torchtune's QLoRA (trace.nf4_torchao)
        from profiling.trace.nf4_torchao import note, quantize_torchao

        quantized = quantize_torchao(model)
        notes.append(note(in_model(quantized)))
    elif config.qlora:
        dq = double_quant(config)
        quantized = quantize_linears(
            model, _DTYPES[config.compute_dtype], config.bnb_keeps_inputs, dq, config.fabric_bnb
        )
        notes.append(
            f"QLoRA: bitsandbytes needs CUDA, so its 4-bit base is represented: "
            f"{in_model(quantized)} weights (Linear layers, each expert's gate, up, down) hold "
            "NF4 storage as bitsandbytes keeps it (packed uint8 n/2 bytes and the NF4 code; "
            + (
                "double-quantized: a uint8 absmax per 64 values, an offset, an fp32 absmax per "
                "256 blocks and a copy of the 256-value map per tensor, the map once) "
                if dq
                else "an fp32 absmax per 64 values) "
            )
            + f"and dequantize to {config.compute_dtype} for each matmul"
            + (" (the absmax to fp32 first)" if dq else "")
            + (
                " (quantized from fp16 as Lightning's BitsandbytesPrecision does: dequantized to "
                "fp16, then cast); the LM head is 4-bit too, the embeddings stay 16-bit; "
                if config.fabric_bnb
                else "; the LM head, embeddings and norms in fp32, as peft's "
                "prepare_model_for_kbit_training casts them, their output fp32 too (bitsandbytes "
                "casts back to its input's dtype); "
                if config.autocast
                else "; the LM head and embeddings stay 16-bit; "
            )
            + (
                "each keeps its input for backward when it needs a gradient (bitsandbytes "
                "0.43.1 and earlier)"
                if config.bnb_keeps_inputs
                else "none keeps its input (bitsandbytes 0.43.2 and later)"
            )
        )
    dropout, dtype = config.lora_dropout, adapter_dtype(config)
    if _arch(config) in ("encoder", "t5"):  # transformers' own names (trace.lora_t5.own_names)
        from profiling.trace.lora_t5 import own_names

        how = (dtype, fake_safe_moves, peft_version())
        return own_names(model, config, in_model, str(_arch(config)), how)
    neox = _neox_widths(config)
    litgpt = _litgpt_widths(model)  # LitGPT's attention on a Llama-kind model: q/k/v fused
    fused = 0
    if neox is not None:  # GPT-NeoX's kind: its own module names, a fused q/k/v adapted apart
        from profiling.trace.lora_neox import peft_names

        modules = peft_names(model, config)
    else:
        apart = [t for t in config.lora_targets if litgpt is None or t not in ("q", "k", "v")]
        modules = [MODULES[t] for t in apart]
    if modules:
        if config.dora:  # peft's DoRA layers read our NF4 stand-in too (trace.dora)
            from profiling.trace.dora import note as dora_note
            from profiling.trace.dora import teach_peft_nf4

            teach_peft_nf4(NF4Linear)
            notes.append(dora_note(config))
        lora = LoraConfig(
            r=r,
            lora_alpha=2 * r,
            lora_dropout=dropout,
            target_modules=modules,
            use_dora=config.dora,
        )
        with fake_safe_moves():
            inject_adapter_in_model(lora, model)
            if config.dora:
                from profiling.trace.dora import free_dead_graphs

                free_dead_graphs(model, config)
            for name, module in model.named_modules():
                if name.endswith(ADAPTER_MODULES):
                    module.to(dtype=dtype)
    widths = neox or litgpt  # a fused q/k/v, adapted after peft, whose marking would freeze it
    if widths is not None:  # as LitGPT's LoRAQKVLinear (profiling.trace.lora_neox)
        from profiling.trace.lora_neox import adapt_fused_qkv

        fused = adapt_fused_qkv(model, list(config.lora_targets), widths, r, dropout, dtype)
    for name, p in model.named_parameters():  # the base frozen (peft's own marking, and ours)
        if "lora_" not in name:
            p.requires_grad_(False)
    if neox is not None:
        from profiling.trace.lora_neox import record

        counts = (unpacked, quantized, fused, modules)
        return record(model, config, in_model, counts, notes, (dtype, peft_version()))
    adapted = sum(1 for n, _ in model.named_modules() if n.endswith("lora_A.default"))
    adapters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    # The LM head's adapter is the model's, once: only the blocks' count scales to the model.
    head = [p.numel() for n, p in model.named_parameters() if "lm_head.lora_" in n]
    whole_layers = in_model(adapted - bool(head)) + bool(head)
    whole_params = in_model(adapters - sum(head)) + sum(head)
    block_targets = [t for t in modules if t != "lm_head"]
    blocks = sum(1 for n, _ in model.named_modules() if n.endswith(".o_proj"))
    blocks = blocks or sum(1 for n, _ in model.named_modules() if n.endswith(".o_proj.base_layer"))
    expected = len(block_targets) * blocks + ("lm_head" in modules)
    adapted, whole_layers = adapted + fused, whole_layers + in_model(fused)
    names = ["LitGPT's fused q/k/v"] if fused else []
    if not adapted or adapted != expected + fused:
        raise ProfilingError(
            f"LoRA here adapts {', '.join(modules)} apart, and this model has "
            f"{adapted} such layers in {blocks} blocks (Phi-3's module fuses q, k, v in one "
            "qkv_proj); estimate it instead"
        )
    notes.append(
        f"LoRA by peft: LoraConfig(r={r}, lora_alpha={2 * r}, lora_dropout={dropout:g}) on "
        f"{', '.join(modules + names)} ({whole_layers} layers), base weights frozen (no "
        f"gradients, no optimizer state); adapters in {str(dtype).removeprefix('torch.')}"
    )
    info = {
        "lora": {
            "rank": r,
            "alpha": 2 * r,
            "targets": modules,
            "dropout": dropout,
            "adapted_layers": whole_layers,
            "adapter_params": whole_params,
            "peft": peft_version(),
            "base": "NF4 (represented: bitsandbytes needs CUDA)" if config.qlora else "frozen",
            "quantized_layers": in_model(quantized),
            "bnb_keeps_inputs": config.bnb_keeps_inputs,
            "dora": config.dora,
        },
        "traced_params": unpacked + adapters,
    }
    return info, notes


def _arch(config: TrainingConfig) -> str | None:
    if config.is_factory or config.model is None:
        return None
    from profiling.models.shape_overrides import workload_of

    w = workload_of(config)
    return w.arch if w is not None else None


def _litgpt_widths(model: nn.Module) -> tuple[int, int] | None:
    """q's and one of k, v's width where the model runs LitGPT's attention (a fused q/k/v:
    ``profiling.models.litgpt_attention``), else None."""
    for module in model.modules():
        shape = getattr(module, "litgpt_shape", None)
        if shape is not None:
            heads, groups, hs = shape
            return heads * hs, groups * hs
    return None


def _neox_widths(config: TrainingConfig) -> tuple[int, int] | None:
    """q's and one of k, v's width on a GPT-NeoX-kind model (None: another kind)."""
    if _arch(config) != "neox":
        return None
    from profiling.models.shape_overrides import workload_of

    w = workload_of(config)
    assert w is not None
    return w.q_dim, w.kv_dim


def lora_problem(config: TrainingConfig, arch: str | None, experts: bool = False) -> str | None:
    """Why the trace cannot run this LoRA configuration (None: it can)."""
    if config.lora_rank is None:
        return None
    if config.is_factory or arch is None:
        return "a reference model or hf:… config for --lora-rank (a factory's layers are its own)"
    if arch not in ("llama", "neox", "encoder", "t5"):
        return (
            "a Llama-family, GPT-NeoX-kind, encoder or encoder-decoder model for --lora-rank "
            "(GPT-2's are not modelled)"
        )
    if config.qlora and config.precision == "fp32":
        return (
            "--precision mixed, bf16 or amp-bf16/amp-fp16 for --qlora (bitsandbytes' 4-bit "
            "layers compute in 16 bits; estimate fp32)"
        )
    if (config.fsdp or config.sharded) and not (lora_fsdp2(config) and arch in ("llama", "neox")):
        return "one GPU or FSDP2 (--fsdp, ZeRO-3; no QLoRA or DoRA) for --lora-rank on this model"
    if config.dora and (problem := dora_problem(config, arch)):
        return problem
    targets = [t for t in config.lora_targets if t != "lm_head"]
    if experts and set(targets) & {"gate", "up", "down"}:
        return "--lora-targets among q, k, v, o, lm_head for a mixture of experts"
    if arch != "encoder" and not set(targets) & {"q", "k", "v"}:
        return "--lora-targets with at least one of q, k, v (as the estimate models it)"
    if peft_version() is None:
        return (
            "full training (no --lora-rank), or peft installed (pip install 'journal-agent[lora]')"
        )
    return None


__all__ = [
    "MODULES",
    "TARGETS",
    "NF4Linear",
    "NF4Weight",
    "adapter_dtype",
    "apply_lora",
    "lora_problem",
    "peft_version",
    "quantize_experts",
    "quantize_linears",
]
