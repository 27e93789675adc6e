"""Text, JSON and the ``measured`` record for a :class:`~profiling.measure.profiler.ProfileSummary`.

Light: no torch. Units: decimal bytes (GB = 10^9) as GPU sizes are quoted, seconds shown in
ms/µs where that reads better.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from profiling.citations import cite
from profiling.records import MeasurementRecord, Quantity, new_record_id
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.measure.devices import GpuInfo
    from profiling.measure.summary import ProfileSummary, StepStats


class ComparisonRow(TypedDict):
    """One row of measured ÷ traced (``profiling.measure.run.compare_rows``)."""

    what: str  # "forward peak", "after backward", "step peak", ...
    measured_bytes: int
    traced_bytes: int
    ratio: float | None  # None when the trace counted 0 bytes
    step: int | None  # the measured step compared
    target: str  # whose kernels the trace kept: "cuda" or "cpu"


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def fmt_rate(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.1f} {unit}"


def _device_line(device: dict[str, Any]) -> str:
    if device.get("kind") == "cuda":
        total = device.get("total_bytes")
        size = f", {fmt_bytes(total)}" if total else ""
        drv = f", driver {device['driver']}" if device.get("driver") else ""
        return f"{device.get('label', 'cuda')} ({device.get('name')}{size}{drv})"
    return f"cpu ({device.get('name') or 'CPU'}, {device.get('cpus')} CPUs)"


def render_summary(s: ProfileSummary) -> str:
    """The report a user reads: memory by phase and step, spikes, times, throughput."""
    lines: list[str] = []
    timed = s.steps_recorded - min(s.warmup, s.steps_recorded)
    lines.append(
        f"Measured on {_device_line(s.device)}: {s.steps_recorded} steps, the first "
        f"{min(s.warmup, s.steps_recorded)} warm-up (excluded from the times; {timed} timed)"
    )
    lines.append(f"Memory counted: {s.memory_kind}")
    where = ""
    if s.peak_step is not None:
        where = f" at step {s.peak_step}" + (f", {s.peak_phase}" if s.peak_phase else "")
    lines.append(f"Peak: {fmt_bytes(s.peak_bytes)}{where}")
    lines += [s.warmup_line(fmt_bytes)] if s.warmup_peak_bytes is not None else []
    lines.append("")
    header = (
        f"{'phase':<14}{'peak':>11}{'mean':>11}{'min':>11}{'max':>11}{'at end':>11}"
        f"{'median time':>13}{'IQR':>11}{'min time':>11}"
    )
    lines.append(header)
    for p in s.phases:
        t = p.time
        lines.append(
            f"{p.name:<14}{fmt_bytes(p.peak_bytes):>11}{fmt_bytes(p.mean_bytes):>11}"
            f"{fmt_bytes(p.min_bytes):>11}{fmt_bytes(p.max_bytes):>11}{fmt_bytes(p.end_bytes):>11}"
            f"{fmt_time(t.median if t else None):>13}{fmt_time(t.iqr if t else None):>11}"
            f"{fmt_time(t.min if t else None):>11}"
        )
    lines.append("(peak, mean, min, max: of each step's peak in that phase; at end: last step)")
    lines.append("")
    lines.extend(_step_lines(s))
    lines.append("")
    lines.extend(_time_lines(s))
    lines.extend(_spike_lines(s))
    proc = _process_line(s)
    if proc:
        lines.append(proc)
    if s.oom is not None:
        o = s.oom
        lines.append(
            f"OUT OF MEMORY at step {o.step}, phase {o.phase}: {fmt_bytes(o.snapshot.current)} "
            f"held, peak {fmt_bytes(o.snapshot.peak)} ({o.message})"
        )
    lines.extend(_overhead_lines(s))
    lines.extend(f"note: {note}" for note in s.notes)
    return "\n".join(lines)


def _step_lines(s: ProfileSummary) -> list[str]:
    lines = []
    lines.append("step  peak        at end      time" + ("        RSS" if _any_rss(s) else ""))
    for st in _elide(s.steps):
        if st is None:
            lines.append("  …")
            continue
        rss = f"  {fmt_bytes(st.rss):>9}" if st.rss is not None else ""
        mark = "  (warm-up)" if st.warmup else ""
        lines.append(
            f"{st.step:<5} {fmt_bytes(st.peak_bytes):>10}  {fmt_bytes(st.end_bytes):>10}  "
            f"{fmt_time(st.time_s):>10}{rss}{mark}"
        )
    return lines


def _time_lines(s: ProfileSummary) -> list[str]:
    lines = []
    if s.step_time:
        t = s.step_time
        lines.append(
            f"Time per step: median {fmt_time(t.median)} (IQR {fmt_time(t.iqr)}, min "
            f"{fmt_time(t.min)}) over {t.n} timed steps"
        )
    else:
        lines.append("Time per step: no timed steps (all were warm-up)")
    extras = []
    if s.backward_forward_ratio is not None:
        extras.append(f"backward ÷ forward {s.backward_forward_ratio:.2f}")
    if s.tokens_per_s is not None:
        extras.append(f"{s.tokens_per_s:,.0f} tokens/s ({s.tokens_per_step:,} tokens per step)")
    if s.flops_per_s is not None:
        extras.append(f"{fmt_rate(s.flops_per_s, 'FLOP/s')} achieved")
    if extras:
        lines.append("; ".join(extras))
    return lines


def _spike_lines(s: ProfileSummary) -> list[str]:
    lines = []
    if s.spikes:
        lines.append(f"Spikes (peak > running median of earlier steps + {s.spike_threshold:.0%}):")
        for sp in s.spikes:
            lines.append(
                f"  step {sp.step}, {sp.phase}: {fmt_bytes(sp.peak_bytes)} vs median "
                f"{fmt_bytes(sp.median_bytes)} (+{sp.excess_pct:.0f}%)"
            )
    else:
        lines.append(f"Spikes: none above the running median + {s.spike_threshold:.0%}")
    return lines


def _overhead_lines(s: ProfileSummary) -> list[str]:
    lines = []
    if s.overhead_s_per_step is not None and s.step_time:
        share = 100 * s.overhead_s_per_step / s.step_time.median if s.step_time.median else 0
        lines.append(
            f"Profiler overhead: {fmt_time(s.overhead_s_per_step)} per step in record_step and "
            f"phases ({share:.2f}% of the median step)"
            + (
                f"; live-tensor accounting saw {s.ops_per_step:,.0f} operators per step"
                if s.ops_per_step
                else ""
            )
        )
    return lines


def _any_rss(s: ProfileSummary) -> bool:
    return any(st.rss is not None for st in s.steps)


def _elide(steps: list[StepStats], keep: int = 12) -> list[StepStats | None]:
    if len(steps) <= keep:
        return list(steps)
    return [*steps[: keep // 2], None, *steps[-keep // 2 :]]


def _cuda_lines(s: ProfileSummary) -> list[str]:
    last = s.last
    if last is None:
        return []
    out = [
        f"Allocator at the last step: allocated {fmt_bytes(last.current)}, reserved "
        f"{fmt_bytes(last.reserved or 0)} (reserved peak {fmt_bytes(s.peak_reserved or 0)}; "
        "reserved = allocated + blocks cached for reuse); "
        f"{last.alloc_retries or 0} allocation retries, {last.ooms or 0} OOMs"
    ]
    if last.nvml_used is not None:
        gap = last.nvml_used - (last.reserved or 0)
        mine = (
            f"; this process, by NVML: {fmt_bytes(last.process_used)}"
            if last.process_used is not None
            else ""
        )
        out.append(
            f"NVML: {fmt_bytes(last.nvml_used)} used of {fmt_bytes(last.nvml_total or 0)} on "
            f"this GPU — {fmt_bytes(gap)} more than the allocator reserved: the CUDA context, "
            f"other libraries' memory and other processes{mine}"
        )
    else:
        out.append("NVML: not available here, so the CUDA context and other processes are unseen")
    return out


def _process_line(s: ProfileSummary) -> str:
    if s.device.get("kind") == "cuda":
        return "\n".join(_cuda_lines(s))
    parts = []
    if s.rss_end is not None:
        parts.append(f"RSS {fmt_bytes(s.rss_end)} at the last step")
    if s.rss_start is not None:
        parts.append(f"{fmt_bytes(s.rss_start)} at start")
    if s.uss_end is not None:
        parts.append(f"USS {fmt_bytes(s.uss_end)} at the end")
    if s.rss_high_water is not None:
        parts.append(f"process lifetime peak RSS {fmt_bytes(s.rss_high_water)}")
    if not parts:
        return ""
    return (
        "Process (all its memory, not only tensors): "
        + ", ".join(parts)
        + " — RSS counts resident pages, USS the pages only this process holds"
    )


def summary_json(s: ProfileSummary, record_id: str | None) -> dict[str, object]:
    """The JSON of ``profile --json``: the issue's keys first, then the rest."""
    return {
        "record_id": record_id,
        "device": s.device,
        "memory_kind": s.memory_kind,
        "peak_bytes": s.peak_bytes,
        "peak_step": s.peak_step,
        "peak_phase": s.peak_phase,
        "warmup_peak": s.warmup_peak,
        "phases": [
            {
                "name": p.name,
                "peak_bytes": p.peak_bytes,
                "mean_bytes": p.mean_bytes,
                "min_bytes": p.min_bytes,
                "max_bytes": p.max_bytes,
                "end_bytes": p.end_bytes,
                "median_time_s": p.time.median if p.time else None,
                "iqr_time_s": p.time.iqr if p.time else None,
                "min_time_s": p.time.min if p.time else None,
            }
            for p in s.phases
        ],
        "steps": [st.model_dump() for st in s.steps],
        "spikes": [sp.model_dump() for sp in s.spikes],
        "warmup_steps": s.warmup,
        "time_per_step_s": s.step_time.median if s.step_time else None,
        "time_per_step": s.step_time.model_dump() if s.step_time else None,
        "tokens_per_s": s.tokens_per_s,
        "flops_per_s": s.flops_per_s,
        "flops_per_step": s.flops_per_step,
        "backward_forward_ratio": s.backward_forward_ratio,
        "process": {
            "rss_start": s.rss_start,
            "rss_end": s.rss_end,
            "uss_start": s.uss_start,
            "uss_end": s.uss_end,
            "rss_high_water": s.rss_high_water,
        },
        "overhead_s_per_step": s.overhead_s_per_step,
        "ops_per_step": s.ops_per_step,
        "oom": s.oom.model_dump(mode="json") if s.oom else None,
        "notes": s.notes,
    }


