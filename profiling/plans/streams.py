"""Which CUDA stream each allocation of a plan's trace is made on.

The caching allocator never shares blocks between streams: a block goes back to the pools of
the stream it was allocated on. FSDP2 makes its collectives' buffers on streams of its own
(torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py): the all-gather's input and output
inside ``device_handle.stream(all_gather_copy_in_stream)``, the reduce-scatter's output —
which the sharded gradients are views of, alive until the optimizer has stepped — inside
``device_handle.stream(reduce_scatter_stream)``; HSDP's all-reduce runs in place on that
output on ``all_reduce_stream`` (nothing allocated there: named all the same).
The trace runs FSDP2's own code on the CPU device, whose ``torch.cpu.stream`` context manager
FSDP2 enters the same way; :func:`fsdp_streams` watches it and names the stream each
allocation happens on, so the replay (``profiling.trace.allocations``) gives each stream its
own segments. Imports torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.trace.allocations import DEFAULT_STREAM

if TYPE_CHECKING:
    from profiling.trace.allocations import AllocationLog, Replay

# FSDPCommContext's streams, as FSDP2 names them, and as reports say them
STREAMS = {
    "all_gather_copy_in_stream": "all-gather copy-in",
    "all_gather_stream": "all-gather",
    "reduce_scatter_stream": "reduce-scatter",
    "all_reduce_stream": "all-reduce",
}


@contextlib.contextmanager
def fsdp_streams() -> Iterator[Callable[[], str]]:
    """While open: a function saying the stream an allocation happens on now (its name in
    :data:`STREAMS`, or the default stream)."""
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPCommContext

    names: dict[int, str] = {}
    stack: list[str] = []
    original_init = FSDPCommContext.lazy_init
    original_stream = torch.cpu.stream

    def lazy_init(self: Any, device: torch.device) -> None:
        original_init(self, device)
        for attr, name in STREAMS.items():
            stream = getattr(self, attr, None)
            if stream is not None:
                names[id(stream)] = name

    @contextlib.contextmanager
    def stream(s: Any) -> Iterator[None]:
        stack.append(names.get(id(s), DEFAULT_STREAM))
        try:
            with original_stream(s):
                yield
        finally:
            stack.pop()

    FSDPCommContext.lazy_init = lazy_init  # type: ignore[method-assign]
    torch.cpu.stream = stream  # type: ignore[assignment]
    try:
        yield lambda: stack[-1] if stack else DEFAULT_STREAM
    finally:
        FSDPCommContext.lazy_init = original_init  # type: ignore[method-assign]
        torch.cpu.stream = original_stream  # type: ignore[assignment]


def replayed(cfg: TrainingConfig, run: Callable[[AllocationLog], object]) -> Replay:
    """The caching allocator's replay of ``run(log)``: run under fake tensors and the trace's
    kernels, every allocation and free logged on the stream it is made on, then replayed
    (``profiling.trace.allocations.replay_of``); a failure under fake tensors said in one
    sentence."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from profiling.trace.allocations import AllocationLog, replay_of
    from profiling.trace.target import kernels

    try:
        with fsdp_streams() as stream_now, FakeTensorMode(allow_non_fake_inputs=False):
            log = AllocationLog(stream_now)
            with kernels(cfg.target):
                run(log)
    except ProfilingError:
        raise
    except Exception as exc:
        from profiling.trace.build import _fake_failure

        raise ProfilingError(_fake_failure(cfg.model, exc)) from None
    replay = replay_of(cfg, log)
    assert replay is not None  # a log was given
    return replay


__all__ = ["STREAMS", "fsdp_streams", "replayed"]
