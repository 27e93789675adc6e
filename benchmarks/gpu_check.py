"""One command to check the profiler on a GPU: measured, traced and estimated, side by side.

    python3 benchmarks/gpu_check.py                 # on one H100 / H200: under 8 minutes
    python3 benchmarks/gpu_check.py --dry-run       # anywhere: the same path, tiny models, CPU

Runs issue 23's four workloads (gpt2-small amp-bf16 b8 s1024, gpt2-medium mixed b4 s1024,
llama-7b mixed b1 s2048, llama-1b bf16 b4 s2048), an SDPA case in fp32 (the memory-efficient
kernel) and an eager-attention case. Each is measured (``MemoryProfiler`` on the GPU: the
steady-state step's peak of allocated bytes, time per step, the profiler's own time), traced
for the GPU (``--target cuda``, in a child process) and estimated. Writes
``benchmarks/results/gpu-<device>-<date>.json`` and ``.md`` (a table: measured ÷ traced,
measured ÷ estimated, overhead, tokens/s, MFU) and prints the table.

It runs from a plain checkout: it puts the repository on ``sys.path`` and imports only
``profiling`` (never journal_agent, typer or rich). What it needs besides torch:
pydantic (with pydantic-core, annotated-types, typing-extensions, typing-inspection), psutil
and nvidia-ml-py; a missing one is named with the wheels to carry, before anything runs. An
out-of-memory step is a result (llama-7b mixed needs about 109 GB: an H200 holds it, an
80 GB H100 does not).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parent))  # _md, also when loaded as a module
from _md import table

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
BUDGET_S = 7.5 * 60  # stop starting new cases after this (the whole check: under 8 minutes)
# import name -> the wheels to carry when it is missing
NEEDS = {
    "torch": "torch (the GPU image's own: never replaced)",
    "pydantic": "pydantic pydantic-core annotated-types typing-extensions typing-inspection",
    "psutil": "psutil",
    "pynvml": "nvidia-ml-py",
}

# (name, configuration) — the GPU cases, and the same shapes in miniature for --dry-run.
CASES = [
    ("gpt2-small amp-bf16", dict(model="gpt2-small", precision="amp-bf16", batch=8, seq=1024)),
    ("gpt2-medium mixed", dict(model="gpt2-medium", precision="mixed", batch=4, seq=1024)),
    ("llama-7b mixed", dict(model="llama-7b", precision="mixed", batch=1, seq=2048)),
    ("llama-1b bf16", dict(model="llama-1b", precision="bf16", batch=4, seq=2048)),
    ("sdpa fp32 (memory-efficient)", dict(model="gpt2-small", precision="fp32", batch=4, seq=1024)),
    (
        "eager attention",
        dict(model="gpt2-small", precision="amp-bf16", batch=4, seq=1024, attention="eager"),
    ),
]
DRY_CASES = [
    ("tiny-gpt2 amp-bf16", dict(model="tiny-gpt2", precision="amp-bf16", batch=2, seq=64)),
    ("tiny-gpt2 mixed", dict(model="tiny-gpt2", precision="mixed", batch=2, seq=64)),
    ("tiny-llama mixed", dict(model="tiny-llama", precision="mixed", batch=1, seq=64)),
    ("tiny-llama bf16", dict(model="tiny-llama", precision="bf16", batch=2, seq=64)),
    ("sdpa fp32", dict(model="tiny-gpt2", precision="fp32", batch=2, seq=64)),
    (
        "eager attention",
        dict(model="tiny-gpt2", precision="fp32", batch=2, seq=64, attention="eager"),
    ),
]
# the profiler's overhead against plain steps, measured for these (GPU only)
OVERHEAD_CASES = ("gpt2-small amp-bf16", "llama-1b bf16")


def missing_dependencies() -> list[str]:
    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


def _gpu_spec(device_name: str):
    """The datasheet entry for the GPU NVML / torch names, or None."""
    from profiling.gpus import GPUS

    name = device_name.lower()
    for key in ("h200", "h100-sxm", "a100-80gb", "a100-40gb", "l40s", "l4", "b200"):
        if key.split("-")[0] in name:
            return GPUS.get(key)
    return None


def _steady_peak(summary) -> int:
    """The highest step peak after the warm-up: what every later step repeats."""
    timed = [s.peak_bytes for s in summary.steps if not s.warmup]
    return max(timed or [s.peak_bytes for s in summary.steps] or [0])


def run_case(name: str, spec: dict, device: str, steps: int, warmup: int) -> dict:
    from profiling.config import TrainingConfig
    from profiling.measure.run import RunOptions, measure_step

    target = "cuda" if device == "cuda" else "cpu"
    cfg = TrainingConfig(**spec, optimizer="adamw", target=target)
    row: dict = {"case": name, "config": cfg.model_dump(mode="json"), "notes": []}
    t0 = time.perf_counter()
    options = RunOptions(steps=steps, warmup=warmup, device=device, compare_trace=False)
    try:
        run = measure_step(cfg, options)
    except Exception as exc:  # one case's failure is a row, not the end of the check
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        return row
    s = run.summary
    row.update(
        measured_peak_bytes=_steady_peak(s),
        oom=None if s.oom is None else f"step {s.oom.step}, {s.oom.phase}",
        step_s=s.step_time.median if s.step_time else None,
        tokens_per_s=s.tokens_per_s,
        flops_per_step=s.flops_per_step,
        overhead_s_per_step=s.overhead_s_per_step,
        measure_s=round(time.perf_counter() - t0, 1),
        device=s.device.get("name"),
        measured_peak_reserved=s.peak_reserved,
        # the summary's notes and the run's overlap: each once
        notes=list(dict.fromkeys([*row["notes"], *s.notes, *run.notes])),
    )
    if row["step_s"]:
        row["overhead_fraction"] = (s.overhead_s_per_step or 0) / row["step_s"]
        spec_gpu = _gpu_spec(str(s.device.get("name", "")))
        if spec_gpu is not None and s.flops_per_s:
            peak = spec_gpu.peak_flops(cfg.compute_dtype != "fp32")
            row["mfu"] = s.flops_per_s / peak
    predict(row, cfg)
    return row


def predict(row: dict, cfg) -> None:
    """The trace's and the estimate's figures for ``cfg`` beside ``row``'s measurement: the
    tensors' peak, and the allocated counter (what ``max_memory_allocated`` counts: the tensors
    rounded to the allocator's 512-byte blocks plus cuBLAS's workspaces) and the reserve."""
    from profiling.estimate.memory import estimate
    from profiling.trace.child import trace_in_child

    counted = cfg.model_copy(update={"counter": "reserved"})  # the allocator replayed too
    t1 = time.perf_counter()
    try:
        trace = trace_in_child(counted, timeout=300)
        row["traced_peak_bytes"] = trace.peak_bytes
        if trace.counters is not None:
            row["traced_allocated_bytes"] = trace.counters.allocated.bytes
            row["traced_reserved_bytes"] = trace.counters.reserved.bytes
    except Exception as exc:
        row["notes"].append(f"no trace: {str(exc).splitlines()[0][:300]}")
    row["trace_s"] = round(time.perf_counter() - t1, 1)
    e = estimate(counted)
    row["estimated_peak_bytes"] = e.per_gpu_bytes
    if e.counters is not None:
        row["estimated_allocated_bytes"] = e.counters.allocated.bytes
        row["estimated_reserved_bytes"] = e.counters.reserved.bytes
    measured = row.get("measured_peak_bytes")
    for what in ("traced", "estimated"):
        for kind in ("peak", "allocated"):
            other = row.get(f"{what}_{kind}_bytes")
            if other and measured and not row.get("oom"):
                key = f"measured_over_{what}" + ("" if kind == "peak" else "_allocated")
                row[key] = measured / other
        other = row.get(f"{what}_reserved_bytes")
        if other and row.get("measured_peak_reserved") and not row.get("oom"):
            row[f"reserved_over_{what}"] = row["measured_peak_reserved"] / other


def rescore(path: Path) -> Path:
    """The predictions of a results file made again here (the GPU's measurements kept):
    after the profiler changes, or for columns an older run did not write."""
    from profiling.config import TrainingConfig

    report = json.loads(path.read_text(encoding="utf-8"))
    for row in report["rows"]:
        if "config" in row and "error" not in row:
            print(f"{row['case']} …", file=sys.stderr, flush=True)
            row["notes"] = list(dict.fromkeys(row.get("notes", [])))
            predict(row, TrainingConfig(**row["config"]))
    report["rescored"] = datetime.date.today().isoformat()
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    path.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))
    return path


def overhead(spec: dict) -> dict | None:
    """Plain steps against profiled ones on the GPU (bench_profile's measurement)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_profile import cuda_overhead

    from profiling.config import TrainingConfig

    try:
        return cuda_overhead(TrainingConfig(**spec, optimizer="adamw"), steps=5, blocks=2)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}


def _fmt(value, kind: str) -> str:
    if value is None:
        return "—"
    if kind == "bytes":
        return f"{value:,}"
    if kind == "ratio":
        return f"{value:.4f}"
    if kind == "pct":
        return f"{100 * value:.3f} %"
    return f"{value:,.0f}"


_HEADER = [
    "case",
    "measured peak",
    "÷ traced tensors",
    "÷ traced allocated",
    "÷ estimated allocated",
    "profiler's own time",
    "tokens/s",
    "MFU",
]
_RATIOS = (
    "measured_over_traced",
    "measured_over_traced_allocated",
    "measured_over_estimated_allocated",
)


def markdown(report: dict) -> str:
    lines = [
        f"GPU check on {report['device']} ({report['torch']}), {report['date']}"
        + (" — DRY RUN on the CPU with tiny models" if report["dry_run"] else "")
        + (f"; predictions made again on {report['rescored']}" if report.get("rescored") else ""),
        "",
        "Measured: the steady-state step's max_memory_allocated. ÷ tensors: over the trace's "
        "peak of tensors alone; ÷ allocated: over the allocated counter (the tensors rounded to "
        "512-byte blocks plus cuBLAS's workspaces — what max_memory_allocated counts). The "
        "profiler's own time is what its hooks took (on the CPU, largely hidden behind the "
        "GPU's work: the measured overhead is below the table).",
        "",
    ]
    rows = []
    for r in report["rows"]:
        if "error" in r:
            rows.append([r["case"], r["error"]])
            continue
        peak = _fmt(r.get("measured_peak_bytes"), "bytes") + (
            f" (OOM {r['oom']})" if r.get("oom") else ""
        )
        rows.append(
            [r["case"], peak]
            + [_fmt(r.get(k), "ratio") for k in _RATIOS]
            + [_fmt(r.get("overhead_fraction"), "pct"), _fmt(r.get("tokens_per_s"), "n")]
            + [_fmt(r.get("mfu"), "pct")]
        )
    lines += table(_HEADER, rows)
    for name, o in report.get("overhead", {}).items():
        if o and "overhead_fraction" in o:
            lines.append(
                f"\nProfiler overhead, {name}: {100 * o['overhead_fraction']:.2f} % "
                f"({o['profiled_step_s']:.4f} s against {o['step_s']:.4f} s plain)"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny models on the CPU")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per case")
    parser.add_argument("--warmup", type=int, default=2, help="warm-up steps per case")
    parser.add_argument("--cases", nargs="*", help="only the cases whose name contains these")
    parser.add_argument(
        "--budget", type=float, default=BUDGET_S, help="seconds after which no case starts"
    )
    parser.add_argument("--rescore", type=Path, help="a results JSON: predict again here")
    args = parser.parse_args(argv)
    if args.rescore:
        sys.path.insert(0, str(REPO))
        rescore(args.rescore)
        return 0
    missing = missing_dependencies()
    if missing:
        wheels = " ".join(NEEDS[m] for m in missing)
        print(f"gpu_check needs {', '.join(missing)}: carry and install these wheels: {wheels}")
        return 2
    sys.path.insert(0, str(REPO))
    import torch

    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: run on a GPU machine, or --dry-run to check the path")
        return 2
    started = time.perf_counter()
    name = "cpu" if device == "cpu" else torch.cuda.get_device_name(0)
    report: dict = {
        "device": name,
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "dry_run": args.dry_run,
        "rows": [],
        "overhead": {},
    }
    for case, spec in DRY_CASES if args.dry_run else CASES:
        if args.cases and not any(part in case for part in args.cases):
            continue
        if time.perf_counter() - started > args.budget:
            report["rows"].append(
                {"case": case, "error": f"skipped: the {args.budget:.0f} s budget ran out"}
            )
            continue
        print(f"{case} …", file=sys.stderr, flush=True)
        report["rows"].append(run_case(case, spec, device, args.steps, args.warmup))
        if device == "cuda" and case in OVERHEAD_CASES:
            report["overhead"][case] = overhead(spec)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ("-dryrun" if args.dry_run else "")
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"gpu-{slug}-{report['date']}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    table = markdown(report)
    stem.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"results: {stem}.json, {stem}.md ({report['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
