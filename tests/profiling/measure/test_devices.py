"""The device layer: NVML and torch.cuda.

This machine has no GPU. `gpu_info` and `journal-agent gpu` run here against the real NVML
library (nvidia-ml-py, which finds no driver). The CUDA branch — NVML readings, the allocator's
statistics, per-phase peak resets, CUDA events, NVTX — is exercised by FAKING nvidia-ml-py's
and torch.cuda's ANSWERS AT THE DEVICE LAYER'S EDGE ONLY: `profiling.measure.devices._pynvml` and
`profiling.measure.devices._torch_cuda` (the only two functions that reach those libraries)
return the fakes below; everything above them (the query function, the backends, the profiler, the
report, the record) is the real code.
"""

from __future__ import annotations

import os
import threading
import time
from types import ModuleType, SimpleNamespace

import pytest

from profiling.measure import backends, devices
from profiling.measure.devices import NoGpu, gpu_info, nvml
from profiling.measure.profiler import MemoryProfiler

# ------------------------------------------------------------------ the real NVML library


def _nvml_sees_a_gpu() -> bool:
    devices.nvml_reset()
    try:
        return bool(nvml("nvmlDeviceGetCount", default=0))
    except NoGpu:
        return False
    finally:
        devices.nvml_reset()


def _without_a_driver(monkeypatch) -> None:
    """The real NVML library where it finds no driver (here); on a machine with a GPU, its
    absence faked at the edge: nvidia-ml-py answering as it does without a driver."""
    if _nvml_sees_a_gpu():
        monkeypatch.setattr(devices, "_pynvml", lambda: fake_pynvml(init_error="LibraryNotFound"))
    devices.nvml_reset()


@pytest.fixture
def no_driver(monkeypatch):
    _without_a_driver(monkeypatch)
    yield
    devices.nvml_reset()


def test_the_no_driver_tests_hold_on_a_machine_with_a_gpu(monkeypatch) -> None:
    monkeypatch.setattr(devices, "_pynvml", lambda: fake_pynvml())  # a machine with a GPU
    assert _nvml_sees_a_gpu()
    _without_a_driver(monkeypatch)
    info = gpu_info()
    assert info.available is False and info.reason.startswith("no NVIDIA GPU here")
    devices.nvml_reset()


@pytest.mark.usefixtures("no_driver")
def test_gpu_info_without_a_driver_is_one_sentence_with_the_cpu() -> None:
    info = gpu_info()
    assert info.available is False and info.devices == []
    assert info.reason.startswith("no NVIDIA GPU here")
    assert "\n" not in info.reason and "Traceback" not in info.reason
    assert info.host["cpus"] == os.cpu_count() and info.host["ram_bytes"] > 0
    assert info.torch  # the torch version, read without importing torch
    with pytest.raises(NoGpu, match="no NVIDIA GPU here"):
        nvml("nvmlDeviceGetCount")


@pytest.mark.skipif(
    _nvml_sees_a_gpu(), reason="this machine has an NVIDIA GPU: the command lists it"
)
def test_gpu_command_without_a_gpu_exits_zero(tmp_path, run_cli) -> None:
    out = run_cli("gpu", cwd=tmp_path)
    assert out.returncode == 0
    first = out.stdout.strip().splitlines()[0]
    assert first.startswith("no NVIDIA GPU here") and "Traceback" not in out.stderr
    data = __import__("json").loads(run_cli("gpu", "--json", cwd=tmp_path).stdout)
    assert data["available"] is False and data["reason"] == first.removesuffix(".")


# ------------------------------------------------------------------ fakes at the edge


class _NVMLError(Exception):
    pass


