"""The blocks alive at a measured step's peak, from PyTorch's own allocation history, to set
beside the trace's live tensors at its peak: where measured and traced peaks part, which
allocation the trace does not make.

    python3 benchmarks/gpu_peak_blocks.py --out DIR [--cases gpt2-small eager]   # on a GPU
    python3 benchmarks/gpu_peak_blocks.py --dry-run          # the CPU: the path, no history

For each of gpu_check's cases named: three warm-up steps as ``journal-agent profile`` runs them,
then one step under ``torch.cuda.memory._record_memory_history`` (Python stacks). Walking the
history from ``memory_allocated()`` at the step's start gives the step's peak; the JSON holds
that peak, the blocks allocated in the step and alive there (size, stream, the innermost
Python frames), and the 40 events before it. Needs what gpu_check needs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _frames(event: dict) -> list[str]:
    return [
        f"{Path(f['filename']).name}:{f['line']}:{f['name']}"
        for f in (event.get("frames") or [])[:4]
    ]


def peak_blocks(events: list[dict], start: int) -> dict:
    """Walk the allocator's history from ``start`` bytes allocated: the peak and what is
    alive there (``free_requested`` is when ``memory_allocated`` drops)."""
    live: dict[int, dict] = {}
    now = best = start
    best_i, best_live = -1, {}
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            live[e["addr"]] = e
            now += e["size"]
            if now > best:
                best, best_i, best_live = now, i, dict(live)
        elif e["action"] == "free_requested" and e["addr"] in live:
            now -= live.pop(e["addr"])["size"]
        elif e["action"] == "free_requested":
            now -= e["size"]  # a block from before the step
    blocks = sorted(best_live.values(), key=lambda e: -e["size"])
    return {
        "start_allocated": start,
        "peak_allocated": best,
        "peak_event": best_i,
        "alive_at_peak": [
            {"size": e["size"], "stream": e.get("stream"), "frames": _frames(e)} for e in blocks
        ],
        "before_peak": [
            {"action": e["action"], "size": e["size"], "frames": _frames(e)}
            for e in events[max(0, best_i - 40) : best_i + 1]
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--cases", nargs="*", default=["gpt2-small", "sdpa", "eager"])
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
    import torch
    from bench_profile import cuda_step
    from gpu_check import CASES, DRY_CASES

    from profiling.config import TrainingConfig

    device = "cpu" if args.dry_run else "cuda"
    report: dict = {
        "device": "cpu" if args.dry_run else torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "rows": [],
    }
    for name, spec in DRY_CASES if args.dry_run else CASES:
        if not any(c in name for c in args.cases):
            continue
        cfg = TrainingConfig(**spec, optimizer="adamw", target="cuda")
        step = cuda_step(cfg, device)
        for _ in range(3):
            step()
        if args.dry_run:
            step()
            report["rows"].append({"case": name, "note": "dry run: no allocation history"})
            continue
        torch.cuda.synchronize()
        start = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.memory._record_memory_history(max_entries=500_000, stacks="python")
        step()
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        row = {"case": name, "max_memory_allocated": torch.cuda.max_memory_allocated()}
        row.update(peak_blocks(snap["device_traces"][0], start))
        report["rows"].append(row)
        print(name, row["max_memory_allocated"], row["peak_allocated"], flush=True)
        del step
        torch.cuda.empty_cache()
    slug = re.sub(r"[^a-z0-9]+", "-", report["device"].lower()).strip("-")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"gpu-peak-blocks-{slug}-{report['date']}.json"
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
