"""The Hugging Face Trainer's arguments (a ``TrainingArguments`` / TRL ``SFTConfig`` JSON,
``args.json``, ``training_args.bin``) and a DeepSpeed config they name (peft and bitsandbytes:
``peft_bnb``).

How the Trainer runs them:

- ``bf16`` / ``fp16`` is autocast over the parameters as loaded: fp32 unless the model was
  loaded in 16 bits (``torch_dtype``), which the arguments do not record — said in a note.
- ``gradient_checkpointing`` (``activation_checkpointing`` from transformers 5) checkpoints
  every decoder layer.
- ``optim`` (``hf_trainer_optim``), ``fsdp`` / ``fsdp_config`` (``hf_trainer_fsdp``), the
  step's other settings — accumulation, checkpointing kwargs, Liger, the refused ones —
  (``hf_trainer_steps``) and every other field's reason to be left out (``hf_trainer_keys``);
  a DeepSpeed ZeRO stage (below) shards over the GPUs given with ``--gpus``.
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
from profiling.recipes.hf_trainer_ddp import read_ddp
from profiling.recipes.hf_trainer_fsdp import read_fsdp
from profiling.recipes.hf_trainer_keys import TRAINER_KNOWN
from profiling.recipes.hf_trainer_optim import read_optimizer
from profiling.recipes.hf_trainer_steps import read_step_keys
from profiling.recipes.model_names import FOLLOW_REFERENCES, hub_model
from profiling.recipes.recipe import NO_MEMORY, Reading


def looks_like_trainer(data: dict[str, Any]) -> bool:
    return "per_device_train_batch_size" in data or (
        "output_dir" in data and ("optim" in data or "learning_rate" in data)
    )


# --------------------------------------------------------------------- the Trainer's arguments


def read_trainer(path: Path, data: dict[str, Any]) -> Reading:
    r = Reading(path.name, data, TRAINER_KNOWN)
    # transformers 4.x: a per_gpu_train_batch_size given wins (TrainingArguments.train_batch_size)
    batch = next((k for k in ("per_gpu_train_batch_size", "per_device_train_batch_size")
                  if r.get(k) is not None), None)  # fmt: skip
    if batch is not None:
        r.use(batch, "batch", r.get(batch))
    r.ignore("per_gpu_train_batch_size", NO_MEMORY + " (unset: per_device_train_batch_size read)")
    _trainer_precision(r)
    _trainer_checkpointing(r)
    read_ddp(r)
    read_optimizer(r)
    for key in ("max_length", "max_seq_length"):  # TRL's SFTConfig
        if r.get(key) is not None:
            r.use(key, "seq", r.get(key), "TRL's SFTConfig: sequences cut to this length")
            break
    read_fsdp(r)
    _trainer_deepspeed(r, path)
    _trainer_compile(r)
    for key in ("packing", "padding_free"):
        if r.get(key):
            r.use(key, "packed", True, "TRL packs sequences (document masks, varlen attention)")
        elif r.has(key):
            r.ignore(key, NO_MEMORY + " (off)")
    read_step_keys(r)
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
        given = [k for k in ("bf16", "fp16") if r.has(k)]
        if given:
            r.use(given[0], "precision", "fp32", "neither bf16 nor fp16: fp32 as loaded")
        else:
            r.imply("(neither bf16 nor fp16)", "precision", "fp32", "fp32 as loaded")
        r.seen(*given[1:], main=given[0] if given else "")


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
