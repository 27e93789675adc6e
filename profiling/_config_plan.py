"""A parallel plan's settings, checked: torchtitan's degrees and the pipeline's schedule.

A plan runs ``dp_replicate × dp_shard × cp × ulysses × tp × pp`` GPUs (torchtitan's
``data_parallel_replicate_degree``, ``data_parallel_shard_degree``, ``context_parallel_degree``,
``tensor_parallel_degree``, ``pipeline_parallel_degree``; ``ulysses`` is DeepSpeed's
``sequence_parallel_size``, which torchtitan has not). The older flags stay what they were:
``--gpus N`` is the data-parallel degree (``--fsdp --gpus N`` is ``--dp-shard N``), so a plan's
``gpus`` is ``dp_shard × dp_replicate`` and the world is ``gpus × cp × ulysses × tp × pp``.

Each check is one sentence naming the flag and what to give instead (the schedules' rules are
torch's own: ``torch.distributed.pipelining.schedules``). No torch here.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import Field

from profiling.errors import ConfigError

PipelineSchedule = Literal["1f1b", "interleaved", "zbv"]
PP_SCHEDULES: dict[str, str] = {
    "1f1b": "one forward, one backward (torch's Schedule1F1B): one stage per rank",
    "interleaved": "interleaved 1F1B (ScheduleInterleaved1F1B): several stages per rank, looped",
    "zbv": "zero bubble V (ScheduleZBVZeroBubble): two stages per rank in a V, the weight "
    "gradients computed apart",
}
# The stages each pp rank holds when --virtual-stages is not given (torchtitan's defaults).
DEFAULT_VIRTUAL = {"1f1b": 1, "interleaved": 2, "zbv": 2}
DEFAULT_SCHEDULE = "1f1b"  # TrainingConfig.pp_schedule's default
MAX_WORLD = 10**6
CHECKPOINT_EVERY_FIELD: Any = Field(
    None,
    ge=1,
    le=10**4,
    description="With --checkpointing full on a plan: only every N-th block of a rank is "
    'checkpointed, the others keep their activations (torchtitan\'s selective_ac_option = "N").',
)


class TrainingConfig(Protocol):
    """The fields of ``profiling.config.TrainingConfig`` a plan's checks read and fill (a
    protocol: ``config`` imports this module)."""

    gpus: int  # filled: dp_shard × dp_replicate
    fsdp: bool  # filled: dp_shard > 1
    sequence_parallel: bool  # filled: always with tensor parallelism
    microbatches: int | None  # filled: the batch by default
    virtual_stages: int | None  # filled: the schedule's default
    checkpoint_every: int | None
    dp_shard: int | None  # filled: --gpus under FSDP with --checkpointing selective-op

    @property
    def zero(self) -> int: ...
    @property
    def precision(self) -> str: ...
    @property
    def tp(self) -> int: ...
    @property
    def attention(self) -> str: ...
    @property
    def batch(self) -> int: ...
    @property
    def dp_replicate(self) -> int | None: ...
    @property
    def cp(self) -> int: ...
    @property
    def ulysses(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def pp_schedule(self) -> str: ...
    @property
    def checkpointing(self) -> str: ...
    @property
    def float8(self) -> str | None: ...
    @property
    def reshard_always(self) -> bool: ...
    @property
    def titan_root_group(self) -> bool: ...
    @property
    def model_fields_set(self) -> set[str]: ...

    def seq_or_default(self) -> int: ...


def _dp(cfg: TrainingConfig) -> None:
    """dp_shard / dp_replicate set gpus (their product), FSDP (dp_shard > 1) or DDP."""
    if cfg.dp_shard is None and cfg.dp_replicate is None:
        return
    shard, replicate = cfg.dp_shard or 1, cfg.dp_replicate or 1
    dp = shard * replicate
    if "gpus" in cfg.model_fields_set and cfg.gpus not in (1, dp):
        raise ConfigError(
            f"--gpus {cfg.gpus} is the data-parallel degree, which --dp-shard {shard} × "
            f"--dp-replicate {replicate} make {dp}; give one or the other",
            "gpus",
        )
    cfg.gpus = dp
    if shard > 1:
        cfg.fsdp = True
    elif cfg.fsdp and (cfg.cp or 1) > 1:
        pass  # torchtitan's dp_shard_cp with dp_shard 1: FSDP2 over the cp ranks alone
    elif cfg.fsdp or cfg.zero:
        raise ConfigError(
            "--dp-shard 1 shards nothing: --dp-replicate alone is DDP (give --dp-shard N > 1 "
            "to shard with FSDP2, or --cp N > 1 with --fsdp to shard over the cp ranks alone)",
            "dp_shard",
        )


def _accumulation(cfg: TrainingConfig) -> None:
    """--microbatches M on a plan without a pipeline: gradient accumulation, M forward and
    backward passes of batch / M each before one optimizer step, FSDP2 reduce-scattering each
    into the sharded gradients (torchtitan's gradient_accumulation_steps: its train_step calls
    forward_backward_step per microbatch, gradient sync left on; pytorch/torchtitan
    torchtitan/trainer.py at b5bcd76)."""
    m = cfg.microbatches or 1
    if cfg.batch % m:
        raise ConfigError(
            f"--microbatches {m} must divide --batch {cfg.batch} (the batch each data-parallel "
            "rank accumulates over microbatches)",
            "microbatches",
        )


def _pipeline(cfg: TrainingConfig) -> None:
    if cfg.pp == 1:
        if cfg.microbatches is not None and is_plan(cfg):
            _accumulation(cfg)
        for field in ("microbatches", "virtual_stages"):
            if getattr(cfg, field) is not None and (field != "microbatches" or not is_plan(cfg)):
                raise ConfigError(f"--{field.replace('_', '-')} needs --pp > 1", field)
        # A schedule other than the default (a config read back from its own JSON, as the
        # trace's child process and the records do, sets every field: the default is no error).
        if "pp_schedule" in cfg.model_fields_set and cfg.pp_schedule != DEFAULT_SCHEDULE:
            raise ConfigError("--pp-schedule needs --pp > 1", "pp_schedule")
        return
    if cfg.microbatches is None:
        cfg.microbatches = cfg.batch  # torchtitan's pipeline_parallel_microbatch_size = 1
    m = cfg.microbatches
    if cfg.batch % m:
        raise ConfigError(
            f"--microbatches {m} must divide --batch {cfg.batch} (the batch each data-parallel "
            "rank splits into microbatches)",
            "microbatches",
        )
    schedule = cfg.pp_schedule
    v = cfg.virtual_stages or DEFAULT_VIRTUAL[schedule]
    cfg.virtual_stages = v
    if schedule == "1f1b" and v != 1:
        raise ConfigError(
            f"--pp-schedule 1f1b runs one stage per rank (--virtual-stages {v}); use "
            "--pp-schedule interleaved for several",
            "virtual_stages",
        )
    if schedule == "1f1b" and m < cfg.pp:
        raise ConfigError(
            f"1F1B needs at least as many microbatches as stages ({cfg.pp}), as torch's "
            f"Schedule1F1B does; give --microbatches ≥ {cfg.pp} (and --batch a multiple)",
            "microbatches",
        )
    if schedule == "interleaved":
        if v < 2:
            raise ConfigError(
                "--pp-schedule interleaved loops over at least 2 stages per rank "
                "(--virtual-stages ≥ 2)",
                "virtual_stages",
            )
        rounds = max(1, m // cfg.pp)
        if m % rounds:
            raise ConfigError(
                f"interleaved 1F1B runs {m} microbatches in rounds of {cfg.pp} (torch's "
                f"ScheduleInterleaved1F1B): {m} is not a multiple of its {rounds} rounds; use "
                f"a multiple of {cfg.pp}",
                "microbatches",
            )
    if schedule == "zbv" and v != 2:
        raise ConfigError(
            f"--pp-schedule zbv holds exactly 2 stages per rank, not {v}", "virtual_stages"
        )


def _context(cfg: TrainingConfig) -> None:
    if cfg.cp == 1:
        return
    seq = cfg.seq_or_default()
    if seq % (2 * cfg.cp):
        raise ConfigError(
            f"--seq {seq} must divide by 2 · --cp {cfg.cp}: context parallelism gives each "
            "rank two load-balanced chunks of the sequence (torchtitan's rule)",
            "cp",
        )
    if cfg.attention == "eager":
        raise ConfigError(
            "--cp runs ring attention in place of SDPA: give --attention sdpa or flash", "cp"
        )


def _ulysses(cfg: TrainingConfig) -> None:
    """DeepSpeed-Ulysses (``deepspeed.sequence.layer.DistributedAttention``): each of N ranks
    holds 1/N of the sequence outside attention and all heads' worth of it; an all-to-all
    before attention gives each the whole sequence for 1/N of the heads, and one after it
    gives the sequence back. The heads' check needs the model (``profiling.plans.model``)."""
    n = cfg.ulysses
    if n == 1:
        return
    for other, flag, why in (
        (cfg.cp, "--cp", "context parallelism shards the sequence by a ring of keys and values"),
        (cfg.tp, "--tp", "tensor parallelism splits the same heads (Megatron-DeepSpeed runs "
         "Ulysses with a tensor-parallel degree of 1)"),
    ):  # fmt: skip
        if other > 1:
            raise ConfigError(
                f"--ulysses {n} cannot run with {flag} {other}: {why}; give one of them",
                "ulysses",
            )
    seq = cfg.seq_or_default()
    if seq % n:
        raise ConfigError(
            f"--seq {seq} must divide by --ulysses {n}: each rank holds an equal share of the "
            "tokens",
            "ulysses",
        )