def summary_quantities(s: ProfileSummary) -> list[Quantity]:
    """The numbers an entry may quote, with units (``journal check`` matches against these)."""
    q = [Quantity(name="peak", value=s.peak_bytes, unit="B")]
    if s.warmup_peak_bytes is not None:
        q.append(Quantity(name="warmup_peak", value=s.warmup_peak_bytes, unit="B"))
    for p in s.phases:
        q.append(Quantity(name=f"peak_{p.name}", value=p.peak_bytes, unit="B"))
        q.append(Quantity(name=f"mean_{p.name}", value=p.mean_bytes, unit="B"))
        q.append(Quantity(name=f"end_{p.name}", value=p.end_bytes, unit="B"))
        q.append(Quantity(name=f"min_{p.name}", value=p.min_bytes, unit="B"))
        q.append(Quantity(name=f"max_{p.name}", value=p.max_bytes, unit="B"))
        if p.time:
            q.append(Quantity(name=f"median_time_{p.name}", value=p.time.median, unit="s"))
            q.append(Quantity(name=f"iqr_time_{p.name}", value=p.time.iqr, unit="s"))
            q.append(Quantity(name=f"min_time_{p.name}", value=p.time.min, unit="s"))
    if s.step_time:
        q.append(Quantity(name="time_per_step", value=s.step_time.median, unit="s"))
        q.append(Quantity(name="time_per_step_iqr", value=s.step_time.iqr, unit="s"))
        q.append(Quantity(name="time_per_step_min", value=s.step_time.min, unit="s"))
    for name, value, unit in (
        ("tokens_per_s", s.tokens_per_s, "tokens/s"),
        ("flops_per_s", s.flops_per_s, "FLOP/s"),
        ("flops_per_step", s.flops_per_step, "FLOP"),
        ("backward_forward_ratio", s.backward_forward_ratio, ""),
        ("rss_end", s.rss_end, "B"),
        ("rss_start", s.rss_start, "B"),
        ("uss_end", s.uss_end, "B"),
        ("rss_high_water", s.rss_high_water, "B"),
        ("profiler_overhead_per_step", s.overhead_s_per_step, "s"),
    ):
        if value is not None:
            q.append(Quantity(name=name, value=value, unit=unit))
    for st in s.steps:
        q.append(Quantity(name=f"step_{st.step}_peak", value=st.peak_bytes, unit="B"))
        q.append(Quantity(name=f"step_{st.step}_end", value=st.end_bytes, unit="B"))
        if st.rss is not None:
            q.append(Quantity(name=f"step_{st.step}_rss", value=st.rss, unit="B"))
        if st.time_s is not None:
            q.append(Quantity(name=f"step_{st.step}_time", value=st.time_s, unit="s"))
    if s.oom is not None:
        q.append(Quantity(name="oom_current", value=s.oom.snapshot.current, unit="B"))
    return q


