"""The device layer: every CUDA, NVML and process-memory reading of ``profiling`` goes through here.

Two edges face the outside world, and nothing else in ``profiling`` touches them:

- :func:`_pynvml` returns nvidia-ml-py's ``pynvml`` module. :func:`nvml` is the one query
  function (as nvitop does it): NVML is initialised lazily on first use, shut down at exit, a
  field the device does not support gets the caller's default, and a machine without the
  library or the driver gets one plain sentence (:class:`NoGpu`), never a traceback.
- :func:`_torch_cuda` returns ``torch.cuda``. The CUDA half of :class:`Backend` (allocator
  statistics, per-phase peak reset, CUDA events, NVTX ranges) calls only it.

Tests of the CUDA branch replace these two functions' answers (a fake ``pynvml`` module, a
fake ``torch.cuda``); everything above them runs for real. Light at import: no torch, no
pynvml until a function needs them.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import os
import platform
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

if TYPE_CHECKING:
    import psutil

# ----------------------------------------------------------------------------- NVML

_NVML_LOCK = threading.Lock()


class _NvmlState(TypedDict):
    ready: bool  # initialised (and not shut down since)
    error: str | None  # why NVML cannot be used here, once known


_nvml_state: _NvmlState = {"ready": False, "error": None}


class NoGpu(Exception):
    """NVML cannot be used here; ``str()`` is one sentence saying why and what to do."""


_NO_LIBRARY = (
    "no NVIDIA GPU here: the NVIDIA driver's NVML library is not installed (nvidia-smi would "
    "fail too); on a GPU machine install the NVIDIA driver — CPU metrics only"
)
_NO_DRIVER = (
    "no NVIDIA GPU here: the NVIDIA kernel driver is not loaded; load it (or reboot after "
    "installing the driver) — CPU metrics only"
)


def _pynvml() -> ModuleType:
    """The edge to nvidia-ml-py (tests replace what this returns)."""
    import pynvml

    return pynvml


def _nvml_error_sentence(exc: BaseException, pynvml: ModuleType) -> str:
    if isinstance(exc, getattr(pynvml, "NVMLError_LibraryNotFound", ())):
        return _NO_LIBRARY
    if isinstance(exc, getattr(pynvml, "NVMLError_DriverNotLoaded", ())):
        return _NO_DRIVER
    if isinstance(exc, getattr(pynvml, "NVMLError_NoPermission", ())):
        return "NVML refused access (no permission); run as a user allowed to query the GPU"
    return f"NVML failed ({exc}); check the driver with nvidia-smi — CPU metrics only"


def _nvml_shutdown() -> None:
    with _NVML_LOCK:
        if _nvml_state["ready"]:
            with contextlib.suppress(Exception):
                _pynvml().nvmlShutdown()
            _nvml_state["ready"] = False


def nvml_reset() -> None:
    """Forget NVML's state (shut down if initialised): the next query initialises again."""
    _nvml_shutdown()
    _nvml_state["error"] = None


def _nvml_init() -> ModuleType:
    """pynvml, initialised once; :class:`NoGpu` with the sentence when it cannot be."""
    with _NVML_LOCK:
        if _nvml_state["error"] is not None:
            raise NoGpu(_nvml_state["error"])
        try:
            pynvml = _pynvml()
        except ImportError:
            _nvml_state["error"] = (
                "nvidia-ml-py is not installed (pip install nvidia-ml-py) — CPU metrics only"
            )
            raise NoGpu(_nvml_state["error"]) from None
        if _nvml_state["ready"]:
            return pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            _nvml_state["error"] = _nvml_error_sentence(exc, pynvml)
            raise NoGpu(_nvml_state["error"]) from None
        _nvml_state["ready"] = True
        atexit.register(_nvml_shutdown)
        return pynvml


