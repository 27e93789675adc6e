"""An estimate as text: the verdict against a GPU (✅ / ⚠️ / ❌), the moments of the step, the
table in the user's journal format.

No torch here.
"""

from __future__ import annotations

from typing import Any

from profiling.units import fmt_bytes

# ``est`` below is a ``profiling.estimate.memory.Estimate`` (not imported: memory imports this).
Estimate = Any

# Below this share of the GPU an estimate is ✅; up to 100 % it is ⚠️ (allocator fragmentation,
# the CUDA context and NCCL buffers take the rest); above, ❌.
HEADROOM = 0.90


def describe_setup(inp: Any, shape: dict[str, Any]) -> str:
    return inp.describe().replace(inp.model or "\0", shape["name"], 1)


def status_for(need: int, available: int) -> tuple[bool, str]:
    """(fits, ✅ / ⚠️ / ❌): ✅ up to HEADROOM of the GPU, ⚠️ up to all of it, ❌ beyond."""
    fits = need <= available
    return fits, "✅" if need <= HEADROOM * available else ("⚠️" if fits else "❌")


def verdict_text(need: int, available: int, per: str = "per GPU") -> str:
    _, status = status_for(need, available)
    avail, needed = fmt_bytes(available, "GB"), fmt_bytes(need, "GB")
    if status == "✅":
        return f"✅ Fits: {needed} of {avail} {per}"
    if status == "⚠️":
        return f"⚠️ Tight: {needed} of {avail} {per} (over {HEADROOM:.0%}: little headroom)"
    return f"❌ Exceeds {avail}: {needed} needed {per}"


def verdict(est: Estimate) -> str:
    if est.gpu_mem_bytes is None:
        return ""
    return verdict_text(est.per_gpu_bytes, est.gpu_mem_bytes)


def moment_lines(est: Estimate) -> list[str]:
    """The moments of the step, the peak marked, as plain lines."""
    lines = []
    for m in est.moments:
        mark = "  ← peak" if m.name == est.peak_moment else ""
        lines.append(f"  {m.name}: {fmt_bytes(m.bytes, 'GB')} = {m.calculation}{mark}")
    return lines


def time_lines(est: Estimate) -> list[str]:
    if est.time is None:
        return []
    from profiling.estimate.time import render_time

    return render_time(est.time)


def counters_block(est: Estimate) -> list[str]:
    """The counters up to the one asked for (``--counter reserved|nvml``), and with a GPU size,
    what nvidia-smi would show against it."""
    if est.counters is None or est.inputs.counter == "allocated":
        return []
    from profiling.estimate.counters import counter_lines

    lines = counter_lines(est.counters, est.inputs.counter)
    if est.gpu_mem_bytes:
        c, avail = est.counters, est.gpu_mem_bytes
        released = c.reserved.bytes - c.held()
        lines.append(f"  {nvml_verdict(c.nvml.bytes, avail, c.paged, released)}")
    return lines


def comm_of(est: Estimate) -> tuple[Any, float | None] | None:
    """With more than one GPU: what a GPU sends per step and NCCL's buffers
    (``profiling.estimate.comm``), with the compute that hides the overlapped part."""
    from profiling.estimate.comm import comm

    if est.inputs.gpus == 1 and est.inputs.tp == 1:
        return None
    timed = est.time.time if est.time is not None else None
    return comm(est.inputs, est.shape), timed.compute_seconds if timed is not None else None


def comm_block(est: Estimate) -> list[str]:
    from profiling.estimate.comm import comm_lines

    found = comm_of(est)
    return comm_lines(*found) if found else []


def host_block(est: Estimate) -> list[str]:
    """What DeepSpeed's offload keeps in host memory (``--deepspeed``), with its verdict."""
    from profiling.estimate.deepspeed_engine import host_text

    return host_text((est.deepspeed or {}).get("host"))


# What fit and the nvidia-smi verdict leave for what no counter models (other processes on the
# GPU, kernels' own scratch; the allocator's retries are modelled): a share of the GPU's memory.
SAFETY_MARGIN = 0.05


