"""A measurement record as a page: configuration, the calculation step by step, results,
tables and charts (breakdown by category, per-module table, memory over the run with its
peak) and provenance. Reads ``profiling.records``; draws with :mod:`journal_agent.view.charts`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from journal_agent.view import charts
from profiling.records import MeasurementRecord, RecordStore
from profiling.units import fmt_bytes, fmt_count

# An estimate's results that are totals, not components of the breakdown (a record written
# before estimates kept their steps: its components are told apart by name).
_TOTALS = {"per_gpu_total", "peak", "total_all_gpus", "unsharded_total", "gpu_mem"}
# What ``fit`` records of each configuration it shows: "#1 mixed, batch 32: peak".
_FIT_ROW = re.compile(r"^#(\d+) (.+): peak$")
_TRACE_PHASES = (
    ("start", None, None),
    ("forward", "after_forward", "peak_in_forward"),
    ("backward", "after_backward", "peak_in_backward"),
    ("optimizer step", "after_optimizer_step", "peak_in_optimizer_step"),
)


def load(store: RecordStore, record_id: str) -> MeasurementRecord | None:
    """The record, or None when there is none or its file is corrupt (the page says which)."""
    try:
        return store.load(record_id)
    except (KeyError, ValueError):
        return None


def fmt_value(value: float, unit: str) -> str:
    if unit == "B":
        return f"{fmt_bytes(value)} ({value:,.0f} B)"
    if unit in ("", "FLOP", "tokens/s"):
        return f"{fmt_count(value)} {unit}".strip()
    if unit == "s":
        return f"{value * 1e3:.3f} ms" if value < 1 else f"{value:.3f} s"
    return f"{value:g} {unit}"


def page(record: MeasurementRecord) -> dict[str, Any]:
    """Everything the record template shows."""
    from journal_agent.record_seal import made_here

    extra = record.extra
    return {
        "record": record,
        "created": record.created.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "headline": headline(record),
        "moments": _moments(record),
        "config": _config(record.config, extra.get("searched")),
        "results": [(q.name, fmt_value(q.value, q.unit)) for q in record.results],
        "steps": [(s, fmt_value(s.value, s.unit)) for s in record.steps],
        "table": extra.get("table") if isinstance(extra.get("table"), str) else None,
        "modules": _modules(extra.get("by_module")),
        "breakdown": _breakdown_chart(record),
        "timeline": _timeline(record),
        "command": extra.get("command") if isinstance(extra.get("command"), str) else None,
        "made_here": made_here(record),
        "device": _flat(record.device),
        "software": _flat(record.software),
    }


def listing(root: Any, store: RecordStore) -> dict[str, Any]:
    """The records page: every record, newest first, with its headline and verdict and what
    cites it (the journal, the ledger, the inbox, drafts, other records), so that one made
    while exploring and never cited can be found, and pruned (``measurements prune``)."""
    from journal_agent.journal.record_refs import citing
    from journal_agent.view.site import record_path

    cited = citing(root)
    rows = []
    for record in sorted(store.list(), key=lambda r: r.created, reverse=True):
        rows.append(
            {
                "record": record,
                "href": record_path(record.id),
                "created": record.created.strftime("%Y-%m-%d %H:%M UTC"),
                "headline": headline(record),
                "cited": sorted(cited.get(record.id, ())),
            }
        )
    kinds = sorted({row["record"].kind for row in rows})
    return {"rows": rows, "kinds": kinds, "uncited": sum(not row["cited"] for row in rows)}


def headline(record: MeasurementRecord) -> dict[str, str] | None:
    """What a record page opens with: its headline number, what it is, and the verdict
    against the GPU when the record names one (✅ / ⚠️ / ❌, as the CLI says it)."""
    from profiling.estimate.render import status_for, verdict_text

    results = {q.name: q.value for q in record.results}
    ranked = [(m, q) for q in record.results if q.unit == "B" and (m := _FIT_ROW.match(q.name))]
    gpu = results.get("gpu_mem") or results.get("gpu_memory")
    if record.kind == "estimated" and ("smallest_peak" in results or ranked):
        return _fit_headline(results, ranked, gpu)
    if record.kind == "estimated":
        value = results.get("per_gpu_total", results.get("peak"))
        what = "per GPU" + _at(record, "moment: ")
    elif record.kind == "traced":
        value = results.get("peak")
        what = "the traced step's peak" + _at(record, "peak_in_")
    else:
        value = results.get("peak")
        total = record.device.get("total_bytes")
        gpu = float(total) if isinstance(total, int | float) and total else None
        what = f"the measured peak on {record.device.get('label') or 'the device'}"
        what += _at(record, "peak_") + ("" if gpu else " (no GPU memory to compare it with)")
    if value is None:
        return None
    out = {"value": fmt_bytes(value, "GB") if value >= 1e9 else fmt_bytes(value), "what": what}
    said = record.extra.get("verdict")
    if record.kind == "traced" and isinstance(said, str) and said:
        # the trace's own one verdict, by the counter it was asked for (nvidia-smi near full
        # under --counter reserved|nvml: never the allocated peak's beside it)
        out["verdict"], out["status"] = said, str(record.extra.get("status") or said[:1])
    elif gpu:
        out["verdict"] = verdict_text(int(value), int(gpu))
        out["status"] = status_for(int(value), int(gpu))[1]
    return out


def _fit_headline(
    results: dict[str, float], ranked: list[tuple[re.Match[str], Any]], gpu: float | None
) -> dict[str, str]:
    from profiling.estimate.render import HEADROOM

    avail = fmt_bytes(gpu, "GB") if gpu else "the GPU"
    if not ranked:
        smallest = results.get("smallest_peak", 0.0)
        return {
            "value": fmt_bytes(smallest, "GB"),
            "what": "the smallest peak of every configuration tried",
            "verdict": f"❌ Nothing fits {avail}: the smallest needs {fmt_bytes(smallest, 'GB')}",
            "status": "❌",
        }
    best, q = ranked[0]
    usable = results.get("usable") or (gpu * HEADROOM if gpu else None)
    verdict = f"✅ Fits {avail}: the best configuration needs {fmt_bytes(q.value, 'GB')}"
    if usable:
        verdict += f" of the {fmt_bytes(usable, 'GB')} counted usable"
    return {
        "value": fmt_bytes(q.value, "GB"),
        "what": f"the best: #{best.group(1)} {best.group(2)}",
        "verdict": verdict,
        "status": "✅",
    }


def _at(record: MeasurementRecord, prefix: str) -> str:
    """ ", at the loss backward": the moment or phase of the highest of the record's values
    named ``prefix…``."""
    named = [
        (q.value, q.name.removeprefix(prefix))
        for q in record.results
        if q.name.startswith(prefix) and ":" not in q.name.removeprefix(prefix)  # no terms
    ]
    return f", at the {max(named)[1].replace('_', ' ')}" if named else ""


def _moments(record: MeasurementRecord) -> charts.Markup:
    """An estimate's moments of the step (what is alive at each), the peak marked: the chart
    of the CLI's "Moments of the step"."""
    if record.kind != "estimated":
        return charts.Markup("")
    points: list[tuple[str, float, float | None]] = [
        (q.name.removeprefix("moment: "), q.value, q.value)
        for q in record.results
        if q.name.startswith("moment: ") and ":" not in q.name.removeprefix("moment: ")
    ]
    if len(points) < 2:
        return charts.Markup("")
    gpu = next((q.value for q in record.results if q.name == "gpu_mem"), None)
    return charts.timeline(
        points,
        "Memory at each moment of the step (estimated)",
        limit=("GPU", gpu) if gpu else None,
        legend="each moment: what is alive at once; the peak is the largest",
    )


