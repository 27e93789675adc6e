"""Readings of one device per boundary of a measured step: the CPU, or one CUDA GPU.

:class:`Backend` (the CPU: live tensor bytes, RSS, ``perf_counter``) and :class:`CudaBackend`
(torch's caching allocator, CUDA events, NVTX, NVML) give :class:`~profiling.measure.profiler.
MemoryProfiler` what it reads at each phase edge and step end. Every torch.cuda and NVML call
goes through ``profiling.measure.devices`` (its ``_torch_cuda`` and ``nvml`` edges), so tests
fake those answers and run this code for real.

Measuring must not disturb what it measures (issue 23: the profiler once took 48 % of a
gpt2-small step on an H200, mostly a ``synchronize`` per step and NVML calls at every step).
On CUDA nothing here waits for the GPU: a phase edge reads two allocator counters
(``memory_allocated``, ``max_memory_allocated``; plus ``max_memory_reserved``) and records a
CUDA event; a step's end reads ``memory_stats()`` once; NVML is sampled by a thread
(:class:`NvmlSampler`) and a step's end takes its latest sample. The profiler resolves events
once the GPU has passed them (``Event.query``), and synchronizes once, when it stops.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel

from profiling.measure import devices
from profiling.measure.devices import NoGpu, nvml

if TYPE_CHECKING:
    from profiling.measure.live_tensors import LiveTensors

Kind = Literal["cpu", "cuda"]


class Reading(BaseModel):
    """One reading of a device's memory. Byte fields that do not apply to the device are None."""

    kind: Kind
    current: int  # the primary number: allocator "allocated" on CUDA, live tensor bytes on CPU
    peak: int  # its peak since the previous reading's reset
    # CUDA (torch allocator)
    reserved: int | None = None
    peak_reserved: int | None = None
    active: int | None = None
    peak_active: int | None = None
    alloc_retries: int | None = None
    ooms: int | None = None
    # CUDA (NVML)
    nvml_used: int | None = None
    nvml_total: int | None = None
    nvml_reserved: int | None = None
    process_used: int | None = None
    gpu_util_pct: float | None = None
    # CPU (process)
    rss: int | None = None
    total: int | None = None  # device memory (NVML total, or physical RAM)


@dataclass(slots=True)
class RawReading:
    """:class:`Reading`'s fields as a plain slotted object: what the hot path builds (a pydantic
    model costs tens of µs per step; this costs about one)."""

    kind: str
    current: int
    peak: int
    reserved: int | None = None
    peak_reserved: int | None = None
    active: int | None = None
    peak_active: int | None = None
    alloc_retries: int | None = None
    ooms: int | None = None
    nvml_used: int | None = None
    nvml_total: int | None = None
    nvml_reserved: int | None = None
    process_used: int | None = None
    gpu_util_pct: float | None = None
    rss: int | None = None
    total: int | None = None

    def fields(self) -> dict[str, Any]:  # keyword arguments of Reading and its subclasses
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class Backend:
    """Memory readings, peak resets, timing and NVTX for one device. CPU here; CUDA below."""

    kind: Kind = "cpu"

    def __init__(self) -> None:
        self.label = "cpu"
        self._live: LiveTensors | None = None
        self._total: int | None = None

    # memory
    def start(self, track_tensors: bool = True) -> None:
        if track_tensors:
            from profiling.measure.live_tensors import LiveTensors

            self._live = LiveTensors()
            self._live.start()
        import psutil

        self._total = int(psutil.virtual_memory().total)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()

    @property
    def tracks_tensors(self) -> bool:
        return self._live is not None

    def read(self, reset_peak: bool, with_process: bool = False) -> RawReading:
        live = self._live
        current, peak = (live.current, live.peak) if live is not None else (0, 0)
        if live is not None and reset_peak:
            live.reset_peak()
        return RawReading(
            kind="cpu",
            current=current,
            peak=peak,
            rss=devices.rss_bytes() if with_process else None,
            total=self._total,
        )

    def live_ops(self) -> int:
        return self._live.ops if self._live is not None else 0

    # time
    def mark(self) -> Any:
        return time.perf_counter()

    def elapsed(self, a: Any, b: Any) -> float:
        return float(b - a)

    def synchronize(self) -> None:
        pass

    def ready(self, mark: Any) -> bool:
        """Whether the time ``mark`` stands for has passed (the GPU may still be behind)."""
        return True

    def range_push(self, name: str) -> None:  # NVTX on CUDA; nothing to mark on the CPU
        pass

    def range_pop(self) -> None:
        pass

    def describe(self) -> dict[str, object]:
        host = devices.host_info()
        return {"kind": "cpu", "label": self.label, "name": host.get("cpu"), **host}

    def is_oom(self, exc: BaseException) -> bool:
        # The CPU allocator raises a RuntimeError with this text (c10's DefaultCPUAllocator).
        return isinstance(exc, MemoryError) or (
            isinstance(exc, RuntimeError) and "DefaultCPUAllocator" in str(exc)
        )


