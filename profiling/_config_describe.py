"""A configuration in a few words, for titles and tables: ``TrainingConfig.describe``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from profiling._config_deepspeed import describe_deepspeed
from profiling._config_lora import LORA_DEFAULT
from profiling._config_plan import TrainingConfig as PlanFields
from profiling._config_plan import describe_plan
from profiling.models.shape_overrides import titled
from profiling.units import fmt_count


class TrainingConfig(PlanFields, Protocol):
    """The fields a description reads (a protocol: ``config`` imports this module)."""

    @property
    def model(self) -> str | None: ...
    @property
    def params(self) -> int | None: ...
    @property
    def precision(self) -> str: ...
    @property
    def optimizer(self) -> str: ...
    @property
    def lora_rank(self) -> int | None: ...
    @property
    def lora_targets(self) -> Sequence[str]: ...
    @property
    def lora_dropout(self) -> float: ...
    @property
    def qlora(self) -> bool: ...
    @property
    def double_quant(self) -> bool | None: ...
    @property
    def paged_optimizer(self) -> bool: ...
    @property
    def checkpointing(self) -> str: ...
    @property
    def checkpoint_every(self) -> int | None: ...
    @property
    def offload_optimizer(self) -> bool: ...
    @property
    def float8_all_gather(self) -> bool: ...
    @property
    def async_tp(self) -> bool: ...
    @property
    def deepspeed(self) -> bool: ...
    @property
    def target(self) -> str: ...
    @property
    def is_plan(self) -> bool: ...
    @property
    def loss(self) -> str: ...
    @property
    def loss_chunks(self) -> int | None: ...


def describe_lora(cfg: TrainingConfig) -> str:
    """'QLoRA r=16 on q,v dropout 0.05' (a configuration with ``lora_rank``)."""
    lora = f"{'QLoRA' if cfg.qlora else 'LoRA'}{' + DoRA' * bool(getattr(cfg, 'dora', False))}"
    lora += f" r={cfg.lora_rank}"
    if cfg.qlora and cfg.double_quant is False:
        lora += " (no double quantization)"
    if cfg.lora_targets != LORA_DEFAULT:
        lora += " on " + ",".join(cfg.lora_targets)
    if cfg.lora_dropout:
        lora += f" dropout {cfg.lora_dropout:g}"
    return lora


def describe_step_kind(cfg: TrainingConfig) -> list[str]:
    """What changes the step beyond model, shape, precision and optimizer: LoRA, the loss and
    attention when not the default, DPO, distillation, compile, the optimizer in backward,
    offloads — for a trace's or a run's title, which must not read as plain full training."""
    parts = [describe_lora(cfg)] if cfg.lora_rank else []
    get = getattr  # fields ``describe`` does not read (the protocol names what it does)
    if cfg.attention != "sdpa":
        parts.append(f"{cfg.attention} attention")
    if cfg.loss != "cross-entropy":
        chunks = f" × {cfg.loss_chunks}" if cfg.loss_chunks else ""
        parts.append(f"{cfg.loss} loss{chunks}")
    if get(cfg, "dpo", False):
        parts.append("torchtune's DPO step")
    if teacher := get(cfg, "kd_teacher", None):
        parts.append(f"distilled from {teacher}")
    if get(cfg, "compile", False):
        parts.append("torch.compile")
    if get(cfg, "optimizer_in_bwd", False):
        parts.append("optimizer in backward")
    if get(cfg, "activation_offload", False):
        parts.append("activations offloaded")
    if cfg.offload_optimizer:
        parts.append("optimizer offloaded to CPU")
    return parts


def describe(cfg: TrainingConfig, searched: str | None = None) -> str:
    """'llama-7b, mixed adamw, 2 GPUs, ZeRO-2, seq 2048 × batch 1, target cuda'; a plan names
    its degrees instead of the GPU count ('FSDP 8 × TP 8 × PP 8 (1f1b, 32 microbatches)').
    ``searched`` ('seq' or 'batch'): the dimension a search sets, left out of the title, whose
    own value (the input's) would read as the answer."""
    # shape flags beside a named model replace its own fields; beside a factory, its arguments
    name = titled(cfg) if cfg.model else f"{fmt_count(cfg.params or 0)} parameters"
    parts = [name, f"{cfg.precision} {'paged ' * cfg.paged_optimizer}{cfg.optimizer}"]
    if cfg.lora_rank:
        parts.append(describe_lora(cfg))
    if cfg.is_plan:
        parts.append(describe_plan(cfg))
    else:
        parts.append(f"{cfg.gpus} GPU" + ("s" if cfg.gpus > 1 else ""))
        if cfg.zero:
            zero = describe_deepspeed(cfg) if cfg.deepspeed else f"ZeRO-{cfg.zero}"
            parts.append(("FSDP2 " if cfg.fsdp else "") + zero)
        if cfg.tp > 1:
            parts.append(f"TP={cfg.tp}" + (" + SP" if cfg.sequence_parallel else ""))
    shape = {"seq": f"seq {cfg.seq_or_default()}", "batch": f"batch {cfg.batch}"}
    parts.append(" × ".join(v for k, v in shape.items() if k != searched))
    if cfg.checkpointing != "none":
        every = cfg.checkpoint_every
        n = f", 1 block in {every}" if every and every > 1 else ""
        parts.append(f"{cfg.checkpointing} checkpointing{n}")
    if cfg.float8:
        parts.append(
            f"Float8 {cfg.float8}" + (" (fp8 all-gather)" if cfg.float8_all_gather else "")
        )
    if cfg.async_tp:
        parts.append("async TP")
    if cfg.attention != "sdpa":
        parts.append(f"{cfg.attention} attention")
    if cfg.loss != "cross-entropy":
        chunks = f" × {cfg.loss_chunks}" if cfg.loss_chunks else ""
        parts.append(f"{cfg.loss} loss{chunks}")
    if cfg.offload_optimizer and cfg.fsdp and not cfg.deepspeed:  # estimate/fsdp_offload
        parts.append("FSDP2's CPU offload (weights, gradients, optimizer)")
    elif cfg.offload_optimizer and not cfg.deepspeed:
        parts.append("optimizer offloaded to CPU")
    parts.append(f"target {cfg.target}")
    return ", ".join(parts)
