"""peft's ``adapter_config.json`` and a bitsandbytes quantization config (``BitsAndBytesConfig``
as JSON, or the ``quantization_config`` of a model's ``config.json``), as peft and transformers
apply them.

- peft: ``r``, ``target_modules`` (``q_proj`` … or ``all-linear``), ``lora_dropout``, ``bias``,
  ``modules_to_save``, ``use_dora``; the base model's Hub id names the model.
- bitsandbytes: ``load_in_4bit`` with ``nf4``/``fp4`` is the QLoRA base;
  ``bnb_4bit_use_double_quant`` its double quantization.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from profiling.recipes.model_names import hub_model
from profiling.recipes.recipe import NO_MEMORY, Reading


def looks_like_peft(data: dict[str, Any]) -> bool:
    return "peft_type" in data or ("r" in data and "target_modules" in data)


def looks_like_bnb(data: dict[str, Any]) -> bool:
    return any(k in data for k in ("load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type")) or (
        isinstance(data.get("quantization_config"), dict)
    )


# --------------------------------------------------------------------- peft


_PEFT_KNOWN = [
    ("lora_alpha", NO_MEMORY), ("alpha_pattern", NO_MEMORY), ("alpha_pattern.*", NO_MEMORY),
    ("use_rslora", NO_MEMORY),
    ("init_lora_weights", NO_MEMORY), ("inference_mode", NO_MEMORY), ("task_type", NO_MEMORY),
    ("revision", NO_MEMORY), ("auto_mapping", NO_MEMORY), ("fan_in_fan_out", NO_MEMORY),
    ("peft_version", NO_MEMORY), ("megatron_core", NO_MEMORY), ("loftq_config", NO_MEMORY),
    ("eva_config", NO_MEMORY), ("corda_config", NO_MEMORY), ("lora_ga_config", NO_MEMORY),
    ("exclude_modules", NO_MEMORY + " when unset"), ("layers_pattern", NO_MEMORY),
    ("qalora_group_size", NO_MEMORY), ("ensure_weight_tying", NO_MEMORY),
    ("alora_invocation_tokens", NO_MEMORY), ("arrow_config", NO_MEMORY),
    ("megatron_config", NO_MEMORY), ("rank_pattern", NO_MEMORY + " when empty"),
    ("velora_config", NO_MEMORY), ("monteclora_config", NO_MEMORY),
]  # fmt: skip

_ROLES = {
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate",
    "up_proj": "up", "down_proj": "down", "lm_head": "lm_head", "query": "q", "key": "k",
    "value": "v", "dense": "o", "c_attn": "qkv", "c_proj": "o", "c_fc": "up", "w1": "gate",
    "w3": "up", "w2": "down", "wq": "q", "wk": "k", "wv": "v", "wo": "o", "qkv_proj": "qkv",
    "gate_up_proj": "gate_up", "output_proj": "o",
    # GPT-NeoX's kind (GPT-NeoX/Pythia/StableLM-alpha, Falcon; Phi's fc1/fc2)
    "query_key_value": "qkv", "dense_h_to_4h": "up", "dense_4h_to_h": "down", "fc1": "up",
    "fc2": "down", "embed_out": "lm_head",
}  # fmt: skip


def lora_roles(modules: object) -> tuple[list[str] | str | None, list[str]]:
    """peft's ``target_modules`` as our roles (``["q", "v"]``, or ``"all-linear"``), and the
    names no role matches."""
    if isinstance(modules, str):
        if modules in ("all-linear", "all_linear"):
            return "all-linear", []
        return None, [modules]  # a regular expression over module names
    if not isinstance(modules, list):
        return None, []
    roles: list[str] = []
    unknown: list[str] = []
    for name in modules:
        role = _ROLES.get(str(name).rsplit(".", 1)[-1])
        if role is None:
            unknown.append(str(name))
        elif role == "qkv":
            roles += ["q", "k", "v"]
        elif role == "gate_up":
            roles += ["gate", "up"]
        else:
            roles.append(role)
    return sorted(set(roles), key=roles.index), unknown


# peft settings that make the step hold more than the estimate counts, which has no setting for
# them (peft 0.21 tuners/lora/config.py LoraConfig): listed as ignored, the answer was low — a
# user told "fits" could run out of memory. Refused instead, in the file's keys. (An encoder's
# classifier in modules_to_save is modelled: estimate/lora_encoder.py.)
_LOW = {
    "modules_to_save": "trains those modules in full beside the adapters (peft's "
    "ModulesToSaveWrapper: a trainable copy of each, with its gradient and optimizer state)",
    "lora_bias": "gives each adapter's B a trainable bias (its gradient and optimizer state)",
    "layer_replication": "builds more layers than the model's config (replicated blocks, each "
    "with its own adapters and activations)",
    "trainable_token_indices": "trains rows of the embedding table (peft's TrainableTokens: "
    "their copy, its gradient and optimizer state)",
    "target_parameters": "puts LoRA on parameters (the experts' weights)",
}


def _held_more(r: Reading) -> None:
    """One sentence for each setting in :data:`_LOW` the file sets, and for a ``rank_pattern``
    above ``r`` (below it, counting every adapter at ``r`` is a bound above)."""
    for key, what in _LOW.items():
        value = r.get(key)
        if value in (None, False, [], {}, ["classifier"]):  # a classifier: lora_encoder
            continue
        r.refuse(key, f"{r.file}: {key} = {json.dumps(value)} {what}, which is not modelled "
                 "(our count would be low): not estimated; drop it to estimate the adapters "
                 "alone")  # fmt: skip
    rank = int(r.get("r") or 8)
    for key in r.unseen("rank_pattern."):
        value = r.get(key)
        if isinstance(value, int) and value > rank:
            r.refuse(key, f"{r.file}: {key} = {value} is above r = {rank}, and every adapter is "
                     f"counted at r (our count would be low): not estimated; give --lora-rank "
                     f"{value} for a bound above", unless="lora_rank")  # fmt: skip
        else:
            r.ignore(key, NO_MEMORY + f" (at most r = {rank}: every adapter counted at r, a bound "
                     "above)")  # fmt: skip


def read_peft(path: Path, data: dict[str, Any]) -> Reading:
    r = Reading(path.name, data, _PEFT_KNOWN)
    kind = str(r.get("peft_type", "LORA")).upper()
    if kind != "LORA":
        r.ignore("peft_type", f"not modelled yet (peft's {kind} adapter)", field="peft_method")
    else:
        r.seen("peft_type", main="r")
    if r.has("r"):
        r.use("r", "lora_rank", r.get("r"))
    roles, unknown = lora_roles(r.get("target_modules"))
    if roles is not None and not unknown:
        r.use("target_modules", "lora_targets", roles)
    elif r.get("target_modules") is None:
        r.imply(
            "target_modules",
            "lora_targets",
            ["q", "v"],
            "unset: peft's default for Llama-family models adapts q_proj and v_proj",
        )
    else:
        r.ignore(
            "target_modules",
            f"{', '.join(unknown)} names no layer this reader knows; give --lora-targets",
        )
    if r.has("lora_dropout"):
        r.use("lora_dropout", "lora_dropout", float(r.get("lora_dropout") or 0.0))
    bias = r.get("bias", "none")
    if bias not in (None, "none"):
        r.use("bias", "lora_bias", bias, "trainable biases")
    else:
        r.ignore("bias", NO_MEMORY + " ('none')")
    _held_more(r)
    for key, field, why in (
        ("modules_to_save", "modules_to_save", "these modules train in full"),
        ("use_dora", "dora", "DoRA keeps each adapted weight's norm and direction"),
        ("lora_bias", "lora_bias", "a trainable bias on each adapter"),
        ("layers_to_transform", "lora_layers", "only these layers adapted"),
        ("layer_replication", "layer_replication", "layers replicated"),
        ("trainable_token_indices", "trainable_tokens", "some embedding rows train"),
        ("target_parameters", "lora_parameters", "LoRA on parameters (MoE experts)"),
        ("use_qalora", "qalora", "QA-LoRA"),
        ("use_bdlora", "bdlora", "block-diagonal LoRA"),
    ):
        value = r.get(key)
        if key in r.refused:  # said in one sentence (_held_more)
            continue
        if value in (None, False, [], {}):
            r.ignore(key, NO_MEMORY + " (unset)")
        else:
            r.use(key, field, value, why)
    base = r.get("base_model_name_or_path")
    if isinstance(base, str) and base:
        found, note = hub_model(base)
        if found:
            r.use("base_model_name_or_path", "model", found, note)
        else:
            r.ignore("base_model_name_or_path", f"{note}; give --model")
    else:
        r.ignore("base_model_name_or_path", "unset: give --model")
    r.finish()
    return r


# --------------------------------------------------------------------- bitsandbytes


def read_bnb(path: Path, data: dict[str, Any]) -> Reading:
    q = data["quantization_config"] if isinstance(data.get("quantization_config"), dict) else None
    prefix = "quantization_config." if q is not None else ""
    known = [("*", NO_MEMORY if q is None else "part of the model's shape (read with the model)")]
    r = Reading(path.name, data, known)
    cfg = q if q is not None else data
    method = str(cfg.get("quant_method", "bitsandbytes"))
    if method != "bitsandbytes":
        r.ignore(
            prefix + "quant_method", f"{method} quantization is not modelled (bitsandbytes is)"
        )
    if cfg.get("load_in_4bit"):
        kind = str(cfg.get("bnb_4bit_quant_type", "fp4"))
        r.use(prefix + "load_in_4bit", "qlora", True, f"bitsandbytes {kind} base (QLoRA)")
        r.seen(prefix + "bnb_4bit_quant_type", main=prefix + "load_in_4bit")
        dq = prefix + "bnb_4bit_use_double_quant"
        if r.has(dq):
            why = "double quantization of the 4-bit blocks' constants"
            r.use(dq, "double_quant", bool(r.get(dq)), why)
        else:
            r.imply(dq, "double_quant", False, "unset: BitsAndBytesConfig's default (off)")
        storage = cfg.get("bnb_4bit_quant_storage")
        if storage not in (None, "uint8"):
            r.use(
                prefix + "bnb_4bit_quant_storage",
                "quant_storage",
                storage,
                "the packed 4-bit values' storage dtype (FSDP)",
            )
        compute = cfg.get("bnb_4bit_compute_dtype")
        if compute is not None:
            r.ignore(
                prefix + "bnb_4bit_compute_dtype",
                "the matmuls' dtype: the precision decides it here (--precision)",
            )
    elif cfg.get("load_in_8bit"):
        r.ignore(prefix + "load_in_8bit", "LLM.int8 weights are not modelled (4-bit QLoRA is)")
    if q is not None and "model_type" in data:
        r.use("model_type", "model", f"hf:{path}", "the model's own config.json")
    r.finish()
    return r


__all__ = ["looks_like_bnb", "looks_like_peft", "lora_roles", "read_bnb", "read_peft"]