def _op_sac(cfg: TrainingConfig) -> None:
    if cfg.checkpointing != "selective-op":
        return
    if not is_plan(cfg):
        raise ConfigError(
            "--checkpointing selective-op is torchtitan's per-op policy, run on a parallel "
            "plan: give its degrees (--dp-shard N, or --fsdp --gpus N; --dp-shard 1 on one "
            "GPU)",
            "checkpointing",
        )
    if cfg.pp > 1 and cfg.pp_schedule == "zbv":
        raise ConfigError(
            "--checkpointing selective-op cannot run under --pp-schedule zbv: torch allows one "
            "backward per selectively checkpointed region and the zero-bubble schedule runs "
            "two (input, then weight); use full checkpointing or another schedule",
            "checkpointing",
        )


def _every(cfg: TrainingConfig) -> None:
    n = cfg.checkpoint_every
    if n is None:
        return
    if cfg.checkpointing != "full":
        raise ConfigError(
            f"--checkpoint-every {n} says which blocks --checkpointing full wraps (1 in {n} of "
            f"a rank's blocks, torchtitan's selective_ac_option = \"{n}\"): give "
            "--checkpointing full with it",
            "checkpoint_every",
        )
    if not is_plan(cfg):
        raise ConfigError(
            f"--checkpoint-every {n} is torchtitan's block-count checkpointing, run on a "
            "parallel plan: give its degrees (--dp-shard N, or --fsdp --gpus N; --dp-shard 1 "
            "on one GPU)",
            "checkpoint_every",
        )


