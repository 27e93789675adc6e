"""A trace's record, JSON and text, and the trace beside the estimate of the same configuration.

Light: no torch. ``TraceResult`` is imported for the type checker only, so this module can be
imported without importing ``profiling.trace.step``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling._config_describe import describe_step_kind
from profiling.config import TrainingConfig
from profiling.estimate.comparison import CompareRow, Comparison
from profiling.estimate.memory import Estimate, EstimateInput
from profiling.estimate.record import estimate_categories
from profiling.records import (
    MeasurementRecord,
    Quantity,
    host_device,
    new_record_id,
    software_versions,
)
from profiling.units import fmt_bytes, fmt_count

if TYPE_CHECKING:
    from profiling.trace.step import TraceResult
    from profiling.trace.tracker import ModuleMemory


def describe_trace_setup(cfg: TrainingConfig) -> str:
    # A factory makes its own inputs: the length it was given (its own default, unless --seq),
    # or, when it takes none, the length it chose itself.
    shape = f"seq {cfg.seq} × batch {cfg.batch}"
    if cfg.is_factory and cfg.model is not None:
        from profiling.models.signature import takes_seq

        if not takes_seq(cfg.model):
            shape = f"seq (the factory's own) × batch {cfg.batch}"
    from profiling.models.shape_overrides import titled

    parts = [titled(cfg), shape, cfg.precision + (" + fp32 grads" if cfg.fp32_grads else "")]
    parts.append(cfg.optimizer)
    if cfg.fsdp:
        style = "FSDP2" + ("" if cfg.reshard_after_forward else " (no reshard: ZeRO-2 style)")
        parts.append(f"{style} × {cfg.world_size} ranks")
    elif cfg.world_size > 1:  # nothing sharded: torch's DistributedDataParallel
        parts.append(f"DDP × {cfg.world_size} ranks")
    if cfg.checkpointing != "none":
        parts.append(f"{cfg.checkpointing} activation checkpointing")
    parts += describe_step_kind(cfg)  # LoRA, DPO, compile …: never read as plain full training
    if cfg.grads_kept:
        parts.append("gradients zeroed in place")
    parts.append(f"target {getattr(cfg, 'target', 'cpu')}")
    return ", ".join(parts)


def trace_record(result: TraceResult, gpu_mem_gb: float | None = None) -> MeasurementRecord:
    cfg = result.config
    verdict = trace_verdict(result, gpu_mem_gb)
    results = [
        Quantity(name="peak", value=result.peak_bytes, unit="B"),
        Quantity(name="first_step_peak", value=result.first_step_peak_bytes, unit="B"),
    ]
    results += [
        Quantity(name=f"peak_in_{k}", value=v, unit="B") for k, v in result.phase_peaks.items()
    ]
    results += [
        Quantity(name=f"peak_{k}", value=v, unit="B") for k, v in result.by_category.items()
    ]
    results += [
        Quantity(name=f"after_step_{k}", value=v, unit="B") for k, v in result.after_step.items()
    ]
    results += _printed_quantities(result)
    found = _comm_of(result)
    if found:
        from profiling.estimate.comm import comm_quantities

        results += comm_quantities(*found)
    if verdict:
        results.append(Quantity(name="gpu_memory", value=verdict["gpu_mem_bytes"], unit="B"))
    results.append(Quantity(name="params", value=result.params, unit=""))
    if result.paged_bytes:
        results.append(Quantity(name="paged_optimizer", value=result.paged_bytes, unit="B"))
    results += [
        Quantity(name="flops", value=result.flops.total, unit="FLOP"),
        Quantity(name="flops_forward", value=result.flops.forward, unit="FLOP"),
        Quantity(name="flops_backward", value=result.flops.backward, unit="FLOP"),
    ]
    if result.time is not None:
        t = result.time
        results += [
            Quantity(name="step_time", value=t.step_seconds, unit="s"),
            Quantity(name="tokens_per_second", value=t.tokens_per_second, unit="tokens/s"),
        ]
        if t.total_seconds is not None:
            results.append(Quantity(name="time_for_tokens", value=t.total_seconds, unit="s"))
    results.append(Quantity(name="wall", value=result.wall_seconds, unit="s"))
    return MeasurementRecord(
        id=new_record_id("traced"),
        kind="traced",
        title=f"Trace: {describe_trace_setup(cfg)}" + (" (per rank)" if cfg.fsdp else ""),
        device={**host_device(), "traced_device": "cpu (fake tensors)"},
        software=software_versions(torch=result.torch_version),
        config={**cfg.model_dump(), "model_info": result.model_info},
        results=results,
        steps=result.time.steps if result.time is not None else [],
        notes="\n".join(result.notes),
        extra={
            "phases": result.phases,
            "peak_phase": result.peak_phase,
            "first_step_peak_phase": result.first_step_peak_phase,
            "by_module": {k: v.model_dump() for k, v in result.by_module.items()},
            "flops_by_module": result.flops.by_module,
            "table": render_trace_text(result) + (f"\n{verdict['verdict']}" if verdict else ""),
            **{k: verdict[k] for k in ("fits", "status", "verdict") if k in verdict},
        },
    )


def _printed_quantities(result: TraceResult) -> list[Quantity]:
    """The other numbers the text shows, so that each can be cited: the "After forward"
    column, the totals after forward and after the step, and the module table's rows."""
    fwd = result.phases.get("after_forward", {})
    out = [Quantity(name=f"after_forward_{k}", value=v, unit="B") for k, v in fwd.items()]
    step_total = result.phases.get("after_optimizer_step", {}).get("total")
    if step_total is not None:
        out.append(Quantity(name="after_step_total", value=step_total, unit="B"))
    if result.counters is not None:
        from profiling.estimate.record import counter_quantities

        out += counter_quantities(result.counters, result.config.gpu_mem_bytes())
    for name, m in top_modules(result):
        out += [
            Quantity(name=f"module {name}: params", value=m.parameters, unit="B"),
            Quantity(name=f"module {name}: peak forward", value=m.peak_forward, unit="B"),
            Quantity(name=f"module {name}: peak backward", value=m.peak_backward, unit="B"),
        ]
    return out


