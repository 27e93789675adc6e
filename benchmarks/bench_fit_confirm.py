"""The cost of ``fit``'s confirmation traces, before and after ``profiling.fit_confirm``; prints
JSON, and a table side by side on stderr.

Before: each confirmed candidate traced every block with ``--counter nvml`` and replayed its
allocations through the caching allocator at the GPU's size (5d071d2). After: the trace's
exact allocated peak (block-scaled where the model allows) under the closed form's bound of the
allocator's need, the every-block replay only where that bound does not fit. For each row: both
times, both figures (what must fit on nvidia-smi near full), and bound ÷ replay, which must be
at least 1 (the bound never says "fits" where the replay does not).

    python benchmarks/bench_fit_confirm.py [--quick]

``--quick``: the 0.5B and 1B rows only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

ROWS: list[dict[str, Any]] = [
    {"model": "hf:qwen2.5-0.5b", "batch": 1, "seq": 1024, "precision": "bf16",
     "checkpointing": "full"},
    {"model": "hf:llama-3.2-1b", "batch": 2, "seq": 2048, "precision": "bf16",
     "checkpointing": "full", "loss": "linear-chunked"},
    {"model": "hf:llama-3.2-1b", "batch": 1, "seq": 2048, "precision": "mixed", "lora_rank": 16},
    # what `fit --model llama-7b --gpu-mem 24 --gpu rtx-4090` confirms first
    {"model": "llama-7b", "batch": 1, "seq": 2048, "precision": "bf16", "lora_rank": 16,
     "checkpointing": "full", "gpu": "rtx-4090"},
    {"model": "hf:llama-3.1-8b", "batch": 1, "seq": 2048, "precision": "bf16", "lora_rank": 32,
     "qlora": True, "checkpointing": "full", "attention": "flash"},
]  # fmt: skip


def measure(fields: dict[str, Any]) -> dict[str, Any]:
    from profiling.config import TrainingConfig
    from profiling.fit_confirm import bounded, replayed

    # a GPU below any reserve: the replay searches the least memory it runs in, as fit's does
    # near the GPU's size
    cfg = TrainingConfig.parse(style="field", gpu_mem=0.001, **fields)
    start = time.perf_counter()
    before = replayed(cfg)
    mid = time.perf_counter()
    after = bounded(cfg)
    end = time.perf_counter()
    return {
        "config": fields,
        "before_seconds": round(mid - start, 1),
        "after_seconds": round(end - mid, 1),
        "replay_must_fit": before.must_fit,
        "bound_must_fit": after.must_fit,
        "bound_over_replay": round(after.must_fit / before.must_fit, 4),
        "after_how": after.how,  # "replay": block scaling missed, every block traced anyway
        "same_peak": before.peak_bytes == after.peak_bytes,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="fit's confirmation traces: before and after")
    ap.add_argument("--quick", action="store_true", help="the 0.5B and 1B rows only")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'configuration':60} {'before s':>9} {'after s':>8} {'bound/replay':>12}  how",
          file=sys.stderr)  # fmt: skip
    for fields in ROWS[:3] if args.quick else ROWS:
        row = measure(fields)
        rows.append(row)
        name = " ".join(f"{v}" if k == "model" else f"{k}={v}" for k, v in fields.items())
        print(f"{name[:60]:60} {row['before_seconds']:>9} {row['after_seconds']:>8} "
              f"{row['bound_over_replay']:>12}  {row['after_how']}", file=sys.stderr,
              flush=True)  # fmt: skip
    safe = all(r["bound_over_replay"] >= 1 and r["same_peak"] for r in rows)
    print(json.dumps({"bound_at_least_replay_everywhere": safe, "rows": rows}, indent=1))
    return 0 if safe else 1


if __name__ == "__main__":
    sys.exit(main())
