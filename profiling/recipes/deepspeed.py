"""A DeepSpeed JSON config, read as DeepSpeed and the Hugging Face integration read it: on its
own (``--from ds_config.json``), named by the Trainer's ``deepspeed`` argument, or by
accelerate's ``deepspeed_config_file``.

``"auto"`` is the Hugging Face integration's placeholder (``transformers/integrations/
deepspeed.py``, ``HfTrainerDeepSpeedConfig``): ``train_micro_batch_size_per_gpu``,
``gradient_accumulation_steps``, ``bf16.enabled`` / ``fp16.enabled`` take the Trainer's
``per_device_train_batch_size``, ``gradient_accumulation_steps``, ``bf16`` / ``fp16``
(``trainer_config_process``); ``reduce_bucket_size`` becomes hidden_size², and for ZeRO-3
``stage3_prefetch_bucket_size`` 0.9·hidden_size² and ``stage3_param_persistence_threshold``
10·hidden_size (``trainer_config_finalize``), which the estimate resolves from the model's
hidden size. An ``"auto"`` with no Trainer's value to take is said as not resolved.
No torch, no DeepSpeed: the file is data.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

from profiling.errors import ProfilingError
from profiling.recipes.recipe import NO_MEMORY, Reading

_PINNED = "does not change the bytes (the host block labels them pinned: DeepSpeed's default)"
_DEFAULT_BUFFERS = "not modelled yet: the NVMe swap buffers are counted at DeepSpeed's defaults"
_OFF = ("zero_optimization.offload_optimizer", "zero_optimization.offload_param")
_ZERO3 = NO_MEMORY + " (DeepSpeed reads it at ZeRO-3 only)"
_NOT_AT_1_2 = "not modelled yet at ZeRO-1/2 (at ZeRO-3 it is)"
# DeepSpeed's engine never reads the block (engine.py's _configure_checkpointing saves model
# checkpoints); deepspeed.checkpointing.configure reads it when a model's own code calls it and
# checkpoints through deepspeed.checkpointing.checkpoint (Megatron-DeepSpeed), which neither
# transformers' models nor ours do (torch.utils.checkpoint: --checkpointing).
_ACTIVATIONS = (NO_MEMORY + ": DeepSpeed's engine never reads it; only a model that calls "
                "deepspeed.checkpointing itself (Megatron-DeepSpeed) does — transformers' "
                "gradient_checkpointing is torch's (give --checkpointing)")  # fmt: skip
_DTYPES = {"fp32": "fp32", "float32": "fp32", "float": "fp32", "torch.float32": "fp32",
           "bf16": "bf16", "bfloat16": "bf16", "bfloat": "bf16", "torch.bfloat16": "bf16",
           "fp16": "fp16", "float16": "fp16", "half": "fp16", "torch.float16": "fp16"}  # fmt: skip
# Keys read as DeepSpeed reads them that move no byte the estimate counts, or are not modelled.
DS_KNOWN: list[tuple[str, str]] = [
    ("train_batch_size", NO_MEMORY + " (micro-batch × accumulation × GPUs)"),
    ("zero_optimization.allgather_bucket_size", "no bytes of its own: the updated partitions "
     "are gathered in place into the 16-bit flat buffer (all_gather_into_tensor, "
     "deepspeed/runtime/utils.py:1013)"),
    ("zero_optimization.stage3_max_live_parameters", "a bound (1e9 elements by default) on "
     "what is prefetched, above the gathered parameters counted"),
    ("zero_optimization.stage3_max_reuse_distance", _ZERO3),
    ("zero_optimization.sub_group_size", _ZERO3),
    ("zero_optimization.stage3_gather_16bit_weights_on_model_save", NO_MEMORY + " in a step"),
    ("zero_optimization.gather_16bit_weights_on_model_save", NO_MEMORY + " in a step"),
    ("zero_optimization.*.pin_memory", _PINNED),
    ("zero_optimization.*.buffer_count", _DEFAULT_BUFFERS),
    ("zero_optimization.*.buffer_size", _DEFAULT_BUFFERS),
    ("zero_optimization.*.max_in_cpu", _DEFAULT_BUFFERS),
    ("zero_optimization.*.ratio", "read at ZeRO-3 with the optimizer offloaded only"),
    ("zero_optimization.*.nvme_path", NO_MEMORY),
    ("zero_optimization.*.fast_init", NO_MEMORY),
    ("zero_optimization.*", NO_MEMORY),
    ("activation_checkpointing.*", _ACTIVATIONS),
    ("data_types.*", _NOT_AT_1_2 + ": the gradients counted in the model's dtype (the "
     "default)"),
    ("communication_data_type", _NOT_AT_1_2 + ": the reduction counted in the model's dtype"),
    ("optimizer.params.*", NO_MEMORY),
    ("fp16.*", NO_MEMORY),
    ("bf16.*", NO_MEMORY),
    ("*", NO_MEMORY),
]  # fmt: skip
_OPTIMIZERS = {"adam": "adamw", "adamw": "adamw", "fusedadam": "adamw", "cpuadam": "adamw"}


@dataclass(frozen=True)
class Filler:
    """Who fills the config's ``"auto"`` and its 16-bit section: the Trainer's arguments, or
    accelerate's config (``values`` keyed by the Trainer's names; ``names``: as the source
    spells them)."""

    who: str  # "the Trainer's", "accelerate's"
    values: dict[str, Any]
    names: dict[str, str] = dataclass_field(default_factory=dict)

    def has(self, key: str) -> bool:
        return self.values.get(key) is not None

    def name(self, key: str) -> str:
        return f"{self.who} {self.names.get(key, key)}"

    @classmethod
    def of_trainer(cls, r: Reading) -> Filler:
        keys = ("per_device_train_batch_size", "gradient_accumulation_steps", "bf16", "fp16")
        return cls("the Trainer's", {k: r.get(k) for k in keys})


def looks_like_deepspeed(data: dict[str, Any]) -> bool:
    return "zero_optimization" in data or "train_micro_batch_size_per_gpu" in data


def read_deepspeed(path: Path, data: dict[str, Any], trainer: Filler | None = None) -> Reading:
    """A DeepSpeed config file; ``trainer``: the Trainer's arguments that name it, whose values
    fill its ``"auto"`` as the Hugging Face integration does."""
    r = Reading(path.name, data, DS_KNOWN)
    read_settings(r, "", trainer)
    r.finish()
    return r


def read_settings(r: Reading, prefix: str, trainer: Filler | None) -> None:
    """The keys under ``prefix`` (``"deepspeed."`` for a config the Trainer holds inline)."""
    _stage(r, prefix)
    _offload(r, prefix)
    _buckets(r, prefix)
    _batch(r, prefix, trainer)
    _precision(r, prefix, trainer)
    _sequence(r, prefix)
    _zero3_settings(r, prefix)
    _trainer_groups(r, prefix, trainer)
    kind = str(r.get(prefix + "optimizer.type") or "")
    if kind.lower() in _OPTIMIZERS:
        r.use(prefix + "optimizer.type", "optimizer", _OPTIMIZERS[kind.lower()],
              "DeepSpeed's Adam is AdamW (adam_w_mode on): two fp32 states")  # fmt: skip
    elif kind:
        r.ignore(prefix + "optimizer.type", f"not modelled yet: DeepSpeed's {kind}; give "
                 "--optimizer")  # fmt: skip
    if prefix:  # the Trainer's inline config: its other keys as DeepSpeed's table says
        for key in r.unseen(prefix):
            rest = key.removeprefix(prefix)
            why = next((w for p, w in DS_KNOWN if fnmatch.fnmatchcase(rest, p)), NO_MEMORY)
            r.ignore(key, why)


def _trainer_groups(r: Reading, p: str, trainer: Filler | None) -> None:
    """With no ``optimizer`` section the Trainer builds its own optimizer (transformers'
    ``deepspeed_optim_sched`` → ``Trainer.create_optimizer``): two parameter groups, weight
    decay and none (biases, norms), which DeepSpeed flattens apart; with one, DeepSpeed builds
    it over one list of parameters (``DummyOptim(model_parameters)``): one group."""
    if trainer is None or trainer.who != "the Trainer's" or r.has(p + "optimizer.type"):
        return
    if isinstance(r.get(p + "zero_optimization.stage"), int) and r.get(
        p + "zero_optimization.stage"
    ) in (1, 2, 3):
        r.imply("(the Trainer's optimizer)", "hf_param_groups", True, "no optimizer section: "
                "Trainer.create_optimizer's weight-decay and no-decay groups, each flattened "
                "by DeepSpeed")  # fmt: skip


def _sequence(r: Reading, p: str) -> None:
    """DeepSpeed's ``sequence_parallel_size`` (``deepspeed/runtime/config.py``), which its
    Ulysses fronts (Megatron-DeepSpeed, ``UlyssesSPAttentionHF``) read: a plan's Ulysses degree."""
    key = p + "sequence_parallel_size"
    n = r.get(key)
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        r.use(key, "ulysses", n, "DeepSpeed-Ulysses: the sequence split over N ranks, all-to-all "
              "to heads around attention; ZeRO shards over data × sequence ranks")  # fmt: skip
    elif n == 1:
        r.ignore(key, NO_MEMORY + " (1: no sequence parallelism)")
    elif r.has(key):
        r.ignore(key, f"{n!r} is not a sequence-parallel degree; give --ulysses N")