def top_modules(result: TraceResult, modules: int = 12) -> list[tuple[str, ModuleMemory]]:
    """The modules the text shows: the highest peaks first."""
    return sorted(
        result.by_module.items(),
        key=lambda kv: max(kv[1].peak_forward, kv[1].peak_backward),
        reverse=True,
    )[:modules]


def trace_verdict(result: TraceResult, gpu_mem_gb: float | None) -> dict[str, Any]:
    """The trace against a GPU size: fits, ✅ / ⚠️ / ❌ and one sentence, by the counter asked
    for — the allocated peak's (``--counter allocated``), else what nvidia-smi would show on a
    GPU near full, the allocator replayed (``nvml_status``): never both, which could disagree
    (D61: "nvidia-smi would show 20.81 GB of 20.00 GB: does not fit" above "✅ Fits: 17.30 GB")."""
    if not gpu_mem_gb:
        return {}
    from profiling.estimate.memory import status_for, verdict_text
    from profiling.estimate.render import nvml_status

    avail = int(gpu_mem_gb * 1e9)
    per = "per rank" if result.config.fsdp else "on one GPU"
    if result.counters is not None and result.config.counter != "allocated":
        fits, status, text = nvml_status(result.counters, avail)
        return {"gpu_mem_bytes": avail, "fits": fits, "status": status, "verdict": text}
    fits, status = status_for(result.peak_bytes, avail)
    return {
        "gpu_mem_bytes": avail,
        "fits": fits,
        "status": status,
        "verdict": verdict_text(result.peak_bytes, avail, per)
        + " (traced peak; add the CUDA context and allocator slack)",
    }


