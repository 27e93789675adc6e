"""The configuration of a training workload: ONE model for estimate, trace, profile and fit.

``TrainingConfig`` says what is trained (a reference model, a ``package.module:factory``, or a
parameter count and shape), on what (batch, sequence), how (precision, optimizer, parallelism,
checkpointing, attention kernel, LoRA/QLoRA, optimizer-state offload) and on which GPU. The CLI
flags, their help, and the agent tools' JSON schemas are generated from these fields, so a
choice added here appears everywhere at once.

Bad input becomes one :class:`ConfigError` sentence naming the flag (``--seq``) or the field
(``seq``) and the valid choices. Older spellings keep working, mapped as documented in
``LEGACY`` (``--dtype bf16`` is ``--precision amp-bf16``, ``--recompute`` is
``--checkpointing``, ``--world-size`` is ``--gpus`` …).

No torch here: configurations are validated in microseconds anywhere.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from profiling.errors import ProfilingError
from profiling.units import parse_count

Precision = Literal["fp32", "amp-bf16", "amp-fp16", "mixed", "bf16"]
Checkpointing = Literal["none", "selective", "full"]
Attention = Literal["eager", "sdpa", "flash"]
Arch = Literal["gpt2", "llama"]
Target = Literal["cuda", "cpu"]

PRECISIONS: dict[str, str] = {
    "fp32": "fp32 everything (4 B weights, 4 B gradients, fp32 optimizer state)",
    "amp-bf16": "torch.autocast(bf16) over fp32 parameters: fp32 weights, gradients and state, "
    "16-bit matmuls (autocast caches 16-bit weight copies for backward)",
    "amp-fp16": "torch.autocast(fp16) over fp32 parameters, with a GradScaler",
    "mixed": "16-bit weights and gradients, fp32 master weights and optimizer state "
    "(Megatron, DeepSpeed, FSDP MixedPrecisionPolicy): 2 + 2 + 12 B/param with Adam",
    "bf16": "pure bf16: weights, gradients and optimizer state all 16-bit",
}


class OptimizerSpec(BaseModel):
    """One optimizer: the per-parameter state it keeps and whether torch ships it."""

    model_config = ConfigDict(frozen=True)

    name: str
    states: tuple[str, ...]  # one full-size tensor per parameter each (adafactor: factored)
    in_torch: bool  # torch.optim has it, so a trace can run it
    note: str = ""


OPTIMIZERS: dict[str, OptimizerSpec] = {
    o.name: o
    for o in (
        OptimizerSpec(name="adamw", states=("momentum", "variance"), in_torch=True),
        OptimizerSpec(name="adam", states=("momentum", "variance"), in_torch=True),
        OptimizerSpec(name="sgd", states=("momentum",), in_torch=True, note="momentum 0.9"),
        OptimizerSpec(name="sgd-nomomentum", states=(), in_torch=True),
        OptimizerSpec(name="adagrad", states=("sum of squares",), in_torch=True),
        OptimizerSpec(name="rmsprop", states=("square average",), in_torch=True),
        OptimizerSpec(name="lion", states=("momentum",), in_torch=False, note="lion-pytorch"),
        OptimizerSpec(
            name="adam8bit",
            states=("momentum (8-bit)", "variance (8-bit)"),
            in_torch=False,
            note="bitsandbytes, needs a GPU",
        ),
        OptimizerSpec(
            name="adafactor",
            states=("factored variance",),
            in_torch=False,
            note="β1 = None: one row and one column vector per matrix",
        ),
    )
}
Optimizer = Literal[
    "adamw", "adam", "sgd", "sgd-nomomentum", "adagrad", "rmsprop", "lion", "adam8bit", "adafactor"
]
assert set(get_args(Optimizer)) == set(OPTIMIZERS)  # one list: the Literal mirrors the table

# Upper bounds that catch typos (a seq of 10^12) before they become nonsense arithmetic.
MAX_PARAMS = 10**15
MAX_SEQ = 10**8
MAX_BATCH = 10**7
MAX_GPUS = 10**6
MAX_GPU_MEM_GB = 10**5
MAX_TOKENS = 10**18

# Older spellings -> what they mean now (CLI flags and keyword arguments alike).
LEGACY: dict[str, str] = {
    "dtype": "--dtype fp32|bf16|fp16 (autocast dtype) -> --precision fp32|amp-bf16|amp-fp16 "
    "(with --fsdp, --dtype bf16 was FSDP's MixedPrecisionPolicy: --precision mixed)",
    "param_dtype": "--param-dtype bf16 (pure bf16 parameters) -> --precision bf16",
    "recompute": "--recompute none|selective|full -> --checkpointing none|selective|full",
    "flash_attention": "--flash-attention -> --attention flash",
    "world_size": "--world-size N -> --gpus N",
    "no_reshard": "--no-reshard (FSDP keeps gathered parameters) -> --zero 2",
    "reshard_after_forward": "reshard_after_forward=False -> zero=2 (True -> zero=3)",
    "gpu_mem_gb": "gpu_mem_gb=G (keyword) -> gpu_mem=G",
}


class ConfigError(ProfilingError):
    """A configuration the tools cannot run; ``field`` names the offending setting."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.validation: ValidationError | None = None


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
            error = _one_sentence(exc, "field")
            error.validation = exc  # parse() re-words it with CLI flags
            raise error from None

    # ---- what is trained
    model: str | None = Field(
        None,
        description="A reference model (gpt2-small, gpt2-medium, gpt2-large, gpt2-xl, "
        "llama-1b, llama-7b; tiny-gpt2, tiny-llama for tests) or a factory "
        "'package.module:function' returning (module, inputs).",
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
    # ---- how
    precision: Precision = Field(
        "fp32",
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
    offload_optimizer: bool = Field(
        False, description="Optimizer state and master weights in CPU memory (ZeRO-Offload)."
    )
    # ---- parallelism
    gpus: int = _positive_int(MAX_GPUS, "Data-parallel GPUs (ranks) N.", 1)
    zero: int = Field(0, ge=0, le=3, description="ZeRO stage 0-3 (sharding over the N GPUs).")
    fsdp: bool = Field(
        False,
        description="Shard with PyTorch FSDP2 (fully_shard): ZeRO-3, or ZeRO-2 style with zero=2.",
    )
    tp: int = _positive_int(4096, "Tensor-parallel degree t (N·t GPUs in all).", 1)
    sequence_parallel: bool = Field(False, description="Sequence parallelism (needs tp > 1).")
    # ---- activations
    checkpointing: Checkpointing = Field(
        "none",
        description="Activation checkpointing: none | selective (attention recomputed) | full "
        "(every block recomputed in backward).",
    )
    attention: Attention = Field(
        "sdpa",
        description="eager (saves the s² scores) | sdpa (fused, PyTorch's default) | flash.",
    )
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout probability (masks saved).")
    # ---- adapters
    lora_rank: int | None = _positive_int(10**5, "Train LoRA adapters of rank R (q, k, v, o).")
    qlora: bool = Field(False, description="4-bit NF4 base weights (needs lora_rank).")
    # ---- the GPU
    target: Target = Field(
        "cuda",
        description="The device whose kernels decide what is kept for backward: cuda (fused "
        "RMSNorm, fp32 LayerNorm statistics, 1-byte dropout masks, flash / memory-efficient "
        "attention as an H100/H200 picks them) or cpu.",
    )
    gpu: str | None = Field(
        None,
        description="A GPU from the table (a100-40gb, a100-80gb, h100-sxm, h100-pcie, h200, "
        "b200, l4, l40s, rtx-4090, rtx-3090): memory, and time at the stated MFU.",
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
    def _legacy(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = {k: v for k, v in data.items() if not (k in LEGACY and v is None)}
        return _map_legacy(data)

    @field_validator("params", "tokens", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be a finite number")
        try:
            return parse_count(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from profiling.gpus import find_gpu

        return find_gpu(value).key

    @model_validator(mode="after")
    def _coherent(self) -> TrainingConfig:
        from profiling.models.workloads import WORKLOADS

        if self.model is None and self.params is None:
            raise ConfigError("give --model NAME or --params N (e.g. --params 7e9)", "model")
        if self.model is not None and ":" not in self.model and self.model not in WORKLOADS:
            raise ConfigError(
                f"unknown model {self.model!r}; use one of {', '.join(WORKLOADS)}, "
                "'package.module:function', or --params N --layers L --hidden H --heads A "
                "--vocab V",
                "model",
            )
        if self.qlora and self.lora_rank is None:
            raise ConfigError("--qlora needs --lora-rank R", "qlora")
        if self.fp32_grads and self.precision != "mixed":
            raise ConfigError(
                f"--fp32-grads is DeepSpeed's extra gradient copy under --precision mixed; "
                f"with {self.precision} the gradients already have one dtype",
                "fp32_grads",
            )
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
        if self.kv_heads and self.heads and self.heads % self.kv_heads:
            raise ConfigError(
                f"--kv-heads {self.kv_heads} must divide --heads {self.heads}", "kv_heads"
            )
        if self.hidden and self.heads and self.hidden % self.heads:
            raise ConfigError(
                f"--hidden {self.hidden} must divide by --heads {self.heads}", "heads"
            )
        self._check_seq()
        return self

    def _check_seq(self) -> None:
        from profiling.models.workloads import WORKLOADS

        w = WORKLOADS.get(self.model or "")
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
            raise _one_sentence(exc.validation, style) from None

    # ------------------------------------------------------------------ derived

    @property
    def is_factory(self) -> bool:
        return self.model is not None and ":" in self.model

    @property
    def compute_dtype(self) -> Literal["fp32", "bf16", "fp16"]:
        """The dtype the matmuls run in."""
        return {"fp32": "fp32", "amp-fp16": "fp16"}.get(self.precision, "bf16")  # type: ignore[return-value]

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

    def seq_or_default(self) -> int:
        """The sequence length: given, else the reference model's (≤ 2048), else 512."""
        if self.seq is not None:
            return self.seq
        from profiling.models.workloads import WORKLOADS

        w = WORKLOADS.get(self.model or "")
        return min(w.max_seq, 2048) if w is not None else 512 if self.is_factory else 2048

    def gpu_spec(self) -> Any:
        if self.gpu is None:
            return None
        from profiling.gpus import GPUS

        return GPUS[self.gpu]

    def gpu_mem_bytes(self) -> int | None:
        """The GPU memory to judge against: --gpu-mem, else the --gpu's datasheet memory."""
        if self.gpu_mem is not None:
            return int(self.gpu_mem * 1e9)
        spec = self.gpu_spec()
        return int(spec.memory_gb * 1e9) if spec is not None else None

    def describe(self) -> str:
        """A short human description: 'llama-7b, mixed adamw, 2 GPUs, ZeRO-2, seq 2048 × 1'."""
        from profiling.units import fmt_count

        name = self.model or f"{fmt_count(self.params or 0)} parameters"
        parts = [name, f"{self.precision} {self.optimizer}"]
        if self.lora_rank:
            parts.append(f"{'QLoRA' if self.qlora else 'LoRA'} r={self.lora_rank}")
        parts.append(f"{self.gpus} GPU" + ("s" if self.gpus > 1 else ""))
        if self.zero:
            parts.append(("FSDP2 " if self.fsdp else "") + f"ZeRO-{self.zero}")
        if self.tp > 1:
            parts.append(f"TP={self.tp}" + (" + SP" if self.sequence_parallel else ""))
        parts.append(f"seq {self.seq_or_default()} × batch {self.batch}")
        if self.checkpointing != "none":
            parts.append(f"{self.checkpointing} checkpointing")
        if self.attention != "sdpa":
            parts.append(f"{self.attention} attention")
        if self.offload_optimizer:
            parts.append("optimizer offloaded to CPU")
        parts.append(f"target {self.target}")
        return ", ".join(parts)


# --------------------------------------------------------------------- legacy spellings


def _legacy_precision(dtype: Any, param_dtype: Any, fsdp: bool) -> str | None:
    """The precision the trace's old ``--dtype`` / ``--param-dtype`` pair meant."""
    if param_dtype not in (None, "fp32"):
        if param_dtype != "bf16":
            raise ConfigError(
                f"--param-dtype {param_dtype} (pure {param_dtype} training) is not offered; use "
                "--precision bf16 or --precision amp-fp16",
                "precision",
            )
        return "bf16"
    if dtype is None:
        return "fp32" if param_dtype == "fp32" else None
    mapping = {"fp32": "fp32", "bf16": "amp-bf16", "fp16": "amp-fp16"}
    if dtype not in mapping:
        raise ConfigError(f"--dtype must be one of fp32, bf16, fp16 (got {dtype!r})", "dtype")
    # With FSDP, --dtype bf16 meant FSDP's MixedPrecisionPolicy: 16-bit gathers, fp32 shards.
    return "mixed" if fsdp and dtype != "fp32" else mapping[dtype]


# Older keyword -> (today's field, how its value maps).
_RENAMES: dict[str, tuple[str, Any]] = {
    "recompute": ("checkpointing", lambda v: v),
    "flash_attention": ("attention", lambda v: "flash" if v else None),
    "world_size": ("gpus", lambda v: v),
    "gpu_mem_gb": ("gpu_mem", lambda v: v),
    "no_reshard": ("zero", lambda v: 2 if v else None),
    "reshard_after_forward": ("zero", lambda v: 3 if v else 2),
}


def _map_legacy(data: dict[str, Any]) -> dict[str, Any]:
    """Rewrite older keywords (see ``LEGACY``) into today's fields, refusing contradictions."""
    out = dict(data)

    def take(old: str, new: str, value: Any) -> None:
        if new in data and data[new] != value:
            raise ConfigError(
                f"{_flag(old)} {data.get(old)} means {_flag(new)} {value}, but {_flag(new)} "
                f"{data[new]} was given too; give {_flag(new)} only",
                new,
            )
        out[new] = value

    dtype, param_dtype = out.pop("dtype", None), out.pop("param_dtype", None)
    precision = _legacy_precision(dtype, param_dtype, bool(out.get("fsdp")))
    if precision is not None:
        old = "param_dtype" if param_dtype not in (None, "fp32") else "dtype"
        if old in data:
            take(old, "precision", precision)
        else:  # only --param-dtype fp32: the default precision, unless one was given
            out.setdefault("precision", precision)
    if isinstance(out.get("checkpointing"), bool):  # the trace's old boolean flag
        out["checkpointing"] = "full" if out["checkpointing"] else "none"
    for old, (new, convert) in _RENAMES.items():
        if old not in out:
            continue
        value = convert(out.pop(old))
        if value is None:
            continue
        if new == "zero":
            out["fsdp"] = True  # resharding is FSDP's switch
        take(old, new, value)
    return out


# --------------------------------------------------------------------- error sentences


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _flag(field: str) -> str:
    return flag_name(field)


def _choices(field: str) -> str | None:
    info = TrainingConfig.model_fields.get(field)
    if info is None:
        return None
    args = [a for a in get_args(info.annotation) if a is not type(None)]
    for arg in args:
        literals = get_args(arg)
        if literals and all(isinstance(v, str) for v in literals):
            return ", ".join(literals)
    literals = get_args(info.annotation)
    if literals and all(isinstance(v, str) for v in literals):
        return ", ".join(literals)
    return None


def _one_sentence(exc: ValidationError, style: str) -> ConfigError:
    problems: list[str] = []
    first_field = None
    for err in exc.errors():
        loc = [str(p) for p in err["loc"] if not isinstance(p, int)]
        field = loc[0] if loc else None
        original = (err.get("ctx") or {}).get("error")
        if isinstance(original, ConfigError) and original.field:
            field = original.field
        first_field = first_field or field
        name = (flag_name(field) if style == "flag" else field) if field else None
        problems.append(_problem(err, field, name))
    return _restyle(ConfigError("; ".join(problems), first_field), style)


def _problem(err: Any, field: str | None, name: str | None) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    got = err.get("input")
    msg = str(err["msg"]).removeprefix("Value error, ")
    original = ctx.get("error")
    if isinstance(original, ProfilingError):  # our own sentence, raised in a validator
        return str(original)
    if name is None:
        return msg
    if kind == "extra_forbidden":
        known = ", ".join(TrainingConfig.model_fields)
        return f"unknown setting {field!r}; the settings are {known}"
    if kind in ("literal_error", "enum"):
        choices = _choices(field or "") or ctx.get("expected")
        return f"unknown {(field or '').replace('_', ' ')} {got!r}; {name} takes {choices}"
    if kind == "greater_than_equal":
        return f"{name} must be at least {ctx['ge']} (got {got})"
    if kind == "greater_than":
        return f"{name} must be greater than {ctx['gt']} (got {got})"
    if kind == "less_than_equal":
        return f"{name} must be at most {ctx['le']:,} (got {got}); is it a typo?"
    if kind == "less_than":
        return f"{name} must be below {ctx['lt']} (got {got})"
    if kind == "finite_number":
        return f"{name} must be a finite number (got {got})"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{name} must be a whole number (got {got!r})"
    if kind in ("float_parsing", "float_type"):
        return f"{name} must be a number (got {got!r})"
    if kind in ("bool_parsing", "bool_type"):
        return f"{name} must be true or false (got {got!r})"
    return f"{name} {msg}" if msg.startswith("must") else f"{name}: {msg}"


def _restyle(exc: ConfigError, style: str) -> ConfigError:
    if style == "flag" or exc.field is None:
        return exc
    text = str(exc)
    # Longest first, so --gpus is not read as --gpu + s.
    for field in sorted([*TrainingConfig.model_fields, *LEGACY], key=lambda f: -len(flag_name(f))):
        text = re.sub(re.escape(flag_name(field)) + r"(?![\w-])", field, text)
    return ConfigError(text, exc.field)


def parse_config(style: Literal["flag", "field"] = "flag", **values: Any) -> TrainingConfig:
    """:meth:`TrainingConfig.parse` as a function."""
    return TrainingConfig.parse(style=style, **values)


__all__ = [
    "LEGACY",
    "OPTIMIZERS",
    "PRECISIONS",
    "Attention",
    "Checkpointing",
    "ConfigError",
    "OptimizerSpec",
    "Precision",
    "Target",
    "TrainingConfig",
    "flag_name",
    "parse_config",
]
