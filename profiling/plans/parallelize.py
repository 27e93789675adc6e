"""A stage of the model parallelized as torchtitan parallelizes it, on the plan's mesh.

``torchtitan/models/llama3/infra/parallelize.py``, step by step, with torch's own APIs:

- tensor parallelism (``apply_tp``): the embedding row-wise with sequence-sharded output, the
  final norm sequence-parallel, the output column-wise with the loss parallel (vocabulary-sharded
  logits); in each block both norms sequence-parallel, the attention's and the feed-forward's
  input gathered once (``PrepareModuleInput``), ``wq wk wv w1 w3`` column-wise, ``wo w2``
  row-wise with sequence-sharded output;
- activation checkpointing (``apply_ac``): ``full`` wraps every block; ``selective`` recomputes
  the attention (Megatron's); ``selective-op`` wraps every block under torchtitan's per-op
  policy (``profiling.plans.op_sac``);
- FSDP2 (``apply_fsdp``) over ``dp_replicate × dp_shard × cp`` (× ``ulysses``: DeepSpeed's
  ZeRO shards over its sequence-data-parallel group) (HSDP when replicated): the
  embedding, each block, the final norm with the output together, and the stage's root; with
  pipeline parallelism nothing is resharded after forward (its ``default`` policy), and the
  norm and output only under its ``always`` policy (``--reshard-always``). Its groups before
  83e6941 (``--titan-root-group``, ``profiling.plans.root_group``): each block, the last not
  resharded after forward, and the root holding the embedding, norm and output.

Imports torch.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import torch
from torch import nn

from profiling.config import TrainingConfig

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from profiling.plans.titan import Transformer


def apply_tp(model: Transformer, tp_mesh: DeviceMesh, float8_tp: bool = False) -> None:
    """torchtitan's ``apply_tp``; ``float8_tp`` its ``enable_float8_tensorwise_tp`` (Float8
    tensorwise: torchao's ``Float8ColwiseParallel``, ``Float8RowwiseParallel`` and
    ``PrepareFloat8ModuleInput`` for the blocks, which cast the sequence-sharded input to fp8
    before its all-gather; the rowwise recipes keep torch's styles, gathering in bf16)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    colwise: type = ColwiseParallel
    rowwise: type = RowwiseParallel
    prepare: type = PrepareModuleInput
    if float8_tp:
        from profiling.plans.float8 import tp_styles

        colwise, rowwise, prepare = tp_styles()

    plan: dict[str, object] = {}
    if model.tok_embeddings is not None:
        plan["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1))
    if model.norm is not None:
        plan["norm"] = SequenceParallel()
    if model.output is not None:
        plan["output"] = ColwiseParallel(
            input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False
        )
    if plan:
        parallelize_module(model, tp_mesh, plan)  # type: ignore[arg-type]  # torch's own styles
    for block in model.layers.values():
        parallelize_module(
            block,
            tp_mesh,
            {
                "attention_norm": SequenceParallel(),
                "attention": prepare(
                    input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)
                ),
                "attention.wq": colwise(),
                "attention.wk": colwise(),
                "attention.wv": colwise(),
                "attention.wo": rowwise(output_layouts=Shard(1)),
                "ffn_norm": SequenceParallel(),
                "feed_forward": prepare(
                    input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)
                ),
                "feed_forward.w1": colwise(),
                "feed_forward.w2": rowwise(output_layouts=Shard(1)),
                "feed_forward.w3": colwise(),
            },
        )


