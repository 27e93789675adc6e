"""Ledger benchmarks on generated ledgers (a year of sessions and beyond); prints JSON.

Measures, per size: parsing + rendering the ledger, one locked update through the CLI's path
(``LedgerStore.update``: lock, read, parse, apply, check sources, atomic write), ``ledger
check``, and building the review queue. Baselines measured in the same run: rewriting a file of
the ledger's size atomically (temp + fsync + rename — the floor for any update that never
truncates) and reading + decoding it. Wall and CPU times are both reported.

A batch case (finding 11 of the third review): one ``LedgerUpdate`` of the most operations a
call may carry against a single-operation update of the same ledger, in the same run (work per
operation), the longest a concurrent journal writer waited for the journal's lock meanwhile
(the lock is held only to write), and how fast a 3,000-operation request is refused.

    python benchmarks/bench_ledger.py [--sizes 300 3000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from datetime import date, timedelta
from pathlib import Path

from journal_agent import confined
from journal_agent.learning import ledger_api, review
from journal_agent.learning.ledger import parse_ledger
from journal_agent.learning.ledger_edit import new_ledger
from journal_agent.learning.ledger_ops import LedgerOperation
from journal_agent.workspace import Workspace


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
        ws = Workspace(root)
        store = ws.ledger
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
            "baseline_atomic_rewrite": timed(
                lambda: confined.replace(root, "copy.md", data), repeats
            ),
            "baseline_read_decode": timed(lambda: path.read_bytes().decode("utf-8"), repeats),
            "parse_render": timed(lambda: parse_ledger(path.read_text()).render(), repeats),
            "update": timed(update, repeats),
            "check": timed(lambda: ledger_api.check(ws), max(3, repeats // 4)),
            "review_queue": timed(lambda: review.queue(ws), max(3, repeats // 4)),
        }


def bench_batch(n: int, repeats: int) -> dict[str, object]:
    """A batch of MAX_OPERATIONS against one operation, on a ledger of ``n`` items per level."""
    from filelock import FileLock

    from journal_agent.learning.ledger_ops import MAX_OPERATIONS
    from journal_agent.tools.registry import make_context, product_tools

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "learning_ledger.md").write_text(make_ledger(n))
        ws = Workspace(root)
        store = ws.ledger
        counter = iter(range(10**9))

        def ops(k: int) -> list[LedgerOperation]:
            return [
                LedgerOperation(op="add_item", level="developing", text=f"batch {next(counter)}")
                for _ in range(k)
            ]

        one = timed(lambda: store.update(ops(1)), repeats)
        batch = timed(lambda: store.update(ops(MAX_OPERATIONS)), max(3, repeats // 4))
        # The longest a journal writer waits for the lock while a batch computes and writes.
        waits: list[float] = []
        done = threading.Event()
        worker = threading.Thread(target=lambda: (store.update(ops(MAX_OPERATIONS)), done.set()))
        lock = FileLock(str(root / ".journal" / "journal.lock"))
        worker.start()
        while not done.is_set():
            t = time.perf_counter()
            with lock:
                waits.append(time.perf_counter() - t)
            time.sleep(0.001)
        worker.join()
        tool, ctx = product_tools()["LedgerUpdate"], make_context(root)
        many = {"operations": [{"op": "add_item", "level": "blind", "text": "x"}] * 3000}
        refused = timed(lambda: tool.call(ctx, many), repeats)
        per_op = batch["wall_ms_median"] / MAX_OPERATIONS
        return {
            "items_per_level": n,
            "baseline_one_operation": one,
            f"update_{MAX_OPERATIONS}_operations": batch,
            "ms_per_operation_in_a_batch": round(per_op, 3),
            "batch_per_operation_over_one": round(per_op / one["wall_ms_median"], 3),
            "journal_lock_longest_wait_ms": round(max(waits) * 1000, 3) if waits else None,
            "refuse_3000_operations": refused,
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
    batches = [bench_batch(n, args.repeats) for n in args.sizes]
    print(json.dumps({"benchmark": "ledger", "results": results, "batch": batches}, indent=2))


if __name__ == "__main__":
    main()