class NvmlSample(TypedDict):
    """One NVML sample of a GPU; None where the device or driver does not say."""

    used: int | None
    total: int | None
    reserved: int | None  # by the driver (memory info v2 only)
    util: int | None  # percent of time a kernel ran
    process_used: int | None  # this process's bytes (read every ``process_every``-th sample)


class NvmlSampler:
    """NVML's view of one GPU, sampled by a daemon thread every ``interval`` seconds.

    ``latest`` is the newest sample (a dict: used, total, reserved, util, process_used);
    ``max_used`` the highest ``used`` seen. The process list (slow on busy GPUs) is read every
    ``process_every``-th sample. Nothing here runs on the training loop's thread after
    :meth:`start`, which takes the first sample itself so that a reading never lacks one.
    """

    def __init__(self, handle: object, interval: float = 0.05, process_every: int = 10) -> None:
        self.handle = handle
        self.interval = interval
        self.process_every = process_every
        self.latest: NvmlSample | None = None
        self.max_used = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        mem = devices._memory_v2(devices._pynvml(), self.handle)
        util = nvml("nvmlDeviceGetUtilizationRates", self.handle)
        out: NvmlSample = {
            "used": getattr(mem, "used", None),
            "total": getattr(mem, "total", None),
            "reserved": getattr(mem, "reserved", None),
            "util": getattr(util, "gpu", None),
            "process_used": self.latest["process_used"] if self.latest else None,
        }
        if self.samples % self.process_every == 0:
            pid = os.getpid()
            for p in nvml("nvmlDeviceGetComputeRunningProcesses", self.handle, default=[]) or []:
                if p.pid == pid and getattr(p, "usedGpuMemory", None):
                    out["process_used"] = int(p.usedGpuMemory)
        self.latest = out  # one assignment: a reader sees a whole sample
        if isinstance(out["used"], int):
            self.max_used = max(self.max_used, out["used"])
        self.samples += 1

    def start(self) -> None:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except Exception:  # NVML gone mid-run (lost GPU, shutdown at exit): stop sampling
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.interval + 1)