def measured_record(
    s: ProfileSummary,
    title: str | None = None,
    config: dict[str, object] | None = None,
    extra: dict[str, object] | None = None,
    quantities: list[Quantity] | None = None,
) -> MeasurementRecord:
    from profiling.measure.devices import software_versions

    label = s.device.get("label") or s.device.get("kind", "device")
    return MeasurementRecord(
        id=new_record_id("measured"),
        kind="measured",
        title=title or f"Measured on {label}: {s.steps_recorded} steps",
        device=s.device,
        software=software_versions(),
        config={**(config or {}), "warmup": s.warmup, "spike_threshold": s.spike_threshold},
        results=summary_quantities(s) + list(quantities or []),
        notes="\n".join(s.notes),
        extra={
            "table": render_summary(s),
            "summary": s.model_dump(mode="json"),
            **(extra or {}),
        },
    )


# --------------------------------------------------------------------- a measured run


def render_comparison(rows: list[ComparisonRow], trace_id: str | None = None) -> str:
    """Measured beside traced, ratio per phase (and what the ratio means)."""
    if not rows:
        return ""
    target = rows[0].get("target")
    where = "the same step under fake tensors" + (f", target {target}" if target else "")
    where += f" {cite(trace_id)}" if trace_id else ""
    lines = [f"Measured ÷ traced ({where}), step {rows[0]['step']}:"]
    lines.append(f"{'':<18}{'measured':>12}{'traced':>12}{'ratio':>9}{'difference':>16}")
    for r in rows:
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.4f}"
        diff = r["measured_bytes"] - r["traced_bytes"]
        lines.append(
            f"{r['what']:<18}{fmt_bytes(r['measured_bytes']):>12}"
            f"{fmt_bytes(r['traced_bytes']):>12}{ratio:>9}{diff:>+14,} B"
        )
    return "\n".join(lines)