def trace_json(result: TraceResult, record_id: str) -> dict[str, object]:
    return {
        "record_id": record_id,
        "peak_bytes": result.peak_bytes,
        "peak_phase": result.peak_phase,
        "by_category": result.by_category,
        "phase_peaks": result.phase_peaks,
        "first_step_peak_bytes": result.first_step_peak_bytes,
        "first_step_peak_phase": result.first_step_peak_phase,
        "flops": result.flops.model_dump(),
        "time": result.time.model_dump() if result.time is not None else None,
        "after_step": result.after_step,
        "phases": result.phases,
        "by_module": {k: v.model_dump() for k, v in result.by_module.items()},
        "params": result.params,
        "world_size": result.config.world_size,
        "per_rank": result.config.fsdp,
        "wall_seconds": result.wall_seconds,
        "config": result.config.model_dump(),
        "counters": result.counters.model_dump() if result.counters is not None else None,
        "notes": result.notes,
    }


def _comm_of(result: TraceResult) -> tuple[Any, float | None] | None:
    """Several GPUs: NCCL's buffers and what one sends per step, from the model's shape
    (``profiling.estimate.comm``); None for a model whose shape the catalogue lacks."""
    from profiling.estimate.comm import step_comm

    sent = step_comm(result.config)
    if sent is None:
        return None
    return sent, result.time.compute_seconds if result.time is not None else None


def _comm_lines(result: TraceResult) -> list[str]:
    from profiling.estimate.comm import comm_lines

    found = _comm_of(result)
    return comm_lines(*found) if found else []


def trace_counter_lines(result: TraceResult) -> list[str]:
    """``--counter reserved|nvml``: the allocator replayed over the trace's allocations (with a
    GPU size, what nvidia-smi would show against it is the trace's verdict: ``trace_verdict``)."""
    if result.counters is None or result.config.counter == "allocated":
        return []
    from profiling.estimate.counters import counter_lines

    return counter_lines(result.counters, result.config.counter)


def _model_lines(info: dict[str, Any]) -> list[str]:
    """For a Hugging Face config: which module was traced, its source, the routing assumption."""
    lines = []
    if info.get("implementation"):
        lines.append(f"traced: {info['implementation']}")
    if info.get("source"):
        lines.append(f"config: {info['source']}")
    if info.get("routing"):
        lines.append(f"routing: {info['routing']}")
    return lines