def _zero3_settings(r: Reading, p: str) -> None:
    """ZeRO-3's sub-groups, reuse distance, partial offload and dtypes (DeepSpeed 0.19.6,
    ``zero/config.py``, ``zero/offload_config.py``, ``runtime/config.py``): what each moves is
    profiling.estimate.deepspeed_groups'."""
    z, stage3 = p + "zero_optimization.", r.get(p + "zero_optimization.stage") == 3
    counts = {"sub_group_size": ("sub_group_size", 1, "elements of an optimizer sub-group: "
                                 "its gradients made fp32 at the step, one sub-group at a time"),
              "stage3_max_reuse_distance": ("max_reuse_distance", 0, "elements: what comes "
                                            "back within it stays gathered")}  # fmt: skip
    for key, (field, least, why) in counts.items():
        value = r.get(z + key)
        if not r.has(z + key):
            continue
        if not stage3:
            r.ignore(z + key, _ZERO3)
        elif isinstance(value, int | float) and not isinstance(value, bool) and value >= least:
            r.use(z + key, field, int(value), why)
        else:
            r.ignore(z + key, f"{value!r} is not a count; give --{field.replace('_', '-')}")
    key, ratio = z + "offload_optimizer.ratio", r.get(z + "offload_optimizer.ratio")
    device = r.get(z + "offload_optimizer.device")
    if isinstance(ratio, int | float) and not isinstance(ratio, bool) and 0 <= ratio <= 1:
        if stage3 and device in ("cpu", "nvme"):
            small = " (to nvme: those under 1 MiB of fp32 only)" if device == "nvme" else ""
            r.use(key, "offload_ratio", float(ratio), "the share of the optimizer's sub-groups "
                  f"offloaded; the first of them stay on the GPU{small}")  # fmt: skip
        else:
            r.ignore(key, "DeepSpeed reads it at ZeRO-3 with the optimizer offloaded")
    _dtypes(r, p, stage3)