def fake_pynvml(*, init_error: str | None = None, used: int = 3_000_000_000) -> ModuleType:
    """Answers as nvidia-ml-py gives them for one A100 (utilization: NotSupported)."""
    m = ModuleType("pynvml")
    m.NVMLError = _NVMLError
    for name in ("NotSupported", "LibraryNotFound", "DriverNotLoaded", "NoPermission"):
        setattr(m, f"NVMLError_{name}", type(f"NVMLError_{name}", (_NVMLError,), {}))
    m.nvmlMemory_v2 = 0x02000028
    m.NVML_TEMPERATURE_GPU = 0
    m.calls = []

    def init():
        m.calls.append("init")
        if init_error:
            raise getattr(m, f"NVMLError_{init_error}")()

    def memory(handle, version=None):
        if version == m.nvmlMemory_v2:
            return SimpleNamespace(
                total=40_000_000_000, reserved=400_000_000, used=used, free=36_600_000_000
            )
        return SimpleNamespace(total=40_000_000_000, used=used + 400_000_000, free=0)

    def not_supported(*_a, **_k):
        raise m.NVMLError_NotSupported()

    m.threads = []  # the thread of every device query: the hot path must make none

    def on_thread(fn):
        def call(*args, **kwargs):
            m.threads.append(threading.current_thread().name)
            return fn(*args, **kwargs)

        return call

    memory = on_thread(memory)
    m.nvmlInit = init
    m.nvmlShutdown = lambda: m.calls.append("shutdown")
    m.nvmlDeviceGetCount = lambda: 1
    m.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    m.nvmlDeviceGetName = lambda h: "NVIDIA A100-SXM4-40GB"
    m.nvmlDeviceGetUUID = lambda h: "GPU-5f2e"
    m.nvmlDeviceGetMemoryInfo = memory
    m.nvmlDeviceGetUtilizationRates = not_supported
    m.nvmlDeviceGetTemperature = lambda h, sensor: 41
    m.nvmlDeviceGetPowerUsage = lambda h: 251_500
    m.nvmlDeviceGetComputeRunningProcesses = on_thread(
        lambda h: [
            SimpleNamespace(pid=os.getpid(), usedGpuMemory=2_100_000_000),
            SimpleNamespace(pid=999_999_999, usedGpuMemory=None),
        ]
    )
    m.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    m.nvmlSystemGetCudaDriverVersion_v2 = lambda: 12040
    m.nvmlSystemGetNVMLVersion = lambda: "12.550.54.15"
    return m


class FakeCuda:
    """torch.cuda's answers for one GPU whose caching allocator the test drives by hand; CUDA
    events read a clock the test advances, so times are exact."""

    OutOfMemoryError = type("OutOfMemoryError", (RuntimeError,), {})

    def __init__(self) -> None:
        self.allocated = self.peak = 0
        self.reserved = self.peak_reserved = 0
        self.clock_ms = 0.0
        self.gpu_ms: float | None = None  # how far the GPU has got (None: it keeps up)
        self.resets = self.syncs = self.stats_reads = 0
        self.ranges: list[str] = []
        self.open_ranges = 0
        self.nvtx = SimpleNamespace(range_push=self._push, range_pop=self._pop)
        cuda = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                self.t: float | None = None

            def record(self) -> None:
                self.t = cuda.clock_ms

            def elapsed_time(self, other: Event) -> float:
                assert cuda.gpu_ms is None or max(self.t, other.t) <= cuda.gpu_ms, "not done"
                return other.t - self.t

            def query(self) -> bool:
                return cuda.gpu_ms is None or self.t <= cuda.gpu_ms

        self.Event = Event

    def _push(self, name: str) -> None:
        self.ranges.append(name)
        self.open_ranges += 1

    def _pop(self) -> None:
        self.open_ranges -= 1

    # the test's hands on the allocator
    def alloc(self, n: int) -> None:
        self.allocated += n
        self.peak = max(self.peak, self.allocated)
        while self.reserved < self.allocated:
            self.reserved += 20_000_000  # 20 MB segments
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def free(self, n: int) -> None:
        self.allocated -= n

    # torch.cuda's API
    def is_available(self) -> bool:
        return True

    def current_device(self) -> int:
        return 0

    def get_device_properties(self, i: int) -> SimpleNamespace:
        return SimpleNamespace(
            name="NVIDIA A100-SXM4-40GB", total_memory=40_000_000_000, major=8, minor=0,
            uuid="5f2e",
        )  # fmt: skip

    def memory_allocated(self, i: int) -> int:
        return self.allocated

    def max_memory_allocated(self, i: int) -> int:
        return self.peak

    def max_memory_reserved(self, i: int) -> int:
        return self.peak_reserved

    def memory_stats(self, i: int) -> dict[str, int]:
        self.stats_reads += 1
        return {
            "allocated_bytes.all.current": self.allocated,
            "allocated_bytes.all.peak": self.peak,
            "reserved_bytes.all.current": self.reserved,
            "reserved_bytes.all.peak": self.peak_reserved,
            "active_bytes.all.current": self.allocated,
            "active_bytes.all.peak": self.peak,
            "num_alloc_retries": 0,
            "num_ooms": 0,
        }

    def reset_peak_memory_stats(self, i: int) -> None:
        self.resets += 1
        self.peak, self.peak_reserved = self.allocated, self.reserved

    def synchronize(self, i: int) -> None:
        self.syncs += 1
        self.gpu_ms = None  # the GPU has caught up


