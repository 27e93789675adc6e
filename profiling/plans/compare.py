"""A plan's estimate beside its trace: every distinct rank side by side, by category.

``estimate --compare-trace`` and ``trace --compare-estimate`` on a plan run both
(``profiling.plans.closed_form.estimate_plan`` and ``profiling.plans.trace.trace_plan``), save
both records, and compare them per pipeline rank — every GPU of one (its tensor, context and
data-parallel ranks) holds the same, at cp 2 the higher of ring ranks 0 and 1 — at each one's
peak: its bytes and the ratio, the moment of it, and the categories there. The rank with the
highest peak is named on both sides, and so is the lowest ratio: below 1, a GPU of that rank
may need more than the estimate says. The trace's record keeps the comparison and cites the
estimate's (the one-GPU comparison's layout: ``profiling.trace.run.trace_beside_estimate``).

No torch here (the trace imports it when it runs).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from profiling.config import TrainingConfig
from profiling.plans.profile import CATEGORIES, RankMemory
from profiling.plans.report import plan_json, plan_record, render_plan
from profiling.plans.result import PlanResult
from profiling.records import MeasurementRecord, RecordStore
from profiling.time_bound import TimeBound
from profiling.units import fmt_bytes


class CategoryRow(TypedDict):
    category: str
    estimated_bytes: int
    traced_bytes: int
    ratio: float | None


class RankRow(TypedDict):
    pp_rank: int
    stages: list[int]
    global_ranks: str
    estimated_bytes: int
    traced_bytes: int
    diff_bytes: int  # estimate − trace: below 0, the estimate is below the trace
    ratio: float
    estimated_at: str
    traced_at: str
    categories: list[CategoryRow]  # each at its own side's peak


class PlanComparison(TypedDict):
    ranks: list[RankRow]
    highest_traced: int  # the pipeline rank with the highest traced peak
    highest_estimated: int
    lowest_ratio_rank: int  # the pipeline rank whose estimate ÷ trace is the lowest
    below_trace: bool  # any rank's estimate below its trace
    ranks_note: str


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _rank_row(e: RankMemory, t: RankMemory) -> RankRow:
    cats: list[CategoryRow] = [
        {
            "category": c,
            "estimated_bytes": int(e.by_category.get(c, 0)),
            "traced_bytes": int(t.by_category.get(c, 0)),
            "ratio": _ratio(int(e.by_category.get(c, 0)), int(t.by_category.get(c, 0))),
        }
        for c in CATEGORIES
        if e.by_category.get(c, 0) or t.by_category.get(c, 0)
    ]
    return {
        "pp_rank": t.pp_rank,
        "stages": t.stages,
        "global_ranks": t.global_ranks,
        "estimated_bytes": e.peak_bytes,
        "traced_bytes": t.peak_bytes,
        "diff_bytes": e.peak_bytes - t.peak_bytes,
        "ratio": round(e.peak_bytes / t.peak_bytes, 4) if t.peak_bytes else 0.0,
        "estimated_at": e.peak_at,
        "traced_at": t.peak_at,
        "categories": cats,
    }


def compare_plans(estimated: PlanResult, traced: PlanResult) -> PlanComparison:
    """Each pipeline rank's estimate beside its trace (see the module)."""
    rows = [_rank_row(e, t) for e, t in zip(estimated.ranks, traced.ranks, strict=True)]
    low = min(rows, key=lambda r: (r["ratio"], r["pp_rank"]))
    note = (
        "each pipeline rank stands for its GPUs: every tensor-, context- and data-parallel rank "
        "of it holds the same"
        + (" (at cp 2 the higher of ring ranks 0 and 1)" if traced.layout.cp == 2 else "")
    )
    return {
        "ranks": rows,
        "highest_traced": traced.highest.pp_rank,
        "highest_estimated": estimated.highest.pp_rank,
        "lowest_ratio_rank": low["pp_rank"],
        "below_trace": any(r["diff_bytes"] < 0 for r in rows),
        "ranks_note": note,
    }


def _signed(n: int) -> str:
    return f"{'+' if n >= 0 else '−'}{abs(n):,} B"


