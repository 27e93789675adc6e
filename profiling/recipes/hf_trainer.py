"""The Hugging Face Trainer's arguments (a ``TrainingArguments`` / TRL ``SFTConfig`` JSON,
``args.json``, ``training_args.bin``) and a DeepSpeed config they name (peft and bitsandbytes:
``peft_bnb``).

How the Trainer runs them:

- ``bf16`` / ``fp16`` is autocast over the parameters as loaded: fp32 unless the model was
  loaded in 16 bits (``torch_dtype``), which the arguments do not record — said in a note.
- ``gradient_checkpointing`` (``activation_checkpointing`` from transformers 5) checkpoints
  every decoder layer.
- ``optim``: ``adamw_torch`` (foreach), ``adamw_torch_fused``, ``adamw_bnb_8bit`` /
  ``paged_adamw_8bit`` (8-bit states), ``adafactor``, ``sgd`` …
- ``gradient_accumulation_steps`` > 1 keeps the gradients through the later micro-batches'
  forward; ``fsdp`` ``full_shard`` / ``shard_grad_op`` and a DeepSpeed ZeRO stage shard over
  the GPUs given with ``--gpus``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiling.recipes.deepspeed import (
    Filler,
    looks_like_deepspeed,
    read_deepspeed,
    read_settings,
)
from profiling.recipes.model_names import FOLLOW_REFERENCES, hub_model
from profiling.recipes.recipe import NO_MEMORY, Reading

_TRAINER_KNOWN_PREFIXES = (
    "output_dir",
    "overwrite_output_dir",
    "do_",
    "eval",
    "per_device_eval",
    "learning_rate",
    "weight_decay",
    "adam_",
    "max_grad_norm",
    "num_train_epochs",
    "max_steps",
    "lr_scheduler",
    "warmup",
    "log",
    "save",
    "seed",
    "data_seed",
    "dataloader",
    "run_name",
    "disable_tqdm",
    "remove_unused_columns",
    "label",
    "load_best",
    "metric_for",
    "greater_is",
    "ignore_data",
    "report_to",
    "push_to_hub",
    "hub_",
    "resume",
    "prediction_loss",
    "include_",
    "ddp_",
    "local_rank",
    "debug",
    "past_index",
    "group_by_length",
    "length_column",
    "skip_memory",
    "use_cpu",
    "use_ipex",
    "jit_mode",
    "tf32",
    "full_determinism",
    "torchdynamo",
    "ray_",
    "split_batches",
    "dispatch_batches",
    "neftune",
    "optim_args",
    "restore_callback",
    "batch_eval",
    "average_tokens",
    "use_legacy",
    "project",
    "trackio",
    "_n_gpu",
    "_setup_devices",
    "distributed_state",
    "deepspeed_plugin",
    "accelerator_config",
    "parallelism_config",
    "enable_jit",
    "train_sampling",
    "use_cache",
    "mixed_precision",
    "fp16_full_eval",
    "bf16_full_eval",
    "fp16_opt_level",
    "fp16_backend",
    "half_precision",
    "auto_find",
    "torch_empty_cache",
    "gradient_checkpointing_kwargs",
    "activation_checkpointing_kwargs",
    "fsdp_min_num_params",
    "fsdp_transformer_layer",
    "fsdp_plugin_args",
    "dataset_",
    "completion_only",
    "assistant_only",
    "chat_template",
    "model_init_kwargs",
    "eos_token",
    "pad_token",
    "dataset",
    "num_of_sequences",
    "mp_parameters",
    "xpu_backend",
)
TRAINER_KNOWN = [(f"{p}*", NO_MEMORY) for p in _TRAINER_KNOWN_PREFIXES]

_OPTIM = {
    "adamw_torch": ("adamw", "torch's AdamW (foreach)"),
    "adamw_hf": ("adamw", ""),
    "adamw_torch_fused": ("adamw", "torch's fused AdamW"),
    "adamw_apex_fused": ("adamw", "apex's fused AdamW"),
    "adamw_bnb_8bit": ("adam8bit", "bitsandbytes' 8-bit AdamW"),
    "adamw_8bit": ("adam8bit", "bitsandbytes' 8-bit AdamW"),
    "paged_adamw_8bit": ("adam8bit", "bitsandbytes' paged 8-bit AdamW"),
    "paged_adamw_32bit": ("adamw", "bitsandbytes' paged 32-bit AdamW"),
    "adamw_torch_4bit": ("adam8bit", "torchao's 4-bit AdamW (counted as 8-bit: 2 B of state)"),
    "adamw_torch_8bit": ("adam8bit", "torchao's 8-bit AdamW"),
    "adafactor": ("adafactor", "transformers' Adafactor"),
    "sgd": ("sgd", "torch's SGD (momentum 0.9 assumed; set --optimizer sgd-nomomentum if none)"),
    "adagrad": ("adagrad", ""),
    "rmsprop": ("rmsprop", ""),
    "lion_8bit": ("adam8bit", "bitsandbytes' 8-bit Lion (one 1-byte state; counted as two)"),
    "lion_32bit": ("lion", ""),
}


def looks_like_trainer(data: dict[str, Any]) -> bool:
    return "per_device_train_batch_size" in data or (
        "output_dir" in data and ("optim" in data or "learning_rate" in data)
    )


# --------------------------------------------------------------------- the Trainer's arguments


def read_trainer(path: Path, data: dict[str, Any]) -> Reading:
    r = Reading(path.name, data, TRAINER_KNOWN)
    if r.has("per_device_train_batch_size"):
        r.use("per_device_train_batch_size", "batch", r.get("per_device_train_batch_size"))
    _trainer_precision(r)
    _trainer_checkpointing(r)
    _trainer_optimizer(r)
    accumulation = r.get("gradient_accumulation_steps", 1) or 1
    if int(accumulation) > 1:
        r.use(
            "gradient_accumulation_steps",
            "grads_kept",
            True,
            "gradients stay allocated through the later micro-batches' forward",
        )
    else:
        r.ignore("gradient_accumulation_steps", NO_MEMORY + " (no accumulation)")
    for key in ("max_length", "max_seq_length"):  # TRL's SFTConfig
        if r.get(key) is not None:
            r.use(key, "seq", r.get(key), "TRL's SFTConfig: sequences cut to this length")
            break
    _trainer_sharding(r, path)
    _trainer_compile(r)
    for key in ("packing", "padding_free"):
        if r.get(key):
            r.use(key, "packed", True, "TRL packs sequences (document masks, varlen attention)")
        elif r.has(key):
            r.ignore(key, NO_MEMORY + " (off)")
    if r.get("use_liger_kernel"):
        r.use(
            "use_liger_kernel",
            "loss",
            "liger",
            "Liger's fused linear cross-entropy; its RMSNorm, RoPE and SwiGLU kernels are taken "
            "to keep what PyTorch's ops keep",
        )
    elif r.has("use_liger_kernel"):
        r.ignore("use_liger_kernel", NO_MEMORY + " (off)")
    model = r.get("model_name_or_path") or r.get("hub_model_id")
    if isinstance(model, str) and model:
        found, note = hub_model(model)
        key = "model_name_or_path" if r.has("model_name_or_path") else "hub_model_id"
        if found:
            r.use(key, "model", found, note)
        else:
            r.ignore(key, f"{note}; give --model")
    r.finish()
    return r


def _trainer_precision(r: Reading) -> None:
    bf16, fp16 = bool(r.get("bf16")), bool(r.get("fp16"))
    if bf16 or fp16:
        key = "bf16" if bf16 else "fp16"
        r.use(
            key,
            "precision",
            "amp-bf16" if bf16 else "amp-fp16",
            "the Trainer's autocast over the parameters as loaded",
        )
        r.notes.append(
            f"{key}: autocast over the model as it was loaded — fp32 here; a model loaded in "
            "16 bits (torch_dtype=bfloat16, which the arguments do not record) trains pure "
            "16-bit: say --precision bf16 (peft's fp32 adapters, given its adapter_config.json, "
            "stay fp32 under the autocast: --autocast-adapters)"
        )
        r.seen("fp16" if bf16 else "bf16", main=key)
    else:
        r.imply("bf16", "precision", "fp32", "neither bf16 nor fp16: fp32 as loaded")
        r.seen("fp16", main="bf16")


def autocast_over_peft(trainer: Reading, readings: list[Reading]) -> None:
    """peft's LoRA adapters beside the Trainer's ``bf16`` / ``fp16``: get_peft_model upcasts
    16-bit adapters to fp32 (``autocast_adapter_dtype=True``, its default: peft
    src/peft/tuners/tuners_utils.py ``cast_adapter_dtype``, 5d602fd), and the Trainer's autocast
    runs their matmuls in 16 bits. On a model loaded in fp32 nothing changes; loaded in bf16
    (``--precision bf16``) the adapters train in fp32 beside a bf16 base."""
    amp = [s for s in trainer.used if s.field == "precision" and str(s.to).startswith("amp-")]
    lora = any(s.field == "lora_rank" for r in readings for s in r.used)
    if amp and lora:
        trainer.use(
            amp[0].key,
            "autocast_adapters",
            True,
            "peft's adapters stay fp32 (autocast_adapter_dtype) under the Trainer's autocast, "
            "also on a model loaded in bf16 (--precision bf16)",
        )


def _trainer_checkpointing(r: Reading) -> None:
    keys = [k for k in ("activation_checkpointing", "gradient_checkpointing") if r.has(k)]
    on = [k for k in keys if r.get(k)]
    if on:
        r.use(on[0], "checkpointing", "full", "every decoder layer checkpointed")
    elif keys:
        r.use(keys[0], "checkpointing", "none")
    r.seen(*keys, main=keys[0] if keys else "")


def _trainer_optimizer(r: Reading) -> None:
    optim = r.get("optim")
    if optim is None:
        return
    name = str(optim).lower()
    if name not in _OPTIM:
        r.ignore("optim", f"{optim!r} is not an optimizer this reader knows; give --optimizer")
        return
    ours, why = _OPTIM[name]
    r.use("optim", "optimizer", ours, why)
    if name in ("adamw_torch_fused", "adamw_apex_fused"):  # one kernel: no foreach lists
        r.use("optim", "foreach", False, "one fused kernel keeps no foreach temporaries: "
              "counted as the for-loop step's scratch, a bound above the kernel's")  # fmt: skip
    if name.startswith("paged_"):
        r.use("optim", "paged_optimizer", True, "bitsandbytes pages its state under pressure")
    if name in ("adamw_torch_8bit", "adamw_torch_4bit"):  # transformers' _TORCHAO_OPTIMIZERS
        r.use("optim", "torchao_optim", True, "torchao's rule and compiled step")


def _trainer_compile(r: Reading) -> None:
    """``torch_compile``; a ``torch_compile_mode`` or ``torch_compile_backend`` alone turns it on
    too (TrainingArguments.__post_init__, transformers/training_args.py)."""
    by = next((k for k in ("torch_compile_mode", "torch_compile_backend") if r.get(k)), None)
    if r.get("torch_compile") or by:
        key = "torch_compile" if r.get("torch_compile") else str(by)
        r.use(key, "compile", True, "torch.compile of the model: each block as the partitioner "
              "splits it (the LM head and loss counted eager)")  # fmt: skip
        for k in ("torch_compile", "torch_compile_mode", "torch_compile_backend"):
            if k != key and k == "torch_compile":  # false, overruled by the mode or backend
                r.ignore(k, f"the Trainer turns torch.compile on when {key} is set")
            elif k != key:
                r.ignore(k, NO_MEMORY + " beyond turning torch.compile on")
    else:
        for k in ("torch_compile", "torch_compile_mode", "torch_compile_backend"):
            r.ignore(k, NO_MEMORY + " (off)")
    mode = r.get("torch_compile_mode")
    if mode in ("reduce-overhead", "max-autotune"):
        r.notes.append(
            f"torch_compile_mode = {mode!r} captures CUDA graphs, whose private memory pool is "
            "not modelled: the estimate is of the compiled step without them"
        )


def _trainer_sharding(r: Reading, path: Path) -> None:
    fsdp = r.get("fsdp")
    text = " ".join(fsdp) if isinstance(fsdp, list) else str(fsdp or "")
    if "full_shard" in text or "hybrid_shard" in text:
        r.use("fsdp", "fsdp", True, "FSDP full shard: ZeRO-3 over the GPUs (give --gpus N)")
        r.use("fsdp", "zero", 3)
    elif "shard_grad_op" in text:
        r.use("fsdp", "fsdp", True, "FSDP SHARD_GRAD_OP: ZeRO-2 style (give --gpus N)")
        r.use("fsdp", "zero", 2)
    elif r.has("fsdp"):
        r.ignore("fsdp", NO_MEMORY + " (off)")
    if "offload" in text:
        r.use("fsdp", "offload_optimizer", True, "FSDP's CPU offload")
    r.seen("fsdp_config", main="fsdp")
    _fsdp_config(r)
    _trainer_deepspeed(r, path)


def _fsdp_config(r: Reading) -> None:
    """``fsdp_config``'s checkpointing and FSDP version, as TrainingArguments reads them
    (transformers/training_args.py, ``_process_fsdp_args``: an ``fsdp_`` prefix dropped;
    ``activation_checkpointing`` handed to accelerate's FSDP plugin, which checkpoints every
    wrapped layer; ``version`` 2 by default in transformers 5, 1 the legacy FSDP1)."""
    for name in ("activation_checkpointing", "version"):
        key = next((f"fsdp_config.{p}{name}" for p in ("", "fsdp_")
                    if r.has(f"fsdp_config.{p}{name}")), None)  # fmt: skip
        if key is None:
            continue
        value = r.get(key)
        if name == "activation_checkpointing" and str(value).lower() == "true":
            r.use(key, "checkpointing", "full", "FSDP's own checkpointing of every wrapped layer")
        elif name == "activation_checkpointing":
            r.ignore(key, NO_MEMORY + " (off)")
        elif str(value) == "1":
            r.use(key, "fsdp_flat", True, "FSDP1: each wrapped layer's parameters views of one "
                  "flat parameter (give --gpus N)")  # fmt: skip
        else:
            r.seen(key, main="fsdp (FSDP2's fully_shard, as estimated)")


def _trainer_deepspeed(r: Reading, path: Path) -> None:
    """The Trainer's ``deepspeed``: a config inline (``deepspeed.*`` keys) or a file it names,
    read with the Trainer's values for its ``"auto"``; DeepSpeed's 16-bit engine then runs the
    precision the Trainer's ``bf16`` / ``fp16`` asked for."""
    ds = r.get("deepspeed")
    held = "hf_deepspeed_config.config."  # a pickled run's own config, "auto" filled
    if any(k.startswith("deepspeed.") for k in r.flat):
        read_settings(r, "deepspeed.", Filler.of_trainer(r))
        _engine_precision(r, r)
    elif any(k.startswith(held) for k in r.flat) and not _here(path, ds):
        read_settings(r, held, Filler.of_trainer(r))
        _engine_precision(r, r)
        r.seen("deepspeed", main="the config the run held (hf_deepspeed_config)")
        for key in r.unseen("hf_deepspeed_config."):
            r.ignore(key, NO_MEMORY)
    elif isinstance(ds, str) and ds:
        target = Path(ds)
        if not target.is_absolute():
            target = path.parent / target
        if not FOLLOW_REFERENCES.get():
            r.ignore("deepspeed", f"{ds}: give the DeepSpeed config as a recipe file too")
        elif target.is_file():
            from profiling.recipes.files import read_data

            sub = read_deepspeed(target, read_data(target), trainer=Filler.of_trainer(r))
            r.seen("deepspeed", main=f"the settings of {target.name} below")
            _engine_precision(r, sub)
            r.used += sub.used
            r.ignored += sub.ignored
            r.notes += sub.notes
        else:
            r.ignore("deepspeed", f"{ds} is not a file here; give --deepspeed --zero N")
    elif r.has("deepspeed"):
        r.ignore("deepspeed", NO_MEMORY + " (off)")


