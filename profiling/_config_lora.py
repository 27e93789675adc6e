"""LoRA's targets for ``profiling.config``: the layers by role, the named sets, the parsing.

Roles, not module names: peft's ``target_modules`` say ``q_proj``, LitGPT ``lora_query``; the
``--from`` readers and the trace map them (``profiling.trace.lora.MODULES``). No torch here.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field

# ``cfg`` is a profiling.config.TrainingConfig, which imports this module: typed Any here so
# that no import circle forms (tests/foundation/test_layers.py)
TrainingConfig = Any

# The Linear layers LoRA can adapt, by their role; "all-linear" is peft's every Linear of the
# blocks (not the LM head).
LoraTarget = Literal["q", "k", "v", "o", "gate", "up", "down", "lm_head"]
LORA_TARGET_SETS: dict[str, tuple[str, ...]] = {
    "all-linear": ("q", "k", "v", "o", "gate", "up", "down"),
    "attention": ("q", "k", "v", "o"),
    "mlp": ("gate", "up", "down"),
}
LORA_DEFAULT = ["q", "k", "v", "o"]

# QLoRA's 4-bit layers as bitsandbytes runs them (profiling.estimate.bnb).
BNB_KEEPS_FIELD: Any = Field(
    False,
    description="QLoRA as bitsandbytes 0.43.1 and earlier ran it (before July 2024): each "
    "4-bit layer also keeps its input for backward whenever that input needs a gradient.",
)
FABRIC_BNB_FIELD: Any = Field(
    False,
    description="--qlora as Lightning Fabric's BitsandbytesPrecision runs it (LitGPT's quantize: "
    "bnb.*): every Linear in 4 bits, the LM head too, each quantized from an fp16 copy, so every "
    "4-bit matmul dequantizes to fp16 and casts that to the compute dtype (two copies at once).",
)
LORA_TARGETS_FIELD: Any = Field(
    ["q", "k", "v", "o"],
    description="The Linear layers LoRA adapts, comma-separated: q, k, v, o, gate, up, down, "
    "lm_head, or all-linear (peft's: every Linear of the blocks), attention, mlp.",
)
LORA_DROPOUT_FIELD: Any = Field(
    0.0, ge=0.0, lt=1.0, description="Dropout on each adapter's input (peft's lora_dropout)."
)
# DoRA (peft's use_dora, torchtune's use_dora): a recipe's adapter config sets it (not offered
# by the agent tools: each field costs tokens in every request).
DORA_FIELD: Any = Field(
    False,
    description="DoRA (peft's use_dora): each adapted layer also trains a magnitude vector and "
    "rebuilds its weight's norm (W + scale·B·A, a full-size temporary) in every forward.",
)
# torchtune's DoRALinear (torchtune 00a080a6 torchtune/modules/peft/dora.py): its recipe's
# use_dora sets it with dora (profiling.trace.dora_torchtune)
TORCHTUNE_DORA_FIELD: Any = Field(
    False,
    description="--dora as torchtune's DoRALinear runs it: the base output from the undropped "
    "input (nothing rerun under dropout), B's output made before the weight's norm.",
)
DOUBLE_QUANT_FIELD: Any = Field(
    None,
    description="--qlora's block constants double-quantized (bitsandbytes' compress_statistics: "
    "bnb_4bit_use_double_quant, LitGPT's bnb.nf4-dq); on unless --no-double-quant (Hugging "
    "Face's default, LitGPT's bnb.nf4).",
)

# peft's get_peft_model upcasts 16-bit adapters to fp32 (autocast_adapter_dtype=True, its
# default: peft src/peft/tuners/tuners_utils.py cast_adapter_dtype, 5d602fd): on a model loaded
# in bf16 the adapters' weights, gradients and AdamW moments are fp32, and the Trainer's autocast
# (bf16/fp16: true) runs their matmuls in 16 bits. --from sets it (peft's adapter_config.json
# beside the Trainer's arguments); it changes only --precision bf16 (elsewhere they are fp32).
AUTOCAST_ADAPTERS_FIELD: Any = Field(
    False,
    description="peft's fp32 adapters under the Trainer's autocast: with --precision bf16 (the "
    "model loaded in bf16) the adapters train in fp32 (get_peft_model's autocast_adapter_dtype) "
    "and their matmuls autocast to bf16.",
)


def peft_autocast(cfg: TrainingConfig) -> bool:
    """Whether a bf16 model's adapters are peft's fp32 ones under autocast (the rest of the
    model trains as pure bf16: its weights are bf16 already, autocast leaves them)."""
    on = bool(getattr(cfg, "autocast_adapters", False))
    return on and cfg.precision == "bf16" and cfg.lora_rank is not None


def trains_16bit(cfg: TrainingConfig) -> bool:
    """Whether the trained tensors (weights, gradients, optimizer moments) are 16-bit: pure bf16,
    except peft's fp32 adapters under autocast."""
    return cfg.precision == "bf16" and not peft_autocast(cfg)


