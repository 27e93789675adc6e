"""The counter a user reads: what ``max_memory_allocated()``, ``max_memory_reserved()`` and
nvidia-smi would show for a step, each with where its number comes from.

- **allocated**: the step's tensors (the estimate's or the trace's peak), each rounded up to the
  caching allocator's 512-byte blocks (a large-pool block keeps a rest of up to 1 MiB it does not
  split off), plus cuBLAS's workspaces, which PyTorch allocates through the same allocator on
  the first matmul of each stream (forward's and the autograd thread's).
- **reserved**: what the caching allocator holds from CUDA, cached free blocks included. From a
  trace, its allocations and frees replayed in order through the allocator's model
  (``profiling.estimate.allocator``: 512-byte rounding, 2 MiB small-pool and 20 MiB / 2 MiB-
  rounded large-pool segments, best fit, splitting and merging; with ``--expandable-segments``
  one growing segment). In closed form (no trace), the allocated peak plus the terms that make
  the reserve exceed it (``profiling.estimate.reserve``: cached blocks between sizes, the
  loss's logits, 1–10 MiB gradients, FSDP2's streams, a partly empty segment per pool): an
  upper bound checked against replays, said as such.
- **what must fit** (``need``): on a GPU near full the allocator hands its cached segments back to
  CUDA and retries a request before it runs out of memory (``profiling.estimate.allocator``),
  so a step runs on a GPU when the reserve it cannot hand back fits, not its whole reserve on a
  GPU that never runs out. From a trace, the least memory its replay runs in
  (``profiling.trace.allocations.need``); in closed form, ``profiling.estimate.reserve``'s bound
  of it. ``fit`` judges by it plus what nvidia-smi counts outside the allocator.
- **nvml** (nvidia-smi's "used"): reserved plus the CUDA context (driver, kernels, cuBLAS and
  cuDNN handles; outside PyTorch's allocator) and, with more than one GPU, NCCL's buffers; with
  a paged optimizer, its managed-memory states while resident (``paged``: the part the driver
  moves to host memory when the GPU needs the room, so not part of what must fit).

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from profiling._config_counter import Counter
from profiling.estimate.reserve import outside_loss
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

MiB = 2**20

# PyTorch's default cuBLAS workspace per handle and stream (CUBLAS_WORKSPACE_CONFIG unset,
# aten/src/ATen/cuda/CublasHandlePool.cpp): ":4096:8" on sm90 and later (32 MiB), else
# ":4096:2:16:8" (8 MiB + 128 KiB). A training step uses two streams: forward's and the
# autograd thread's. Measured: 67,107,700 B beyond the trace on an H200 (docs/profiling.md).
WORKSPACE_SM90 = 4096 * 1024 * 8
WORKSPACE_OLDER = 4096 * 1024 * 2 + 16 * 1024 * 8
STREAMS = 2
SM90 = ("h100-sxm", "h100-pcie", "h100-nvl", "h200", "b200")
# The allocator counts blocks, not requests: a large-pool block whose rest after a request is at
# most 1 MiB is not split (should_split: remaining > kSmallSize, c10/cuda/
# CUDACachingAllocator.cpp), and max_memory_allocated counts the rest with it. Which blocks keep
# one depends on the order of frees (a request carved out of a block cached by another), so the
# closed form counts an average per tensor alive (tensors_alive), above what the replays of
# traced steps needed (tests/profiling/estimate/test_allocated_bound.py and 8 more, one GPU):
# 32.4 KB on gpt2-small with eager attention (its tensors' peak 10.2 MB under the trace's too),
# 29.3 KB on Qwen2.5-0.5B with full checkpointing (128 blocks with a rest, 47.8 MB), 26.3 KB on
# gpt2-small in fp32, 21.1 KB in amp-bf16 (17.7 MB), 18.2 KB on Llama 3.1 8B QLoRA at 2,048
# tokens (32.9 MB), under 7 KB on the Llama and uncheckpointed Qwen rows. The half block per
# tensor counted before left the closed form 0.14-0.34 % under the H200's measurement
# (benchmarks/results/gpu-nvidia-h200-2026-11-30.md).
UNSPLIT_PER_TENSOR = 40 * 1024

# The CUDA context: the driver's state, the kernels loaded (lazily, CUDA_MODULE_LOADING=LAZY,
# PyTorch's default since CUDA 11.7), cuBLAS/cuDNN handles. "≈ 300–500 MB on current drivers"
# (/work/shared/REFERENCE.md, "Memory and time on PyTorch"); the upper end is used, so a fit is
# never called on the low side. `journal-agent profile` on the GPU measures yours (NVML used
# minus reserved).
CONTEXT = 500 * MiB
# Measured on an H200 (driver 580.159.04, CUDA 13.0, torch 2.11, 2026-11-30;
# benchmarks/results/gpu-probe-nvidia-h200-2026-11-30.json and hf-peft-nvidia-h200-*.json):
# NVML's used less the allocator's reserve and less what the driver held before any context
# (644,939,776 B, memory info v1's "reserved for system use", which v2 and nvidia-smi leave out):
# 648,871,936 B once CUDA starts, 804,061,184 after a Trainer + peft step's kernels are loaded,
# 871,170,048 after the probe's (lazy loading adds each kernel as it first runs). The most
# seen, rounded up to a MiB, for Hopper and later, where the 300–500 MB above was too little.
CONTEXT_SM90 = 831 * MiB


def context(cfg: TrainingConfig) -> int:
    """The CUDA context nvidia-smi counts beside the allocator's reserve, by GPU: measured on
    Hopper, the reference's upper end before it (and with no GPU named)."""
    return CONTEXT_SM90 if cfg.gpu in SM90 else CONTEXT