@pytest.fixture
def fake_gpu(monkeypatch):
    """Fake nvidia-ml-py and torch.cuda answers at the device layer's edge only."""
    nv, cuda = fake_pynvml(), FakeCuda()
    devices.nvml_reset()
    monkeypatch.setattr(devices, "_pynvml", lambda: nv)
    monkeypatch.setattr(devices, "_torch_cuda", lambda: cuda)
    monkeypatch.setattr(devices, "_torch_built_cuda", lambda: "12.4")
    yield nv, cuda
    devices.nvml_reset()


def test_nvml_query_function_is_lazy_defaults_unsupported_and_shuts_down(fake_gpu) -> None:
    nv, _ = fake_gpu
    assert nv.calls == []  # nothing until the first query
    assert nvml("nvmlDeviceGetCount") == 1
    assert nvml("nvmlDeviceGetCount") == 1
    assert nv.calls == ["init"]  # initialised once
    assert nvml("nvmlDeviceGetUtilizationRates", ("handle", 0), default="n/a") == "n/a"
    devices._nvml_shutdown()  # what atexit runs
    assert nv.calls == ["init", "shutdown"]


@pytest.mark.parametrize(
    ("error", "words"),
    [("LibraryNotFound", "library is not installed"), ("DriverNotLoaded", "driver is not loaded")],
)
def test_nvml_without_library_or_driver_is_one_sentence(monkeypatch, error, words) -> None:
    nv = fake_pynvml(init_error=error)
    devices.nvml_reset()
    monkeypatch.setattr(devices, "_pynvml", lambda: nv)
    try:
        info = gpu_info()
    finally:
        devices.nvml_reset()
    assert info.available is False and words in info.reason and "CPU metrics only" in info.reason


def test_gpu_info_reads_memory_v2_processes_and_versions(fake_gpu) -> None:
    info = gpu_info()
    assert info.available and info.driver == "550.54.15" and info.cuda_driver == "12.4"
    assert info.torch_cuda == "12.4" and info.torch_sees_cuda is True
    (gpu,) = info.devices
    assert gpu.name == "NVIDIA A100-SXM4-40GB" and gpu.total_bytes == 40_000_000_000
    assert gpu.used_bytes == 3_000_000_000 and gpu.reserved_bytes == 400_000_000  # v2, not v1
    assert gpu.utilization_gpu_pct is None  # NotSupported on this device: the default
    assert gpu.power_w == 251.5 and gpu.temperature_c == 41
    assert [(p.pid, p.used_bytes) for p in gpu.processes] == [
        (os.getpid(), 2_100_000_000),
        (999_999_999, None),
    ]


def test_profiler_on_cuda_peaks_per_phase_events_nvtx_and_the_nvml_gap(fake_gpu, tmp_path):
    _, cuda = fake_gpu
    prof = MemoryProfiler(warmup=1, tokens_per_step=1000, flops_per_step=2e12)
    assert prof.device == "cuda:0"
    cuda.alloc(500_000_000)  # the model, before start
    prof.start()
    for step in range(4):
        with prof.phase("forward"):
            cuda.alloc(300_000_000)  # activations
            cuda.clock_ms += 10
        cuda.alloc(50_000_000)  # between phases: counts for the step, not for a phase
        cuda.free(50_000_000)
        with prof.phase("backward"):
            cuda.alloc(200_000_000)  # transient
            cuda.free(200_000_000 + 300_000_000)  # activations freed
            cuda.clock_ms += 20
        with prof.phase("optimizer"):
            cuda.alloc(100_000_000 if step == 0 else 0)
            cuda.clock_ms += 5
        prof.record_step(step)
    s = prof.summary()
    phases = {p.name: p for p in s.phases}
    # Each phase has its own peak: the allocator's peak was reset at every boundary.
    assert phases["forward"].peak_bytes == 800_000_000 + 100_000_000  # + the optimizer state
    assert phases["backward"].peak_bytes == 1_100_000_000
    assert phases["optimizer"].peak_bytes == 600_000_000
    assert phases["forward"].min_bytes == 800_000_000  # step 0, before the state existed
    assert s.steps[0].peak_bytes == 1_000_000_000  # backward, step 0
    # Times from CUDA events: exact; no synchronize per step or phase (the GPU kept up here:
    # every event was resolved as it passed, so stopping had nothing to wait for).
    assert phases["forward"].time.median == pytest.approx(0.010)
    assert phases["backward"].time.median == pytest.approx(0.020)
    assert s.backward_forward_ratio == pytest.approx(2.0)
    assert s.step_time.median == pytest.approx(0.035) and s.step_time.n == 3
    assert s.tokens_per_s == pytest.approx(1000 / 0.035)
    assert s.flops_per_s == pytest.approx(2e12 / 0.035)
    assert cuda.syncs == 0 and cuda.ranges[:3] == ["forward", "backward", "optimizer"]
    assert cuda.open_ranges == 0
    # NVML beside the allocator: the gap is shown, not hidden.
    last = s.last
    # The allocator keeps the freed blocks cached: reserved stays at its high-water mark.
    assert last.current == 600_000_000 and last.reserved == 1_100_000_000
    assert last.nvml_used == 3_000_000_000 and last.nvml_minus_reserved == 1_900_000_000
    assert last.process_used == 2_100_000_000
    report = prof.report()
    assert "1.90 GB more than the allocator reserved: the CUDA context" in report
    assert "cuda:0 (NVIDIA A100-SXM4-40GB, 40.00 GB, driver 550.54.15)" in report
    rid = prof.save_record(tmp_path)
    from profiling.records import RecordStore

    record = RecordStore(tmp_path).load(rid)
    assert record.device["name"] == "NVIDIA A100-SXM4-40GB"
    assert record.device["driver"] == "550.54.15" and record.software["torch_cuda"] == "12.4"


