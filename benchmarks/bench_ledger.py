"""Ledger benchmarks on generated ledgers (a year of sessions and beyond); prints JSON.

Measures, per size: parsing + rendering the ledger, one locked update through the CLI's path
(``LedgerStore.update``: lock, read, parse, apply, check sources, atomic write), ``ledger
check``, and building the review queue. Baselines measured in the same run: rewriting a file of
the ledger's size atomically (temp + fsync + rename — the floor for any update that never
truncates) and reading + decoding it. Wall and CPU times are both reported.

    python benchmarks/bench_ledger.py [--sizes 300 3000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from journal_agent.atomic import atomic_write
from journal_agent.learning import ledger_api, review
from journal_agent.learning.ledger import parse_ledger
from journal_agent.learning.ledger_edit import new_ledger
from journal_agent.learning.ledger_ops import LedgerOperation
from journal_agent.learning.ledger_store import LedgerStore


def make_ledger(n: int) -> str:
    """A ledger with ``n`` items per mastery level, ``n`` sessions, actions and insights."""
    text = new_ledger("Benchmark", "2026-01-01")
    lines = text.splitlines()
    out: list[str] = []
    day = date(2024, 1, 1)
    for line in lines:
        out.append(line)
        if line.startswith("### 🟢") or line.startswith("### 🟡") or line.startswith("### 🔴"):
            out += [
                f"- **Concept {line[4]} {i}**: explained in a sentence *(新增)*" for i in range(n)
            ]
        elif line.startswith("### Immediate"):
            out += [f"- [{'x' if i % 2 else ' '}] Action item number {i}" for i in range(n)]
        elif line.startswith("|------"):
            out += [
                f"| {(day + timedelta(days=i)).isoformat()} | Topic {i} | Outcome of session {i} |"
                for i in range(n)
            ]
        elif line.startswith("## 💡"):
            for i in range(n):
                out += ["", f"### {(day + timedelta(days=i)).isoformat()}: Insight {i}"]
                out += [f'> "Insight number {i}, in one sentence without numbers."']
    return "\n".join(out) + "\n"


def timed(fn, repeats: int) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return {
        "wall_ms_median": round(statistics.median(walls) * 1000, 3),
        "cpu_ms_median": round(statistics.median(cpus) * 1000, 3),
        "wall_ms_min": round(min(walls) * 1000, 3),
    }


def bench(n: int, repeats: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        text = make_ledger(n)
        data = text.encode("utf-8")
        path = root / "learning_ledger.md"
        path.write_bytes(data)
        store = LedgerStore(root)
        counter = iter(range(10**9))

        def update() -> None:
            i = next(counter)
            store.update(
                [LedgerOperation(op="add_action", horizon="short-term", text=f"bench {i}")]
            )

        return {
            "items_per_level": n,
            "bytes": len(data),
            "lines": text.count("\n"),
            "baseline_atomic_rewrite": timed(lambda: atomic_write(root / "copy.md", data), repeats),
            "baseline_read_decode": timed(lambda: path.read_bytes().decode("utf-8"), repeats),
            "parse_render": timed(lambda: parse_ledger(path.read_text()).render(), repeats),
            "update": timed(update, repeats),
            "check": timed(lambda: ledger_api.check(root), max(3, repeats // 4)),
            "review_queue": timed(lambda: review.queue(root), max(3, repeats // 4)),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[300, 3000])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    results = [bench(n, args.repeats) for n in args.sizes]
    for r in results:
        update = r["update"]["wall_ms_median"]  # type: ignore[index]
        floor = r["baseline_atomic_rewrite"]["wall_ms_median"]  # type: ignore[index]
        r["update_over_atomic_rewrite"] = round(update / floor, 2) if floor else None
    print(json.dumps({"benchmark": "ledger", "results": results}, indent=2))


if __name__ == "__main__":
    main()