def _accum_modelled(r: Reading, p: str, dtype: str) -> bool:
    """What the estimate models at ZeRO-1/2 (profiling._config_deepspeed._accum_at_1_2): the
    model's own dtype, and fp32 under bf16 or fp16 (ZeRO-1: BF16_Optimizer under bf16, else
    the ZeRO optimizer's fp32 grad_accum; ZeRO-2: nothing moves)."""
    bf16 = r.get(p + "bf16.enabled") not in (None, False)
    if r.get(p + "fp16.enabled") is True:  # ds_fp16: ZeRO-1's grad_accum path, not BF16's
        return dtype in ("fp16", "fp32")
    return dtype == ("bf16" if bf16 else "fp32") or (bf16 and dtype == "fp32")


def _bf16_optimizer(r: Reading, p: str) -> bool:
    """ZeRO-1 with bf16 and fp32 accumulation, no offload: DeepSpeed's BF16_Optimizer."""
    accum = _DTYPES.get(str(r.get(p + "data_types.grad_accum_dtype")).lower())
    one = r.get(p + "zero_optimization.stage") == 1
    offload = r.get(p + "zero_optimization.offload_optimizer.device") in ("cpu", "nvme")
    return one and accum == "fp32" and r.get(p + "bf16.enabled") not in (None, False) and (
        not offload)  # fmt: skip