def render_trace_text(result: TraceResult, modules: int = 12) -> str:
    cfg = result.config
    head = f"Traced training step: {describe_trace_setup(cfg)}"
    scope = "per rank" if cfg.world_size > 1 else "one device"
    lines = [
        head,
        f"{fmt_count(result.params)} parameters; tensors kept as "
        f"{getattr(cfg, 'target', 'cpu')} kernels keep them (fake tensors: nothing allocated, "
        f"{result.wall_seconds:.1f} s)",
        *_model_lines(result.model_info),
        "",
        f"{'Category':<14}{'At peak':>12}{'After step':>14}{'After forward':>16}",
        "─" * 56,
    ]
    fwd = result.phases.get("after_forward", {})
    for cat, value in result.by_category.items():
        after = result.after_step.get(cat, 0)
        if not (value or after or fwd.get(cat)):
            continue
        lines.append(
            f"{cat:<14}{fmt_bytes(value):>12}{fmt_bytes(after):>14}{fmt_bytes(fwd.get(cat, 0)):>16}"
        )
    phase = result.peak_phase.replace("_", " ")
    first_phase = result.first_step_peak_phase.replace("_", " ")
    lines += [
        "─" * 56,
        f"{'peak allocated':<14}{fmt_bytes(result.peak_bytes):>12}"
        f"{fmt_bytes(result.phases.get('after_optimizer_step', {}).get('total', 0)):>14}"
        f"{fmt_bytes(fwd.get('total', 0)):>16}   ({fmt_bytes(result.peak_bytes, 'GiB')}, {scope})",
        "",
        f"Steady-state peak {fmt_bytes(result.peak_bytes)} allocated in the {phase} (every step "
        f"after the first); first step {fmt_bytes(result.first_step_peak_bytes)} in the "
        f"{first_phase} (its optimizer states are created only inside its optimizer step).",
        "Peak by phase: "
        + ", ".join(f"{k.replace('_', ' ')} {fmt_bytes(v)}" for k, v in result.phase_peaks.items()),
        f"FLOPs of the step: {fmt_count(result.flops.total)} "
        f"(forward {fmt_count(result.flops.forward)}, backward {fmt_count(result.flops.backward)})",
    ]
    if result.paged_bytes:
        lines.append(
            f"Paged optimizer state: {fmt_bytes(result.paged_bytes)} in CUDA managed memory, "
            "beside the peak (outside PyTorch's allocator; moved to host memory under pressure)"
        )
    lines += trace_counter_lines(result)
    lines += _comm_lines(result)
    if result.time is not None:
        from profiling.estimate.step_time import render_time

        lines += render_time(result.time)
    top = top_modules(result, modules)
    if top:
        lines += ["", f"{'Module':<40}{'Params':>12}{'Peak fwd':>12}{'Peak bwd':>12}"]
        for name, m in top:
            lines.append(
                f"{name[:39]:<40}{fmt_bytes(m.parameters):>12}{fmt_bytes(m.peak_forward):>12}"
                f"{fmt_bytes(m.peak_backward):>12}"
            )
    for note in result.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


# --------------------------------------------------------------------- side by side


def trace_config_for_estimate(est: Estimate) -> TrainingConfig:
    """The traced twin of an estimate: the same configuration, checked for what a trace runs.

    Raises ProfilingError for what a trace cannot reproduce (LoRA, tensor parallelism, 8-bit or
    factored optimizers, a parameter count without a model).
    """
    from profiling.errors import ProfilingError
    from profiling.trace.optimizers import OPTIMIZERS
    from profiling.trace.untraceable import untraceable

    problems = untraceable(est.inputs)
    if est.inputs.optimizer not in OPTIMIZERS:
        problems.append(f"an optimizer among {', '.join(OPTIMIZERS)}")
    if problems:
        raise ProfilingError("the trace beside an estimate needs " + "; ".join(problems))
    return est.inputs


def estimate_input_for_trace(cfg: TrainingConfig, gpu_mem_gb: float | None = None) -> EstimateInput:
    """The estimate that describes the same step as a trace configuration: the same one."""
    from profiling.errors import ProfilingError

    if cfg.is_factory:
        raise ProfilingError("--compare-estimate needs a reference model, not a factory")
    if gpu_mem_gb is not None:
        cfg = cfg.model_copy(update={"gpu_mem": gpu_mem_gb})
    return cfg


def _why(est: Estimate, cfg: TrainingConfig) -> dict[str, str]:
    """What still differs between estimate and trace of the same configuration, and why."""
    why = {
        "parameters": "the same weights in the same dtype on both sides",
        "gradients": "gradients after the step (the steady state: freed before forward unless "
        "--grads-kept)",
        "optimizer": "optimizer state only: moments, master weights under mixed, step counters",
        "activations": "what is alive when forward ends: the op-by-op model (GPT-2 / Llama "
        "blocks) against every storage the trace saw",
        "buckets": "DDP's Reducer buckets, a copy of every trainable gradient made at the wrap "
        "and alive at every moment: Ψ_t × the parameters' bytes against the buckets made as "
        "torch assigns them",
    }
    if cfg.precision == "mixed" and cfg.fsdp:
        why["parameters"] = (
            "FSDP2's MixedPrecisionPolicy keeps fp32 sharded parameters (they are the master "
            "weights) where the estimate counts 16-bit weights and an fp32 master copy under "
            "optimizer; the 16-bit copies FSDP gathers are transient"
        )
        why["gradients"] = "FSDP2 reduce-scatters into fp32 gradient shards; the estimate: 16-bit"
        why["optimizer"] = (
            "the trace's fp32 shards are the master weights, so its optimizer holds only the "
            "moments"
        )
    if est.inputs.zero and est.inputs.gpus > 1 and not cfg.fsdp:
        why["parameters"] += "; the trace shards with FSDP2 (all stages shard the parameters)"
    return why