def nvml_verdict(nvml: int, available: int, paged: int = 0, released: int = 0) -> str:
    """What nvidia-smi would show against the GPU; a paged optimizer's state gives way: the
    driver moves it to host memory rather than let the step run out of memory; ``released``:
    the cached segments the allocator hands back and retries without near the GPU's size."""
    usable = available * (1 - SAFETY_MARGIN)
    word = "fits" if nvml - released - paged <= usable else "does not fit"
    out = nvml - released - usable
    if released and nvml > usable >= nvml - released:
        # Lead with what a GPU this size shows (D55: "would show 6.30 GB of 6.00 GB: fits"
        # read as a contradiction, and fit listed the same row at the near-full figure).
        return (
            f"nvidia-smi would show {fmt_bytes(nvml - released, 'GB')} near full of "
            f"{fmt_bytes(available, 'GB')}: fits with {fmt_bytes(released, 'GB')} of cached "
            "segments handed back (the allocator releases them and retries before it runs out "
            f"of memory; a larger GPU would keep them: {fmt_bytes(nvml, 'GB')}) (safety margin "
            f"{SAFETY_MARGIN:.0%}: usable {fmt_bytes(usable, 'GB')})"
        )
    if released and nvml > usable and word == "fits":  # and paging besides
        word += f" with {fmt_bytes(released, 'GB')} of cached segments handed back"
    if paged and out > 0 and nvml - released - paged <= usable:
        word += (
            f" by paging: {fmt_bytes(out, 'GB')} of the paged optimizer state moved to host "
            "memory (each step pays the transfers)"
        )
    return (
        f"nvidia-smi would show {fmt_bytes(nvml, 'GB')}"
        + (" with the paged state resident" if paged else "")
        + " of "
        f"{fmt_bytes(available, 'GB')}: {word} (safety margin {SAFETY_MARGIN:.0%}: usable "
        f"{fmt_bytes(usable, 'GB')})"
    )


def nvml_status(counters: Any, available: int) -> tuple[bool, str, str]:
    """(fits, ✅ / ❌, the sentence) by nvidia-smi near full: what must fit (``Counters.must_fit``:
    the reserve a GPU near full keeps, the context, NCCL's buffers, less the pageable state)
    against the GPU less the safety margin — the one verdict of a ``--counter reserved|nvml``
    trace, which replays the allocator and so decides by it, not by the allocated peak."""
    c = counters
    usable = available * (1 - SAFETY_MARGIN)
    fits = c.must_fit() <= usable
    sentence = nvml_verdict(c.nvml.bytes, available, c.paged, c.reserved.bytes - c.held())
    status = "✅" if fits else "❌"
    return fits, status, f"{status} {sentence}"  # the sentence ends "fits" or "does not fit"


def render_text(est: Estimate) -> str:
    """The table in the user's journal format: component, memory per GPU, calculation."""
    rows = [(c.name, fmt_bytes(c.bytes, "GB"), c.calculation) for c in est.components]
    total = (
        "Total per GPU (allocated)",
        fmt_bytes(est.per_gpu_bytes, "GB"),
        f"the peak, at the {est.peak_moment}" + (f"; {verdict(est)}" if verdict(est) else ""),
    )
    w0 = max(len(r[0]) for r in [*rows, total]) + 2
    w1 = max(len(r[1]) for r in [*rows, total]) + 2
    width = w0 + w1 + max(len(r[2]) for r in [*rows, total])
    rule = "─" * width
    lines = [
        f"Memory for training {describe_setup(est.inputs, est.shape)}",
        "",
        f"{'Component':<{w0}}{'Per GPU':<{w1}}Calculation",
        rule,
    ]
    lines += [f"{a:<{w0}}{b_:<{w1}}{c}" for a, b_, c in rows]
    lines += [rule, f"{total[0]:<{w0}}{total[1]:<{w1}}{total[2]}"]
    lines += [
        "",
        "Moments of the step (not every row is alive at once; the total is the largest):",
        *moment_lines(est),
    ]
    if est.inputs.zero or est.inputs.gpus > 1:
        lines.append(
            f"Without ZeRO: {fmt_bytes(est.unsharded_bytes, 'GB')} (the same step on one GPU, "
            "nothing sharded)"
        )
    lines.append(f"({fmt_bytes(est.per_gpu_bytes, 'GiB')} per GPU; 1 GB = 10^9 B, 1 GiB = 2^30 B)")
    lines += counters_block(est)
    lines += comm_block(est)
    lines += host_block(est)
    if est.time is not None:
        lines += ["", "Time:", *(f"  {line}" for line in time_lines(est))]
    for note in est.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


__all__ = [
    "HEADROOM",
    "SAFETY_MARGIN",
    "comm_block",
    "counters_block",
    "describe_setup",
    "host_block",
    "moment_lines",
    "nvml_status",
    "nvml_verdict",
    "render_text",
    "status_for",
    "time_lines",
    "verdict",
    "verdict_text",
]