def _reshard(cfg: TrainingConfig) -> None:
    """--reshard-always: torchtitan's "always" policy, modelled on FSDP (under a pipeline every
    group resharded after each microbatch's forward: profiling.plans.always_pp), not beside
    ZBV's split backward or every-N checkpointing (always_pp takes the blocks alike)."""
    zbv = cfg.pp > 1 and (cfg.pp_schedule == "zbv" or cfg.checkpoint_every is not None)
    if cfg.reshard_always and (
        not (cfg.fsdp and is_plan(cfg)) or zbv or cfg.zero == 2 or cfg.ulysses > 1
    ):  # fmt: skip
        raise ConfigError(
            "--reshard-always is torchtitan's fsdp_reshard_after_forward 'always', modelled on "
            "a plan with FSDP (--dp-shard N > 1 or --cp N > 1), not --zero 2, not --ulysses, "
            "and under --pp not with --pp-schedule zbv or --checkpoint-every",
            "reshard_always",
        )
    if cfg.titan_root_group and (cfg.zero == 2 or cfg.reshard_always):
        raise ConfigError(
            "--titan-root-group is torchtitan's FSDP grouping before its reshard policies "
            "(83e6941, July 2025): drop --zero 2 / --reshard-always, or it",
            "titan_root_group",
        )


def check_plan(cfg: TrainingConfig) -> None:
    """Check the plan's settings and fill what follows from them (gpus, FSDP, microbatches,
    stages per rank); a ConfigError sentence otherwise."""
    titan_only = cfg.checkpointing == "selective-op" or cfg.checkpoint_every is not None
    titan_only = titan_only or cfg.float8 is not None or cfg.ulysses > 1
    if titan_only and cfg.fsdp and not is_plan(cfg):
        cfg.dp_shard = cfg.gpus  # --fsdp --gpus N is --dp-shard N: torchtitan's step, a plan
    _dp(cfg)
    _pipeline(cfg)
    _context(cfg)
    _ulysses(cfg)
    _op_sac(cfg)
    _every(cfg)
    _reshard(cfg)
    from profiling._config_float8 import check_float8

    check_float8(cfg, is_plan(cfg))
    if is_plan(cfg) and cfg.tp > 1:
        cfg.sequence_parallel = True  # torchtitan's tensor parallelism is always sequence-parallel
    world = plan_world(cfg)
    if world > MAX_WORLD:
        sp = f" × ulysses {cfg.ulysses}" if cfg.ulysses > 1 else ""
        raise ConfigError(
            f"the plan needs {world:,} GPUs (dp {cfg.gpus} × cp {cfg.cp}{sp} × tp {cfg.tp} × pp "
            f"{cfg.pp}); at most {MAX_WORLD:,}",
            "gpus",
        )