CONTEXT_MEASURED = (
    "measured on an H200: driver 580.159.04, CUDA 13.0, torch 2.11; "
    "benchmarks/results/gpu-probe-nvidia-h200-2026-11-30.json"
)
CONTEXT_ASSUMED = "assumed: the upper end of the 300–500 MB drivers take"


def context_label(cfg: TrainingConfig) -> str:
    """The context's name as a cited quantity: measured on Hopper and later, assumed before."""
    return f"CUDA context ({CONTEXT_MEASURED if cfg.gpu in SM90 else CONTEXT_ASSUMED})"


def context_text(cfg: TrainingConfig, why: bool = False) -> str:
    """``CUDA context N MiB``, with ``why`` where the figure comes from."""
    text = f"CUDA context {_mib(context(cfg))}"
    if not why:
        return text
    return text + (
        " (measured on an H200)" if cfg.gpu in SM90 else " (the upper end of 300–500 MB)"
    )


class CounterValue(BaseModel):
    counter: Counter
    bytes: int
    how: str  # where the number comes from, one sentence with its terms


class Counters(BaseModel):
    """The three counters of one step's peak, per GPU."""

    allocated: CounterValue
    reserved: CounterValue
    nvml: CounterValue
    source: Literal["trace", "closed form"]
    paged: int = 0  # of nvml: a paged optimizer's managed memory, movable to the host
    # the least the allocator must be allowed to reserve for the step to run (cached segments
    # handed back and requests retried near the GPU's size); None: the reserve itself
    need: int | None = None
    need_how: str = ""

    def held(self) -> int:
        """What the allocator must hold for the step to run: its need, or its reserve."""
        return self.reserved.bytes if self.need is None else min(self.need, self.reserved.bytes)

    def must_fit(self) -> int:
        """What must stay on the GPU: what the allocator cannot hand back and retry without,
        what nvidia-smi counts outside it, less the pageable optimizer state."""
        return self.nvml.bytes - self.reserved.bytes + self.held() - self.paged

    def of(self, counter: Counter) -> CounterValue:
        return {"allocated": self.allocated, "reserved": self.reserved, "nvml": self.nvml}[counter]


def _mib(n: int) -> str:
    return f"{n / MiB:g} MiB"


