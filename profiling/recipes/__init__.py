"""``--from FILE``: a training configuration read from the user's own recipe, as their framework
reads it, without importing the framework.

LitGPT's finetuning YAML, torchtune's recipe YAML, the Hugging Face Trainer's arguments
(``TrainingArguments`` JSON, ``args.json``, ``training_args.bin``) with peft's
``adapter_config.json`` and a bitsandbytes config, and torchtitan's TOML. Each file becomes the
configuration values it sets (:class:`Recipe`), every key accounted for: used (which field, and
how the framework's value was read) or ignored (why). A folder (a checkpoint beside its
arguments) is read as the recipe files it holds, together.

    recipe = read_recipe(["lora.yaml"])
    config = TrainingConfig.parse(**with_recipe(recipe, {"gpu_mem": 24}))

Flags the user gives win over the file (said in a note). No torch, no framework import.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from profiling.errors import ConfigError, ProfilingError
from profiling.recipes import (
    accelerate,
    deepspeed,
    hf_trainer,
    hf_trainer_steps,
    litgpt,
    peft_bnb,
    torchtitan,
    torchtune,
    torchtune_fsdp,
)
from profiling.recipes.files import read_data
from profiling.recipes.hf_trainer_ddp import ddp_over_peft
from profiling.recipes.model_names import FOLLOW_REFERENCES
from profiling.recipes.recipe import NO_MEMORY, Reading, Recipe, Setting, settle

# What a checkpoint folder may hold, read in this order (a later file's setting wins).
FOLDER_FILES = (
    "hyperparameters.yaml",  # LitGPT saves its config there
    "training_args.bin",
    "args.json",
    "training_args.json",
    "config.json",
    # bitsandbytes' BitsAndBytesConfig as JSON beside the checkpoint (a QLoRA base): without it
    # the folder read as plain LoRA on a 16-bit base
    "bnb_config.json",
    "quantization_config.json",
    "adapter_config.json",
)
_RECIPE_SUFFIXES = (".json", ".yaml", ".yml", ".toml")


def _model_config(path: Path, data: dict[str, Any]) -> Reading:
    r = Reading(path.name, data, [("*", "part of the model's shape (read with the model)")])
    r.use("model_type", "model", f"hf:{path}", "the model's own config.json")
    r.finish()
    return r


def _detect(path: Path, data: dict[str, Any]) -> tuple[str, Callable[[], Reading | list[Reading]]]:
    """(framework, reader) for one file's data."""
    if path.suffix.lower() == ".toml":
        if torchtitan.looks_like(data):
            return "torchtitan", lambda: torchtitan.read(path, data)
    elif path.suffix.lower() in (".yaml", ".yml"):
        if accelerate.looks_like(data):
            return "accelerate", lambda: accelerate.read(path, data)
        if torchtune.looks_like(data):
            return "torchtune", lambda: torchtune.read(path, data)
        if litgpt.looks_like(data):
            method = litgpt.method_of(path, data)
            return f"LitGPT finetune {method}", lambda: litgpt.read(path, data)[1]
    elif peft_bnb.looks_like_peft(data):
        return "peft", lambda: peft_bnb.read_peft(path, data)
    elif peft_bnb.looks_like_bnb(data):
        return "bitsandbytes", lambda: peft_bnb.read_bnb(path, data)
    elif deepspeed.looks_like_deepspeed(data):
        return "DeepSpeed", lambda: deepspeed.read_deepspeed(path, data)
    elif hf_trainer.looks_like_trainer(data):
        return "Hugging Face Trainer", lambda: hf_trainer.read_trainer(path, data)
    elif "model_type" in data and path.suffix.lower() == ".json":
        return "a model's config.json", lambda: _model_config(path, data)
    raise ProfilingError(
        f"--from {path}: not a recipe this reads (LitGPT or torchtune YAML, the Hugging Face "
        "Trainer's arguments, peft's adapter_config.json, a bitsandbytes or DeepSpeed config, "
        "an accelerate config, torchtitan TOML); give the flags instead"
    )


def _files(paths: Sequence[str | Path]) -> list[Path]:
    out: list[Path] = []
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            found = [path / name for name in FOLDER_FILES if (path / name).is_file()]
            if not found:
                raise ProfilingError(
                    f"--from {path}: a folder with none of {', '.join(FOLDER_FILES)}; give the "
                    "recipe file"
                )
            out += found
        else:
            out.append(path)
    return out


def _unread(paths: Sequence[str | Path]) -> list[str]:
    """A sentence for each file of a given folder that looks like a configuration and is not
    read (a folder is read by its known names only): never dropped unsaid."""
    notes = []
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            for f in sorted(path.iterdir()):
                if f.suffix.lower() in _RECIPE_SUFFIXES and f.name not in FOLDER_FILES:
                    notes.append(
                        f"{f}: not read (a folder's files read: {', '.join(FOLDER_FILES)})"
                    )
    return notes


def read_recipe(paths: Sequence[str | Path], follow: bool = True) -> Recipe:
    """The configuration the files set, each key used or ignored with its reason; ``follow``:
    whether a file's own references (a checkpoint folder's config.json, a DeepSpeed config)
    are read too (an agent's tool reads only the files it was given, each checked)."""
    token = FOLLOW_REFERENCES.set(follow)
    try:
        return _read(paths)
    finally:
        FOLLOW_REFERENCES.reset(token)


