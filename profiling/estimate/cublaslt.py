"""cuBLASLt's workspaces: what a linear *with a bias* leaves allocated beside cuBLAS's.

PyTorch runs ``addmm`` with a 1-D bias (``F.linear`` with a bias, 2-D or flattened 3-D input;
GPT-2's ``Conv1D``) through cuBLASLt's ``gemm_and_bias`` in fp32, fp16 and bf16
(aten/src/ATen/native/cuda/Blas.cpp, ``isInputCompliesAddmmCudaLt``), which takes its workspace
from ``getCUDABlasLtWorkspace()``: one per cuBLAS handle and stream — a handle per thread — of
``CUBLASLT_WORKSPACE_SIZE``, 1,024 KiB by default, allocated through the caching allocator and
kept (aten/src/ATen/cuda/CublasHandlePool.cpp at pytorch/pytorch 26a39059ec58; the workspace is
cuBLAS's own only with ``TORCH_CUBLASLT_UNIFIED_WORKSPACE=1``). Measured on an H200 (torch
2.11, CUDA 13.0; benchmarks/results/gpu-probe-nvidia-h200-2026-11-30.json): a bf16 linear with a
bias keeps 1,048,576 B beyond its tensors and cuBLAS's 32 MiB, again on another thread; its
backward (``mm`` and a sum) keeps none. A training step runs its forward on one thread and
backward on the autograd engine's, which runs a forward again only when checkpointing recomputes
blocks there. It is 1 MiB, the small pool's largest request: a 2 MiB segment of its own when no
cached small block holds it. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

LT_WORKSPACE = 1024 * 1024  # CUBLASLT_WORKSPACE_SIZE's default, 1,024 KiB


def biased_linears(cfg: TrainingConfig) -> bool:
    """Whether the step runs a linear with a bias: GPT-2, BERT-style encoders and ViT, GPT-NeoX,
    Phi, Falcon and BLOOM's biased linears, Qwen2's q/k/v; T5 and Llama-style models have none.
    A model not in the catalogue (a factory, ``--params`` alone) is counted as having one."""
    from profiling.models.shape_overrides import workload_of

    w = workload_of(cfg) if cfg.model else None
    if w is None:
        return True
    if w.arch == "t5":
        return False
    return w.arch in ("gpt2", "encoder") or w.linear_bias or w.qkv_bias or w.head_bias


def lt_workspaces(cfg: TrainingConfig) -> list[int]:
    """cuBLASLt's workspaces the step keeps: forward's thread, and the autograd thread's when
    checkpointing runs the forward again there; none without a biased linear."""
    if not biased_linears(cfg):
        return []
    return [LT_WORKSPACE] * (1 if cfg.checkpointing == "none" else 2)


__all__ = ["LT_WORKSPACE", "biased_linears", "lt_workspaces"]