def nvml(name: str, *args: object, default: object = None, **kwargs: object) -> Any:
    """Call ``pynvml.<name>(*args)``; ``default`` for a field this device does not support.

    Raises :class:`NoGpu` when NVML is unusable on this machine. Other NVML errors on one
    field (not supported, no data, lost GPU) also return ``default``: one missing metric must
    not hide the others.
    """
    pynvml = _nvml_init()
    try:
        value = getattr(pynvml, name)(*args, **kwargs)
    except pynvml.NVMLError:
        return default
    if isinstance(value, bytes):  # older nvidia-ml-py returns bytes for strings
        value = value.decode(errors="replace")
    return value


class HostInfo(TypedDict, total=False):
    """The machine beside the GPUs (empty when it was not read)."""

    host: str
    platform: str
    cpu: str
    cpus: int | None
    ram_bytes: int


class GpuProcess(BaseModel):
    pid: int
    name: str
    used_bytes: int | None = Field(None, description="None when the driver does not say")


class GpuDevice(BaseModel):
    index: int
    name: str
    uuid: str | None = None
    total_bytes: int | None = None
    used_bytes: int | None = Field(None, description="NVML memory info v2 (matches nvidia-smi)")
    reserved_bytes: int | None = Field(None, description="reserved by the driver (v2 only)")
    free_bytes: int | None = None
    utilization_gpu_pct: float | None = None
    utilization_memory_pct: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    processes: list[GpuProcess] = Field(default_factory=list)


class GpuInfo(BaseModel):
    """What ``journal-agent gpu`` shows: the GPUs, driver, CUDA and torch, or why there is none."""

    available: bool
    reason: str | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    nvml: str | None = None
    devices: list[GpuDevice] = Field(default_factory=list)
    torch: str | None = None
    torch_cuda: str | None = Field(None, description="CUDA version torch was built with")
    torch_sees_cuda: bool | None = None
    host: HostInfo = Field(default_factory=HostInfo)


def _cuda_version(v: object) -> str | None:
    if not isinstance(v, int) or v <= 0:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def _process_name(pid: int) -> str:
    try:
        import psutil

        return psutil.Process(pid).name()
    except Exception:  # gone, or another user's process
        return "?"


def _memory_v2(pynvml: ModuleType, handle: object) -> object:
    version = getattr(pynvml, "nvmlMemory_v2", None)
    if version is not None:
        info = nvml("nvmlDeviceGetMemoryInfo", handle, version=version)
        if info is not None:
            return info
    return nvml("nvmlDeviceGetMemoryInfo", handle)  # v1: 'used' over-reports on new drivers


def _temp_sensor(pynvml: ModuleType) -> int:
    return int(getattr(pynvml, "NVML_TEMPERATURE_GPU", 0))


def gpu_device(index: int) -> GpuDevice:
    """One GPU as NVML sees it (memory v2, utilization, processes)."""
    pynvml = _nvml_init()
    h = nvml("nvmlDeviceGetHandleByIndex", index)
    mem = _memory_v2(pynvml, h)
    util = nvml("nvmlDeviceGetUtilizationRates", h)
    procs = []
    for p in nvml("nvmlDeviceGetComputeRunningProcesses", h, default=[]) or []:
        used = getattr(p, "usedGpuMemory", None)
        procs.append(
            GpuProcess(pid=p.pid, name=_process_name(p.pid), used_bytes=used if used else None)
        )
    power = nvml("nvmlDeviceGetPowerUsage", h)
    return GpuDevice(
        index=index,
        name=nvml("nvmlDeviceGetName", h, default="unknown GPU"),
        uuid=nvml("nvmlDeviceGetUUID", h),
        total_bytes=getattr(mem, "total", None),
        used_bytes=getattr(mem, "used", None),
        reserved_bytes=getattr(mem, "reserved", None),
        free_bytes=getattr(mem, "free", None),
        utilization_gpu_pct=getattr(util, "gpu", None),
        utilization_memory_pct=getattr(util, "memory", None),
        temperature_c=nvml("nvmlDeviceGetTemperature", h, _temp_sensor(pynvml)),
        power_w=power / 1000 if isinstance(power, int | float) else None,
        processes=procs,
    )