def parse_targets(value: Any) -> Any:
    """``"q,v"``, ``["q_proj", "v_proj"]`` or a named set (``all-linear``) as a sorted list of
    roles; what is no role is left for the field's own check to name."""
    if value is None:
        return list(LORA_DEFAULT)
    items = value.split(",") if isinstance(value, str) else list(value)
    names: list[str] = []
    for item in items:
        item = str(item).strip().removesuffix("_proj")
        names += LORA_TARGET_SETS.get(item, (item,))
    if not names or "" in names:
        raise ValueError("name at least one layer: q, k, v, o, gate, up, down, lm_head")
    order = get_args(LoraTarget)
    return sorted(set(names), key=lambda n: order.index(n) if n in order else -1)


def _has_gate(w: Any) -> bool:
    """Whether the model's MLP has a gate projection: Llama's kind (SwiGLU, GeGLU) and T5 v1.1's
    gated GELU (``wi_0``) do; GPT-2's, GPT-NeoX's kind's (GPT-NeoX, Phi, Falcon, BLOOM), BERT's
    and T5 v1.0's MLPs are two matrices (up, down)."""
    return w.arch == "llama" or (w.arch == "t5" and bool(w.gated))


def own_linears(w: Any, targets: list[str]) -> list[str]:
    """all-linear's (or mlp's) roles as the model ``w`` (a ``WorkloadConfig``, or None) has
    them: gate left out where its MLP has none, as peft's ``all-linear`` adapts the Linear layers
    there are (``parse_targets`` expanded the name before the model was known); any other list
    as given."""
    if w is None or _has_gate(w) or not set(LORA_TARGET_SETS["mlp"]) <= set(targets):
        return targets
    return [t for t in targets if t != "gate"]


def missing_gate(w: Any, cfg: TrainingConfig) -> tuple[str, str] | None:
    """(one sentence, the field) where LoRA names a gate the model's MLP does not have: peft
    would raise (no module matches) or the estimate count adapters that do not exist. GPT-2's
    and GPT-NeoX's kind's; an encoder's (``hf_encoders.encoder_refusal``) and T5 v1.0's
    (``estimate.lora_t5.check``) have their own sentences."""
    if w is None or w.arch not in ("gpt2", "neox") or cfg.lora_rank is None:
        return None
    if "gate" not in cfg.lora_targets:
        return None
    return (
        f"--lora-targets gate: {w.name} has no gate projection (its MLP is two matrices, up and "
        "down); adapt q, k, v, o, up or down, or all-linear (its own linears)",
        "lora_targets",
    )


def compiled_gpt2_lora(w: Any, cfg: TrainingConfig) -> tuple[str, str] | None:
    """(one sentence, the field) for LoRA on GPT-2's kind under --compile: the estimate counts
    a compiled block by partitioning the trace's own two-block build
    (``trace.compiled_estimate._blocks``), and the trace adapts peft's q_proj/v_proj names,
    which GPT-2's fused ``c_attn`` does not have — peft's ``inject_adapter``
    (``peft/tuners/tuners_utils.py``) raised ``NoMatchingPeftModuleError``, a traceback."""
    if w is None or w.arch != "gpt2" or cfg.lora_rank is None or not cfg.compile:
        return None
    return (
        "--compile with --lora-rank on GPT-2's kind is not modelled (a compiled block is "
        "counted on the trace's build, which adapts no GPT-2 layer): drop --compile, or "
        "--lora-rank",
        "compile",
    )


__all__ = [
    "AUTOCAST_ADAPTERS_FIELD",
    "BNB_KEEPS_FIELD",
    "DORA_FIELD",
    "DOUBLE_QUANT_FIELD",
    "FABRIC_BNB_FIELD",
    "LORA_DEFAULT",
    "LORA_DROPOUT_FIELD",
    "LORA_TARGETS_FIELD",
    "LORA_TARGET_SETS",
    "TORCHTUNE_DORA_FIELD",
    "LoraTarget",
    "compiled_gpt2_lora",
    "missing_gate",
    "own_linears",
    "parse_targets",
    "peft_autocast",
    "trains_16bit",
]