def _config(config: dict[str, Any], searched: object = None) -> list[tuple[str, str]]:
    """The configuration as set: the core settings, then what differs from the defaults
    (``profiling.config_table.shown``); no unset option listed as "None". A ``fit`` record's
    searched settings are named as searched, never shown at the defaults it started from."""
    from profiling.config_table import shown

    varied = [str(k) for k in searched] if isinstance(searched, list) else []
    out = [("searched", ", ".join(varied))] if varied else []
    for key, value in shown({k: v for k, v in config.items() if k not in varied}):
        if isinstance(value, dict):
            out += [(f"{key}.{k}", v) for k, v in _flat(value) if v != "None"]
        elif isinstance(value, list | tuple):
            out.append((key, ", ".join(str(v) for v in value)))
        else:
            out.append((key, str(value)))
    return out


def _flat(data: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and len(out) < 200:
            out += _flat(value, name + ".")
        elif isinstance(value, list | tuple):
            out.append((name, json.dumps(value, default=str)[:300]))
        else:
            out.append((name, str(value)))
    return out


def _breakdown_chart(record: MeasurementRecord) -> charts.Markup:
    """Memory by category; for a ``fit`` record, each configuration's peak in its rank order
    beside the part of the GPU counted as usable (its results are no categories)."""
    results = {q.name: q.value for q in record.results if q.unit == "B"}
    ranked = [(m, q) for q in record.results if q.unit == "B" and (m := _FIT_ROW.match(q.name))]
    if record.kind == "estimated" and ranked:
        rows = [(f"#{m.group(1)} {m.group(2)}", q.value) for m, q in ranked]
        usable = results.get("usable")
        return charts.bars(rows, "Estimated peak of each configuration, by rank", limit=usable)
    if record.kind == "measured":
        return charts.Markup("")  # its phases are drawn through the step below, not categories
    return charts.bars(_breakdown(record), "Memory by category")


def _breakdown(record: MeasurementRecord) -> list[tuple[str, float]]:
    results = {q.name: q for q in record.results}
    if record.kind == "traced":
        return [
            (name.removeprefix("peak_"), q.value)
            for name, q in results.items()
            if name.startswith("peak_") and not name.startswith("peak_in_") and q.unit == "B"
        ]
    if record.kind == "estimated":
        # The components are the quantities the calculation computes step by step; the
        # results also hold sums of them (model_states, each moment's terms) and DeepSpeed's
        # own estimator, which would count the same bytes twice.
        computed = {s.name for s in record.steps}
        return [
            (name, q.value)
            for name, q in results.items()
            if q.unit == "B"
            and (name in computed if computed else name not in _TOTALS)
            and not name.startswith("moment:")
        ]
    summary = record.extra.get("summary") or {}
    return [(p["name"], p["peak_bytes"]) for p in summary.get("phases", []) if "name" in p]


def _modules(by_module: Any) -> list[dict[str, Any]]:
    """The per-module table of a trace, largest peak first (at most 200 rows)."""
    if not isinstance(by_module, dict):
        return []
    rows = []
    for name, m in by_module.items():
        if not isinstance(m, dict):
            continue
        peak = max(m.get("peak_forward", 0), m.get("peak_backward", 0))
        rows.append(
            {
                "name": name or "(model)",
                "parameters": fmt_bytes(m.get("parameters", 0)),
                "buffers": fmt_bytes(m.get("buffers", 0)),
                "inputs": fmt_bytes(m.get("inputs", 0)),
                "outputs": fmt_bytes(m.get("outputs", 0)),
                "peak_forward": fmt_bytes(m.get("peak_forward", 0)),
                "peak_backward": fmt_bytes(m.get("peak_backward", 0)),
                "peak": peak,
            }
        )
    rows.sort(key=lambda r: -r["peak"])
    return rows[:200]


def _timeline(record: MeasurementRecord) -> Any:
    results = {q.name: q.value for q in record.results}
    if record.kind == "traced":
        phases = record.extra.get("phases") or {}
        points = []
        for label, after, peak in _TRACE_PHASES:
            held = (phases.get(after) or {}).get("total", 0) if after else 0
            if label == "start":
                held = (phases.get("after_optimizer_step") or {}).get("total", 0)
            points.append((label, float(held), results.get(peak) if peak else None))
        return charts.timeline(points, "Memory through the traced step, by phase")
    if record.kind == "measured":
        summary = record.extra.get("summary") or {}
        steps = summary.get("steps") or []
        points = [
            (
                f"step {s['step']}" + (" (warm-up)" if s.get("warmup") else ""),
                s["end_bytes"],
                s["peak_bytes"],
            )
            for s in steps
            if "step" in s
        ]
        return _measured_phases(summary.get("phases") or []) + charts.timeline(
            points, "Memory over the measured steps"
        )
    return charts.Markup("")


def _measured_phases(phases: list[dict[str, Any]]) -> charts.Markup:
    """A measured step by phase, as the trace's chart draws a traced one: what the last step
    held at the end of each phase, and each phase's highest peak over the steps."""
    by_name = {p.get("name"): p for p in phases if isinstance(p, dict)}
    order = [n for n in ("forward", "backward", "optimizer") if n in by_name]
    if not order:
        return charts.Markup("")
    points: list[tuple[str, float, float | None]] = [
        ("start", float(by_name[order[-1]].get("end_bytes", 0)), None)
    ]
    points += [
        (name, float(by_name[name].get("end_bytes", 0)), by_name[name].get("peak_bytes"))
        for name in order
    ]
    return charts.timeline(points, "Memory through a measured step, by phase")