def run_setup(run: Any) -> str:
    """The run's setup, without the trace's ``target``: a measured run ran on its own device
    ("target cuda on cpu" read as if it had run on both)."""
    from profiling.trace.report import describe_trace_setup

    parts = describe_trace_setup(run.config).split(", ")
    return ", ".join(p for p in parts if not p.startswith("target "))


def run_record(run: Any, trace_id: str | None = None) -> MeasurementRecord:
    """The ``measured`` record of a ``profile`` run: summary, configuration, comparison."""
    s = run.summary
    extra_q = [
        Quantity(
            name=f"measured_over_traced_{r['what'].replace(' ', '_')}", value=r["ratio"], unit=""
        )
        for r in run.comparison
        if r["ratio"] is not None
    ]
    extra_q.append(Quantity(name="params", value=run.params, unit=""))
    table = render_summary(s)
    if run.comparison:
        table += "\n\n" + render_comparison(run.comparison, trace_id)
    record = measured_record(
        s,
        title=f"Measured on {s.device.get('label', 'device')}: {run_setup(run)}",
        config={
            **run.config.model_dump(),
            "model_info": run.model_info,
            "steps": run.options.steps,
        },
        extra={"comparison": run.comparison, "trace_record": trace_id},
        quantities=extra_q,
    )
    record.extra["table"] = table
    return record


