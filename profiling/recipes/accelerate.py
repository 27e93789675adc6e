"""An accelerate config (``accelerate config`` writes it: ``default_config.yaml``), read as
``accelerate launch`` reads it: ``distributed_type``, ``num_processes`` over ``num_machines``,
``mixed_precision``, and the DeepSpeed or FSDP plugin's settings — a ``deepspeed_config_file``
read as DeepSpeed reads it (``profiling.recipes.deepspeed``).

How accelerate runs them (accelerate/utils/dataclasses.py, ``DeepSpeedPlugin``,
``FullyShardedDataParallelPlugin``): ``num_processes`` is the processes of all machines;
``mixed_precision`` bf16/fp16 is DeepSpeed's 16-bit engine under DeepSpeed, FSDP's
``MixedPrecisionPolicy`` under FSDP (16-bit gathers over fp32 shards), autocast otherwise;
``zero_stage``, ``offload_optimizer_device`` and ``offload_param_device`` fill the plugin's
config; FSDP's ``fsdp_sharding_strategy`` FULL_SHARD / SHARD_GRAD_OP is ZeRO-3 / ZeRO-2 style.
No torch, no accelerate: the file is data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiling.recipes.deepspeed import Filler, read_deepspeed
from profiling.recipes.model_names import FOLLOW_REFERENCES
from profiling.recipes.recipe import FSDP_OFFLOAD, NO_MEMORY, Reading

KNOWN: list[tuple[str, str]] = [
    ("deepspeed_config.zero3_init_flag", NO_MEMORY + " in a step (how the model is built)"),
    ("deepspeed_config.zero3_save_16bit_model", NO_MEMORY + " in a step (at save)"),
    ("deepspeed_config.gradient_clipping", NO_MEMORY),
    ("deepspeed_config.deepspeed_multinode_launcher", NO_MEMORY),
    ("fsdp_config.fsdp_auto_wrap_policy", NO_MEMORY + " (each decoder layer a unit)"),
    ("fsdp_config.fsdp_transformer_layer_cls_to_wrap", NO_MEMORY + " (each decoder layer)"),
    ("fsdp_config.fsdp_state_dict_type", NO_MEMORY + " in a step (at save)"),
    ("fsdp_config.*", "not modelled yet: give the flag it corresponds to, if it moves memory"),
    ("*", NO_MEMORY),
]
_SHARDING = {"FULL_SHARD": 3, "1": 3, "HYBRID_SHARD": 3, "4": 3, "SHARD_GRAD_OP": 2, "2": 2}


def looks_like(data: dict[str, Any]) -> bool:
    return "distributed_type" in data and (
        "compute_environment" in data or "num_processes" in data
    )  # fmt: skip


def read(path: Path, data: dict[str, Any]) -> list[Reading]:
    """The config's reading, and its DeepSpeed config file's when it names one."""
    r = Reading(path.name, data, KNOWN)
    kind = str(r.get("distributed_type") or "NO").upper()
    readings = [r]
    _processes(r, kind)
    if kind == "DEEPSPEED":
        readings += _deepspeed(r, path)
    elif kind == "FSDP":
        _fsdp(r)
    else:
        r.seen("distributed_type", main="num_processes")
    _precision(r, kind, readings)
    r.finish()
    return readings


def _processes(r: Reading, kind: str) -> None:
    n = r.get("num_processes")
    if isinstance(n, int) and n >= 1:
        r.use("num_processes", "gpus", n, f"{kind}: one process per GPU, all machines")
        machines = r.get("num_machines")
        if kind == "DEEPSPEED" and isinstance(machines, int) and machines > 1 and n % machines == 0:
            r.use("num_machines", "gpus_per_node", n // machines, "host memory is per node")
        elif r.has("num_machines"):
            r.seen("num_machines", main="num_processes")


def _deepspeed(r: Reading, path: Path) -> list[Reading]:
    r.seen("distributed_type", main="the DeepSpeed settings")
    file = r.get("deepspeed_config.deepspeed_config_file")
    if isinstance(file, str) and file and file.lower() != "none":
        target = Path(file) if Path(file).is_absolute() else path.parent / file
        if not FOLLOW_REFERENCES.get():
            r.ignore("deepspeed_config.deepspeed_config_file",
                     f"{file}: give the DeepSpeed config as a recipe file too")  # fmt: skip
        elif target.is_file():
            from profiling.recipes.files import read_data

            r.seen("deepspeed_config.deepspeed_config_file", main=f"{target.name}, read below")
            mp = str(r.get("mixed_precision") or "no").lower()
            steps = r.get("deepspeed_config.gradient_accumulation_steps")
            values = {
                "bf16": mp == "bf16",
                "fp16": mp == "fp16",
                "gradient_accumulation_steps": steps,
            }
            names = {"bf16": "mixed_precision", "fp16": "mixed_precision"}
            names["gradient_accumulation_steps"] = "deepspeed_config.gradient_accumulation_steps"
            filler = Filler("accelerate's", values, names)
            return [read_deepspeed(target, read_data(target), filler)]
        else:
            r.ignore("deepspeed_config.deepspeed_config_file",
                     f"{file} is not a file here; give --deepspeed --zero N")  # fmt: skip
        return []
    stage = r.get("deepspeed_config.zero_stage")
    if isinstance(stage, int) and 1 <= stage <= 3:
        r.use("deepspeed_config.zero_stage", "zero", stage, f"DeepSpeed ZeRO-{stage}")
        r.imply("(DeepSpeed's engine)", "deepspeed", True,
                "its buckets, persistent parameters, offload and host memory")  # fmt: skip
    devices = {}
    for key, field in (("offload_optimizer_device", "offload_optimizer"),
                       ("offload_param_device", "offload_param")):  # fmt: skip
        device = r.get(f"deepspeed_config.{key}")
        if device in ("cpu", "nvme"):
            r.use(f"deepspeed_config.{key}", field, True, f"offloaded to {device}")
            devices[key] = device
        elif r.has(f"deepspeed_config.{key}"):
            r.ignore(f"deepspeed_config.{key}", NO_MEMORY + " (none)")
    _devices(r, devices)
    steps = r.get("deepspeed_config.gradient_accumulation_steps")
    if isinstance(steps, int) and steps > 1:
        r.use("deepspeed_config.gradient_accumulation_steps", "grads_kept", True,
              "gradients accumulated over micro-batches")  # fmt: skip
    return []


def _devices(r: Reading, devices: dict[str, str]) -> None:
    """Each part's own device, as DeepSpeed takes them: --offload-to is the optimizer's (the
    parameters' when only they move), --offload-param-to the parameters' when it differs."""
    first = next(iter(devices), None)
    if first and devices[first] == "nvme":
        r.imply(f"(deepspeed_config.{first})", "offload_to", "nvme", "NVMe swap")
    if len(set(devices.values())) > 1:
        device = devices["offload_param_device"]
        r.imply("(deepspeed_config.offload_param_device)", "offload_param_to", device,
                f"the parameters to {device}, the optimizer elsewhere")  # fmt: skip


def _fsdp(r: Reading) -> None:
    r.seen("distributed_type", main="the FSDP settings")
    strategy = str(r.get("fsdp_config.fsdp_sharding_strategy") or "FULL_SHARD").upper()
    zero = _SHARDING.get(strategy)
    key = "fsdp_config.fsdp_sharding_strategy"
    if zero is None:
        r.ignore(key, f"{strategy}: not sharded (every rank holds everything)")
        return
    if r.has(key):
        r.use(key, "fsdp", True, "FSDP shards over the processes")
    else:
        r.imply("(FSDP's default: FULL_SHARD)", "fsdp", True, "FSDP shards over the processes")
    r.imply("(the sharding strategy)", "zero", zero, f"ZeRO-{zero} style")
    if r.get("fsdp_config.fsdp_offload_params"):
        r.use("fsdp_config.fsdp_offload_params", "offload_optimizer", True, FSDP_OFFLOAD)
    elif r.has("fsdp_config.fsdp_offload_params"):
        r.ignore("fsdp_config.fsdp_offload_params", NO_MEMORY + " (off)")
    if r.get("fsdp_config.fsdp_activation_checkpointing"):
        r.use("fsdp_config.fsdp_activation_checkpointing", "checkpointing", "full",
              "each wrapped decoder layer checkpointed")  # fmt: skip
    elif r.has("fsdp_config.fsdp_activation_checkpointing"):
        r.ignore("fsdp_config.fsdp_activation_checkpointing", NO_MEMORY + " (off)")


def _precision(r: Reading, kind: str, readings: list[Reading]) -> None:
    mp = str(r.get("mixed_precision") or "no").lower()
    if any(s.field == "precision" for x in readings[1:] for s in x.used):
        r.ignore("mixed_precision", "the DeepSpeed config's bf16/fp16 decides")
        return
    if mp not in ("bf16", "fp16"):
        if r.has("mixed_precision"):
            r.use("mixed_precision", "precision", "fp32", "no mixed precision")
        return
    if kind in ("DEEPSPEED", "FSDP"):
        why = (
            "DeepSpeed's 16-bit engine: 16-bit weights and gradients, fp32 master and state"
            if kind == "DEEPSPEED"
            else "FSDP's MixedPrecisionPolicy: 16-bit gathers over fp32 shards"
        )
        r.use("mixed_precision", "precision", "mixed", why)
    else:
        r.use("mixed_precision", "precision", f"amp-{mp}", "autocast over the model as loaded")


__all__ = ["looks_like", "read"]