def workspaces(cfg: TrainingConfig) -> list[int]:
    """cuBLAS's workspaces the step holds (one per stream), then cuBLASLt's (one per thread
    that runs a linear with a bias: ``profiling.estimate.cublaslt``)."""
    from profiling.estimate.cublaslt import lt_workspaces

    size = WORKSPACE_SM90 if (cfg.gpu is None or cfg.gpu in SM90) else WORKSPACE_OLDER
    return [size] * STREAMS + lt_workspaces(cfg)


def _workspace_text(cfg: TrainingConfig) -> str:
    from profiling.estimate.cublaslt import LT_WORKSPACE, lt_workspaces

    each = workspaces(cfg)[0]
    arch = "sm90+" if each == WORKSPACE_SM90 else "before sm90"
    text = f"cuBLAS workspaces {STREAMS} × {_mib(each)} ({arch}, PyTorch's default)"
    lt = len(lt_workspaces(cfg))
    if lt:
        text += (f" + cuBLASLt's {lt} × {_mib(LT_WORKSPACE)} (linears with a bias; "
                 "measured on an H200)")  # fmt: skip
    return text


def _nvml(cfg: TrainingConfig, reserved: int, paged: int = 0) -> CounterValue:
    from profiling.estimate.comm import nccl_bytes, nccl_text
    from profiling.estimate.symm_mem import symm_mem_bytes, symm_mem_text

    nccl = nccl_bytes(cfg)  # NCCL's buffers have one home: profiling.estimate.comm
    how = f"reserved + {context_text(cfg, why=True)}"
    if nccl:
        how += " + " + nccl_text(cfg)
    symm = symm_mem_bytes(cfg)  # async TP's workspace, outside the caching allocator too
    if symm:
        how += " + " + symm_mem_text(cfg)
        nccl += symm
    if paged:
        how += f" + the paged optimizer state {fmt_bytes(paged)} while resident"
    return CounterValue(counter="nvml", bytes=reserved + context(cfg) + nccl + paged, how=how)


def tensors_alive(cfg: TrainingConfig, shape: dict[str, Any]) -> int:
    """About how many tensors are alive at the peak (each rounds up to 512 B, a large one may
    keep an unsplit rest): the parameters with their gradients and optimizer states, and some
    20 saved per layer — an overcount under LoRA and checkpointing, which the rests' average
    per tensor was fitted with."""
    from profiling.config import OPTIMIZERS

    tensors = int(shape.get("param_tensors") or 0)
    states = 1 + len(OPTIMIZERS[cfg.optimizer].states) + (1 if cfg.precision == "mixed" else 0)
    return tensors * (1 + states) + 20 * int(shape.get("layers") or 0)


def unsplit_rests(cfg: TrainingConfig, tensors: int) -> int:
    """The large pool's unsplit rests the allocated counter counts beside ``tensors`` tensors:
    none with expandable segments, where ``should_split`` splits off any rest of at least 512 B
    in either pool (``remaining >= kMinBlockSize`` when ``expandable_segments()``;
    c10/cuda/CUDACachingAllocator.cpp at pytorch/pytorch 001074d25084), so every block is its
    request rounded to 512 B; else ``UNSPLIT_PER_TENSOR`` each."""
    return 0 if cfg.expandable_segments else tensors * UNSPLIT_PER_TENSOR