def _read(paths: Sequence[str | Path]) -> Recipe:
    files = _files(paths)
    frameworks: list[str] = []
    readings: list[Reading] = []
    trainer: Reading | None = None
    for path in files:
        data = read_data(path)
        framework, reader = _detect(path, data)
        frameworks.append(framework)
        if framework == "DeepSpeed" and trainer is not None:  # the Trainer's, given beside it
            read = hf_trainer.beside_trainer(trainer, path, data)
        else:
            read = reader()  # accelerate's reading comes with its DeepSpeed file's
        if framework == "Hugging Face Trainer" and isinstance(read, Reading):
            trainer = read
        readings += read if isinstance(read, list) else [read]
    if trainer is not None and "peft" in frameworks:
        hf_trainer.autocast_over_peft(trainer, readings)
        ddp_over_peft(trainer, readings)
    names = [str(p) for p in files]
    recipe = settle(" + ".join(dict.fromkeys(frameworks)), names, readings)
    recipe.notes += _unread(paths)
    return recipe


def with_recipe(recipe: Recipe, given: dict[str, Any]) -> dict[str, Any]:
    """The configuration values: the recipe's, then what the user gave (which wins; each
    override is noted in ``recipe.notes``). One sentence when no model is named anywhere."""
    _refuse_other_training(recipe)
    gpus = int(given.get("gpus") or recipe.values.get("gpus") or 1)
    torchtune_fsdp.on_gpus(recipe, gpus)
    hf_trainer_steps.on_gpus(recipe, gpus)
    refused = next(
        (w for f, w in recipe.refusals.items() if f in recipe.values and f not in given),
        next((w for f, w in recipe.refused.items() if f not in given), None),
    )
    if refused is not None:
        raise ProfilingError(refused)
    values = dict(recipe.values)
    if recipe.framework == "torchtitan":
        from profiling.recipes.torchtitan import check_every_gpu

        check_every_gpu(recipe, {**values, **given})
    for field, value in given.items():
        if field in values and values[field] != value:
            from profiling.config_table import flag_name

            flag = flag_name(field)
            said = (flag if value else f"--no-{flag[2:]}") if isinstance(value, bool) else (
                f"{flag} {value}")  # fmt: skip
            recipe.notes.append(f"{said} given: it overrides the recipe's {values[field]!r}")
        values[field] = value
    if "model" in recipe.values and "model" not in given:
        _shape_replaces_model(recipe, values, given)
    if "model" not in values and "params" not in values and "layers" not in values:
        raise ProfilingError(
            f"{', '.join(recipe.files)} names no model we ship{_naming(recipe)}; give --model "
            "hf:NAME or hf:PATH (a config.json)"
        )
    return values


def _shape_replaces_model(recipe: Recipe, values: dict[str, Any], given: dict[str, Any]) -> None:
    """A shape given by hand (--arch or --params, with --layers --hidden …) wins over the model
    the recipe names, as every flag given wins over the file: the recipe's model is set aside,
    and said so. Shape flags alone (--layers 4, or all of --layers --hidden --heads --vocab)
    replace those fields of the recipe's model instead, as beside --model
    (profiling.models.shape_overrides): its family (its blocks, its tied or untied head) stays,
    and the trace builds it. (All four used to set the model aside for a GPT-2 shape by hand,
    which no trace beside the estimate could run.)"""
    from profiling._config_shape import SHAPE_FIELDS
    from profiling.config_table import flag_name

    flags = [flag_name(f) for f in SHAPE_FIELDS if given.get(f) is not None]
    if flags and (given.get("arch") is not None or given.get("params") is not None):
        recipe.notes.append(
            f"{' '.join(flags)} given: the shape by hand replaces the recipe's model "
            f"{values.pop('model')!r}"
        )


# The keys that name the model, by reader (exact: torchtune's checkpointer.checkpoint_dir, its
# tokenizer._component_ name no model).
_NAMING = (
    "model._component_", "checkpoint_dir", "base_model_name_or_path", "model_name_or_path",
    "hub_model_id", "model.flavor",
)  # fmt: skip


def _naming(recipe: Recipe) -> str:
    """`` (KEY = VALUE: why it names none of ours)`` for the key that named the model, or ''."""
    named = next((s for s in recipe.ignored if s.key in _NAMING), None)
    if named is None:
        return ""
    # (the readers' own "; give --model …" is said once, after)
    why = re.sub(r"[;:] give --model.*$", "", named.why)
    return f" ({named.key} = {named.value!r}: {why})"


# Methods that choose which weights train, read but not modelled: estimated without them, the
# step would be a full fine-tune of the same model (every weight trained), never what the file
# runs. (The readers set these fields, which TrainingConfig lacks; settle lists them ignored.)
TRAINING_METHODS = ("adapter", "peft_method")


def _refuse_other_training(recipe: Recipe) -> None:
    """One sentence, not full training in its place, for a training method not modelled."""
    method = next((s for s in recipe.ignored if s.field in TRAINING_METHODS), None)
    if method is None:
        return
    name = (
        f"peft's {method.value} adapter"
        if method.field == "peft_method"
        else "LLaMA-Adapter (LitGPT's finetune_adapter scripts)"
    )
    raise ProfilingError(
        f"{method.file}: {name} trains only its own weights, which is not modelled, and "
        "estimated without it the step would be a full fine-tune: not estimated"
    )


def explain(recipe: Recipe, error: ConfigError) -> ProfilingError:
    """A configuration error caused by a recipe's value, said with the key that set it."""
    source = next((s for s in recipe.used if s.field == error.field), None)
    if source is None:
        return error
    return ConfigError(
        f"{source.file}'s {source.key} = {source.value!r} gives {error}", error.field
    )


__all__ = [
    "FOLDER_FILES",
    "NO_MEMORY",
    "Recipe",
    "Setting",
    "explain",
    "read_recipe",
    "with_recipe",
]