def is_plan(cfg: TrainingConfig) -> bool:
    """Whether the configuration names a plan's degrees (pipeline, context, Ulysses, dp_shard
    or dp_replicate): estimated and traced per rank by ``profiling.plans``."""
    if cfg.pp > 1 or cfg.cp > 1 or cfg.ulysses > 1:
        return True
    return cfg.dp_shard is not None or cfg.dp_replicate is not None


def dp_degrees(cfg: TrainingConfig) -> tuple[int, int]:
    """A plan's (dp_shard, dp_replicate): the flags', or ``--gpus N`` read as the data-parallel
    degree — ``--fsdp --gpus N`` is ``--dp-shard N``, a plain ``--gpus N`` DDP's replicas. The
    one reading for the layout, the communicators and the reserve (a plan given as ``--fsdp
    --gpus 4 --pp 2`` left FSDP's communicator and its gathers out)."""
    replicate = cfg.dp_replicate or (1 if cfg.fsdp else cfg.gpus)
    return cfg.gpus // replicate, replicate


def megatron_mixed(cfg: TrainingConfig) -> bool:
    """``--precision mixed`` beside TP or PP without FSDP (nor CP, nor Ulysses): torchtitan's
    ``maybe_enable_amp`` (torchtitan/distributed/utils.py) turns mixed precision off there
    ("Mixed precision training is disabled": its step is fp32); a plan runs the 16-bit weights
    with an fp32 master copy the user asked for (Megatron's way) and says so in a note."""
    model_parallel = cfg.tp * cfg.pp > 1 and cfg.cp == 1 and cfg.ulysses == 1
    return is_plan(cfg) and cfg.precision == "mixed" and model_parallel and not cfg.fsdp


def ddp_alone(cfg: TrainingConfig) -> bool:
    """A plan of DDP's replicas alone (``--dp-replicate N``, nothing sharded, no other degree):
    torchtitan's ``apply_ddp`` (torch's DistributedDataParallel through ``replicate``), which it
    runs on a one-dimensional mesh only (``parallelize_llama``: "DDP has not supported > 1D
    parallelism")."""
    shard, replicate = dp_degrees(cfg)
    others = cfg.tp * cfg.pp * cfg.cp * cfg.ulysses
    return is_plan(cfg) and replicate > 1 and shard == 1 and not cfg.fsdp and others == 1


def plan_world(cfg: TrainingConfig) -> int:
    """Every GPU of the plan: dp_replicate × dp_shard × cp × ulysses × tp × pp."""
    return cfg.gpus * cfg.cp * cfg.ulysses * cfg.tp * cfg.pp


def describe_plan(cfg: TrainingConfig) -> str:
    """'FSDP 8 × TP 8 × PP 8 (1f1b, 32 microbatches)' — the degrees above 1, in torchtitan's
    mesh order."""
    parts = []
    if (cfg.dp_replicate or 1) > 1:
        parts.append(f"DP-replicate {cfg.dp_replicate}")
    if cfg.fsdp and cfg.gpus // (cfg.dp_replicate or 1) > 1:
        parts.append(f"FSDP {cfg.gpus // (cfg.dp_replicate or 1)}")
    elif cfg.gpus > 1 and cfg.dp_replicate is None:
        parts.append(f"DP {cfg.gpus}")
    if cfg.cp > 1:
        parts.append(f"CP {cfg.cp}")
    if cfg.ulysses > 1:
        parts.append(f"Ulysses {cfg.ulysses}")
    if cfg.tp > 1:
        parts.append(f"TP {cfg.tp}" + ("+SP" if cfg.sequence_parallel else ""))
    if cfg.pp > 1:
        parts.append(f"PP {cfg.pp}")
    text = " × ".join(parts) or "1 GPU"
    if cfg.pp > 1:
        v = cfg.virtual_stages or 1
        stages = f", {v} stages per rank" if v > 1 else ""
        text += f" ({cfg.pp_schedule}, {cfg.microbatches} microbatches{stages})"
    elif (cfg.microbatches or 1) > 1:
        text += f" (gradient accumulation over {cfg.microbatches} microbatches)"
    return text


__all__ = [
    "DEFAULT_VIRTUAL",
    "PP_SCHEDULES",
    "PipelineSchedule",
    "check_plan",
    "ddp_alone",
    "describe_plan",
    "dp_degrees",
    "is_plan",
    "megatron_mixed",
    "plan_world",
]