def apply_ac(
    model: Transformer,
    mode: str,
    target: str | None,
    only: list[bool] | None = None,
    compiled: bool = False,
) -> int:
    """Checkpoint each block (``full``), its attention (``selective``) or each block under
    torchtitan's per-op policy (``selective-op``: ``profiling.plans.op_sac``): non-reentrant,
    the recomputation under the target's kernel rules; ``only`` the blocks it marks
    (torchtitan's every N-th block: ``Stage.checkpointed``); ``compiled``: the policy alone,
    as torch.compile of the checkpointed block takes it. Returns the blocks wrapped."""
    import contextlib

    from torch.utils.checkpoint import checkpoint

    extra: dict[str, object] = {}
    if target is not None and not compiled:
        from profiling.trace.target import kernels

        extra["context_fn"] = lambda: (contextlib.nullcontext(), kernels(target))
    if compiled and mode != "selective-op":
        # a plain checkpoint under torch.compile: Dynamo's tag_activation_checkpoint runs it as
        # selective checkpointing whose policy always prefers recomputation (torch's own
        # _always_prefer_recompute); the partitioner then keeps the region's inputs alone
        from torch._higher_order_ops.wrap import _always_prefer_recompute
        from torch.utils.checkpoint import create_selective_checkpoint_contexts

        # torchtitan's ptd_checkpoint_wrapper(..., preserve_rng_state=False)
        extra = {"context_fn": functools.partial(create_selective_checkpoint_contexts,
                                                 _always_prefer_recompute),
                 "preserve_rng_state": False}  # fmt: skip
    if mode == "selective-op":
        from profiling.plans.op_sac import op_sac_context_fn

        # torchtitan's ptd_checkpoint_wrapper(..., preserve_rng_state=False)
        # compiled: torch.compile takes the policy's two modes alone (its partitioner, not
        # the trace's kernel rules, decides the recomputation)
        extra = {"context_fn": op_sac_context_fn(None if compiled else target),
                 "preserve_rng_state": False}  # fmt: skip
    wrapped = 0
    for j, block in enumerate(model.layers.values()):
        if only is not None and not only[j]:
            continue
        part: nn.Module = block if mode != "selective" else block.attention  # type: ignore[assignment]
        part.forward = functools.partial(checkpoint, part.forward, use_reentrant=False, **extra)
        wrapped += 1
    return wrapped


def apply_fsdp(
    model: Transformer, dp_mesh: DeviceMesh, cfg: TrainingConfig, pipelined: bool
) -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from profiling.trace.fake_world import lazy_shards

    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if cfg.precision == "mixed"
        else MixedPrecisionPolicy()
    )
    # torchtitan's get_fsdp_reshard_after_forward_policy: "always" reshards under a pipeline too
    reshard = (not pipelined and cfg.reshard_after_forward) or cfg.reshard_always
    if not pipelined and cfg.titan_root_group:  # torchtitan before 83e6941 (root_group)
        with lazy_shards():
            last = len(model.layers) - 1
            for i, block in enumerate(model.layers.values()):
                fully_shard(block, mesh=dp_mesh, mp_policy=policy,
                            reshard_after_forward=reshard and i < last)  # fmt: skip
            fully_shard(model, mesh=dp_mesh, mp_policy=policy, reshard_after_forward=False)
        return
    with lazy_shards():
        if model.tok_embeddings is not None:
            fully_shard(model.tok_embeddings, mesh=dp_mesh, mp_policy=policy,
                        reshard_after_forward=reshard)  # fmt: skip
        for block in model.layers.values():
            fully_shard(block, mesh=dp_mesh, mp_policy=policy, reshard_after_forward=reshard)
        if model.norm is not None and model.output is not None:
            # resharded only under torchtitan's "always" (apply_fsdp_to_decoder:
            # reshard_after_forward=policy == "always"), with a pipeline or without
            fully_shard([model.norm, model.output], mesh=dp_mesh, mp_policy=policy,
                        reshard_after_forward=cfg.reshard_always)  # fmt: skip
        fully_shard(model, mesh=dp_mesh, mp_policy=policy)


def dp_mesh_of(mesh: DeviceMesh, names: tuple[str, ...]) -> DeviceMesh | None:
    """The mesh FSDP shards over: (dp_replicate,) dp_shard and cp (and Ulysses' ranks)
    flattened as torchtitan's ``dp_shard_cp`` (None when none shards)."""
    present = [n for n in ("dp_replicate", "dp_shard", "cp", "ulysses") if n in names]
    shard = [n for n in present if n != "dp_replicate"]
    if not shard:
        return None
    flat = mesh[tuple(shard)]._flatten("dp_shard_cp") if len(shard) > 1 else mesh[shard[0]]
    if "dp_replicate" in present:
        from torch.distributed.device_mesh import DeviceMesh

        return DeviceMesh._concatenate([mesh["dp_replicate"], flat])  # type: ignore[attr-defined]  # torch's private concatenation, as FSDP2 itself uses it
    return flat


__all__ = ["apply_ac", "apply_fsdp", "apply_tp", "dp_mesh_of"]