def _torch_version() -> str | None:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_info() -> HostInfo:
    import psutil

    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu": _cpu_name(),
        "cpus": os.cpu_count(),
        "ram_bytes": psutil.virtual_memory().total,
    }


def gpu_info() -> GpuInfo:
    """The GPUs NVML sees, with driver, CUDA and torch versions; or why there are none.

    torch is imported only when NVML finds a GPU (to say whether this torch can use it).
    """
    base = {"torch": _torch_version(), "host": host_info()}
    try:
        count = nvml("nvmlDeviceGetCount", default=0)
    except NoGpu as exc:
        return GpuInfo(available=False, reason=str(exc), **base)
    devices = [gpu_device(i) for i in range(int(count or 0))]
    info = GpuInfo(
        available=bool(devices),
        reason=None if devices else "NVML works but reports no GPU on this machine",
        driver=nvml("nvmlSystemGetDriverVersion"),
        cuda_driver=_cuda_version(nvml("nvmlSystemGetCudaDriverVersion_v2"))
        or _cuda_version(nvml("nvmlSystemGetCudaDriverVersion")),
        nvml=nvml("nvmlSystemGetNVMLVersion"),
        devices=devices,
        **base,
    )
    if devices:
        cuda = _torch_cuda()
        info.torch_sees_cuda = bool(cuda.is_available())
        info.torch_cuda = _torch_built_cuda()
    return info


# ----------------------------------------------------------------------------- torch.cuda


def _torch_cuda() -> ModuleType:
    """The edge to ``torch.cuda`` (tests replace what this returns)."""
    import torch

    return torch.cuda


def _torch_built_cuda() -> str | None:
    import torch

    return getattr(torch.version, "cuda", None)


def set_cuda_device(index: int) -> None:
    """Make GPU ``index`` this process's current device (one rank per GPU)."""
    _torch_cuda().set_device(index)


def cuda_available() -> bool:
    try:
        return bool(_torch_cuda().is_available())
    except Exception:  # a broken CUDA install reports here, not later mid-run
        return False


# ----------------------------------------------------------------------------- process memory


def _process() -> psutil.Process:
    import psutil

    return psutil.Process()


_STATM: dict[str, int | None] = {}  # fd: statm kept open (None: unusable), page: its unit


def rss_bytes() -> int:
    """Resident set size: every page of this process in RAM (libraries, Python, tensors, …).

    psutil's ``memory_info().rss``; on Linux read from the same ``/proc/self/statm`` through a
    file descriptor kept open (≈ 2 µs instead of ≈ 20 µs: it is read at every step).
    """
    fd = _STATM.get("fd")
    if fd is None and "fd" not in _STATM:
        try:
            _STATM["fd"] = fd = os.open("/proc/self/statm", os.O_RDONLY)
            _STATM["page"] = os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, AttributeError):
            _STATM["fd"] = None
    page = _STATM.get("page")
    if fd is not None and page is not None:
        try:
            return int(os.pread(fd, 128, 0).split()[1]) * page
        except (OSError, IndexError, ValueError):
            pass
    return int(_process().memory_info().rss)


def uss_bytes() -> int | None:
    """Unique set size: the RAM freed if this process exited (reads smaps: ~0.3 ms)."""
    try:
        return int(_process().memory_full_info().uss)
    except Exception:  # not on every platform, or no permission
        return None


def rss_high_water_bytes() -> int | None:
    """The process's lifetime peak RSS, or None where it is unavailable.

    Linux: ``VmHWM`` of ``/proc/self/status`` (the kernel folds the current RSS in; the
    ``getrusage`` figure can lag behind it). Elsewhere ``getrusage``.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # reported in kB (KiB)
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if platform.system() == "Darwin" else peak * 1024)  # Linux reports KiB


def software_versions() -> dict[str, str | None]:
    """Versions that change measured numbers: Python, torch (+ its CUDA), profiling, driver."""
    from profiling.records import software_versions as base

    out = base()
    out.setdefault("torch", _torch_version())
    with contextlib.suppress(Exception):
        out["torch_cuda"] = _torch_built_cuda()
    return out
