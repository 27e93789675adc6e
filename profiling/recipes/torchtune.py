"""torchtune's recipe configs (``recipes/configs/<model>/<size>_<method>.yaml``), read as its
recipes (``full_finetune_*``, ``lora_finetune_*``) use them: ``_component_`` names the class or
builder each table instantiates.

- ``model._component_``: the builder (``torchtune.models.llama3_1.qlora_llama3_1_8b``) names the
  model, and ``lora_``/``qlora_`` say LoRA on a 16-bit or NF4 base; ``lora_attn_modules``,
  ``apply_lora_to_mlp``, ``apply_lora_to_output``, ``lora_rank``, ``lora_dropout``.
- ``dtype: bf16``: the model, gradients and optimizer state all in bf16 (torchtune has no fp32
  master copy); ``fp32``.
- ``batch_size`` per device; ``gradient_accumulation_steps`` > 1 keeps gradients between
  micro-batches (``optimizer_in_bwd`` steps each parameter in backward instead).
- ``enable_activation_checkpointing`` (every layer), ``enable_activation_offloading``,
  ``compile``, ``loss._component_`` (``LinearCrossEntropyLoss``: the LM head and loss in
  chunks), ``dataset.packed``, ``tokenizer.max_seq_len``.
- the distributed recipes' FSDP2 (``fsdp_reshard_after_forward``, ``fsdp_cpu_offload``,
  ``custom_sharded_layers``; on more than one GPU whatever the file says):
  ``profiling.recipes.torchtune_fsdp``.
- ``optimizer._component_``: torch's AdamW (``fused``), bitsandbytes' ``PagedAdamW8bit``,
  torchao's 8/4-bit AdamW (``torchao_optim``: its own rule for which tensors get 8-bit states,
  its compiled step's fp32 buffers) …
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiling.errors import ProfilingError
from profiling.recipes.model_names import local_config, torchtune_model
from profiling.recipes.recipe import NO_MEMORY, TORCH_ADAFACTOR, Reading, flatten
from profiling.recipes.torchtune_dpo import dpo
from profiling.recipes.torchtune_fsdp import distributed, read_fsdp
from profiling.recipes.torchtune_kd import distill, kd_refusal

KNOWN = [
    ("output_dir", NO_MEMORY), ("tokenizer._component_", NO_MEMORY), ("tokenizer.path", NO_MEMORY),
    ("tokenizer.prompt_template", NO_MEMORY), ("checkpointer.*", NO_MEMORY),
    ("resume_from_checkpoint", NO_MEMORY), ("save_adapter_weights_only", NO_MEMORY),
    ("dataset._component_", NO_MEMORY), ("dataset.*", NO_MEMORY), ("seed", NO_MEMORY),
    ("shuffle", NO_MEMORY), ("optimizer.lr", NO_MEMORY), ("optimizer.weight_decay", NO_MEMORY),
    ("optimizer.betas", NO_MEMORY), ("optimizer.eps", NO_MEMORY), ("lr_scheduler*", NO_MEMORY),
    ("epochs", NO_MEMORY), ("max_steps_per_epoch", NO_MEMORY), ("clip_grad_norm", NO_MEMORY),
    ("metric_logger*", NO_MEMORY), ("log_every_n_steps", NO_MEMORY),
    ("log_peak_memory_stats", NO_MEMORY), ("log_level", NO_MEMORY), ("device", NO_MEMORY),
    ("profiler*", NO_MEMORY), ("low_cpu_ram", NO_MEMORY), ("model.lora_alpha", NO_MEMORY),
    ("batch_size_val", NO_MEMORY), ("run_val_every_n_steps", NO_MEMORY),
    ("dataset_val*", NO_MEMORY),
    # Keys of the recipes refused below (other_recipe): never "say it with a flag", as no
    # flag says them.
    ("quantizer", NO_MEMORY + " (none)"),
    ("quantizer.*", "QAT's fake-quantized copies are not modelled"),
    ("teacher_*", "knowledge distillation's teacher model: read from teacher_model "
     "(--kd-teacher) where the file names one"),
    ("kd_*", "knowledge distillation's loss: read from kd_loss (--kd-teacher) where the file "
     "names a teacher_model"),
    ("ref_*", "a frozen reference model (PPO, GRPO) is not modelled"),
]  # fmt: skip

_OPTIMIZERS = {
    "AdamW": "adamw", "Adam": "adam", "SGD": "sgd", "PagedAdamW8bit": "adam8bit",
    "AdamW8bit": "adam8bit", "PagedAdamW": "adamw", "AdamW4bit": "adam8bit",
    "Adafactor": "adafactor",
}  # fmt: skip


def looks_like(data: dict[str, Any]) -> bool:
    # PPO's recipe names its model policy_model (refused below, in one sentence)
    return any(isinstance(data.get(k), dict) and "_component_" in data[k] for k in _MODEL_KEYS)


_MODEL_KEYS = ("model", "policy_model")


def read(path: Path, data: dict[str, Any]) -> Reading:
    refusal = other_recipe(data)
    if refusal is not None:
        raise ProfilingError(f"{path.name}: {refusal}: not estimated")
    r = Reading(path.name, data, KNOWN)
    lora = _model(r, path)
    if lora:
        _lora(r)
    _dtype(r)
    distill(r)  # a KD config's teacher (--kd-teacher)
    if dpo(r):
        pass
    elif r.has("batch_size"):
        r.use("batch_size", "batch", r.get("batch_size"), "per device")
    seq = r.get("tokenizer.max_seq_len")
    if seq is not None:
        r.use("tokenizer.max_seq_len", "seq", seq, "sequences cut to this length")
    else:
        r.ignore("tokenizer.max_seq_len", "unset: the data decides; give --seq")
        r.notes.append(
            "tokenizer.max_seq_len unset: the longest sample of the data decides; give --seq"
        )
    _switches(r)
    if distributed(r):
        read_fsdp(r)
    _optimizer(r)
    _loss(r)
    r.finish()
    return r


def other_recipe(data: dict[str, Any]) -> str | None:
    """What a config of a torchtune recipe other than supervised fine-tuning runs that is not
    modelled (one sentence), or None: read as a fine-tune, each would be estimated far too low
    (recipes at bd2a0fc)."""
    flat = flatten(data)
    components = {k: str(v) for k, v in flat.items() if k.endswith("_component_") and v}
    loss = str(flat.get("loss._component_", "")).rsplit(".", 1)[-1]
    if "policy_model._component_" in flat:  # ppo_full_finetune_single_device.py
        return ("torchtune's PPO recipe (policy_model, reward_and_value_model) trains a policy "
                "and a value model beside a frozen reference policy and a reward model, and "
                "generates its own samples, which is not modelled")  # fmt: skip
    # (dev/3B_sft_for_grpo.yaml is a fine-tune: its dataset is torchtune.dev.grpo's, its loss
    # LinearCrossEntropyLoss; the async recipe's loss is training.loss)
    grpo = next((k for k, v in components.items() if k.endswith("loss._component_")
                 and "grpo" in v.lower()), None)  # fmt: skip
    if grpo is not None or "grpo_samples" in flat:  # dev/grpo_full_finetune_distributed.py
        said = f"{grpo} = {components[grpo].rsplit('.', 1)[-1]}" if grpo else "grpo_samples"
        return (f"torchtune's GRPO recipe ({said}) generates several completions per "
                "prompt and scores them against a frozen reference model (ref_checkpointer), "
                "which is not modelled")  # fmt: skip
    if loss in ("RSOLoss", "SimPOLoss"):
        # DPOLoss is modelled (read below, --dpo); RSO's hinge and SimPO's reference-free
        # average log-probabilities (return_average_logprobs) are not
        return (f"torchtune's DPO recipe with loss._component_ = {loss} (only DPOLoss is "
                "modelled: --dpo) runs another loss over the log-probabilities, which is not "
                "modelled")  # fmt: skip
    if "teacher_model._component_" in flat or "kd_loss._component_" in flat:
        # knowledge_distillation_*.py: --kd-teacher (recipes.torchtune_kd) for ForwardKL's loss
        refusal = kd_refusal(components.get("kd_loss._component_", "none"))
        if refusal is not None or "teacher_model._component_" not in flat:
            return refusal or (
                "torchtune's knowledge distillation recipe without "
                "teacher_model._component_ names no teacher, which is needed"
            )
    quantizer = components.get("quantizer._component_", "").rsplit(".", 1)[-1]
    # generate.py, eleuther_eval.py, quantize.py (and their _v2/distributed forms): no optimizer,
    # no loss, and what only they read (a file of a model section alone is not one of them)
    leaves = {k.rsplit(".", 1)[-1] for k in flat}
    if (
        "optimizer" not in data
        and "loss" not in data
        and (quantizer or leaves & {"max_new_tokens", "tasks", "prompt"})
    ):
        kind = ("generation" if leaves & {"max_new_tokens", "prompt"}
                else "evaluation" if "tasks" in leaves else "quantization")  # fmt: skip
        return (f"torchtune's {kind} recipe (no optimizer, no loss) runs no training step, "
                "and only a training step is estimated")  # fmt: skip
    if quantizer:
        # qat_distributed.py, qat_single_device.py, qat_lora_finetune_distributed.py:
        # quantizer.prepare swaps each Linear for a fake-quantizing one
        return (f"torchtune's QAT recipe (quantizer._component_ = {quantizer}) trains through "
                "fake-quantized weights and activations, and QAT's fake-quantized copies are "
                "not modelled")  # fmt: skip
    return None


def _model(r: Reading, path: Path) -> bool:
    component = str(r.get("model._component_", ""))
    model, lora, qlora, note = torchtune_model(component)
    local = local_config(r.get("checkpointer.checkpoint_dir"), path.parent)
    if local is not None:
        r.use("checkpointer.checkpoint_dir", "model", local, "its config.json")
    elif model is not None:
        r.use("model._component_", "model", model, note)
    else:
        r.ignore("model._component_", note, field="model")
    if lora:
        r.use(
            "model._component_",
            "lora_rank",
            r.get("model.lora_rank", 8),
            "a LoRA builder" + (" (lora_rank)" if r.has("model.lora_rank") else ", rank 8"),
        )
        r.seen("model.lora_rank", main="model._component_")
    if qlora:
        r.use("model._component_", "qlora", True, "a QLoRA builder: NF4 base")
        r.use("model._component_", "torchao_nf4", True, "torchao's NF4Tensor (FrozenNF4Linear)")
    return lora


def _lora(r: Reading) -> None:
    roles: list[str] = []
    attention = r.get("model.lora_attn_modules") or []
    names = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "output_proj": "o"}
    roles += [names[m] for m in attention if m in names]
    if r.get("model.apply_lora_to_mlp"):
        roles += ["gate", "up", "down"]
    if r.get("model.apply_lora_to_output"):
        roles.append("lm_head")
    r.use(
        "model.lora_attn_modules",
        "lora_targets",
        roles,
        "with apply_lora_to_mlp and apply_lora_to_output",
    )
    r.seen("model.apply_lora_to_mlp", "model.apply_lora_to_output", main="model.lora_attn_modules")
    if r.has("model.lora_dropout"):
        r.use("model.lora_dropout", "lora_dropout", float(r.get("model.lora_dropout") or 0.0))
    if r.get("model.use_dora"):
        # torchtune's own DoRALinear: --dora as torchtune orders it (estimate.dora_torchtune)
        r.use("model.use_dora", "dora", True, "DoRA: a magnitude per output row, the norm rebuilt")
        r.use("model.use_dora", "torchtune_dora", True, "as torchtune's DoRALinear runs it")
    else:
        r.ignore("model.use_dora", NO_MEMORY + " (off)")
    for key in ("model.quantize_base",):
        if r.get(key):
            r.use(key, "qlora", True, "NF4 base")
            r.use(key, "torchao_nf4", True, "torchao's NF4Tensor (LoRALinear's to_nf4)")
        else:
            r.ignore(key, NO_MEMORY + " (off)")


def _dtype(r: Reading) -> None:
    dtype = r.get("dtype", "bf16")
    ours = {"bf16": "bf16", "fp32": "fp32", "fp16": "bf16"}.get(str(dtype))
    if ours is None:
        r.ignore("dtype", f"{dtype!r} is not a dtype this reader knows; give --precision")
        return
    why = "torchtune trains the model, gradients and optimizer state in bf16" * (ours == "bf16")
    if r.has("dtype"):
        r.use("dtype", "precision", ours, why)
    else:
        r.imply("dtype", "precision", ours, "unset: torchtune's default bf16")


def _switches(r: Reading) -> None:
    if r.get("enable_activation_checkpointing"):
        r.use("enable_activation_checkpointing", "checkpointing", "full", "every layer")
    elif r.has("enable_activation_checkpointing"):
        r.use("enable_activation_checkpointing", "checkpointing", "none")
    if r.get("enable_activation_offloading"):
        r.use(
            "enable_activation_offloading",
            "activation_offload",
            True,
            "OffloadActivations: each block's input in pinned host memory, two on the GPU "
            "while a block is recomputed",
        )
    else:
        r.ignore("enable_activation_offloading", NO_MEMORY + " (off)")
    accumulation = int(r.get("gradient_accumulation_steps", 1) or 1)
    if r.get("optimizer_in_bwd"):
        r.use(
            "optimizer_in_bwd",
            "optimizer_in_bwd",
            True,
            "each parameter stepped in backward: no gradients kept",
        )
    else:
        r.ignore("optimizer_in_bwd", NO_MEMORY + " (off)")
    if accumulation > 1 and not r.get("optimizer_in_bwd"):
        r.use(
            "gradient_accumulation_steps",
            "grads_kept",
            True,
            f"{accumulation} micro-batches: gradients kept through the later forwards",
        )
    else:
        r.ignore("gradient_accumulation_steps", NO_MEMORY + " (no accumulation)")
    if r.get("compile"):
        r.use(
            "compile",
            "compile",
            True,
            "training.compile_model: torch.compile of each layer, as the partitioner splits it; "
            "compile_loss: a chunked loss's compute_cross_entropy compiled per chunk",
        )
    else:
        r.ignore("compile", NO_MEMORY + " (off)")
    if r.get("dataset.packed"):
        r.use("dataset.packed", "packed", True, "packed samples with document masks")
    else:
        r.ignore("dataset.packed", NO_MEMORY + " (off: one sample per row, padded)")


def _optimizer(r: Reading) -> None:
    component = r.get("optimizer._component_")
    if component is None:
        return
    name = str(component).rsplit(".", 1)[-1]
    ours = _OPTIMIZERS.get(name)
    if ours is None:
        r.ignore("optimizer._component_", f"{component} is not an optimizer this reader knows")
        return
    if ours == "sgd" and not r.get("optimizer.momentum"):
        ours = "sgd-nomomentum"
    r.seen("optimizer.momentum", main="optimizer._component_")
    torch_adafactor = ours == "adafactor" and not str(component).startswith("transformers.")
    r.use("optimizer._component_", "optimizer", ours, TORCH_ADAFACTOR * torch_adafactor)
    if r.get("optimizer.fused"):
        # (it set a field 'fused_optimizer' we lack, so it was listed as not modelled)
        r.use("optimizer.fused", "foreach", False, "one fused kernel: no foreach lists (a "
              "for-loop's per-tensor scratch counted)")  # fmt: skip
    elif r.has("optimizer.fused"):
        r.ignore("optimizer.fused", NO_MEMORY + " (off)")
    if r.has("optimizer.foreach"):
        r.use("optimizer.foreach", "foreach", bool(r.get("optimizer.foreach")))
    if "Paged" in name:
        r.use("optimizer._component_", "paged_optimizer", True, "state paged under pressure")
    if ours == "adam8bit" and str(component).startswith("torchao."):
        # (profiling.estimate.torchao_optim: which tensors get 8-bit states, the step's fp32)
        r.use("optimizer._component_", "torchao_optim", True, "torchao's rule and compiled step"
              + " (4-bit counted as 8-bit, the larger)" * ("4bit" in name))  # fmt: skip


def _loss(r: Reading) -> None:
    component = str(r.get("loss._component_", ""))
    name = component.rsplit(".", 1)[-1]
    if name in ("LinearCrossEntropyLoss", "CEWithChunkedOutputLoss"):
        kind = "chunked" if name == "CEWithChunkedOutputLoss" else "linear-chunked"
        r.use(
            "loss._component_", "loss", kind, f"torchtune's {name}: the LM head and loss in chunks"
        )
        if r.has("loss.num_output_chunks"):
            r.use("loss.num_output_chunks", "loss_chunks", r.get("loss.num_output_chunks"))
        if str(r.get("model._component_", "")).startswith("torchtune.models.gemma2."):
            # torchtune/models/gemma2/_component_builders.py: Gemma2FinalNorm tanh-caps the
            # normalized hidden state (final_capping_value) and its head's logits are uncapped;
            # transformers' Gemma 2, which is estimated and traced, caps the logits
            r.refusals["loss"] = (
                f"{r.file}: loss._component_ = {name} on Gemma 2 is not modelled: torchtune's "
                "Gemma2FinalNorm tanh-caps the normalized hidden state before the LM head where "
                "transformers' Gemma 2, the model estimated, caps the logits; give --loss "
                "cross-entropy to estimate PyTorch's loss over the whole fp32 logits, more than "
                "torchtune's chunks hold"
            )
    elif name and name != "DPOLoss":  # (DPOLoss: --dpo, recipes.torchtune_dpo)
        r.ignore("loss._component_", NO_MEMORY + f" beyond the loss ({name})")


__all__ = ["looks_like", "other_recipe", "read"]