def _accum_reason(r: Reading, p: str, dtype: str) -> str:
    fp16 = r.get(p + "fp16.enabled") is True
    if dtype != "fp32" or (r.get(p + "bf16.enabled") in (None, False) and not fp16):
        return "the gradient partition stays in the model's dtype"
    if r.get(p + "zero_optimization.stage") != 1:
        return "at ZeRO-2 the gradient partition stays in the model's dtype"
    if _bf16_optimizer(r, p):
        return "ZeRO-1 with bf16: DeepSpeed's BF16_Optimizer and its fp32 accumulators"
    return ("ZeRO-1 with fp16" if fp16 else "ZeRO-1 with the optimizer offloaded") + (
        ": an fp32 grad_accum of every parameter")  # fmt: skip


def _dtypes(r: Reading, p: str, stage3: bool) -> None:
    for key, field in ((p + "data_types.grad_accum_dtype", "grad_accum_dtype"),
                       (p + "communication_data_type", "comm_dtype")):  # fmt: skip
        value = r.get(key)
        if value is None:
            continue
        dtype = _DTYPES.get(str(value).lower())
        if dtype is None:
            r.ignore(key, f"{value!r} is not a dtype DeepSpeed takes (fp32, bf16, fp16)")
        elif stage3:
            r.use(key, field, dtype, "the gradient partitions' dtype" if field ==
                  "grad_accum_dtype" else "the gradient bucket's dtype")  # fmt: skip
        elif field == "comm_dtype":
            r.use(key, field, dtype, "BF16_Optimizer's all-reduce of its fp32 accumulators "
                  "converts them to it (engine.py allreduce_bucket)" if _bf16_optimizer(r, p)
                  else "a reduction converts the bucket's flattened slices to it "
                  "(stage_1_and_2.py allreduce_bucket)")  # fmt: skip
        elif field == "grad_accum_dtype" and _accum_modelled(r, p, dtype):
            r.use(key, field, dtype, _accum_reason(r, p, dtype))
        else:
            r.ignore(key, _NOT_AT_1_2)


def _stage(r: Reading, p: str) -> None:
    key = p + "zero_optimization.stage"
    stage = r.get(key)
    if isinstance(stage, int) and 1 <= stage <= 3:
        r.use(key, "zero", stage, f"DeepSpeed ZeRO-{stage} (give --gpus N)")
        r.imply("(DeepSpeed's engine)", "deepspeed", True,
                "its buckets, persistent parameters, offload and host memory")  # fmt: skip
    elif stage == 0:
        r.use(key, "zero", 0, "DeepSpeed without ZeRO: every rank holds everything")
    elif r.has(key):
        r.ignore(key, "not a ZeRO stage (0-3); give --zero")


