"""What keeps a trace within its time bound (:mod:`profiling.time_bound`) besides the bound.

**Checkpoints at every torch call.** While a trace runs under a bound, :class:`Checkpoints` (a
``TorchFunctionMode``) passes :func:`~profiling.time_bound.checkpoint` at every torch function
the step calls (about 15,000 for GPT-2 small): the trace stops at the first call after its
deadline, where an exception is like any failing torch call and every mode, lock and process
group is put back on the way out.

**Torch's own state comes back whatever stops the trace.** A stop is an exception at a torch
call, and some torch calls run inside a ``with``'s exit (the profiler's ``record_function``
around ``optimizer.step`` leaves it through a torch op): a stop there skips the rest of that
exit — and torch's optimizer wrapper turned gradients off for the step and turns them back on
after it. So checkpoints skip the profiler's bookkeeping ops, and :func:`torch_state_kept`
puts back what a stop anywhere (``SIGALRM`` included) can leave behind: gradient mode, the
default dtype, autocast, and the function and dispatch modes pushed since. Without it a fit
stopped by its bound left gradients off for the rest of the process (the MCP server's, a
test worker's): every later trace said "element 0 of tensors does not require grad".

**One trace at a time.** Tracing touches process-global state (the default dtype, the process
group, dispatch modes): hosts that run tools on threads trace one at a time, and the wait for
another thread's trace counts against the bound (:func:`one_trace_at_a_time`).

**A world size the trace cannot shard in the time it has is refused before it starts.**
FSDP2's ``fully_shard`` splits every parameter into one shard per rank, and under fake tensors
each shard is a Python object made by the fake-tensor dispatch: the cost grows with the number
of parameters times the world size (``--gpus 2048`` on GPT-2 small, 148 parameters: 87 s on a
loaded 2-core machine; ``--gpus 1000000`` would take days). Before each model is sharded,
:func:`refuse_unshardable` measures what one shard costs here (a ``torch.chunk`` of a fake
tensor into as many pieces as there are ranks, up to 256) and refuses, in one sentence, a world
size whose sharding alone cannot end before the trace's time bound
(:func:`profiling.time_bound.remaining`). The measure is a lower bound (FSDP makes each shard
twice, and a shard costs more the more there are), so what is refused could never have been
traced in time; what is not refused may still run out of time, and is then stopped by the bound.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from profiling.errors import ProfilingError
from profiling.time_bound import checkpoint, remaining

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

SAMPLE_PIECES = 256  # shards made to time one (a few ms)
CHUNKS_PER_PARAMETER = 2  # fully_shard chunks each parameter at least twice (param, metadata)
MEASURED_FROM = 64  # below this many ranks sharding takes well under a second
_TRACE_LOCK = threading.Lock()


class Checkpoints(TorchFunctionMode):
    """A stop point of the time bound before every torch function (see the module)."""

    def __torch_function__(
        self,
        func: Callable[..., object],
        types: object,
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        if not _bookkeeping(func):
            checkpoint()
        return func(*args, **(kwargs or {}))


def _bookkeeping(func: Callable[..., object]) -> bool:
    """Whether ``func`` is the profiler's bookkeeping, called from a ``with``'s exit."""
    return getattr(func, "namespace", None) == "profiler"


_AUTOCAST_DEVICES = ("cpu", "cuda")


@contextlib.contextmanager
def torch_state_kept() -> Iterator[None]:
    """Put back torch's thread-local state on the way out, however the block ended."""
    from torch.utils._python_dispatch import _pop_mode

    grad = torch.is_grad_enabled()
    dtype = torch.get_default_dtype()
    autocast = {d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d))
                for d in _AUTOCAST_DEVICES}  # fmt: skip
    functions = torch._C._len_torch_function_stack()
    dispatches = torch._C._len_torch_dispatch_stack()
    try:
        yield
    finally:
        while torch._C._len_torch_function_stack() > functions:
            torch._C._pop_torch_function_stack()
        while torch._C._len_torch_dispatch_stack() > dispatches:
            _pop_mode()
        for device, (enabled, cast) in autocast.items():
            torch.set_autocast_enabled(device, enabled)
            torch.set_autocast_dtype(device, cast)
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)


def checked_progress(progress: Callable[[str], None] | None) -> Callable[[str], None]:
    """``progress``, with each stage said also a checkpoint of the time bound."""

    def say(stage: str) -> None:
        checkpoint()
        if progress is not None:
            progress(stage)

    return say


@contextlib.contextmanager
def one_trace_at_a_time(config: TrainingConfig) -> Iterator[None]:
    """Hold the trace lock (the wait counts against the time bound: a thread's stop cannot
    interrupt a wait in C, so the wait itself is bounded); torch's state is kept around it."""
    left = remaining()
    if not _TRACE_LOCK.acquire(timeout=-1 if left is None else left):
        raise ProfilingError(
            f"the trace of {config.model} could not start: another trace held this process "
            "for its whole time bound; try again when it ends, or give it a longer timeout"
        )
    try:
        with torch_state_kept():  # however the trace ends, torch is left as it was
            yield
    finally:
        _TRACE_LOCK.release()


def seconds_per_shard(pieces: int) -> float:
    """What making one shard of a parameter costs in the current (fake) mode, in seconds."""
    k = max(1, min(pieces, SAMPLE_PIECES))
    sample = torch.empty(k, 4)
    best = float("inf")
    for _ in range(3):  # the first call fills the fake-tensor dispatch cache, as FSDP's do
        start = time.perf_counter()
        torch.chunk(sample, k)
        best = min(best, time.perf_counter() - start)
    return best / k


def refuse_unshardable(model: nn.Module, world_size: int) -> None:
    """Raise a ProfilingError when sharding ``model`` over ``world_size`` fake ranks cannot end
    within the time bound around the trace (nothing is refused without a bound)."""
    left = remaining()
    if left is None or world_size < MEASURED_FROM:
        return
    parameters = sum(1 for _ in model.parameters())
    per_rank = parameters * CHUNKS_PER_PARAMETER * seconds_per_shard(world_size)
    needed = per_rank * world_size
    if needed <= left:
        return
    most = max(1, int(left / per_rank))
    raise ProfilingError(
        f"FSDP over {world_size:,} ranks cannot be traced in the {left:.0f} s left: splitting "
        f"the model's {parameters:,} parameters into {world_size:,} shards each takes at "
        f"least {_duration(needed)} here; trace at most about {most:,} ranks (--gpus), "
        "estimate this world size instead (journal-agent estimate), or give it a longer timeout"
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


__all__ = [
    "Checkpoints",
    "checked_progress",
    "one_trace_at_a_time",
    "refuse_unshardable",
    "seconds_per_shard",
    "torch_state_kept",
]