def test_cuda_out_of_memory_is_a_result(fake_gpu) -> None:
    _, cuda = fake_gpu
    prof = MemoryProfiler()
    prof.start()
    prof.record_step(0)
    with pytest.raises(cuda.OutOfMemoryError), prof.phase("backward"):
        cuda.alloc(39_000_000_000)
        raise cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert (prof.oom.step, prof.oom.phase) == (1, "backward")
    assert prof.oom.snapshot.current == 39_000_000_000
    assert "OUT OF MEMORY at step 1, phase backward: 39.00 GB held" in prof.report()


def test_cuda_timer_is_not_perf_counter(fake_gpu) -> None:
    """On CUDA the host clock is not the GPU's: the time must come from the events."""
    prof = MemoryProfiler(warmup=0)
    prof.start()
    with prof.phase("forward"):
        time.sleep(0.02)  # the host waits; the GPU clock does not move
    prof.record_step(0)
    assert prof.summary().phases[0].time.median == 0.0


def test_every_field_a_backend_reads_reaches_the_reading():
    # The hot path builds a slotted RawReading (about 1 µs) that becomes a pydantic Reading
    # only when shown: a field one of them lacks would be dropped from every profile.
    values = {name: n + 1 for n, name in enumerate(backends.Reading.model_fields)}
    values["kind"] = "cuda"
    raw = backends.RawReading(**values)
    assert backends.Reading(**raw.fields()).model_dump() == values


def test_measuring_on_cuda_never_waits_for_the_gpu(fake_gpu) -> None:
    """The loop runs ahead of the GPU: no synchronize, no NVML call, one full statistics read
    per step; the events are resolved once the GPU has passed them, or at the end."""
    nv, cuda = fake_gpu
    prof = MemoryProfiler(warmup=0)
    prof.start()
    on_loop = threading.current_thread().name
    cuda.gpu_ms = 0.0  # the GPU lags: nothing queued so far has run
    nv.threads.clear()
    cuda.stats_reads = 0
    for step in range(3):
        for phase, ms in (("forward", 10), ("backward", 20)):
            with prof.phase(phase):
                cuda.alloc(1000)
                cuda.clock_ms += ms
                cuda.free(1000)
        prof.record_step(step)
        assert [r.duration_s for r in prof._rows] == [None] * len(prof._rows)  # not yet run
    assert cuda.syncs == 0 and cuda.stats_reads == 3  # one memory_stats() per step
    assert on_loop not in nv.threads  # NVML is read by the sampler thread only
    cuda.gpu_ms = 40.0  # the GPU has finished step 0 and step 1's forward
    with prof.phase("forward"):
        cuda.clock_ms += 10
    prof.record_step(3)
    resolved = [r for r in prof._rows if r.duration_s is not None]
    assert [r.phase for r in resolved] == ["forward", "backward", None, "forward"]
    assert cuda.syncs == 0
    s = prof.summary()  # stopping waits once for the rest
    assert cuda.syncs == 1
    assert {p.name: p.time.median for p in s.phases} == pytest.approx(
        {"forward": 0.010, "backward": 0.020}
    )
    assert [st.time_s for st in s.steps] == pytest.approx([0.030, 0.030, 0.030, 0.010])
    assert s.last.nvml_used == 3_000_000_000  # the sampler's sample
