"""DeepSpeed's ZeRO engine as ``TrainingConfig`` fields: the engine itself (``--deepspeed``),
what it offloads and where, the host memory to judge against, and the bucket and threshold
settings of its ``zero_optimization`` block that are real bytes on the GPU.

The field objects live here so ``config.py`` stays one line each (as ``_config_behaviours``);
:func:`check_deepspeed` says in one sentence what DeepSpeed would refuse or what would change
nothing. Defaults are DeepSpeed's own (``deepspeed/runtime/zero/config.py``, 0.19.6):
``reduce_bucket_size`` 5e8, ``stage3_prefetch_bucket_size`` 5e7,
``stage3_param_persistence_threshold`` 1e5, ``overlap_comm`` on for stage 3 only
(``overlap_comm_valid``). No torch here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from profiling.errors import ConfigError

TrainingConfig = Any  # profiling.config imports this module

OffloadDevice = Literal["cpu", "nvme"]
# A count of elements, or "auto": the Hugging Face integration's placeholder, resolved from the
# model's hidden size as ``trainer_config_finalize`` does (profiling.estimate.deepspeed_engine).
Count = Annotated[int, Field(ge=0, le=10**13)] | Literal["auto"] | None

# deepspeed/runtime/zero/config.py (DeepSpeedZeroConfig), 0.19.6.
REDUCE_BUCKET_DEFAULT = 500_000_000
PREFETCH_BUCKET_DEFAULT = 50_000_000
PERSISTENCE_DEFAULT = 100_000
SUB_GROUP_DEFAULT = 1_000_000_000
REUSE_DISTANCE_DEFAULT = 1_000_000_000  # stage3_max_reuse_distance (not a field: read at it)
# deepspeed/runtime/zero/offload_config.py: the NVMe swapper's pinned buffers.
PARAM_BUFFER_COUNT, PARAM_BUFFER_SIZE, PARAM_MAX_IN_CPU = 5, 100_000_000, 1_000_000_000
OPTIMIZER_BUFFER_COUNT = 4

DEEPSPEED_FIELD: Any = Field(
    False,
    description="DeepSpeed's ZeRO engine (with --zero 1-3): its gradient buckets, persistent "
    "parameters, prefetch, fp32 gradient partition, offload's pinned host buffers and the host "
    "memory per node.",
)
OFFLOAD_OPTIMIZER_FIELD: Any = Field(
    False,
    description="Optimizer state and master weights in CPU memory (ZeRO-Offload); with --fsdp, "
    "FSDP2's CPU offload: the sharded weights and gradients there too.",
)
OFFLOAD_PARAM_FIELD: Any = Field(
    False, description="DeepSpeed ZeRO-3: the 16-bit parameter partitions in host memory."
)
OFFLOAD_TO_FIELD: Any = Field(
    "cpu",
    description="Where DeepSpeed offloads to: cpu, or nvme (pinned swap buffers in host memory).",
)
# DeepSpeed sets each part's device apart (offload_optimizer.device, offload_param.device in
# deepspeed/runtime/zero/offload_config.py): parameters on cpu beside an optimizer on nvme keep
# every 16-bit partition in host memory, which counting both as nvme would miss.
OFFLOAD_PARAM_TO_FIELD: Any = Field(
    None,
    description="Where DeepSpeed offloads the parameters when not where --offload-to sends the "
    "optimizer: cpu or nvme (offload_param.device).",
)
CPU_MEM_FIELD: Any = Field(
    None, gt=0, le=10**6, description="Host (CPU) memory per node in GB, for the verdict."
)
GPUS_PER_NODE_FIELD: Any = Field(
    None, ge=1, le=1024, description="GPUs per node (default: the GPUs, at most 8)."
)
REDUCE_BUCKET_FIELD: Any = Field(
    None,
    description="DeepSpeed's reduce_bucket_size in elements (default 5e8; auto: hidden²).",
)
PREFETCH_BUCKET_FIELD: Any = Field(
    None,
    description="DeepSpeed's stage3_prefetch_bucket_size (default 5e7; auto: 0.9·hidden²).",
)
PERSISTENCE_FIELD: Any = Field(
    None,
    description="DeepSpeed's stage3_param_persistence_threshold (default 1e5; auto: 10·hidden).",
)
OVERLAP_COMM_FIELD: Any = Field(
    None, description="DeepSpeed's overlap_comm (default: on for ZeRO-3 only)."
)
DsDtype = Literal["fp32", "bf16", "fp16"] | None
SUB_GROUP_FIELD: Any = Field(
    None, ge=1, le=10**16, description="DeepSpeed ZeRO-3's sub_group_size (default 1e9)."
)
REUSE_DISTANCE_FIELD: Any = Field(
    None, ge=0, le=10**16, description="DeepSpeed's stage3_max_reuse_distance (default 1e9)."
)
OFFLOAD_RATIO_FIELD: Any = Field(
    None, ge=0, le=1, description="DeepSpeed ZeRO-3's offload_optimizer.ratio (default 1)."
)
GRAD_ACCUM_DTYPE_FIELD: Any = Field(
    None, description="DeepSpeed's data_types.grad_accum_dtype (default: the model's)."
)
HF_PARAM_GROUPS_FIELD: Any = Field(
    False,
    description="The Hugging Face Trainer's two optimizer groups (weight decay; none for "
    "biases and norms): DeepSpeed flattens and sub-groups each apart.",
)
COMM_DTYPE_FIELD: Any = Field(
    None, description="DeepSpeed's communication_data_type (default: the model's)."
)
FP16_FIELD: Any = Field(
    False,
    description="DeepSpeed's fp16 engine (fp16.enabled) under --precision mixed, not bf16: "
    "at ZeRO-1 fp32 accumulation runs its ZeRO optimizer's grad_accum, not BF16_Optimizer.",
)

# What the fields above mean only with the engine on.
ENGINE_ONLY = (
    "offload_param",
    "offload_param_to",
    "cpu_mem",
    "gpus_per_node",
    "reduce_bucket_size",
    "prefetch_bucket_size",
    "param_persistence_threshold",
    "overlap_comm",
    "sub_group_size",
    "max_reuse_distance",
    "offload_ratio",
    "grad_accum_dtype",
    "comm_dtype",
    "hf_param_groups",
    "ds_fp16",
)
ZERO3_ONLY = ("sub_group_size", "max_reuse_distance", "offload_ratio", "grad_accum_dtype",
              "comm_dtype")  # fmt: skip

# All of them: the agents' tools leave them out of their schemas (every field costs tokens in
# each request); a DeepSpeed config given as from_file sets them.
DEEPSPEED_FIELDS = ("deepspeed", "offload_to", *ENGINE_ONLY)

# The same configuration without the engine (the estimate's "without ZeRO" step).
ENGINE_OFF: dict[str, Any] = {"deepspeed": False, "offload_to": "cpu", "offload_param": False,
                              **{f: None for f in ENGINE_ONLY if f != "offload_param"},
                              "hf_param_groups": False, "ds_fp16": False}  # fmt: skip


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def check_deepspeed(cfg: TrainingConfig) -> None:
    """One sentence for a DeepSpeed setting that cannot hold together."""
    if not cfg.deepspeed:
        given = [f for f in ENGINE_ONLY if getattr(cfg, f) not in (None, False)]
        # their host memory is judged against --cpu-mem too (FSDP2's CPU offload: fsdp_offload)
        if cfg.activation_offload or cfg.fsdp:  # fit searches FSDP2 offload on --fsdp
            given = [f for f in given if f not in ("cpu_mem", "gpus_per_node")]
        if cfg.offload_to != "cpu":
            given.append("offload_to")
        if given:
            raise ConfigError(
                f"{_flag(given[0])} is a setting of DeepSpeed's ZeRO engine: add --deepspeed "
                "(with --zero 1-3)",
                given[0],
            )
        return
    if cfg.zero == 0 or cfg.fsdp:
        raise ConfigError(
            "--deepspeed is DeepSpeed's ZeRO engine: give --zero 1, 2 or 3 (and no --fsdp: "
            "that is PyTorch's FSDP2)",
            "deepspeed",
        )
    if cfg.offload_param and cfg.zero != 3:
        raise ConfigError(
            "--offload-param needs --zero 3 (DeepSpeed offloads parameters only when it "
            "partitions them)",
            "offload_param",
        )
    _check_zero3_settings(cfg)
    if cfg.ds_fp16 and cfg.precision != "mixed":
        raise ConfigError(
            "--ds-fp16 is DeepSpeed's fp16 engine (16-bit weights, fp32 master): give "
            "--precision mixed",
            "ds_fp16",
        )
    if cfg.offload_to == "nvme" and not (cfg.offload_optimizer or cfg.offload_param):
        raise ConfigError(
            "--offload-to nvme says where --offload-optimizer / --offload-param go: give one",
            "offload_to",
        )
    if cfg.offload_param_to is not None and not cfg.offload_param:
        raise ConfigError(
            "--offload-param-to says where --offload-param sends the parameters: give "
            "--offload-param (with --zero 3)",
            "offload_param_to",
        )
    adapters = cfg.lora_rank is not None and (cfg.qlora or cfg.dora or cfg.autocast)
    if cfg.tp > 1 or adapters or cfg.optimizer_in_bwd:
        what = (
            "--tp" if cfg.tp > 1 else "--optimizer-in-bwd" if cfg.optimizer_in_bwd
            else "--qlora" if cfg.qlora else "--dora" if cfg.dora
            else f"--precision {cfg.precision} (the engine casts the module itself: give mixed)"
        )  # fmt: skip
        raise ConfigError(
            f"--deepspeed is modelled for full training and LoRA on data parallelism: {what} "
            "with DeepSpeed's engine is not modelled yet (leave out --deepspeed for the ZeRO "
            "paper's sharding)",
            "deepspeed",
        )


def model_dtype(cfg: TrainingConfig) -> str:
    """The engine's 16-bit dtype (fp16 with ``ds_fp16``, else bf16), or fp32."""
    return "fp32" if cfg.precision == "fp32" else "fp16" if cfg.ds_fp16 else "bf16"


