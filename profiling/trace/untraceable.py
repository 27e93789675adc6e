"""What of a configuration the trace cannot reproduce: each problem says what to use instead.

Light (no torch): ``fit`` asks it of every candidate before tracing the best, and the trace's
``_traceable`` (profiling.trace.build) refuses with its sentences.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.models.shape_overrides import workload_of


def untraceable(config: TrainingConfig) -> list[str]:
    """What of the configuration a trace cannot reproduce (each says what to use instead)."""
    problems = []
    if config.model is None:
        problems.append("a --model (a reference name or package.module:factory), not --params")
    if config.lora_rank is not None:
        from profiling.trace.lora import lora_problem

        workload = None if config.is_factory else workload_of(config)
        arch = workload.arch if workload is not None else None
        problem = lora_problem(config, arch, workload is not None and workload.moe)
        if problem:
            problems.append(problem)
    if config.tp > 1:
        problems.append("no tensor parallelism (--tp 1)")
    if config.offload_optimizer and config.fsdp:  # no host memory under fake tensors
        problems.append(
            "no --offload-optimizer under --fsdp (FSDP2's CPU offload is estimated, not traced: "
            "its host memory too)"
        )
    elif config.offload_optimizer:
        problems.append("optimizer state on the GPU (no --offload-optimizer)")
    if config.activation_offload:  # no host memory nor copy stream under fake tensors
        problems.append("no --activation-offload (estimated only: the estimate models it)")
    if config.deepspeed:
        problems.append(
            "no --deepspeed (DeepSpeed's engine is estimated in closed form; the trace runs "
            "ZeRO as FSDP2: leave out --deepspeed)"
        )
    problems += _zero_alone(config)
    if config.optimizer_in_bwd and (config.fsdp or config.sharded):
        problems.append("one GPU for --optimizer-in-bwd (no ZeRO/FSDP)")
    if config.checkpointing == "selective" and config.compile:  # trace.selective: eager blocks
        problems.append("no --compile with --checkpointing selective (estimated only)")
    if (config.optimizer == "adam8bit" or config.paged_optimizer) and config.sharded:
        problems.append("one GPU for bitsandbytes' optimizers (no ZeRO/FSDP)")
    if config.optimizer == "adafactor" and config.sharded:
        problems.append("one GPU for Adafactor (its row and column means of sharded tensors)")
    if (config.attention == "eager" or config.dropout) and config.is_factory:
        problems.append(
            "--attention sdpa and no --dropout with a factory (your model runs its own "
            "attention and dropout; the flags set the reference models')"
        )
    return problems


def _zero_alone(config: TrainingConfig) -> list[str]:
    """ZeRO-1 and ZeRO-2 without --fsdp: runtimes FSDP2, which the trace runs, has no mode for."""
    if not config.sharded or config.fsdp:
        return []
    if config.zero == 1:
        # The trace runs ZeRO as FSDP2 (fully_shard), whose only choice is reshard_after_forward:
        # parameters and gradients are always sharded (ZeRO-2/3); no mode shards the optimizer
        # state alone, so a ZeRO-1 trace would be another configuration's numbers.
        return ["--zero 2 or 3 (FSDP2 has no ZeRO-1 mode: ZeRO-1 is estimated only)"]
    if config.zero == 2:
        # --zero 2 alone is the ZeRO paper's stage 2 (and DeepSpeed's): every rank keeps the
        # whole weights, 2Ψ + 14Ψ/N under mixed. FSDP2 shards the weights at any policy
        # (reshard_after_forward=False only keeps a group's all-gather output from its forward
        # to its backward: FSDPParamGroup.post_forward, torch 2.13 _fsdp_param_group.py), so a
        # trace of it would be --fsdp --zero 2's numbers beside this estimate (0.786 of it on
        # 16 tokens, parameters 2.00x: audit3 D28). DeepSpeed's engine does not run on fake
        # tensors: estimated only, as ZeRO-1.
        return [
            "--fsdp with --zero 2 (FSDP2 without resharding; --zero 2 alone is the ZeRO paper's "
            "stage 2, every rank's weights whole, which FSDP2 has no mode for: it is estimated "
            "only)"
        ]
    return []