def render_plan_compare(cmp: PlanComparison) -> str:
    """The side-by-side table: each rank's peaks, then its categories at them."""
    lines = [
        f"{'pp rank':<8}{'stages':<8}{'Estimated':>12}{'Traced':>12}{'Est/Trace':>11}"
        f"{'Est − Trace':>16}",
        "─" * 67,
    ]
    for r in cmp["ranks"]:
        stages = ",".join(map(str, r["stages"]))
        lines.append(
            f"{r['pp_rank']:<8}{stages:<8}{fmt_bytes(r['estimated_bytes']):>12}"
            f"{fmt_bytes(r['traced_bytes']):>12}{r['ratio']:>10.4f}×{_signed(r['diff_bytes']):>16}"
        )
    for r in cmp["ranks"]:
        where = f"estimated at the {r['estimated_at']}, traced at the {r['traced_at']}"
        lines += ["", f"pipeline rank {r['pp_rank']} (global ranks {r['global_ranks']}) at its "
                  f"peak: {where}"]  # fmt: skip
        for c in r["categories"]:
            ratio = f"{c['ratio']:.3f}×" if c["ratio"] is not None else "—"
            lines.append(
                f"  {c['category']:<14}{fmt_bytes(c['estimated_bytes']):>12}"
                f"{fmt_bytes(c['traced_bytes']):>12}{ratio:>11}"
            )
    ranks = {r["pp_rank"]: r for r in cmp["ranks"]}
    top, low = ranks[cmp["highest_traced"]], ranks[cmp["lowest_ratio_rank"]]
    lines += [
        "",
        f"highest peak: pipeline rank {top['pp_rank']} traced ({fmt_bytes(top['traced_bytes'])}), "
        f"pipeline rank {cmp['highest_estimated']} estimated",
        f"lowest estimate ÷ trace: pipeline rank {low['pp_rank']}, {low['ratio']:.4f} "
        f"({_signed(low['diff_bytes'])})"
        + (": below the trace — a GPU of it may need more than estimated" if low["ratio"] < 1
           else ""),
        f"note: {cmp['ranks_note']}",
    ]  # fmt: skip
    return "\n".join(lines)


class PlanComparisonRun(BaseModel):
    """A plan estimated and traced: both results, both saved records, the comparison and the
    JSON (the side asked for first, the other under ``trace`` or ``estimate``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    first: Literal["estimated", "traced"]
    estimated: PlanResult
    traced: PlanResult
    estimate_record: MeasurementRecord
    trace_record: MeasurementRecord
    comparison: PlanComparison
    payload: dict[str, Any]

    def text(self) -> str:
        sides = [(self.estimated, self.estimate_record), (self.traced, self.trace_record)]
        if self.first == "traced":
            sides.reverse()
        lines: list[str] = []
        for result, record in sides:
            cite = f"record: {record.id}  (cite as {record.citation()})"
            lines += [render_plan(result), cite, ""]
        est, tr = self.estimate_record.citation(), self.trace_record.citation()
        lines += [f"Estimate {est} beside trace {tr} (per GPU, per pipeline rank):"]
        lines.append(render_plan_compare(self.comparison))
        return "\n".join(lines)


def plan_compare_and_record(
    config: TrainingConfig,
    store: RecordStore,
    *,
    first: Literal["estimated", "traced"],
    timeout: float | None = None,
    progress: Any = None,
) -> PlanComparisonRun:
    """Estimate and trace ``config``'s plan, compare them, save both records (the trace's
    keeping the comparison and citing the estimate's)."""
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    with TimeBound(timeout, "the estimate and trace of the plan", "give it a longer --timeout"):
        estimated = estimate_plan(config)
        traced = trace_plan(config, progress)
    cmp = compare_plans(estimated, traced)
    est_record, tr_record = plan_record(estimated), plan_record(traced)
    tr_record.extra["estimate_record"] = est_record.id
    tr_record.extra["comparison"] = cmp
    store.save(est_record)
    store.save(tr_record)
    est_json, tr_json = plan_json(estimated, est_record.id), plan_json(traced, tr_record.id)
    if first == "estimated":
        payload = {**est_json, "trace": tr_json}
    else:
        payload = {**tr_json, "estimate": est_json}
    payload["comparison"] = cmp
    return PlanComparisonRun(
        first=first, estimated=estimated, traced=traced, estimate_record=est_record,
        trace_record=tr_record, comparison=cmp, payload=payload,
    )  # fmt: skip


__all__ = [
    "PlanComparison", "PlanComparisonRun", "compare_plans", "plan_compare_and_record",
    "render_plan_compare",
]  # fmt: skip
