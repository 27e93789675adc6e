"""The closed form's reserve against the allocator replay; prints JSON.

For a grid of steps — models (tiny, Llama 3.2 1B, Llama 3.1 8B), one GPU and FSDP2 plans
(torchtitan's: mixed precision, expandable segments), sequences up to long contexts, no and
full checkpointing, full fine-tuning, LoRA and QLoRA — the step is traced under fake tensors
with every block (``--counter reserved``: its allocations and frees replayed through the caching
allocator's model, ``profiling.estimate.allocator``, default segments and expandable ones) and
estimated in closed form. The closed form's reserved memory must be at least the replay's in
every row (what ``estimate`` and nvidia-smi's column show: the reserve of a GPU that never runs
out); the report gives closed ÷ replay per row and its distribution (aim: at most about 1.10).
The ``need`` columns: the least memory the replay runs in (the allocator handing its cached
segments back and retrying before it runs out, ``profiling.trace.allocations.need``) against
the closed form's bound of it (``profiling.estimate.reserve.need_bound``) — what ``fit`` judges
by, so it too must be at least the replay's in every row.

    python benchmarks/bench_reserve.py [--quick] [--rows N]

``--quick``: the tiny and 1B rows only (a few minutes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

TINY = {"model": "tiny-llama"}
SMALL = {"model": "hf:qwen2.5-0.5b"}
ONE_B = {"model": "hf:llama-3.2-1b"}
EIGHT_B = {"model": "hf:llama-3.1-8b"}
PLAN_1B = {"model": "llama-1b"}
LORA = {"lora_rank": 16}
QLORA = {"lora_rank": 32, "qlora": True, "lora_targets": "q,k,v,o,gate,up,down"}
FULL = {"checkpointing": "full"}
FLASH = {"attention": "flash"}
TITAN = {"precision": "mixed", "expandable_segments": True}


def grid(quick: bool) -> list[dict[str, Any]]:
    """The steps compared (each a TrainingConfig's fields)."""
    rows: list[dict[str, Any]] = []
    for seq in (32, 128):
        for ck in ({}, FULL):
            rows.append({**TINY, "batch": 2, "seq": seq, **ck})
    rows.append({**TINY, "batch": 2, "seq": 128, "expandable_segments": True})
    rows.append({**TINY, "batch": 2, "seq": 128, **LORA, **FULL})
    rows.append({**TINY, "batch": 2, "seq": 128, "dp_shard": 2, **TITAN})
    rows.append({**TINY, "batch": 2, "seq": 128, "dp_shard": 8, **TITAN, **FULL})
    rows.append({"model": "gpt2-small", "batch": 8, "seq": 1024, "precision": "amp-bf16"})
    for precision in ("mixed", "amp-bf16"):  # master weights; autocast's cached copies (#31)
        rows.append({**TINY, "batch": 2, "seq": 128, "precision": precision, **FULL})
        rows.append({**TINY, "batch": 2, "seq": 128, "precision": precision,
                     "expandable_segments": True})  # fmt: skip
        rows.append({**SMALL, "batch": 1, "seq": 1024, "precision": precision, **FULL})
    for seq in (1024, 4096, 16384):
        rows.append({**SMALL, "batch": 1, "seq": seq, "precision": "bf16", **FULL})
    rows.append({**SMALL, "batch": 4, "seq": 2048, "precision": "bf16"})
    rows.append({**SMALL, "batch": 1, "seq": 8192, "precision": "bf16", **LORA, **FULL, **FLASH})
    for seq in (512, 2048, 8192, 16384):
        rows.append({**ONE_B, "batch": 1, "seq": seq, "precision": "bf16", **FULL, **FLASH})
    for seq in (1024, 4096):
        rows.append({**ONE_B, "batch": 2, "seq": seq, "precision": "bf16"})
    rows.append({**ONE_B, "batch": 1, "seq": 2048, "precision": "mixed", **LORA})
    rows.append({**ONE_B, "batch": 1, "seq": 4096, "precision": "bf16", **FULL,
                 "expandable_segments": True})  # fmt: skip
    rows.append({**ONE_B, "batch": 1, "seq": 8191, "precision": "bf16", **QLORA, **FULL, **FLASH})
    rows.append({**ONE_B, "batch": 1, "seq": 8192, "precision": "bf16", **QLORA, **FULL, **FLASH,
                 "loss": "transformers-4.46"})  # fmt: skip
    # a plan runs torchtitan's Llama 3 (an untied output): the Llama-shaped 1B reference
    for batch, seq in ((1, 1024), (2, 2048)):
        rows.append({**PLAN_1B, "batch": batch, "seq": seq, "dp_shard": 2, **TITAN, **FULL})
    rows.append({**PLAN_1B, "batch": 2, "seq": 2048, "dp_shard": 8, **TITAN})
    # losses that work a chunk at a time: their segments are a chunk's (or the head's V·h),
    # not the whole sequence's fp32 logits (audit2 D18; /tmp sweeps of 86 rows: 1.04-1.63)
    for loss in ("chunked", "linear-chunked", "liger", "cce"):
        rows.append({**SMALL, "batch": 2, "seq": 2048, "precision": "bf16", "loss": loss})
        rows.append({**ONE_B, "batch": 1, "seq": 4096, "precision": "mixed", **FULL,
                     "loss": loss})  # fmt: skip
    if quick:
        return rows
    for seq in (932, 2551, 12264):
        rows.append({**EIGHT_B, "batch": 1, "seq": seq, "precision": "bf16", **QLORA, **FULL,
                     **FLASH})  # fmt: skip
    # Unsloth's HF + FA2 column, with transformers 4.46-4.48's loss (benchmarks/peer)
    rows.append({**EIGHT_B, "batch": 1, "seq": 12264, "precision": "bf16", **QLORA, **FULL,
                 **FLASH, "loss": "transformers-4.46"})  # fmt: skip
    rows.append({**EIGHT_B, "batch": 1, "seq": 4096, "precision": "bf16", **LORA, **FULL})
    rows.append({**EIGHT_B, "batch": 1, "seq": 8192, "dp_shard": 8, **TITAN, **FULL})
    rows.append({**EIGHT_B, "batch": 2, "seq": 2048, "dp_shard": 8, **TITAN})
    return rows


def measure(fields: dict[str, Any]) -> dict[str, Any]:
    """One row: the replay's and the closed form's reserve (the row's segments: torchtitan's
    plans expandable, one GPU default unless the row says)."""
    from profiling.config import TrainingConfig

    start = time.perf_counter()
    # a GPU smaller than any step's reserve: the trace then searches the least memory its
    # replay runs in (what a GPU near full keeps)
    cfg = TrainingConfig.parse(style="field", counter="reserved", gpu_mem=0.001, **fields)
    if cfg.is_plan:
        from profiling.plans.closed_form import estimate_plan
        from profiling.plans.report import rank_counters
        from profiling.plans.trace import trace_plan

        traced = trace_plan(cfg)
        replay = rank_counters(traced, traced.highest)
        res = estimate_plan(cfg)
        closed = rank_counters(res, res.highest)
    else:
        from profiling.estimate.memory import estimate
        from profiling.trace.step import trace_step

        replay = trace_step(cfg, block_scaling=False).counters
        closed = estimate(cfg).counters
    assert replay is not None and closed is not None and replay.source == "trace"
    allocated, got = replay.allocated.bytes, replay.reserved.bytes
    need, closed_need = replay.held(), closed.held()
    return {
        "config": fields,
        "allocated": allocated,
        "replay": got,
        "closed": closed.reserved.bytes,
        "closed_allocated": closed.allocated.bytes,
        "replay_over_allocated": round(got / allocated, 4),
        "closed_over_replay": round(closed.reserved.bytes / got, 4),
        "need": need,
        "closed_need": closed_need,
        "need_over_allocated": round(need / allocated, 4),
        "closed_need_over_need": round(closed_need / need, 4),
        "seconds": round(time.perf_counter() - start, 1),
    }


def summary(rows: list[dict[str, Any]], key: str = "closed_over_replay") -> dict[str, Any]:
    ratios = [r[key] for r in rows]
    below = [{"config": r["config"], key: r[key]} for r in rows if r[key] < 1.0]
    q = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else ratios * 9
    within = sum(1.0 <= x <= 1.10 for x in ratios) / len(ratios)
    spread = {"min": min(ratios), "p10": round(q[0], 4),
              "median": round(statistics.median(ratios), 4), "p90": round(q[-1], 4),
              "max": max(ratios), "within_10_percent_above": round(within, 3)}  # fmt: skip
    out = {
        "rows": len(rows),
        "closed_at_least_replay_everywhere": not below,
        "below": below,
        key: spread,
    }
    if key == "closed_over_replay":  # what fit judges by: the need, bound against the replay's
        out["need"] = summary(rows, "closed_need_over_need")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the closed form's reserve against the replay")
    ap.add_argument("--quick", action="store_true", help="the tiny and 1B rows only")
    ap.add_argument("--rows", type=int, default=None, help="the first N rows only")
    ap.add_argument("--start", type=int, default=0, help="from row N on")
    args = ap.parse_args(argv)
    specs = grid(args.quick)[args.start : args.rows]
    rows = []
    for fields in specs:
        rows.append(measure(fields))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"summary": summary(rows), "rows": rows}, indent=1))
    result = summary(rows)
    ok = (
        result["closed_at_least_replay_everywhere"]
        and result["need"]["closed_at_least_replay_everywhere"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