def _offload(r: Reading, p: str) -> None:
    devices = {}
    for block, field in zip(_OFF, ("offload_optimizer", "offload_param"), strict=True):
        key = f"{p}{block}.device"
        device = r.get(key)
        if device in ("cpu", "nvme"):
            if field == "offload_param" and r.get(p + "zero_optimization.stage") != 3:
                r.ignore(key, "DeepSpeed offloads parameters only at stage 3")
                continue
            what = "optimizer" if field == "offload_optimizer" else "parameters"
            r.use(key, field, True, f"DeepSpeed offloads the {what} to {device}")
            devices[field] = device
        elif r.has(key):
            r.ignore(key, NO_MEMORY + " (none: nothing offloaded)")
    # --offload-to is the optimizer's device (the parameters' when only they move); a parameter
    # device of its own is --offload-param-to: each part's host memory follows its own device.
    main = devices.get("offload_optimizer") or devices.get("offload_param")
    if main == "nvme":
        first = "offload_optimizer" if "offload_optimizer" in devices else "offload_param"
        r.use(f"{p}{_OFF[first == 'offload_param']}.device", "offload_to", "nvme",
              "NVMe through pinned swap buffers in host memory")  # fmt: skip
    if len(set(devices.values())) > 1:
        r.use(f"{p}{_OFF[1]}.device", "offload_param_to", devices["offload_param"],
              f"the parameters to {devices['offload_param']}, the optimizer to {main}")  # fmt: skip


def _buckets(r: Reading, p: str) -> None:
    z = p + "zero_optimization."
    hf = {
        "reduce_bucket_size": ("reduce_bucket_size", "hidden_size²"),
        "stage3_prefetch_bucket_size": ("prefetch_bucket_size", "0.9·hidden_size²"),
        "stage3_param_persistence_threshold": ("param_persistence_threshold", "10·hidden_size"),
    }
    for key, (field, rule) in hf.items():
        value = r.get(z + key)
        if value == "auto":
            r.use(z + key, field, "auto", f"the Hugging Face integration fills {rule} "
                  "(trainer_config_finalize): from the model's hidden size")  # fmt: skip
        elif isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            r.use(z + key, field, int(value), "elements")
        elif r.has(z + key):
            r.ignore(z + key, f"{value!r} is not a count; give --{field.replace('_', '-')}")
    if isinstance(r.get(z + "overlap_comm"), bool):
        r.use(z + "overlap_comm", "overlap_comm", r.get(z + "overlap_comm"),
              "two gradient buckets (stages 1 and 2) when on")  # fmt: skip
    if r.get(z + "contiguous_gradients") is True:
        r.seen(z + "contiguous_gradients", main="reduce_bucket_size (its bucket, counted)")
    elif r.get(z + "contiguous_gradients") is False:
        r.ignore(z + "contiguous_gradients", "not modelled yet: counted as on (DeepSpeed's "
                 "default: the gradient bucket and the contiguous partition)")  # fmt: skip


def _auto(r: Reading, key: str, trainer: Filler | None, trainer_key: str) -> bool:
    """An ``"auto"`` the Trainer fills: said as read from it, or as not resolved."""
    if r.get(key) != "auto":
        return False
    if trainer is not None and trainer.has(trainer_key):
        r.seen(key, main=f'{trainer.name(trainer_key)} ("auto")')
    else:
        r.ignore(key, f"\"auto\" not resolved: the Hugging Face integration fills it from the "
                 f"Trainer's {trainer_key}, which is not given here")  # fmt: skip
    return True


def _batch(r: Reading, p: str, trainer: Filler | None) -> None:
    key = p + "train_micro_batch_size_per_gpu"
    if not _auto(r, key, trainer, "per_device_train_batch_size") and isinstance(r.get(key), int):
        r.use(key, "batch", r.get(key))
    key = p + "gradient_accumulation_steps"
    if _auto(r, key, trainer, "gradient_accumulation_steps"):
        return
    steps = r.get(key)
    if isinstance(steps, int) and steps > 1:
        r.use(key, "grads_kept", True, "gradients accumulated over micro-batches")
    elif r.has(key):
        r.ignore(key, NO_MEMORY + " (no accumulation)")


