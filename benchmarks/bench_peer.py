"""Predicted ÷ measured against other projects' published peak memory (issue #31).

benchmarks/peer/rows.json holds each published row: its source (repository, path, commit), the
exact config file where one exists (a faithful copy under benchmarks/peer/configs/, read with
``--from``'s reader), the counter it reports, the measured value, whether it ran out of memory,
and — where the row cannot be expressed with our settings — why. This runs the estimate of every
expressible row (the settings of its config file, then the row's own: sequence, batch, GPUs),
takes the counter the row reports (allocated, reserved; "active" is read as allocated), and
prints JSON: each row's predicted ÷ measured, every out-of-memory row judged (what nvidia-smi
would show against the GPU less the safety margin: it must not fit), the rows that cannot be
expressed with their reasons, and the summary side by side with the targets:

- on the rows whose configuration is fully published: median |ratio − 1| ≤ 5 %, ≥ 90 % within
  ±10 %, none below 0.90;
- every out-of-memory row "does not fit";
- the largest context that fits (``fit --max-seq``'s search, by estimate) within 0.8–1.05× of
  the published one; each column (published, ours) also as a line of the GPU's memory —
  tokens per GB and the memory at no tokens — to show whether they part per token or before it.

    python benchmarks/bench_peer.py [--rows benchmarks/peer/rows.json] [--markdown]
                                    [--old REF | --no-old]

``--old REF`` (default 3c7ea88, before session 10's LitGPT fixes) runs the same rows through the
``profiling`` of that commit (``git archive``, in a process of its own: two versions of one
package cannot share a process) and prints its summary beside this one's, and each row's old
ratio beside its new one.

Beside them, DeepSpeed's own ZeRO estimators (benchmarks/peer/deepspeed_estimator.json, 216
rows: models × GPUs per node × nodes × offloads, made by DeepSpeed 0.19.6 on transformers'
models): the numbers ``estimate --deepspeed`` gives as DeepSpeed's, exact to the byte and as
printed, and our engine's own beside them (peer_deepspeed.py); ``--no-deepspeed`` leaves them out.

Estimates (milliseconds each; a --compile row runs torch.compile's partitioner on fake tensors
once per shape, seconds), except a parallel plan without a pipeline whose row reports reserved
memory (torchtitan's): its rank's step is traced under fake tensors at its full block count and
its allocations replayed through the caching allocator's model, each FSDP2 stream on its own
segments (``trace --counter reserved``; 20-30 s a row). No GPU.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(1, str(HERE))  # peer_deepspeed, also when this file is loaded as a module

import peer_deepspeed  # noqa: E402

from profiling._config_shape import SHAPE_FIELDS  # noqa: E402
from profiling.config import TrainingConfig  # noqa: E402  (the checkout, not an install)
from profiling.errors import ProfilingError  # noqa: E402
from profiling.estimate.memory import estimate  # noqa: E402
from profiling.fit import usable  # noqa: E402
from profiling.recipes import read_recipe  # noqa: E402

UNITS = {"GB": 1e9, "GiB": 2**30, "B": 1}
TARGETS = {"median_abs_error": 0.05, "share_within_10pct": 0.90, "min_ratio": 0.90}
LARGEST_CONTEXT = (0.8, 1.05)  # predicted ÷ published largest sequence that fits
OLD = "3c7ea88"  # main before the LitGPT loss with an adapted head and --fabric-bnb


def _gpu_bytes(row: dict[str, Any]) -> int:
    """The row's GPU memory in bytes: its "GB" are 10⁹ B, or 2³⁰ B where the row says
    ``"gpu_mem_unit": "GiB"`` (a card sold as 12 GB holds 12 GiB, and Unsloth's tables count
    ``max_memory_reserved() / 1024³`` as GB)."""
    unit = 2**30 if row.get("gpu_mem_unit") == "GiB" else 10**9
    return int(row["gpu_mem_gb"] * unit)


def _config(row: dict[str, Any]) -> TrainingConfig:
    values: dict[str, Any] = {}
    local = (row.get("config_file") or {}).get("local")
    if local:
        values.update(read_recipe([HERE / "peer" / local]).values)
    overrides = row.get("overrides") or {}
    if any(f in overrides for f in SHAPE_FIELDS) and "model" not in overrides:
        values.pop("model", None)  # a shape given by hand replaces the file's model (--from's rule)
    values.update(overrides)
    if row.get("gpu_mem_gb"):
        values["gpu_mem"] = _gpu_bytes(row) / 1e9
    return TrainingConfig.parse(style="field", **values)


def _predicted(cfg: TrainingConfig, counter: str) -> tuple[int, int, int]:
    """(the row's counter, nvidia-smi, the model states alone) predicted, per GPU; for a
    parallel plan, on its highest pipeline rank (torchtitan's tables take the maximum over
    GPUs): the reserve replayed from its trace without a pipeline, else the closed form's
    bound."""
    if cfg.is_plan:
        from profiling.plans.closed_form import estimate_plan
        from profiling.plans.report import rank_counters

        if counter == "reserved" and cfg.pp == 1:
            # the reserve itself: the rank's step traced and replayed through the caching
            # allocator, each FSDP2 stream on its own segments (not the closed form's bound)
            from profiling.plans.trace import trace_plan

            res = trace_plan(cfg.model_copy(update={"counter": "reserved"}))
        else:
            res = estimate_plan(cfg)
        which = "reserved" if counter == "reserved" else "allocated"
        # the rank whose counter is highest (the last stage's reserve holds the loss's logits)
        top = max(res.ranks, key=lambda r: (rank_counters(res, r).of(which).bytes, -r.pp_rank))
        c = rank_counters(res, top)
        states = sum(top.by_category.get(k, 0) for k in ("parameters", "gradients", "optimizer"))
        return c.of(which).bytes, c.nvml.bytes, states  # type: ignore[arg-type]
    est = estimate(cfg)
    assert est.counters is not None  # every estimate carries them
    which = "reserved" if counter == "reserved" else "allocated"
    # The states a step keeps; not what it gathers or holds unsharded for a while (the
    # "overhead" lines: ZeRO-3's gathered blocks, no_sync's unsharded gradients).
    states = sum(
        c.bytes
        for c in est.components
        if c.category in ("parameters", "gradients", "optimizer") and c.group != "overhead"
    )
    return est.counters.of(which).bytes, est.counters.nvml.bytes, states  # type: ignore[arg-type]


def _largest_context(row: dict[str, Any]) -> dict[str, Any]:
    """A published largest sequence beside ours. ``fit --max-seq``'s answer (estimates: room
    left for the CUDA context and the 5 % margin) is what a user is told, and it alone decides
    an out-of-memory row. A row whose lengths are where one counter's line meets the GPU's
    whole memory (``"counter": "reserved"``) is compared like for like: the length at which our
    reserve on a GPU near full reaches the same memory, no context, no margin
    (``fit_search.reach``)."""
    from profiling.fit_search import largest, reach

    cfg = _config(row)
    said = largest(cfg, "seq").best
    fit_says = said.value if said is not None else None
    predicted = reach(cfg, "seq", _gpu_bytes(row)) if row.get("counter") == "reserved" else fit_says
    out: dict[str, Any] = {
        "id": row["id"],
        "gpu_mem_gb": row["gpu_mem_gb"],
        "published": row["measured"],
        "predicted": predicted,
        "fit_says": fit_says,
        "fully_published": row.get("fully_published", False),
    }
    if row.get("oom"):  # not even a short sequence fits: ours must say nothing fits
        out["does_not_fit"] = fit_says is None and predicted is None
    else:  # nothing fits by ours where a length did: 0, counted (the short side)
        out["ratio"] = round((predicted or 0) / row["measured"], 4)
        out["fit_ratio"] = round((fit_says or 0) / row["measured"], 4)
    return out


def run(rows: list[dict[str, Any]]) -> dict[str, Any]:
    judged, ooms, skipped, contexts = [], [], [], []
    for row in rows:
        if not row.get("expressible"):
            skipped.append({"id": row["id"], "reason": row.get("reason", ""),
                            "needs": row.get("needs", [])})  # fmt: skip
            continue
        if row.get("kind") == "largest_context":
            contexts.append(_largest_context(row))
            continue
        try:
            cfg = _config(row)
            predicted, nvml, states = _predicted(cfg, row["counter"])
        except ProfilingError as exc:
            skipped.append({"id": row["id"], "reason": f"our configuration refuses it: {exc}"})
            continue
        if row.get("oom"):
            budget = usable(_gpu_bytes(row))
            ooms.append(
                {"id": row["id"], "nvml": nvml, "usable": budget, "does_not_fit": nvml > budget}
            )
            continue
        measured = row["measured"] * UNITS[row["unit"]]
        # A row whose model states alone (weights, gradients, optimizer state, as its config
        # says) exceed what it reports was not made with that config: it is shown, not counted.
        consistent = states <= measured
        judged.append(
            {
                "id": row["id"],
                "project": row["project"],
                "counter": row["counter"],
                "measured": round(measured),
                "predicted": predicted,
                "ratio": round(predicted / measured, 4),
                "fully_published": row.get("fully_published", False) and consistent,
                **(
                    {}
                    if consistent
                    else {"inconsistent": f"its model states alone are {states / 1e9:.2f} GB"}
                ),
            }
        )
    return {
        "rows": judged,
        "oom_rows": ooms,
        "largest_context": contexts,
        "not_expressed": skipped,
        **_summary(judged, ooms, contexts),
    }


def _line(points: list[tuple[float, float]]) -> dict[str, Any] | None:
    """The least-squares line of length against the GPU's memory: its tokens per GB, the
    memory at no tokens (what the step holds before its first token), the bytes one more
    token costs, and the farthest length from it (Unsloth's columns are lines to the token)."""
    if len(points) < 2:
        return None
    fit = statistics.linear_regression([g for g, _ in points], [t for _, t in points])
    return {
        "tokens_per_gb": round(fit.slope, 2),
        "gb_at_no_tokens": round(-fit.intercept / fit.slope, 3),
        "mb_per_token": round(1e3 / fit.slope, 3),
        "farthest_tokens": round(max(abs(t - fit.slope * g - fit.intercept) for g, t in points), 2),
    }


def _context_summary(contexts: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [c["ratio"] for c in contexts if "ratio" in c]
    low, high = LARGEST_CONTEXT
    rows = [c for c in contexts if "ratio" in c]
    return {
        "rows": len(ratios),
        "ratios": ratios,
        "within": f"{sum(low <= r <= high for r in ratios)} of {len(ratios)} within {low}–{high}",
        "oom_said": f"{sum(c.get('does_not_fit', False) for c in contexts)} of "
        f"{sum('does_not_fit' in c for c in contexts)} out-of-memory rows: nothing fits",
        # Where the two part: per token, or before the first token (benchmarks/peer/README.md).
        "published_line": _line([(c["gpu_mem_gb"], c["published"]) for c in rows]),
        "predicted_line": _line(
            [(c["gpu_mem_gb"], c["predicted"]) for c in rows if c["predicted"]]
        ),
    }


def _summary(
    judged: list[dict[str, Any]], ooms: list[dict[str, Any]], contexts: list[dict[str, Any]]
) -> dict[str, Any]:
    full = [r["ratio"] for r in judged if r["fully_published"]]
    every = [r["ratio"] for r in judged]

    def stats(ratios: list[float]) -> dict[str, Any]:
        if not ratios:
            return {"rows": 0}
        errors = [abs(x - 1) for x in ratios]
        return {
            "rows": len(ratios),
            "median_abs_error": round(statistics.median(errors), 4),
            "share_within_10pct": round(sum(e <= 0.10 for e in errors) / len(errors), 3),
            "min_ratio": round(min(ratios), 4),
            "median_ratio": round(statistics.median(ratios), 4),
        }

    fully = stats(full)
    met = bool(full) and (
        fully["median_abs_error"] <= TARGETS["median_abs_error"]
        and fully["share_within_10pct"] >= TARGETS["share_within_10pct"]
        and fully["min_ratio"] >= TARGETS["min_ratio"]
    )
    return {
        "summary": {
            "fully_published": fully,
            "all_expressed": stats(every),
            "oom_rows_judged_does_not_fit": (
                f"{sum(o['does_not_fit'] for o in ooms)} of {len(ooms)}"
            ),
            "largest_context": _context_summary(contexts),
            "targets": {**TARGETS, "largest_context": list(LARGEST_CONTEXT)},
            "targets_met": met
            and all(o["does_not_fit"] for o in ooms)
            and all(
                c.get("does_not_fit", True)
                and LARGEST_CONTEXT[0] <= c.get("ratio", 1.0) <= LARGEST_CONTEXT[1]
                for c in contexts
            ),
        }
    }


def _markdown(result: dict[str, Any]) -> str:
    lines = [
        "| row | counter | measured | predicted | predicted ÷ measured | before |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        mark = "" if r["fully_published"] else " (not fully published)"
        if r.get("inconsistent"):
            mark = f" (not self-consistent: {r['inconsistent']})"
        old = r.get("ratio_before")
        lines.append(
            f"| {r['id']}{mark} | {r['counter']} | {r['measured'] / 1e9:.2f} GB | "
            f"{r['predicted'] / 1e9:.2f} GB | {r['ratio']:.3f} | "
            + (f"{old:.3f} |" if old is not None else "|")
        )
    for o in result["oom_rows"]:
        verdict = "does not fit ✓" if o["does_not_fit"] else "**fits ✗**"
        lines.append(
            f"| {o['id']} (OOM) | nvidia-smi | OOM | {o['nvml'] / 1e9:.2f} GB | {verdict} |"
        )
    for c in result["largest_context"]:
        if "ratio" in c:
            said = format(c["fit_says"], ",") if c["fit_says"] else "nothing"
            lines.append(
                f"| {c['id']} | largest seq (fit --max-seq: {said}) | {c['published']:,} | "
                f"{format(c['predicted'], ',') if c['predicted'] else 'nothing fits'} | "
                f"{c['ratio']:.3f} |"
            )
        else:
            fits = c["fit_says"] or c["predicted"]
            verdict = "nothing fits ✓" if c["does_not_fit"] else f"**{fits:,} fits ✗**"
            lines.append(f"| {c['id']} (OOM) | largest seq | OOM | {verdict} | |")
    return "\n".join(lines + _deepspeed_markdown(result.get("summary", {})))


def _deepspeed_markdown(summary: dict[str, Any]) -> list[str]:
    ds = summary.get("deepspeed_estimator")
    if not ds:
        return []

    def spread(v: dict[str, float] | None) -> str:
        return f"{v['min']:.3f}–{v['max']:.3f}" if v else "—"

    lines = [
        "",
        f"DeepSpeed's estimators: {ds['estimator_exact']} rows exact to the byte, "
        f"{ds['estimator_as_printed']} as printed.",
        "",
        "| DeepSpeed estimator | ours per GPU ÷ its | ours per node ÷ its ÷ 1.5 |",
        "| --- | --- | --- |",
    ]
    for k, v in ds["engine_beside_estimator"].items():
        lines.append(f"| {k} | {spread(v['gpu'])} | {spread(v['host_per_node'])} |")
    return lines


def old_result(ref: str, rows: Path) -> dict[str, Any]:
    """The same rows through ``profiling`` as it was at ``ref`` (its own bench, its own process)."""
    paths = ["profiling", "benchmarks/bench_peer.py", "benchmarks/peer"]
    later = "benchmarks/peer_deepspeed.py"  # bench_peer imports it from this commit on
    known = subprocess.run(["git", "-C", str(HERE.parent), "cat-file", "-e", f"{ref}:{later}"])
    paths += [later] if known.returncode == 0 else []
    archive = subprocess.run(
        ["git", "-C", str(HERE.parent), "archive", ref, *paths], capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        script = Path(tmp) / "benchmarks" / "bench_peer.py"
        # A bench from 5c2a35a on compares with its own --old (a git archive, which its copy
        # outside the repository cannot make), and later ones add DeepSpeed's rows: only its
        # rows and summary are read here, so it is told to skip both where it knows how.
        text = script.read_text(encoding="utf-8")
        skip = [flag for flag in ("--no-old", "--no-deepspeed") if f'"{flag}"' in text]
        done = subprocess.run(
            [sys.executable, str(script), "--rows", str(rows), *skip],
            capture_output=True, text=True, check=True, timeout=600,
        )  # fmt: skip
    return json.loads(done.stdout)


def beside(result: dict[str, Any], old: dict[str, Any], ref: str) -> None:
    """Each row's old ratio beside its new one, and the old summary beside this one."""
    ratios = {r["id"]: r["ratio"] for r in old.get("rows", [])}
    for row in result["rows"]:
        row["ratio_before"] = ratios.get(row["id"])
    result["summary"][f"at_{ref}"] = {
        key: old["summary"].get(key) for key in ("fully_published", "all_expressed", "targets_met")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=Path, default=HERE / "peer" / "rows.json")
    parser.add_argument("--markdown", action="store_true", help="the rows as a Markdown table")
    parser.add_argument("--old", default=OLD, help=f"the commit to compare with (default {OLD})")
    parser.add_argument("--no-old", action="store_true", help="no comparison with --old")
    parser.add_argument(
        "--no-deepspeed", action="store_true", help="without DeepSpeed's estimator rows"
    )
    opts = parser.parse_args()
    result = run(json.loads(opts.rows.read_text(encoding="utf-8")))
    if not opts.no_deepspeed:
        ds = peer_deepspeed.run(json.loads(peer_deepspeed.ROWS.read_text(encoding="utf-8"))["rows"])
        result["deepspeed_estimator"] = ds["rows"]
        result["summary"]["deepspeed_estimator"] = ds["summary"]
    if not opts.no_old:
        beside(result, old_result(opts.old, opts.rows.resolve()), opts.old)
    if opts.markdown:
        print(_markdown(result))
        print()
    print(json.dumps(result["summary"] if opts.markdown else result, indent=1))


if __name__ == "__main__":
    main()
