"""The estimate's count of what a compiled block keeps for backward: the same partitioner
(``profiling.trace.compiled``) on two blocks of the model as the trace builds it, on fake
tensors, cached per configuration. Imports torch."""

from __future__ import annotations

import functools

from torch._subclasses.fake_tensor import FakeTensorMode

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.trace.build import _block_list, _build
from profiling.trace.compiled import CompiledBlock, Partition, Saved, saved_by
from profiling.trace.graph_walk import Recomputed, param_grads, recomputed


def block_saved(config: TrainingConfig) -> tuple[Saved, Saved]:
    """(the first block's, every other block's) bytes kept for backward under torch.compile,
    from the partitioner on a two-block copy of the model on fake tensors (cached per
    configuration: the search of ``fit --max-seq`` partitions once per length it tries). A
    block's activations are the same on one GPU as under ZeRO or FSDP: one GPU's is built."""
    first, rest = _blocks(_key(config))
    return first[0], rest[0]


def block_recomputed(config: TrainingConfig) -> tuple[Recomputed, Recomputed]:
    """(the first block's, every other block's) graphs run again in backward under full
    checkpointing — the forward graph recomputing what it saves, then the backward graph —
    walked op by op (``graph_walk.recomputed``), from the same partitions as ``block_saved``."""
    first, rest = _blocks(_key(config))
    return first[1], rest[1]


def block_grads(config: TrainingConfig) -> tuple[int, int]:
    """(the first block's, every other block's) parameters' gradients as their backward graphs
    return them (``graph_walk.param_grads``), from the same partitions as ``block_saved``."""
    first, rest = _blocks(_key(config))
    return first[2], rest[2]


def _key(config: TrainingConfig) -> str:
    small = config.model_copy(
        update={"checkpointing": "none", "compile": True, "optimizer_in_bwd": False,
                "activation_offload": False, "seq": config.seq_or_default(), "fsdp": False,
                "gpus": 1, "zero": 0, "deepspeed": False}
    )  # fmt: skip
    return small.model_dump_json()


def _counts(part: Partition, state: int) -> tuple[Saved, Recomputed, int]:
    return saved_by(part, state), recomputed(part), param_grads(part, state)


_Counts = tuple[Saved, Recomputed, int]


@functools.lru_cache(maxsize=32)
def _blocks(key: str) -> tuple[_Counts, _Counts]:
    config = TrainingConfig.model_validate_json(key)
    with FakeTensorMode(allow_non_fake_inputs=False):
        model, _, _, _ = _build(config, None, None, [], layers=2)
        blocks = _block_list(model)
        assert blocks is not None, "compile_model refuses a model without blocks"
        parts = [b.forward.last for b in blocks if isinstance(b.forward, CompiledBlock)]
    if len(parts) != 2 or None in parts:
        raise ProfilingError("torch.compile's partitioner saw no block of this model")
    first, rest = (_counts(*p) for p in parts if p is not None)
    return first, rest