def run_json(run: Any, record_id: str, trace_id: str | None = None) -> dict[str, object]:
    out = summary_json(run.summary, record_id)
    out["config"] = run.config.model_dump()
    out["params"] = run.params
    out["trace"] = (
        {"record_id": trace_id, "peak_bytes": run.trace.peak_bytes}
        if run.trace is not None
        else None
    )
    out["measured_over_traced"] = run.comparison
    return out


# --------------------------------------------------------------------- devices


def _fmt(n: int | None) -> str:
    return "—" if n is None else fmt_bytes(n)


def render_gpu_info(info: GpuInfo) -> str:
    """The text of ``journal-agent gpu`` (also what the DeviceInfo tool returns)."""
    host = info.host
    cpu = f"CPU: {host.get('cpu')}, {host.get('cpus')} CPUs, {_fmt(host.get('ram_bytes'))} RAM"
    torch = f"torch {info.torch or 'not installed'}"
    if not info.available:
        return f"{info.reason}.\n{cpu}; {torch}"
    lines = [
        f"NVIDIA driver {info.driver}, CUDA driver API {info.cuda_driver}, NVML {info.nvml}; "
        f"{torch} (built for CUDA {info.torch_cuda or 'none'}; "
        f"{'sees' if info.torch_sees_cuda else 'does NOT see'} the GPUs)"
    ]
    for d in info.devices:
        util = "—" if d.utilization_gpu_pct is None else f"{d.utilization_gpu_pct:.0f}%"
        lines.append(
            f"GPU {d.index}: {d.name} — {_fmt(d.used_bytes)} used of {_fmt(d.total_bytes)} "
            f"(driver-reserved {_fmt(d.reserved_bytes)}, free {_fmt(d.free_bytes)}), "
            f"utilization {util}"
        )
        for p in d.processes:
            lines.append(f"  pid {p.pid} {p.name}: {_fmt(p.used_bytes)}")
        if not d.processes:
            lines.append("  no compute processes")
    lines.append(cpu)
    return "\n".join(lines)


def device_record(info: GpuInfo) -> MeasurementRecord:
    """What ``gpu`` / DeviceInfo saw, as a ``measured`` record (memory in use per GPU)."""
    from profiling.measure.devices import software_versions

    results = [Quantity(name="ram", value=info.host.get("ram_bytes") or 0, unit="B")]
    for d in info.devices:
        for name in ("total", "used", "reserved", "free"):
            value = getattr(d, f"{name}_bytes")
            if value is not None:
                results.append(Quantity(name=f"gpu{d.index}_{name}", value=value, unit="B"))
        for p in d.processes:
            if p.used_bytes is not None:
                results.append(
                    Quantity(name=f"gpu{d.index}_pid{p.pid}_used", value=p.used_bytes, unit="B")
                )
    title = (
        f"Devices: {len(info.devices)} × {info.devices[0].name}"
        if info.devices
        else "Devices: no NVIDIA GPU (CPU only)"
    )
    return MeasurementRecord(
        id=new_record_id("measured"),
        kind="measured",
        title=title,
        device=info.model_dump(mode="json"),
        software=software_versions(),
        results=results,
        notes=info.reason or "",
        extra={"table": render_gpu_info(info)},
    )
