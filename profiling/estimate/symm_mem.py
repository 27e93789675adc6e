"""Asynchronous tensor parallelism's symmetric-memory workspace: bytes nvidia-smi counts and the
caching allocator does not.

torchtitan's ``enable_async_tensor_parallel`` turns on Inductor's micro-pipeline pass
(``torch._inductor.config._micro_pipeline_tp``) and symmetric memory for the TP group: each
all-gather before a column-wise matmul becomes ``symm_mem.fused_all_gather_matmul`` and each
row-wise matmul before a reduce-scatter ``symm_mem.fused_matmul_reduce_scatter``
(``torch/distributed/_symmetric_memory/__init__.py``). Both exchange their chunks through ONE
workspace per process group (``get_symm_mem_workspace``: kept in
``_group_name_to_workspace_tensor``, re-allocated only when a call asks for more), allocated by
``_SymmetricMemory.empty_strided_p2p`` — the symmetric-memory allocator's own mapping, outside
PyTorch's caching allocator, so ``max_memory_reserved()`` misses it and nvidia-smi shows it.

Its size is the largest request over the step:

- ``_pipelined_all_gather_and_consume`` (the all-gather's matmuls, and the backward's all-gather
  of a row-wise matmul's output gradient) asks for the local shard: ``b · s/t · h · c``;
- ``_pipelined_produce_and_all2all`` (the matmul's reduce-scatter, and the backward's of a
  column-wise matmul's input gradient) asks for two output chunks: ``2 · b · s/t · h · c`` —
  the largest;
- ``_multimem_all_gather_matmul`` (NVLS multicast, only at ``b · s ≤ 2048`` rows) the whole
  gathered input, ``b · s · h · c``;

with ``b`` the microbatch, ``s`` the sequence over context parallelism, ``h`` the hidden size
and ``c`` the compute dtype's bytes; plus the allocation's signal pad
(``_SymmetricMemory.signal_pad_size``, 9,216 B in torch 2.13). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

SIGNAL_PAD = 9216  # torch 2.13's _SymmetricMemory.signal_pad_size (the default)
MULTIMEM_ROWS = 2048  # _should_use_multimem_all_gather_matmul's largest gathered row count


def _dims(cfg: TrainingConfig) -> tuple[int, int, int, int]:
    """(tokens of a microbatch on this CP rank, hidden, compute bytes, tp)."""
    from profiling.estimate.shape import shape_of

    h = int(shape_of(cfg).get("hidden") or 0)
    b = cfg.batch // (cfg.microbatches or 1)
    c = 4 if cfg.compute_dtype == "fp32" else 2
    return b * cfg.seq_or_default() // cfg.cp, h, c, cfg.tp


def symm_mem_bytes(cfg: TrainingConfig) -> int:
    """The workspace on one GPU under ``--async-tp`` (see the module); 0 without it."""
    if not cfg.async_tp or cfg.tp < 2:
        return 0
    tokens, h, c, t = _dims(cfg)
    requests = [tokens // t * h * c, 2 * (tokens // t) * h * c]
    if tokens <= MULTIMEM_ROWS:
        requests.append(tokens * h * c)
    return max(requests) + SIGNAL_PAD


def symm_mem_text(cfg: TrainingConfig) -> str:
    """How the workspace was counted, for the counters' ``how``."""
    tokens, h, c, t = _dims(cfg)
    return (
        f"async TP's symmetric-memory workspace {symm_mem_bytes(cfg) / 2**20:,.1f} MiB "
        f"(2 · b·s/t {tokens // t:,} · h {h:,} · {c} B, fused_matmul_reduce_scatter's two "
        f"chunks, + a {SIGNAL_PAD:,} B signal pad)"
    )


__all__ = ["SIGNAL_PAD", "symm_mem_bytes", "symm_mem_text"]
