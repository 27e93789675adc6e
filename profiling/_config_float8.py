"""A plan's Float8 training and asynchronous tensor parallelism, as ``TrainingConfig`` fields.

- ``float8``: torchao's Float8 training recipe (``Float8LinearConfig.from_recipe_name``):
  ``tensorwise`` (one scale per tensor), ``rowwise`` (one per row, power-of-2 scales) or
  ``rowwise_with_gw_hp`` (rowwise, the weight gradient's matmul in high precision), every
  ``nn.Linear`` of the blocks converted as torchtitan's float8 converter converts them (the
  output projection left out); ``profiling.plans.float8``.
- ``float8_all_gather``: torchtitan's ``enable_fsdp_float8_all_gather`` (torchao's
  ``WeightWithDynamicFloat8CastTensor``): FSDP2 gathers the converted weights in fp8; tensorwise
  only (torchao asserts a dynamic tensorwise weight cast).
- ``async_tp``: torchtitan's ``enable_async_tensor_parallel``: torch's micro-pipelined TP, its
  symmetric-memory workspace outside the caching allocator (``profiling.estimate.comm``).

The field objects live here (with two of the pipeline's and Ulysses' degree, checked in
``profiling._config_plan``) so ``config.py`` stays one line each.
No torch here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from profiling.errors import ConfigError

Float8Recipe = Literal["tensorwise", "rowwise", "rowwise_with_gw_hp"]
FLOAT8_RECIPES: dict[str, str] = {
    "tensorwise": "one fp32 scale per tensor (torchao's default recipe)",
    "rowwise": "one scale per row, rounded to a power of 2",
    "rowwise_with_gw_hp": "rowwise; the weight gradient's matmul in high precision",
}

# Two of the pipeline's fields, here so config.py stays within its lines.
MICROBATCHES_FIELD: Any = Field(
    None,
    ge=1,
    le=10**7,  # config.MAX_BATCH
    description="Microbatches per step: a pipeline's (default: the batch), else gradient "
    "accumulation.",
)
VIRTUAL_STAGES_FIELD: Any = Field(
    None,
    ge=1,
    le=64,
    description="Stages per pipeline rank (default 1 for 1f1b, 2 for interleaved and zbv).",
)
FLOAT8_FIELD: Any = Field(
    None,
    description="Float8 training as torchao runs it, on a plan: tensorwise | rowwise | "
    "rowwise_with_gw_hp (every Linear of the blocks; torchtitan's converter).",
)
FLOAT8_ALL_GATHER_FIELD: Any = Field(
    False,
    description="FSDP gathers the Float8 Linears' weights in fp8 (tensorwise; torchtitan's "
    "enable_fsdp_float8_all_gather).",
)
RESHARD_ALWAYS_FIELD: Any = Field(
    False,
    description="torchtitan's fsdp_reshard_after_forward 'always': the final norm and output "
    "resharded after forward too, and under a pipeline every group after each microbatch's "
    "forward (its default keeps them gathered; 'never' is --zero 2).",
)
# torch 2.6's PipelineStage.forward_one_chunk appends every stage's output to output_chunks,
# cleared at the next step's start, and the schedule's step merges the last stage's; torch 2.10
# (pytorch/pytorch#165822) added step(return_outputs=False), which torchtitan passes since
# e5ef99a: profiling.plans.profile.compose has the sources.
PP_KEEPS_OUTPUTS_FIELD: Any = Field(
    False,
    description="A pipeline as torch 2.6 and earlier runs it (torchtitan's 2024 benchmarks): "
    "each stage keeps every microbatch's output until the next step, the last stage's merged "
    "at the step's end.",
)
TITAN_ROOT_GROUP_FIELD: Any = Field(
    False,
    description="Plans without a pipeline: torchtitan's FSDP groups before July 2025 (83e6941) "
    "— the embedding, final norm and output in the root's group, gathered from forward's "
    "start to backward's end, and the last block not resharded after forward.",
)
ULYSSES_FIELD: Any = Field(
    1,
    ge=1,
    le=4096,
    description="Ulysses sequence-parallel degree (DeepSpeed's sequence_parallel_size): the "
    "sequence split over N ranks, all-to-all to heads around attention.",
)
ASYNC_TP_FIELD: Any = Field(
    False,
    description="Asynchronous TP (torchtitan's enable_async_tensor_parallel): its "
    "symmetric-memory workspace in nvidia-smi's count.",
)


def check_float8(cfg: Any, plan: bool) -> None:
    """One sentence for a setting torchao or torchtitan would refuse."""
    if cfg.float8 is not None:
        if not plan:
            raise ConfigError(
                "--float8 is torchao's Float8 training in torchtitan's step, run on a parallel "
                "plan: give its degrees (--dp-shard N, or --fsdp --gpus N; --dp-shard 1 on one "
                "GPU)",
                "float8",
            )
        if cfg.precision not in ("mixed", "bf16"):
            raise ConfigError(
                f"--float8 casts bf16 activations and weights: give --precision mixed or bf16, "
                f"not {cfg.precision}",
                "float8",
            )
    if cfg.float8_all_gather and cfg.float8 != "tensorwise":
        raise ConfigError(
            "--float8-all-gather gathers weights with one scale per tensor: it needs --float8 "
            "tensorwise (torchao's rule)",
            "float8_all_gather",
        )
    if cfg.float8_all_gather and not cfg.fsdp:
        raise ConfigError(
            "--float8-all-gather is FSDP's all-gather in fp8: give --dp-shard N > 1",
            "float8_all_gather",
        )
    if cfg.pp_keeps_outputs and cfg.pp < 2:
        raise ConfigError(
            "--pp-keeps-outputs is a pipeline's stages' (torch 2.6's): give --pp 2 or more",
            "pp_keeps_outputs",
        )
    if cfg.async_tp and cfg.tp < 2:
        raise ConfigError(
            "--async-tp overlaps tensor parallelism's collectives with its matmuls: it needs "
            "--tp 2 or more",
            "async_tp",
        )


__all__ = [
    "ASYNC_TP_FIELD", "FLOAT8_ALL_GATHER_FIELD", "FLOAT8_FIELD", "FLOAT8_RECIPES",
    "MICROBATCHES_FIELD", "PP_KEEPS_OUTPUTS_FIELD", "RESHARD_ALWAYS_FIELD",
    "TITAN_ROOT_GROUP_FIELD", "ULYSSES_FIELD",
    "VIRTUAL_STAGES_FIELD",
    "Float8Recipe", "check_float8",
]  # fmt: skip