class CudaBackend(Backend):
    """torch's CUDA caching allocator + NVML for one GPU, through ``devices``' two edges."""

    kind: Kind = "cuda"

    def __init__(self, index: int | None = None) -> None:
        super().__init__()
        self.cuda = devices._torch_cuda()
        self.index = self.cuda.current_device() if index is None else index
        self.label = f"cuda:{self.index}"
        self.sampler: NvmlSampler | None = None
        self._nvml_reason: str | None = None

    def start(self, track_tensors: bool = True) -> None:
        # The allocator's own counters are exact; no tensor accounting is needed on CUDA.
        self.cuda.reset_peak_memory_stats(self.index)
        try:
            handle = nvml("nvmlDeviceGetHandleByIndex", self._nvml_index())
        except NoGpu as exc:
            self._nvml_reason = str(exc)
            return
        self.sampler = NvmlSampler(handle)
        self.sampler.start()

    def _nvml_index(self) -> int:
        # CUDA_VISIBLE_DEVICES renumbers CUDA devices but not NVML's: map through the UUID.
        props = self.cuda.get_device_properties(self.index)
        uuid = str(getattr(props, "uuid", "") or "")
        if uuid:
            for i in range(int(nvml("nvmlDeviceGetCount", default=0) or 0)):
                h = nvml("nvmlDeviceGetHandleByIndex", i)
                if str(nvml("nvmlDeviceGetUUID", h, default="")).removeprefix("GPU-") == uuid:
                    return i
        return self.index

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    @property
    def tracks_tensors(self) -> bool:
        return False

    def read(self, reset_peak: bool, with_process: bool = False) -> RawReading:
        cuda, i = self.cuda, self.index
        if with_process:  # a step's end: the allocator's full statistics, once per step
            s = cuda.memory_stats(i)
            reading = RawReading(
                kind="cuda",
                current=int(s.get("allocated_bytes.all.current", 0)),
                peak=int(s.get("allocated_bytes.all.peak", 0)),
                reserved=int(s.get("reserved_bytes.all.current", 0)),
                peak_reserved=int(s.get("reserved_bytes.all.peak", 0)),
                active=int(s.get("active_bytes.all.current", 0)),
                peak_active=int(s.get("active_bytes.all.peak", 0)),
                alloc_retries=int(s.get("num_alloc_retries", 0)),
                ooms=int(s.get("num_ooms", 0)),
            )
            self._add_nvml(reading)
        else:  # a phase edge: the interval's numbers, three counters (no dict, no wait)
            reading = RawReading(
                kind="cuda",
                current=int(cuda.memory_allocated(i)),
                peak=int(cuda.max_memory_allocated(i)),
                peak_reserved=int(cuda.max_memory_reserved(i)),
            )
        if reset_peak:
            cuda.reset_peak_memory_stats(i)
        return reading

    def _add_nvml(self, reading: RawReading) -> None:
        if self.sampler is None:
            return
        latest = self.sampler.latest  # the sampler thread's newest: no NVML call here
        if latest is None:
            return
        reading.nvml_used = latest["used"]
        reading.nvml_total = reading.total = latest["total"]
        reading.nvml_reserved = latest["reserved"]
        reading.gpu_util_pct = latest["util"]
        reading.process_used = latest["process_used"]

    def mark(self) -> Any:
        event = self.cuda.Event(enable_timing=True)
        event.record()
        return event

    def elapsed(self, a: Any, b: Any) -> float:
        return float(a.elapsed_time(b)) / 1000.0  # CUDA events report milliseconds

    def ready(self, mark: Any) -> bool:
        return bool(mark.query())  # has the GPU reached this event? (never waits)

    def synchronize(self) -> None:
        self.cuda.synchronize(self.index)

    def range_push(self, name: str) -> None:
        # NVTX ranges show the phases on Nsight Systems' timeline.
        self.cuda.nvtx.range_push(name)

    def range_pop(self) -> None:
        self.cuda.nvtx.range_pop()

    def describe(self) -> dict[str, object]:
        props = self.cuda.get_device_properties(self.index)
        out: dict[str, object] = {
            "kind": "cuda",
            "label": self.label,
            "index": self.index,
            "name": getattr(props, "name", "CUDA device"),
            "total_bytes": getattr(props, "total_memory", None),
            "capability": f"{getattr(props, 'major', '?')}.{getattr(props, 'minor', '?')}",
            **devices.host_info(),
        }
        try:
            out["driver"] = nvml("nvmlSystemGetDriverVersion")
            out["cuda_driver"] = devices._cuda_version(nvml("nvmlSystemGetCudaDriverVersion_v2"))
        except NoGpu as exc:
            out["nvml"] = str(exc)
        if self._nvml_reason:
            out["nvml"] = self._nvml_reason
        if self.sampler is not None:
            out["nvml_samples"] = self.sampler.samples
            out["nvml_max_used_bytes"] = self.sampler.max_used
        return out

    def is_oom(self, exc: BaseException) -> bool:
        oom = getattr(self.cuda, "OutOfMemoryError", None)
        return (oom is not None and isinstance(exc, oom)) or "CUDA out of memory" in str(exc)


def pick_backend(device: str | None = None) -> Backend:
    """The backend for ``device``: None/"auto" (CUDA if torch sees one, else CPU), "cpu",
    "cuda" or "cuda:N"."""
    from profiling.errors import ProfilingError

    if device in (None, "auto"):
        return CudaBackend() if devices.cuda_available() else Backend()
    if device == "cpu":
        return Backend()
    if device.startswith("cuda"):
        if not devices.cuda_available():
            raise ProfilingError(
                f"device {device!r} asked for, but this torch sees no CUDA device (CPU-only "
                "build or no driver); drop --device or use --device cpu"
            )
        index = int(device.split(":", 1)[1]) if ":" in device else None
        return CudaBackend(index)
    raise ProfilingError(f"unknown device {device!r}; use cpu, cuda or cuda:N")