_ENGINE = "DeepSpeed's 16-bit engine: 16-bit weights and gradients, fp32 master and state"


def _bf16_section(r: Reading, p: str, trainer: Filler | None) -> str:
    """The section DeepSpeed reads bf16 from: ``bf16``, or when the file has none its legacy
    ``bfloat16`` (``get_bfloat16_config``: ``param_dict.get("bf16")``, then ``"bfloat16"``,
    "keeping for backwards compatibility", deepspeed/runtime/precision_config.py). Through
    accelerate (the Trainer, ``accelerate launch``) a ``bf16`` section is always added
    (``DeepSpeedPlugin.set_mixed_precision``: ``{"enabled": False}`` when absent), which
    shadows the legacy one."""
    legacy = f"{p}bfloat16.enabled"
    if any(k.startswith(f"{p}bf16.") for k in r.flat) or not r.has(legacy):
        return "bf16"
    if trainer is not None:
        r.ignore(legacy, "shadowed: accelerate adds a \"bf16\" section (set_mixed_precision), "
                 "which DeepSpeed reads before its legacy \"bfloat16\"")  # fmt: skip
        return "bf16"
    if r.get(legacy) == "auto":
        r.ignore(legacy, "\"auto\" not resolved: nothing fills the legacy \"bfloat16\" section; "
                 "give --precision mixed for DeepSpeed's 16-bit engine")  # fmt: skip
        return "bf16"
    return "bfloat16"


def _trainer_match(r: Reading, p: str, trainer: Filler | None) -> None:
    """The Trainer refuses to start when the config's explicit ``fp16.enabled`` /
    ``bf16.enabled`` differs from its own ``fp16`` / ``bf16`` (transformers'
    HfTrainerDeepSpeedConfig.fill_match, raised by trainer_config_finalize)."""
    if trainer is None or trainer.who != "the Trainer's":
        return
    for name in ("fp16", "bf16"):
        value, hf = r.get(f"{p}{name}.enabled"), bool(trainer.values.get(name))
        if isinstance(value, bool) and value != hf:
            raise ProfilingError(
                f"{r.file}'s {name}.enabled = {str(value).lower()} does not match the Trainer's "
                f"{name} = {str(hf).lower()}, and the Trainer refuses to start on that mismatch "
                f"(transformers' HfTrainerDeepSpeedConfig): make them agree, or set "
                f'{name}.enabled to "auto"'
            )


def _precision(r: Reading, p: str, trainer: Filler | None) -> None:
    _trainer_match(r, p, trainer)
    for name in (_bf16_section(r, p, trainer), "fp16"):
        key = f"{p}{name}.enabled"
        value = r.get(key)
        if value is True or (value == "auto" and trainer is not None and trainer.values.get(name)):
            r.use(key, "precision", "mixed", _ENGINE)
            if name == "fp16":  # its own dtype for data_types and communication_data_type
                r.imply("(fp16.enabled)", "ds_fp16", True, "DeepSpeed's engine in fp16, not bf16")
            return
        if value == "auto" and trainer is None:
            r.ignore(key, f"\"auto\" not resolved: the Trainer's {name} fills it; give "
                     "--precision mixed for DeepSpeed's 16-bit engine")  # fmt: skip
        elif r.has(key):
            r.ignore(key, NO_MEMORY + " (off)")
    # accelerate's DeepSpeedPlugin.set_mixed_precision adds the section the config lacks.
    on = [n for n in ("bf16", "fp16") if trainer is not None and trainer.values.get(n)]
    if on and not r.has(f"{p}{on[0]}.enabled"):
        r.imply(
            f"({trainer.name(on[0]) if trainer else on[0]})",
            "precision",
            "mixed",
            f"adds DeepSpeed's {on[0]} section (accelerate's set_mixed_precision): {_ENGINE}",
        )


__all__ = ["DS_KNOWN", "Filler", "looks_like_deepspeed", "read_deepspeed", "read_settings"]
