"""CPU time of ``journal check --json`` on a generated journal, this checkout beside an older
commit in the same run; prints JSON.

The journal is bench_memory.py's (bench_journal.py's entries: code references, cited records,
tags; about 70,000 entries at 98 MB), with its refs.jsonl and search index built first (the
check's near-duplicate pass reads the index; a rebuild is measured by bench_memory.py). Then,
for this checkout (``new``) and for ``--old REF`` (``git archive`` into a temporary folder and
run from there), each ``--repeat`` times in turn on the same files: ``python -m journal_agent
journal check --json`` as a fresh process, its CPU time (user + system, ``wait4``'s: the
machine is shared, so wall time says more of the neighbours than of the check), wall time,
peak RSS and exit code; and whether both print the same report byte for byte (``same_output``:
the same check, cheaper). The best of the repeats is compared.

    python benchmarks/bench_check.py [--mb 98] [--old REF] [--repeat 2]
        [--workspace DIR (generated once, kept)]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The commit before `journal check` read each entry once and folded only non-ASCII text.
BEFORE = "2f54a01"


def _bench_memory():
    spec = importlib.util.spec_from_file_location("bench_memory", HERE / "bench_memory.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_memory"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def _run(code, root: Path) -> dict[str, object]:
    """``journal check --json`` in a fresh process: CPU and wall seconds, peak RSS, output."""
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        proc = subprocess.Popen(
            code.argv("journal", "check", "--json", "--root", str(root)),
            cwd=code.folder,
            env=code.env(),
            stdout=out,
            stderr=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t
        out.seek(0)
        output = out.read()
    return {
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "wall_s": round(elapsed, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "rc": os.waitstatus_to_exitcode(status),
        "_output": output,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mb", type=float, default=98.0)
    parser.add_argument("--old", default=BEFORE, help=f"the commit to compare with ({BEFORE})")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--workspace", type=Path, help="generate the journal here once and reuse it (kept)"
    )
    args = parser.parse_args()
    bm = _bench_memory()
    new = bm.Code("new", bm.REPO)
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        root = args.workspace.resolve() if args.workspace else Path(tmp) / "ws"
        old = bm._old_code(args.old, Path(tmp) / "old")
        for code in (new, old):
            code.check()
        made = root / "made.json"  # (bench_memory.py's: a workspace serves both)
        if not made.is_file():
            bm._setup_apart(root, args.mb)  # (apart: its peak would be every run's peak)
        _, entries = json.loads(made.read_text())
        journal_mb = round((root / "learning_journal.md").stat().st_size / 1e6, 1)
        runs: dict[str, list[dict[str, object]]] = {"new": [], "old": []}
        for _ in range(args.repeat):
            for name, code in (("new", new), ("old", old)):
                row = _run(code, root)
                runs[name].append(row)
                shown = {k: v for k, v in row.items() if k != "_output"}
                print(json.dumps({"code": name, **shown}), file=sys.stderr, flush=True)
    best = {name: min(rows, key=lambda r: r["cpu_s"]) for name, rows in runs.items()}  # type: ignore[arg-type, return-value]
    report = {
        "journal_mb": journal_mb,
        "entries": entries,
        "old": args.old,
        "new": {k: v for k, v in best["new"].items() if k != "_output"},
        "old_run": {k: v for k, v in best["old"].items() if k != "_output"},
        "cpu_speedup": round(float(best["old"]["cpu_s"]) / float(best["new"]["cpu_s"]), 2),  # type: ignore[arg-type]
        "same_output": all(
            r["_output"] == runs["old"][0]["_output"] for r in runs["new"] + runs["old"]
        ),
        "load_average": [round(x, 1) for x in os.getloadavg()],
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