def compare(est: Estimate, result: TraceResult) -> Comparison:
    """Rows of (category, estimated, traced, ratio, why), model states, and the two peaks."""
    cfg = result.config
    e = estimate_categories(est)
    traced = dict(result.after_step)
    traced["activations"] = result.phases.get("after_forward", {}).get("activations", 0)
    why = _why(est, cfg)
    rows: list[CompareRow] = []
    buckets = ("buckets",) if e.get("buckets") or traced.get("buckets") else ()  # DDP's
    for cat in ("parameters", "gradients", "optimizer", "activations", *buckets):
        est_b, tr_b = e.get(cat, 0), traced.get(cat, 0)
        rows.append(
            {
                "category": cat,
                "estimated_bytes": est_b,
                "traced_bytes": tr_b,
                "ratio": round(est_b / tr_b, 3) if tr_b else None,
                "why": why.get(cat, ""),
            }
        )
    states = ("parameters", "gradients", "optimizer", *buckets)
    est_states = sum(e.get(c, 0) for c in states)
    tr_states = sum(traced.get(c, 0) for c in states)
    phase = result.peak_phase.replace("_", " ")
    return {
        "rows": rows,
        "model_states": {
            "estimated_bytes": est_states,
            "traced_bytes": tr_states,
            "ratio": round(est_states / tr_states, 3) if tr_states else None,
        },
        "estimated_total": est.per_gpu_bytes,
        "traced_peak": result.peak_bytes,
        "ratio": round(est.per_gpu_bytes / result.peak_bytes, 3) if result.peak_bytes else None,
        "why_total": (
            f"both are the step's highest moment: the estimate's is the {est.peak_moment}, the "
            f"trace's is in the {phase}"
        ),
    }


def render_compare_text(cmp: Comparison) -> str:
    lines = [
        f"{'Category':<14}{'Estimated':>12}{'Traced':>12}{'Est/Trace':>11}",
        "─" * 49,
    ]
    for row in cmp["rows"]:
        ratio = f"{row['ratio']:.2f}×" if row["ratio"] is not None else "—"
        lines.append(
            f"{row['category']:<14}{fmt_bytes(row['estimated_bytes']):>12}"
            f"{fmt_bytes(row['traced_bytes']):>12}{ratio:>11}"
        )
    ms = cmp["model_states"]
    ms_ratio = f"{ms['ratio']:.2f}×" if ms["ratio"] is not None else "—"
    ratio = f"{cmp['ratio']:.2f}×" if cmp["ratio"] is not None else "—"
    lines += [
        "─" * 49,
        f"{'model states':<14}{fmt_bytes(ms['estimated_bytes']):>12}"
        f"{fmt_bytes(ms['traced_bytes']):>12}{ms_ratio:>11}",
        f"{'peak':<14}{fmt_bytes(cmp['estimated_total']):>12}"
        f"{fmt_bytes(cmp['traced_peak']):>12}{ratio:>11}",
        "",
        "Why they differ (where they do), and what each row counts:",
    ]
    for row in cmp["rows"]:
        if row["why"]:
            lines.append(f"- {row['category']}: {row['why']}")
    lines.append(f"- peak: {cmp['why_total']}")
    lines.append(
        "(traced parameters/gradients/optimizer: what stays after the step; traced "
        "activations: what is alive when forward ends)"
    )
    return "\n".join(lines)