def beside_trainer(r: Reading, path: Path, data: dict[str, Any]) -> Reading:
    """A DeepSpeed config given as a file of its own beside the Trainer's arguments (the agents'
    tools follow no reference): read with the Trainer's values for its "auto", as the Trainer
    would have read the file it names."""
    sub = read_deepspeed(path, data, trainer=Filler.of_trainer(r))
    _engine_precision(r, sub)
    for s in [s for s in r.ignored if s.key == "deepspeed"]:
        s.why = f"{s.value}: read from {path.name}, given beside it"
    return sub


def _here(path: Path, ds: Any) -> bool:
    """Whether the DeepSpeed config the Trainer names is a file beside its arguments."""
    if not isinstance(ds, str) or not ds:
        return False
    target = Path(ds) if Path(ds).is_absolute() else path.parent / ds
    return target.is_file()


def _engine_precision(r: Reading, ds: Reading) -> None:
    """DeepSpeed's bf16/fp16 engine (16-bit weights, fp32 master) replaces the Trainer's
    autocast reading of ``bf16`` / ``fp16``."""
    own = ("bf16", "fp16")
    engine = [s for s in ds.used if s.field == "precision" and s.key not in own]
    if not engine:
        return
    for s in [s for s in r.used if s.field == "precision" and s.key in own]:
        r.used.remove(s)
        r.ignored.append(
            s.model_copy(
                update={
                    "to": None,
                    "why": f"read by DeepSpeed's engine: {engine[0].key.strip('()')}",
                }
            )
        )
    r.notes = [n for n in r.notes if ": autocast over the model as it was loaded" not in n]


__all__ = [
    "autocast_over_peft",
    "beside_trainer",
    "looks_like_deepspeed",
    "looks_like_trainer",
    "read_deepspeed",
    "read_trainer",
]
