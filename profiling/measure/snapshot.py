"""``MemorySnapshot``: what the device says at one moment, with unit helpers.

On CUDA ``current`` is the caching allocator's *allocated* bytes and ``peak`` its peak since
the previous snapshot (peaks are reset at every phase boundary, so each phase has its own);
``reserved``/``active`` and NVML's view sit beside them. On CPU ``current`` is the bytes of
live torch tensors (exact, see :mod:`profiling.measure.live_tensors`) and ``rss`` the process's
resident set. Fields that do not apply to the device are ``None``.
"""

from __future__ import annotations

from typing import Literal

from profiling.measure.backends import Backend, Reading, pick_backend
from profiling.units import GB, GiB

Unit = Literal["B", "KB", "MB", "GB", "KiB", "MiB", "GiB"]
_SCALE: dict[str, float] = {
    "B": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": GB,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": GiB,
}
SnapshotKind = Literal["phase", "step", "point", "oom"]


class MemorySnapshot(Reading):
    """One reading, placed in the run: step, phase, seconds since start, interval length."""

    step: int | None = None
    phase: str | None = None
    at: Literal["phase", "step", "point", "oom"] = "point"
    t: float = 0.0  # seconds since the profiler started (host clock)
    duration_s: float | None = None  # the phase's or step's time (CUDA events on GPU)
    warmup: bool = False

    # -- units

    def to(self, unit: Unit = "MB", field: str = "current") -> float | None:
        """A byte field in ``unit`` (decimal MB/GB as GPU sizes are quoted, or binary MiB/GiB)."""
        value = getattr(self, field)
        return None if value is None else value / _SCALE[unit]

    @property
    def current_mb(self) -> float:
        return self.current / 1e6

    @property
    def current_gb(self) -> float:
        return self.current / GB

    @property
    def current_gib(self) -> float:
        return self.current / GiB

    @property
    def peak_mb(self) -> float:
        return self.peak / 1e6

    @property
    def peak_gb(self) -> float:
        return self.peak / GB

    @property
    def peak_gib(self) -> float:
        return self.peak / GiB

    @property
    def utilization_pct(self) -> float | None:
        """``current`` as a percentage of the device's memory (None if the total is unknown)."""
        return None if not self.total else 100.0 * self.current / self.total

    @property
    def nvml_minus_reserved(self) -> int | None:
        """NVML 'used' minus the allocator's 'reserved': the CUDA context, other libraries'
        and other processes' memory on this GPU — shown, not hidden."""
        if self.nvml_used is None or self.reserved is None:
            return None
        return self.nvml_used - self.reserved

    @classmethod
    def capture(cls, device: str | None = None, backend: Backend | None = None) -> MemorySnapshot:
        """What ``device`` (default: CUDA if torch sees one, else CPU) says right now.

        On CPU this counts the tensors reachable from Python at this moment (a garbage-collector
        walk); tensors held only inside autograd's graph show up in a :class:`MemoryProfiler`
        run, which watches every operator.
        """
        backend = backend or pick_backend(device)
        backend.start(track_tensors=True)
        try:
            reading = backend.read(reset_peak=False, with_process=True)
        finally:
            backend.stop()
        return cls(**reading.fields())
