"""A plan's estimate beside its trace: every distinct rank side by side, by category.

``estimate --compare-trace`` and ``trace --compare-estimate`` on a plan run both
(``profiling.plans.closed_form.estimate_plan`` and ``profiling.plans.trace.trace_plan``), save
both records, and compare them per pipeline rank — every GPU of one (its tensor, context and
data-parallel ranks) holds the same but a context-parallel ring's first rank (each row the
higher of ring ranks 0 and 1, and each of the two compared on its own beside it) — at each
one's peak: its bytes and the ratio, the moment of it, and the categories there. The rank with the
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


class RingRow(TypedDict):
    ring_rank: int  # 0: the ring's first rank; 1: every rank from 1 on (they hold alike)
    ring_ranks: str  # the ring ranks it stands for: "0", "1", "1-3"
    estimated_bytes: int
    traced_bytes: int
    diff_bytes: int
    ratio: float
    estimated_at: str
    traced_at: str


class HigherRing(TypedDict):
    estimated: int  # the ring rank whose peak is the higher on each side (the first of equals)
    traced: int


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
    # context parallelism: each kind of a ring's rank compared on its own (the row above is
    # each side's higher); empty without both kinds profiled
    ring_ranks: list[RingRow]
    higher_ring_rank: HigherRing | None


class PlanComparison(TypedDict):
    ranks: list[RankRow]
    highest_traced: int  # the pipeline rank with the highest traced peak
    highest_estimated: int
    lowest_ratio_rank: int  # the pipeline rank whose estimate ÷ trace is the lowest
    below_trace: bool  # any rank's estimate below its trace (a ring rank's on its own too)
    # the ring rank whose estimate ÷ trace is the lowest: {pp_rank, ring_rank, ratio,
    # diff_bytes}, None without ring ranks
    lowest_ring: dict[str, int | float] | None
    ranks_note: str


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _ring_rows(
    estimated: PlanResult, traced: PlanResult, pp_rank: int
) -> tuple[list[RingRow], HigherRing | None]:
    """Each ring rank kind of a pipeline rank, estimate beside trace, and which is higher."""
    places = sorted(set(estimated.ring_ranks) & set(traced.ring_ranks))
    if len(places) < 2:
        return [], None
    cp = traced.layout.cp
    rows: list[RingRow] = []
    for place in places:
        e, t = estimated.ring_ranks[place][pp_rank], traced.ring_ranks[place][pp_rank]
        rows.append({
            "ring_rank": place,
            "ring_ranks": "0" if place == 0 else ("1" if cp == 2 else f"1-{cp - 1}"),
            "estimated_bytes": e.peak_bytes, "traced_bytes": t.peak_bytes,
            "diff_bytes": e.peak_bytes - t.peak_bytes,
            "ratio": round(e.peak_bytes / t.peak_bytes, 4) if t.peak_bytes else 0.0,
            "estimated_at": e.peak_at, "traced_at": t.peak_at,
        })  # fmt: skip

    def top(side: Literal["estimated_bytes", "traced_bytes"]) -> int:
        return max(rows, key=lambda r: (r[side], -r["ring_rank"]))["ring_rank"]

    return rows, {"estimated": top("estimated_bytes"), "traced": top("traced_bytes")}


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
        "ring_ranks": [],
        "higher_ring_rank": None,
    }


def compare_plans(estimated: PlanResult, traced: PlanResult) -> PlanComparison:
    """Each pipeline rank's estimate beside its trace (see the module)."""
    rows = [_rank_row(e, t) for e, t in zip(estimated.ranks, traced.ranks, strict=True)]
    for r in rows:
        r["ring_ranks"], r["higher_ring_rank"] = _ring_rows(estimated, traced, r["pp_rank"])
    low = min(rows, key=lambda r: (r["ratio"], r["pp_rank"]))
    rings = [(r["pp_rank"], g) for r in rows for g in r["ring_ranks"]]
    lowest_ring: dict[str, int | float] | None = None
    if rings:
        pp, g = min(rings, key=lambda x: (x[1]["ratio"], x[0], x[1]["ring_rank"]))
        lowest_ring = {"pp_rank": pp, "ring_rank": g["ring_rank"], "ratio": g["ratio"],
                       "diff_bytes": g["diff_bytes"]}  # fmt: skip
    note = (
        "each pipeline rank stands for its GPUs: every tensor-, context- and data-parallel rank "
        "of it holds the same"
        + (", but a context-parallel ring's first rank (its rows below; each row above is the "
           "higher of ring ranks 0 and 1)" if rings else "")
    )  # fmt: skip
    return {
        "ranks": rows,
        "highest_traced": traced.highest.pp_rank,
        "highest_estimated": estimated.highest.pp_rank,
        "lowest_ratio_rank": low["pp_rank"],
        "below_trace": any(r["diff_bytes"] < 0 for r in rows)
        or any(g["diff_bytes"] < 0 for _, g in rings),
        "lowest_ring": lowest_ring,
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
    lines += _render_rings(cmp)
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


def _render_rings(cmp: PlanComparison) -> list[str]:
    """Each pipeline rank's ring ranks on their own, and which is higher on each side."""
    lines: list[str] = []
    for r in cmp["ranks"]:
        if not r["ring_ranks"] or r["higher_ring_rank"] is None:
            continue
        lines += ["", f"pipeline rank {r['pp_rank']}, each kind of context-parallel ring rank:"]
        for g in r["ring_ranks"]:
            label = f"ring rank {g['ring_ranks']}" if g["ring_rank"] == 0 or "-" not in \
                g["ring_ranks"] else f"ring ranks {g['ring_ranks']}"  # fmt: skip
            lines.append(
                f"  {label:<14}{fmt_bytes(g['estimated_bytes']):>12}"
                f"{fmt_bytes(g['traced_bytes']):>12}{g['ratio']:>10.4f}×"
                f"{_signed(g['diff_bytes']):>16}  (estimated at the {g['estimated_at']}, "
                f"traced at the {g['traced_at']})"
            )
        hi, g = r["higher_ring_rank"], r["ring_ranks"]
        said = [
            f"equal {side}" if len({x[key] for x in g}) == 1 else f"ring rank {hi[side]} {side}"
            for side, key in (("traced", "traced_bytes"), ("estimated", "estimated_bytes"))
        ]
        lines.append(f"  higher: {', '.join(said)}")
    low = cmp["lowest_ring"]
    if low is not None:
        lines.append(
            f"lowest ring rank estimate ÷ trace: pipeline rank {low['pp_rank']}, ring rank "
            f"{low['ring_rank']}, {low['ratio']:.4f} ({_signed(int(low['diff_bytes']))})"
            + (": below the trace" if low["ratio"] < 1 else "")
        )
    return lines


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
        # every kind of a ring's rank on both sides, compared on its own
        estimated = estimate_plan(config, every_ring_rank=True)
        traced = trace_plan(config, progress, every_ring_rank=True)
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
