"""The configuration of a training workload: ONE model for estimate, trace, profile and fit.

``TrainingConfig`` says what is trained (a reference model, a ``package.module:factory``, or a
parameter count and shape), on what (batch, sequence), how (precision, optimizer, parallelism,
checkpointing, attention kernel, LoRA/QLoRA, optimizer-state offload) and on which GPU. The CLI
flags, their help, and the agent tools' JSON schemas are generated from these fields, so a
choice added here appears everywhere at once.

Bad input becomes one :class:`ConfigError` sentence naming the flag (``--seq``) or the field
(``seq``) and the valid choices. Older spellings keep working (``LEGACY``: ``--dtype bf16`` is
``--precision amp-bf16``, ``--recompute`` ``--checkpointing`` …). No torch here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from profiling import _config_behaviours as behaviours
from profiling import _config_deepspeed as ds
from profiling import _config_float8 as f8
from profiling import _config_optimizers as optim
from profiling._config_behaviours import LOSS_CHUNKS_FIELD, LOSS_FIELD, Loss, check_behaviours
from profiling._config_counter import COUNTER_FIELD, EXPANDABLE_FIELD, Counter
from profiling._config_ddp import DDP_BUCKET_VIEW_FIELD, DDP_FIND_UNUSED_FIELD
from profiling._config_describe import describe as _describe
from profiling._config_gpu import gpu_mem_bytes as _gpu_mem_bytes
from profiling._config_gpu import gpu_spec as _gpu_spec
from profiling._config_legacy import LEGACY, map_legacy
from profiling._config_lora import (
    AUTOCAST_ADAPTERS_FIELD,
    BNB_KEEPS_FIELD,
    DORA_FIELD,
    DOUBLE_QUANT_FIELD,
    FABRIC_BNB_FIELD,
    LORA_DEFAULT,
    LORA_DROPOUT_FIELD,
    LORA_TARGET_SETS,
    LORA_TARGETS_FIELD,
    TORCHTUNE_DORA_FIELD,
    LoraTarget,
    parse_targets,
)
from profiling._config_optimizers import OPTIMIZERS, PAGED_FIELD, Optimizer, OptimizerSpec
from profiling._config_plan import CHECKPOINT_EVERY_FIELD, PipelineSchedule, check_plan, is_plan
from profiling._config_sentences import flag_name, one_sentence
from profiling._config_shape import check_heads, check_model, model_workload
from profiling._config_shape import hand_workload as _hand_workload
from profiling.errors import ConfigError
from profiling.units import parse_count

if TYPE_CHECKING:
    from profiling.models.config import WorkloadConfig

Precision = Literal["fp32", "amp-bf16", "amp-fp16", "mixed", "bf16"]
Checkpointing = Literal["none", "selective", "selective-op", "full"]
Attention = Literal["eager", "sdpa", "flash"]
Arch = Literal["gpt2", "llama"]
Target = Literal["cuda", "cpu"]

# The one default precision (CLI, Python API, agent tools and docs take it from here): fp32, what
# PyTorch trains in when code asks for nothing else; a trace or measurement runs the user's code
# as written, and an estimate without --precision describes that step (docs/profiling.md).
DEFAULT_PRECISION = "fp32"

PRECISIONS: dict[str, str] = {
    "fp32": "fp32 everything (4 B weights, 4 B gradients, fp32 optimizer state)",
    "amp-bf16": "torch.autocast(bf16) over fp32 parameters: fp32 weights, gradients and state, "
    "16-bit matmuls (autocast caches 16-bit weight copies for backward)",
    "amp-fp16": "torch.autocast(fp16) over fp32 parameters, with a GradScaler",
    "mixed": "16-bit weights and gradients, fp32 master weights and optimizer state "
    "(Megatron, DeepSpeed, FSDP MixedPrecisionPolicy): 2 + 2 + 12 B/param with Adam",
    "bf16": "pure bf16: weights, gradients and optimizer state all 16-bit",
}


# The settings each command honours where not all (CLI flags and tool fields come from these).
FIT_FIELDS = (
    "model", "params", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "arch", "seq",
    "optimizer", "gpus", "gpu", "gpu_mem", "mfu", "attention", "target", "counter",
    "expandable_segments",
)  # fmt: skip
# What a real run on this machine can honour (profile, MemoryProfile).
PROFILE_FIELDS = (
    "model", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "batch", "seq",
    "precision", "fp32_grads", "optimizer", "foreach", "grads_kept", "zero", "fsdp",
    "checkpointing", "compile",
)  # fmt: skip

# Upper bounds that catch typos (a seq of 10^12) before they become nonsense arithmetic.
MAX_PARAMS = 10**15
MAX_SEQ = 10**8
MAX_BATCH = 10**7
MAX_GPUS = 10**6
MAX_GPU_MEM_GB = 10**5
MAX_TOKENS = 10**18


def _positive_int(maximum: int, description: str, default: int | None = None) -> Any:
    return Field(default, ge=1, le=maximum, description=description)


class TrainingConfig(BaseModel):
    """One training workload. Build it with :meth:`parse` for one-sentence errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=False)

    def __init__(self, **data: Any) -> None:
        # Direct construction (library callers, tests) also gets one sentence, naming fields.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            error = one_sentence(exc, "field", type(self).model_fields)
            error.validation = exc  # parse() re-words it with CLI flags
            raise error from None

    # ---- what is trained
    model: str | None = Field(
        None,
        description="A reference model (gpt2-small, gpt2-medium, gpt2-large, gpt2-xl, "
        "llama-1b, llama-7b; tiny-gpt2, tiny-llama for tests), a Hugging Face config "
        "(hf:NAME from the shipped catalogue, e.g. hf:llama-3.1-8b, or hf:PATH to a "
        "config.json or model folder) or a factory 'package.module:function' returning "
        "(module, inputs).",
    )
    params: int | None = Field(
        None,
        ge=1,
        le=MAX_PARAMS,
        description='Parameter count when no model: 7000000000, 7e9, "7B", "124M".',
    )
    layers: int | None = _positive_int(10**5, "Transformer layers L (with params).")
    hidden: int | None = _positive_int(10**7, "Hidden size h.")
    heads: int | None = _positive_int(10**5, "Attention heads a.")
    kv_heads: int | None = _positive_int(10**5, "Key/value heads (grouped-query attention).")
    ffn: int | None = _positive_int(10**8, "MLP inner size (default 4h for gpt2, 8h/3 llama).")
    vocab: int | None = _positive_int(10**8, "Vocabulary size V.")
    arch: Arch | None = Field(
        None, description="Block type for a shape given by hand: gpt2 (GELU, LayerNorm) or llama."
    )
    # ---- on what
    batch: int = _positive_int(MAX_BATCH, "Micro-batch per GPU.", 1)
    seq: int | None = _positive_int(MAX_SEQ, "Sequence length (default: the model's, ≤ 2048).")
    target_seq: int | None = behaviours.TARGET_SEQ_FIELD
    # ---- how
    precision: Precision = Field(
        DEFAULT_PRECISION,
        description="fp32 | amp-bf16 / amp-fp16 (torch.autocast over fp32 parameters) | mixed "
        "(16-bit weights and gradients + fp32 master and optimizer state) | bf16 (pure).",
    )
    fp32_grads: bool = Field(
        False, description="mixed: also an fp32 gradient copy (DeepSpeed's 18 B/param)."
    )
    optimizer: Optimizer = Field("adamw", description="The optimizer.")
    foreach: bool | None = Field(
        None, description="Multi-tensor optimizer kernels (default: on, off with FSDP)."
    )
    grads_kept: bool = Field(
        False,
        description="zero_grad(set_to_none=False): gradients stay allocated between steps "
        "(PyTorch's default frees them).",
    )
    optimizer_in_bwd: bool = optim.IN_BWD_FIELD
    offload_optimizer: bool = ds.OFFLOAD_OPTIMIZER_FIELD
    deepspeed: bool = ds.DEEPSPEED_FIELD  # DeepSpeed's engine, its settings
    offload_param: bool = ds.OFFLOAD_PARAM_FIELD
    offload_to: ds.OffloadDevice = ds.OFFLOAD_TO_FIELD
    offload_param_to: ds.OffloadDevice | None = ds.OFFLOAD_PARAM_TO_FIELD
    cpu_mem: float | None = ds.CPU_MEM_FIELD
    gpus_per_node: int | None = ds.GPUS_PER_NODE_FIELD
    reduce_bucket_size: ds.Count = ds.REDUCE_BUCKET_FIELD
    prefetch_bucket_size: ds.Count = ds.PREFETCH_BUCKET_FIELD
    param_persistence_threshold: ds.Count = ds.PERSISTENCE_FIELD
    overlap_comm: bool | None = ds.OVERLAP_COMM_FIELD
    sub_group_size: int | None = ds.SUB_GROUP_FIELD
    max_reuse_distance: int | None = ds.REUSE_DISTANCE_FIELD
    offload_ratio: float | None = ds.OFFLOAD_RATIO_FIELD
    grad_accum_dtype: ds.DsDtype = ds.GRAD_ACCUM_DTYPE_FIELD
    comm_dtype: ds.DsDtype = ds.COMM_DTYPE_FIELD
    hf_param_groups: bool = ds.HF_PARAM_GROUPS_FIELD
    ds_fp16: bool = ds.FP16_FIELD
    paged_optimizer: bool = PAGED_FIELD
    torchao_optim: bool = optim.TORCHAO_OPTIM_FIELD
    activation_offload: bool = behaviours.ACTIVATION_OFFLOAD_FIELD
    compile: bool = behaviours.COMPILE_FIELD
    # ---- parallelism
    gpus: int = _positive_int(MAX_GPUS, "Data-parallel GPUs (ranks) N.", 1)
    zero: int = Field(0, ge=0, le=3, description="ZeRO stage 0-3 (sharding over the N GPUs).")
    fsdp: bool = Field(
        False,
        description="Shard with PyTorch FSDP2 (fully_shard): ZeRO-3, or ZeRO-2 style with zero=2.",
    )
    tp: int = _positive_int(4096, "Tensor-parallel degree t (N·t GPUs in all).", 1)
    sequence_parallel: bool = Field(False, description="Sequence parallelism (needs tp > 1).")
    accumulate_unsharded: int | None = behaviours.ACCUMULATE_UNSHARDED_FIELD
    fsdp_flat: bool = behaviours.FSDP_FLAT_FIELD
    ddp_find_unused: bool = DDP_FIND_UNUSED_FIELD
    ddp_bucket_view: bool = DDP_BUCKET_VIEW_FIELD
    # ---- parallel plans (profiling.plans: torchtitan's degrees, every rank's peak)
    dp_shard: int | None = _positive_int(
        MAX_GPUS, "FSDP degree: states sharded over dp_shard × cp ranks (--fsdp --gpus N)."
    )
    dp_replicate: int | None = _positive_int(
        MAX_GPUS, "Replicas of the sharded model (HSDP), or DDP ranks without --dp-shard."
    )
    cp: int = _positive_int(4096, "Context-parallel degree: the sequence split over cp ranks.", 1)
    ulysses: int = f8.ULYSSES_FIELD
    pp: int = _positive_int(4096, "Pipeline-parallel degree: the layers split into stages.", 1)
    pp_schedule: PipelineSchedule = Field(
        "1f1b", description="The pipeline schedule: 1f1b | interleaved | zbv (torch's)."
    )
    microbatches: int | None = f8.MICROBATCHES_FIELD
    virtual_stages: int | None = f8.VIRTUAL_STAGES_FIELD
    pp_keeps_outputs: bool = f8.PP_KEEPS_OUTPUTS_FIELD
    float8: f8.Float8Recipe | None = f8.FLOAT8_FIELD
    float8_all_gather: bool = f8.FLOAT8_ALL_GATHER_FIELD
    async_tp: bool = f8.ASYNC_TP_FIELD
    reshard_always: bool = f8.RESHARD_ALWAYS_FIELD
    titan_root_group: bool = f8.TITAN_ROOT_GROUP_FIELD
    # ---- activations
    checkpointing: Checkpointing = Field(
        "none",
        description="Activation checkpointing: none | selective (attention recomputed) | "
        "selective-op (torchtitan's per-op policy, plans) | full (every block recomputed).",
    )
    checkpoint_every: int | None = CHECKPOINT_EVERY_FIELD
    attention: Attention = Field(
        "sdpa", description="eager (saves the s² scores) | sdpa (fused, PyTorch's default) | flash."
    )
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout probability (masks saved).")
    loss: Loss = LOSS_FIELD
    loss_chunks: int | None = LOSS_CHUNKS_FIELD
    dpo: bool = behaviours.DPO_FIELD
    kd_teacher: str | None = behaviours.KD_TEACHER_FIELD
    tied_head: bool | None = behaviours.TIED_HEAD_FIELD  # ---- then the adapters
    lora_rank: int | None = _positive_int(10**5, "Train LoRA adapters of rank R (q, k, v, o).")
    lora_targets: list[LoraTarget] = LORA_TARGETS_FIELD
    lora_dropout: float = LORA_DROPOUT_FIELD
    dora: bool = DORA_FIELD
    torchtune_dora: bool = TORCHTUNE_DORA_FIELD
    autocast_adapters: bool = AUTOCAST_ADAPTERS_FIELD
    qlora: bool = Field(False, description="4-bit NF4 base weights (needs lora_rank).")
    bnb_keeps_inputs: bool = BNB_KEEPS_FIELD
    double_quant: bool | None = DOUBLE_QUANT_FIELD
    fabric_bnb: bool = FABRIC_BNB_FIELD
    torchao_nf4: bool = behaviours.TORCHAO_NF4_FIELD
    litgpt_norm: bool = behaviours.LITGPT_NORM_FIELD
    litgpt_uncapped: bool = behaviours.LITGPT_UNCAPPED_FIELD  # ---- then the GPU
    target: Target = Field(
        "cuda",
        description="The device whose kernels decide what is kept for backward: cuda (fused "
        "RMSNorm, fp32 LayerNorm statistics, 1-byte dropout masks, flash / memory-efficient "
        "attention as an H100/H200 picks them) or cpu.",
    )
    counter: Counter = COUNTER_FIELD
    expandable_segments: bool = EXPANDABLE_FIELD
    gpu: str | None = Field(
        None,
        description="A GPU from the table (a100-40gb, a100-80gb, h100-sxm, h100-pcie, h100-nvl, "
        "h200, b200, a10, a10g, l4, l40s, rtx-4090, rtx-3090): memory, and time at the stated MFU.",
    )
    gpu_mem: float | None = Field(
        None,
        gt=0,
        le=MAX_GPU_MEM_GB,
        description="GPU memory in GB (10^9 B) for ✅/⚠️/❌ (default: the gpu's datasheet).",
    )
    mfu: float = Field(
        0.4, gt=0, le=1, description="Model FLOPs utilization for time estimates (0-1)."
    )
    tokens: int | None = Field(
        None, ge=1, le=MAX_TOKENS, description="Tokens to train on: total time at that MFU."
    )

    # ------------------------------------------------------------------ validation

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        data = {k: v for k, v in data.items() if not (k in LEGACY and v is None)}
        return map_legacy(data)

    @field_validator(
        "params", "tokens", "reduce_bucket_size", "prefetch_bucket_size",
        "param_persistence_threshold", "sub_group_size", "max_reuse_distance", mode="before",
    )  # fmt: skip
    @classmethod
    def _count(cls, value: Any) -> Any:
        if value is None or isinstance(value, bool) or value == "auto":  # "auto": ds.Count
            return value
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be a finite number")
        try:
            return parse_count(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("lora_targets", mode="before")
    @classmethod
    def _targets(cls, value: Any) -> Any:
        return parse_targets(value)

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from profiling.gpus import find_gpu

        return find_gpu(value).key

    @model_validator(mode="after")
    def _coherent(self) -> TrainingConfig:
        check_model(self)  # named, by --params or by hand; shape flags beside a name
        if self.lora_rank is None and (
            self.lora_dropout or self.dora or self.lora_targets != LORA_DEFAULT
        ):
            field = "lora_dropout" if self.lora_dropout else "dora" if self.dora else "lora_targets"
            raise ConfigError(f"{flag_name(field)} needs --lora-rank R", field)
        if self.fp32_grads and self.precision != "mixed":
            raise ConfigError(
                f"--fp32-grads is DeepSpeed's extra gradient copy under --precision mixed; "
                f"with {self.precision} the gradients already have one dtype",
                "fp32_grads",
            )
        check_plan(self)
        if self.sequence_parallel and self.tp == 1:
            raise ConfigError("--sequence-parallel needs --tp > 1", "sequence_parallel")
        if self.fsdp and self.zero == 1:
            raise ConfigError(
                "FSDP2 has no ZeRO-1 mode: use --zero 2 (gathered parameters kept, ZeRO-2 "
                "style) or --zero 3",
                "zero",
            )
        if self.fsdp and self.zero == 0:
            self.zero = 3  # fully_shard's default: reshard after forward
        check_heads(self)  # --kv-heads divides --heads, --heads --hidden
        check_behaviours(self)
        ds.check_deepspeed(self)
        self._check_seq()
        return self

    hand_workload = _hand_workload  # the shape given by hand (--layers --hidden …), or None

    def _workload(self) -> WorkloadConfig | None:
        """The model's shape (a reference model or a Hugging Face config) with the shape flags
        given beside it, None for a factory."""
        return model_workload(self)

    def _check_seq(self) -> None:
        w = self._workload()
        if no := behaviours.model_check(w, self):
            raise ConfigError(*no)
        if w is not None and self.seq is not None and self.seq > w.max_seq:
            raise ConfigError(
                f"--seq {self.seq} exceeds {w.name}'s maximum of {w.max_seq}; use --seq ≤ "
                f"{w.max_seq}",
                "seq",
            )

    @classmethod
    def parse(cls, style: Literal["flag", "field"] = "flag", **values: Any) -> TrainingConfig:
        """Validate ``values``; a problem becomes one :class:`ConfigError` sentence.

        ``style="flag"`` names settings as CLI flags (``--seq``), ``"field"`` as keywords /
        tool fields (``seq``).
        """
        try:
            return cls(**values)
        except ConfigError as exc:
            if exc.validation is None:
                raise
            raise one_sentence(exc.validation, style, cls.model_fields) from None

    # ------------------------------------------------------------------ derived

    @property
    def is_factory(self) -> bool:
        return self.model is not None and ":" in self.model and not self.is_hf

    @property
    def is_hf(self) -> bool:
        """A Hugging Face config: ``hf:NAME`` (shipped) or ``hf:PATH`` (a config.json)."""
        return self.model is not None and self.model.startswith("hf:")

    @property
    def compute_dtype(self) -> Literal["fp32", "bf16", "fp16"]:
        """The dtype the matmuls run in."""
        names: dict[str, Literal["fp32", "bf16", "fp16"]] = {"fp32": "fp32", "amp-fp16": "fp16"}
        return names.get(self.precision, "bf16")

    @property
    def dtype(self) -> Literal["fp32", "bf16", "fp16"]:
        """The compute dtype (the older ``--dtype`` name of it)."""
        return self.compute_dtype

    @property
    def param_dtype(self) -> Literal["fp32", "bf16", "fp16"]:
        """The dtype the model's parameters are built in: 16-bit for bf16 and mixed (whose fp32
        master copy lives in the optimizer), fp32 for FSDP mixed (fp32 shards, 16-bit gathers)."""
        if self.precision == "bf16" or (self.precision == "mixed" and not self.fsdp):
            return "bf16"
        return "fp32"

    @property
    def autocast(self) -> bool:
        return self.precision in ("amp-bf16", "amp-fp16")

    @property
    def sharded(self) -> bool:
        """Whether ZeRO/FSDP shards anything: stage ≥ 1 over more than one GPU."""
        return self.gpus > 1 and self.zero >= 1

    @property
    def reshard_after_forward(self) -> bool:
        """FSDP: free gathered parameters after forward (ZeRO-3); False keeps them (ZeRO-2)."""
        return self.zero != 2

    @property
    def world_size(self) -> int:
        return self.gpus

    def seq_or_default(self, factory: Callable[..., object] | None = None) -> int:
        """The sequence length: given; else the reference model's (≤ 2048); for a factory
        (``package.module:function``, or ``factory``) its ``seq`` parameter's default; else 512."""
        if self.seq is not None:
            return self.seq
        if factory is not None or self.is_factory:
            from profiling.models.signature import default_seq

            own = default_seq(self.model or "", factory)
            if own is not None:
                return own
        w = self._workload()
        return min(w.max_seq, 2048) if w is not None else 512 if self.is_factory else 2048

    gpu_spec = _gpu_spec  # the --gpu's datasheet entry, or None
    gpu_mem_bytes = _gpu_mem_bytes  # --gpu-mem, else the --gpu's datasheet memory

    describe = _describe  # 'llama-7b, mixed adamw, 2 GPUs, ZeRO-2, seq 2048 × batch 1, …'

    @property
    def is_plan(self) -> bool:
        """A parallel plan (pipeline, context, --dp-shard / --dp-replicate): per rank."""
        return is_plan(self)


def parse_config(style: Literal["flag", "field"] = "flag", **values: Any) -> TrainingConfig:
    """:meth:`TrainingConfig.parse` as a function."""
    return TrainingConfig.parse(style=style, **values)


__all__ = [
    "DEFAULT_PRECISION", "FIT_FIELDS", "LEGACY", "LORA_DEFAULT", "LORA_TARGET_SETS", "OPTIMIZERS",
    "PRECISIONS", "PROFILE_FIELDS", "Attention", "Checkpointing", "ConfigError", "LoraTarget",
    "OptimizerSpec", "Precision", "Target", "TrainingConfig", "flag_name", "parse_config",
]  # fmt: skip
