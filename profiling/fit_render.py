"""``fit``'s one table: every candidate — data parallelism (DDP, ZeRO-1/2/3, offload) and the
parallel plans (FSDP × TP × CP × PP) — in the same columns and units, as text, JSON and a record.

Per GPU: ``allocated`` (the highest pipeline rank's, for a plan), ``nvidia-smi`` (the most any
rank shows), ``traced``. The job's: ``tokens/s`` (every GPU together) beside ``/GPU`` (that ÷ the
job's GPUs); ``sent/step`` (what one GPU sends per step) and ``comm wait`` (what of it compute
does not hide, in the step's time) with more than one GPU; ``host/node`` where an offload keeps
state in host memory. No torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate.render import SAFETY_MARGIN
from profiling.fit import Candidate, FitResult, judge_quantities, usable
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.records import MeasurementRecord


def _gb(n: int | None) -> str:
    return fmt_bytes(n, "GB") if n else "—"


def table(cands: list[Candidate], top: int, several: bool) -> list[str]:
    """The header and the first ``top`` rows; ``several``: the job has more than one GPU (the
    communication's columns)."""
    host = any(c.host_bytes for c in cands[:top])
    head = f"{'#':>2}  {'allocated':>9}  {'nvidia-smi':>10}  {'traced':>9}  {'tokens/s':>10}  "
    if several:
        head += f"{'/GPU':>7}  {'rank':>4}  {'sent/step':>9}  {'comm wait':>9}  "
    head += f"{'host/node':>9}  " * host + "configuration"
    lines = [head]
    for i, c in enumerate(cands[:top], 1):
        speed = f"{c.tokens_per_second:,.0f}" if c.tokens_per_second else "—"
        row = (
            f"{i:>2}  {_gb(c.peak_bytes):>9}  {_gb(c.nvml_bytes):>10}  "
            f"{_gb(c.traced_nvml_bytes):>9}  {speed:>10}  "
        )
        if several:
            each = f"{c.tokens_per_gpu:,.0f}" if c.tokens_per_gpu else "—"
            rank = "—" if c.highest_rank is None else f"pp {c.highest_rank}"
            wait = f"{c.exposed_seconds * 1e3:,.1f} ms" if c.exposed_seconds is not None else "—"
            row += f"{each:>7}  {rank:>4}  {_gb(c.comm_bytes):>9}  {wait:>9}  "
        row += f"{_gb(c.host_bytes):>9}  " * host
        lines.append(row + c.label())
    if len(cands) > top:
        lines.append(f"    … {len(cands) - top} more fit")
    return lines


UNITS = (
    "columns: allocated, nvidia-smi and traced per GPU (a plan's: its highest pipeline rank's "
    "allocated, the most any rank shows on nvidia-smi); tokens/s the job's, every GPU together, "
    "and /GPU that ÷ its GPUs; sent/step what one GPU sends per step, comm wait what of it "
    "compute does not hide (part of the step's time)"
)


def render_fit(res: FitResult, top: int = 10) -> str:
    b = res.base
    name = b.model or f"{b.params} parameters"
    world = res.world or b.gpus
    plans = f", {res.plans} of them plans" if res.plans else ""
    head = (
        f"What fits: {name}, seq {b.seq_or_default()}, {b.optimizer}, {world:,} GPU"
        + ("s" if world > 1 else "")
        + f" of {fmt_bytes(res.gpu_mem_bytes, 'GB')}"
        + (f" ({b.gpu})" if b.gpu else "")
        + f", target {b.target} — {res.searched} configurations estimated{plans}"
    )
    lines = [head, ""]
    if not res.fitting:
        if (h := res.host_short) is not None:
            why = (
                f"{h.label()} fits the GPU ({fmt_bytes(h.nvml_bytes, 'GB')} on nvidia-smi), but "
                f"DeepSpeed's offload needs {fmt_bytes(h.host_bytes or 0, 'GB')} of host memory "
                f"per node, over --cpu-mem {res.base.cpu_mem or 0:g} GB."
            )
        else:
            s = res.smallest
            why = (
                f"the smallest need is {fmt_bytes(s.nvml_bytes, 'GB')} on nvidia-smi "
                f"({fmt_bytes(s.peak_bytes, 'GB')} allocated) per GPU ({s.label()}), against "
                f"{fmt_bytes(usable(res.gpu_mem_bytes), 'GB')} usable."
            )
        return "\n".join([*lines, f"Nothing fits: {why}", *(f"note: {n}" for n in res.notes[:1])])
    several = world > 1 or any(c.comm_bytes for c in res.fitting)
    lines += table(res.fitting, top, several)
    lines += res.best_lines
    lines += [f"note: {n}" for n in res.notes]
    return "\n".join(lines)


def row_json(c: Candidate) -> dict[str, Any]:
    """One candidate's row: its numbers, in the table's units."""
    return {
        "label": c.label(),
        "trains": c.trains,
        "plan": c.config.is_plan,
        "peak_bytes": c.peak_bytes,
        "peak_moment": c.peak_moment,
        "nvml_bytes": c.nvml_bytes,
        "highest_pp_rank": c.highest_rank,
        "tokens_per_second": c.tokens_per_second,
        "tokens_per_second_per_gpu": c.tokens_per_gpu,
        "gpus": c.world,
        "comm_bytes_per_step": c.comm_bytes,
        "comm_exposed_seconds": c.exposed_seconds,
        "host_bytes_per_node": c.host_bytes,
        "traced_peak_bytes": c.traced_peak_bytes,
        "traced_nvml_bytes": c.traced_nvml_bytes,
        "traced_fits": c.traced_fits,
        "config": c.config.model_dump(exclude_defaults=True),
    }


def fit_json(res: FitResult) -> dict[str, Any]:
    return {
        "gpu_mem_bytes": res.gpu_mem_bytes,
        "usable_bytes": usable(res.gpu_mem_bytes),
        "safety_margin": SAFETY_MARGIN,
        "searched": res.searched,
        "plans_searched": res.plans,
        "world": res.world or res.base.gpus,
        "fits": bool(res.fitting),
        "fitting": [{"rank": i, **row_json(c)} for i, c in enumerate(res.fitting, 1)],
        "smallest": {
            "label": res.smallest.label(),
            "peak_bytes": res.smallest.peak_bytes,
            "nvml_bytes": res.smallest.nvml_bytes,
            "config": res.smallest.config.model_dump(exclude_defaults=True),
        },
        "notes": res.notes,
    }


def row_quantities(i: int, c: Candidate) -> list[Any]:
    """A shown row's numbers as a record's values (so each can be cited)."""
    from profiling.records import Quantity

    name = f"#{i} {c.label()}"
    out = [
        Quantity(name=f"{name}: peak", value=c.peak_bytes, unit="B"),
        Quantity(name=f"{name}: nvidia-smi", value=c.nvml_bytes, unit="B"),
    ]
    for what, value, unit in (
        ("traced peak", c.traced_peak_bytes, "B"),
        ("traced nvidia-smi", c.traced_nvml_bytes, "B"),
        ("tokens/s", c.tokens_per_second, "tokens/s"),
        ("tokens/s per GPU", c.tokens_per_gpu, "tokens/s"),
        ("sent per GPU per step", c.comm_bytes, "B"),
        ("communication not hidden", c.exposed_seconds, "s"),
        ("host per node", c.host_bytes, "B"),
    ):
        if value:
            out.append(Quantity(name=f"{name}: {what}", value=value, unit=unit))
    return out


def fit_record(res: FitResult, top: int = 10) -> MeasurementRecord:
    """What ``fit`` prints, as a record to cite: each shown row's estimated peak, traced peak
    and tokens/s, the GPU's memory and the part of it counted as usable."""
    from profiling.fit import searched_fields
    from profiling.records import MeasurementRecord, Quantity, new_record_id, software_versions

    results = [
        Quantity(name="gpu_mem", value=res.gpu_mem_bytes, unit="B"),
        Quantity(name="usable", value=usable(res.gpu_mem_bytes), unit="B"),
        Quantity(name="smallest_peak", value=res.smallest.peak_bytes, unit="B"),
        Quantity(name="smallest_nvml", value=res.smallest.nvml_bytes, unit="B"),
        *(
            [
                Quantity(name="host_short: nvidia-smi", value=h.nvml_bytes, unit="B"),
                Quantity(name="host_short: host per node", value=h.host_bytes or 0, unit="B"),
            ]
            if (h := res.host_short) is not None
            else []
        ),
        *judge_quantities(res.base),
    ]
    for i, c in enumerate(res.fitting[:top], 1):
        results += row_quantities(i, c)
    text = render_fit(res, top)
    return MeasurementRecord(
        id=new_record_id("estimated"),
        kind="estimated",
        title=f"What fits: {text.splitlines()[0].removeprefix('What fits: ')}",
        device={"gpu_mem_bytes": res.gpu_mem_bytes, "gpus": res.world or res.base.gpus},
        software=software_versions(),
        config=res.base.model_dump(),
        results=results,
        notes="\n".join(res.notes),
        # What the search varied: the configuration's values of these are only its defaults.
        extra={"table": text, "searched": searched_fields(res.base)},
    )


__all__ = ["UNITS", "fit_json", "fit_record", "render_fit", "row_json", "row_quantities", "table"]