def _accum_at_1_2(cfg: TrainingConfig) -> bool:
    """``data_types.grad_accum_dtype`` at ZeRO-1/2 as DeepSpeed 0.19.6 runs it: the model's own
    dtype changes nothing; fp32 under bf16 is ``BF16_Optimizer`` at ZeRO-1 without an offloaded
    optimizer (engine.py:1993), the ZeRO optimizer's fp32 ``grad_accum`` with one
    (stage_1_and_2.py:361), and at ZeRO-2 leaves the gradient partition in the model's dtype
    (stage_1_and_2.py:1678) — all modelled."""
    return cfg.grad_accum_dtype in (None, model_dtype(cfg)) or (
        cfg.grad_accum_dtype == "fp32" and cfg.precision == "mixed"
    )


def _check_zero3_settings(cfg: TrainingConfig) -> None:
    given = [f for f in ZERO3_ONLY if getattr(cfg, f) is not None]
    if cfg.zero in (1, 2):  # communication_data_type: the reduction's conversion
        given = [f for f in given if f != "comm_dtype"]
        if _accum_at_1_2(cfg):
            given = [f for f in given if f != "grad_accum_dtype"]
    if given and cfg.zero != 3:
        what = (
            "DeepSpeed reads it at ZeRO-3 only (stage3.py)"
            if given[0] in ZERO3_ONLY[:3]
            else "at ZeRO-1/2 fp32 accumulation is modelled under --precision mixed (bf16), "
            "and the model's own dtype"
        )
        raise ConfigError(f"{_flag(given[0])} needs --zero 3: {what}", given[0])  # fmt: skip
    if cfg.offload_ratio is not None and not cfg.offload_optimizer:
        raise ConfigError(
            "--offload-ratio is the share of the optimizer DeepSpeed offloads: give "
            "--offload-optimizer",
            "offload_ratio",
        )