def closed_form(
    cfg: TrainingConfig, peak: int, tensors: int, paged: int = 0, outside_loss: int | None = None,
    loss: bool = True, activations: int | None = None,
) -> Counters:  # fmt: skip
    """The counters from an estimated peak of ``tensors`` allocations' bytes (the rounding of
    each to 512 B is at most 511 B per tensor alive); ``outside_loss``: the step's peak outside
    the loss's moments, when known, ``loss``: whether the GPU computes the loss (the
    reserve's logits term), and ``activations``: the estimate's at the end of forward, when
    known (the reserve's activations' segments cached from backward on)."""
    from profiling.estimate.reserve import need_bound, reserved_bound

    extra = sum(workspaces(cfg)) + tensors * 256  # half a 512-byte block per tensor, on average
    rests = unsplit_rests(cfg, tensors)
    allocated = peak + extra + rests
    # The reserve's and the need's terms were fitted to replays whose blocks hold their rests
    # (the cached blocks between sizes): they start, as then, from the blocks less the rests.
    pre = None if outside_loss is None else outside_loss + extra
    reserved, reserve_how = reserved_bound(cfg, peak + extra, pre, loss, activations)
    need, need_how = need_bound(cfg, peak + extra, loss)
    if rests:
        less = f"allocated − its unsplit rests {fmt_bytes(rests)} + "
        reserve_how, need_how = (
            h.replace("allocated + ", less, 1) for h in (reserve_how, need_how)
        )
    rounding = (
        "512-byte rounding (expandable segments split every block: no unsplit rests)"
        if cfg.expandable_segments
        else "512-byte rounding and unsplit block rests (up to 1 MiB each)"
    )
    return Counters(
        allocated=CounterValue(
            counter="allocated",
            bytes=allocated,
            how=f"the step's peak + {_workspace_text(cfg)} + {rounding} of about {tensors:,} "
            "tensors",
        ),
        reserved=CounterValue(
            counter="reserved",
            bytes=reserved,
            how=reserve_how
            + (" (expandable segments)" if cfg.expandable_segments else "")
            + " (an upper bound; trace --counter reserved replays this step's own allocations)",
        ),
        nvml=_nvml(cfg, reserved, paged),
        source="closed form",
        paged=paged,
        need=need,
        need_how=need_how + " (an upper bound)",
    )


def from_replay(
    cfg: TrainingConfig, allocated: int, reserved: int, reserved_expandable: int, requests: int,
    how: str = "", paged: int = 0, need: int | None = None,
) -> Counters:  # fmt: skip
    """The counters from the trace's allocations replayed through the allocator's model;
    ``need``: the least memory the replay ran in (None: not searched)."""
    # segments hold every allocated block (``allocated`` may be raised to a composed peak)
    chosen = max(allocated, reserved_expandable if cfg.expandable_segments else reserved)
    other = reserved if cfg.expandable_segments else reserved_expandable
    mode = "expandable segments" if cfg.expandable_segments else "default segments"
    other_mode = "default" if cfg.expandable_segments else "expandable_segments:True"
    return Counters(
        allocated=CounterValue(
            counter="allocated",
            bytes=allocated,
            how=f"the trace's {requests:,} allocations in 512-byte blocks + {_workspace_text(cfg)}"
            + (f"; {how}" if how else ""),
        ),
        reserved=CounterValue(
            counter="reserved",
            bytes=chosen,
            how=f"those allocations and frees replayed through the caching allocator ({mode}: "
            "512 B rounding, 2 MiB small / 20 MiB large segments, best fit, split and merged); "
            f"{other_mode} would hold {fmt_bytes(other)}",
        ),
        nvml=_nvml(cfg, chosen, paged),
        source="trace",
        paged=paged,
        need=need,
        need_how=""
        if need is None
        else "the least memory those allocations replay in, the "
        "allocator handing its cached segments back to CUDA and retrying where a segment "
        "would not fit, as PyTorch's does before it runs out of memory",
    )


def counter_lines(counters: Counters, counter: Counter) -> list[str]:
    """The counters up to the one asked for, each with where it comes from."""
    order: list[Counter] = ["allocated", "reserved", "nvml"]
    shown = order[: order.index(counter) + 1]
    label = {"allocated": "allocated", "reserved": "reserved", "nvml": "nvidia-smi"}
    lines = [f"Counters ({counters.source}; per GPU):"]
    for name in shown:
        value = counters.of(name)
        lines.append(f"  {label[name]}: {fmt_bytes(value.bytes)} = {value.how}")
        if name == "reserved" and counters.held() < value.bytes:
            lines.append(f"  reserved on a GPU near full: {fmt_bytes(counters.held())} = "
                         f"{counters.need_how}")  # fmt: skip
    return lines


__all__ = [
    "CONTEXT",
    "CONTEXT_SM90",
    "UNSPLIT_PER_TENSOR",
    "Counter",
    "CounterValue",
    "Counters",
    "closed_form",
    "context",
    "context_label",
    "context_text",
    "counter_lines",
    "from_replay",
    "outside_loss",
    "tensors_alive",
    "workspaces",
]
