"""LoRA and QLoRA in the traced step: peft's own adapters on the model, the base frozen.

With ``peft`` installed (``pip install 'journal-agent[lora]'``), ``--lora-rank R`` puts peft's
``LoraConfig(r=R, lora_alpha=2R, lora_dropout=0, target_modules=q_proj, k_proj, v_proj,
o_proj)`` on the model the trace built — the real Hugging Face module or our own blocks — with
``inject_adapter_in_model``: peft's ``lora.Linear`` layers run their own forward, the base weights
are frozen (no gradients, no optimizer state), and only the adapters train. The adapters are
fp32, as ``PeftModel`` casts them (``autocast_adapter_dtype``), except under pure bf16.

``--qlora``: bitsandbytes' 4-bit kernels need CUDA, and the trace runs on fake cpu tensors, so each
Linear layer of the blocks (the LM head and embeddings stay 16-bit, as bitsandbytes leaves them)
becomes ``profiling.trace.nf4``'s :class:`NF4Linear`, which holds what bitsandbytes' ``Linear4bit``
holds after ``quantize_4bit(quant_type="nf4", compress_statistics=double_quant)`` (the sizes are
``profiling.estimate.bnb``'s): the packed weight (uint8, n/2 bytes), the 16-value NF4 code, and an
fp32 absmax per 64-value block or, double-quantized, a uint8 one, its offset, the fp32 absmax of
those per 256 blocks and the nested state's copy of the 256-value map, with the map itself once for
the model. Its forward dequantizes the whole weight to the compute dtype for the matmul and again
for backward, saving no input (bitsandbytes' ``MatMul4Bit`` does the same when the weight needs no
gradient). The record says which was traced.

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
from profiling.estimate.fsdp_lora_scope import lora_fsdp2_traced
from profiling.trace.dora import problem as dora_problem
from profiling.trace.fake_moves import fake_safe_moves
from profiling.trace.nf4 import NF4Linear, NF4Weight, quantize_experts, quantize_linears

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
    if (config.fsdp or config.sharded) and not (
        lora_fsdp2_traced(config) and arch in ("llama", "neox")
    ):
        return (
            "one GPU or FSDP2 (--fsdp, ZeRO-3 or --zero 2; no DoRA, no torchao's NF4) for "
            "--lora-rank on this model"
        )
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