def param_device(cfg: TrainingConfig) -> str:
    """Where the offloaded 16-bit parameter partitions go: ``--offload-param-to``, else
    ``--offload-to`` (the optimizer's device)."""
    return cfg.offload_param_to or cfg.offload_to


def describe_deepspeed(cfg: TrainingConfig) -> str:
    """'DeepSpeed ZeRO-3, optimizer and parameters offloaded to nvme' for a title."""
    moved = [(w, d) for w, on, d in (("optimizer", cfg.offload_optimizer, cfg.offload_to),
             ("parameters", cfg.offload_param, param_device(cfg))) if on]  # fmt: skip
    text = f"DeepSpeed ZeRO-{cfg.zero}"
    if len({d for _, d in moved}) > 1:
        return text + ", " + ", ".join(f"{w} offloaded to {d}" for w, d in moved)
    if moved:
        text += f", {' and '.join(w for w, _ in moved)} offloaded to {moved[0][1]}"
    return text


__all__ = [
    "COMM_DTYPE_FIELD",
    "CPU_MEM_FIELD",
    "DEEPSPEED_FIELD",
    "DEEPSPEED_FIELDS",
    "ENGINE_OFF",
    "FP16_FIELD",
    "GPUS_PER_NODE_FIELD",
    "GRAD_ACCUM_DTYPE_FIELD",
    "HF_PARAM_GROUPS_FIELD",
    "OFFLOAD_OPTIMIZER_FIELD",
    "OFFLOAD_PARAM_FIELD",
    "OFFLOAD_PARAM_TO_FIELD",
    "OFFLOAD_RATIO_FIELD",
    "OFFLOAD_TO_FIELD",
    "OVERLAP_COMM_FIELD",
    "PERSISTENCE_FIELD",
    "PREFETCH_BUCKET_FIELD",
    "REDUCE_BUCKET_FIELD",
    "REUSE_DISTANCE_FIELD",
    "SUB_GROUP_FIELD",
    "Count",
    "DsDtype",
    "OffloadDevice",
    "check_deepspeed",
    "describe_deepspeed",
    "model_dtype",
    "param_device",
]
