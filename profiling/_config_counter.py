"""The counter fields of ``profiling.config``: which memory counter a user reads beside the
allocated peak, and the caching allocator's setting that changes it
(``profiling.estimate.counters`` predicts them). No torch here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

Counter = Literal["allocated", "reserved", "nvml"]

COUNTER_FIELD: Any = Field(
    "allocated",
    description="The memory counter to predict beside the allocated peak: allocated "
    "(max_memory_allocated: the step's tensors), reserved (max_memory_reserved: the "
    "caching allocator's segments, cached blocks included) or nvml (what nvidia-smi shows: "
    "reserved + the CUDA context + NCCL's buffers).",
)
EXPANDABLE_FIELD: Any = Field(
    False,
    description="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the caching allocator "
    "grows one segment per pool and stream by pages (2 MiB small, 20 MiB large) instead of "
    "cudaMalloc'ing 20 MiB / 2 MiB-rounded segments (less reserved memory).",
)

__all__ = ["COUNTER_FIELD", "EXPANDABLE_FIELD", "Counter"]
