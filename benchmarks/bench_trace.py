"""Trace benchmarks; prints JSON.

1. The 7B Llama-shaped steady-state step (seq 2048, batch 1, amp-bf16, AdamW) traced in a
   fresh subprocess: wall and CPU time and peak RSS, against targets (≤ 9 s, ≤ 500 MB). CPU
   time (user + system of the child) is the number to judge on a shared machine: wall time
   there includes waiting for a core. Baselines measured in the same run: a subprocess that
   only imports torch and the tracer (the floor), the same trace with every block traced
   (``block_scaling=False``) and with torch's peak bookkeeping unchanged
   (``upstream_tracker=True``) — both must equal the default byte for byte.
2. Estimate-to-trace ratios per reference workload and category (parameters, gradients,
   optimizer, activations, total/peak) for the matching mixed-precision AdamW step.

    python benchmarks/bench_trace.py [--skip-upstream] [--workloads gpt2-small llama-1b ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

TARGETS = {"trace_7b_cpu_s": 9.0, "trace_7b_peak_rss_mb": 500.0}

CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from profiling.trace import TraceConfig, trace_step
import_s = time.perf_counter() - t0
out = {"import_s": round(import_s, 3)}
mode = sys.argv[1]
if mode != "import-only":
    cfg = TraceConfig(model="llama-7b", seq=2048, batch=1, precision="amp-bf16", optimizer="adamw")
    t1 = time.perf_counter()
    r = trace_step(cfg, upstream_tracker=(mode == "upstream"), block_scaling=(mode != "full"))
    out.update(
        trace_s=round(time.perf_counter() - t1, 3),
        peak_bytes=r.peak_bytes,
        first_step_peak_bytes=r.first_step_peak_bytes,
        by_category=r.by_category,
        after_step=r.after_step,
        flops=r.flops.total,
        params=r.params,
        result=r.model_dump(mode="json", exclude={"wall_seconds", "notes"}),
    )
usage = resource.getrusage(resource.RUSAGE_SELF)
out["wall_s"] = round(time.perf_counter() - t0, 3)
out["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)
out["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)
print(json.dumps(out))
"""


def _child(mode: str) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True
    )
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    data["process_wall_s"] = round(time.perf_counter() - t0, 3)
    return data


def bench_7b(skip_upstream: bool) -> dict:
    floor = _child("import-only")
    ours = _child("fast")
    full = _child("full")
    result = {
        "case": "llama-7b, seq 2048, batch 1, amp-bf16, AdamW (foreach), steady-state step",
        "import_only_baseline": floor,
        "trace": {k: v for k, v in ours.items() if k != "result"},
        "peak_gib": round(ours["peak_bytes"] / 2**30, 2),
        "first_step_peak_gib": round(ours["first_step_peak_bytes"] / 2**30, 2),
        "targets": TARGETS,
        "meets_targets": ours["cpu_s"] <= TARGETS["trace_7b_cpu_s"]
        and ours["peak_rss_mb"] <= TARGETS["trace_7b_peak_rss_mb"],
        "every_block_baseline": {k: v for k, v in full.items() if k != "result"},
        # Every number the trace reports, not only the peak.
        "block_scaled_equals_every_block": ours["result"] == full["result"],
        "speedup_vs_every_block": round(full["cpu_s"] / ours["cpu_s"], 2),
    }
    if not skip_upstream:
        upstream = _child("upstream")
        result["upstream_tracker_baseline"] = {k: v for k, v in upstream.items() if k != "result"}
        result["same_bytes_as_upstream"] = ours["result"] == upstream["result"]
        result["speedup_vs_upstream"] = round(upstream["cpu_s"] / ours["cpu_s"], 2)
    return result


def bench_ratios(workloads: list[str]) -> dict:
    from profiling.estimate import estimate
    from profiling.report import compare, estimate_input_for_trace
    from profiling.trace import TraceConfig, trace_step

    out = {}
    for name in workloads:
        cfg = TraceConfig(model=name, batch=1, dtype="bf16", optimizer="adamw")
        t0 = time.perf_counter()
        result = trace_step(cfg)
        est = estimate(estimate_input_for_trace(result.config))
        cmp = compare(est, result)
        out[name] = {
            "seq": result.config.seq,
            "params": result.params,
            "trace_s": round(time.perf_counter() - t0, 2),
            "ratios": {row["category"]: row["ratio"] for row in cmp["rows"]},
            "model_states": cmp["model_states"]["ratio"],
            "total_over_peak": cmp["ratio"],
            "estimated_gb": round(est.per_gpu_bytes / 1e9, 2),
            "traced_peak_gb": round(result.peak_bytes / 1e9, 2),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-upstream", action="store_true", help="skip the slow baseline")
    parser.add_argument(
        "--workloads",
        nargs="*",
        default=["gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "llama-1b", "llama-7b"],
    )
    args = parser.parse_args()
    report = {
        "trace_7b": bench_7b(args.skip_upstream),
        "estimate_over_trace": bench_ratios(args.workloads),
        "notes": (
            "ratios are estimate/trace per category: the estimate assumes mixed precision "
            "(2 B weights + 2 B grads + 12 B optimizer), the trace runs bf16 autocast over fp32 "
            "parameters (4 + 4 + 8); traced activations are those alive when forward ends"
        ),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
