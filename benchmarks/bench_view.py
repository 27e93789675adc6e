"""`journal-agent view` on a generated journal of 10,000 entries; prints JSON.

The server runs as the user runs it (a `journal-agent view --no-open` process); requests go
over one keep-alive connection, like a browser tab's. Measured, each as p50/p95 of the time
from sending the request to the last byte, after a warm-up request of each kind:

- the first journal page (`index.html`: the newest 200 entries, the tags);
- an entry page (rendered Markdown, each reference's state, backlinks, related entries);
- search as you type, as the page sends it at each keystroke: first by words alone
  (``&words=1``: what the page shows at once), then the CLI's search (words and meaning
  fused), which replaces it; timed separately (the target is on the first);
- the baseline, in the same run: `api/stamp`, the cheapest route behind the same guard (the
  cost of HTTP, the token check and the event loop); the targets are on the server's own time,
  each route's time minus the baseline's p50;
- the server's memory (RSS) after all requests;
- the same with search by meaning turned off in the settings (no embedding model loaded);
- `export html` of the whole journal (in-process; its CPU seconds too, the workers' included),
  against rendering the first page alone;
- the load average when done (the machine is shared: wall times grow with the others' work).

    python benchmarks/bench_view.py [--entries 10000] [--requests 200]
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

TARGETS = {
    "first_page_p95_ms": 100.0,
    "entry_page_p95_ms": 100.0,
    "search_as_you_type_p95_ms": 50.0,
    "server_rss_mb": 200.0,
    "export_html_s": 30.0,
}
QUERIES = ["zero", "sharding optimizer", "activation checkpointing", "flash attention kernel"]


def _generator():
    """The 10k-entry journal of bench_journal.py (entries, code files, refs, records)."""
    path = Path(__file__).with_name("bench_journal.py")
    spec = importlib.util.spec_from_file_location("bench_journal", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Tab:
    """One keep-alive connection with the view's cookie, like a browser tab."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.port = parts.port
        self.cookie = f"journal_agent_view_{parts.port}={parts.query.removeprefix('token=')}"
        self.conn = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=60)

    def get(self, path: str) -> float:
        t = time.perf_counter()
        headers = {"Host": f"127.0.0.1:{self.port}", "Cookie": self.cookie}
        self.conn.request("GET", path, headers=headers)
        response = self.conn.getresponse()
        response.read()
        elapsed = time.perf_counter() - t
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status}")
        return elapsed


def _timed(tab: Tab, paths: list[str]) -> dict[str, float]:
    tab.get(paths[0])  # warm-up: the first parse of the journal, the index, the model
    times = [tab.get(p) for p in paths]
    return {
        "p50_ms": round(1000 * _percentile(times, 0.5), 2),
        "p95_ms": round(1000 * _percentile(times, 0.95), 2),
    }


def _typed(queries: list[str]) -> list[str]:
    """What the page sends while someone types each query (every keystroke after the first):
    the words-only request, then the full one."""
    out = []
    for query in queries:
        for n in range(2, len(query) + 1):
            path = f"/api/search?q={quote(query[:n])}"
            out += [f"{path}&words=1", path]
    return out


def _typing(tab: Tab, paths: list[str]) -> dict[str, dict[str, float]]:
    tab.get(paths[0])  # warm-up
    times: dict[bool, list[float]] = {True: [], False: []}
    for path in paths:
        times[path.endswith("&words=1")].append(tab.get(path))
    return {
        name: {
            "p50_ms": round(1000 * _percentile(times[words], 0.5), 2),
            "p95_ms": round(1000 * _percentile(times[words], 0.95), 2),
        }
        for name, words in (("search_as_you_type", True), ("search_with_meaning", False))
    }


def serve_and_measure(root: Path, requests: int, rng: random.Random) -> dict[str, object]:
    import psutil

    proc = subprocess.Popen(
        [sys.executable, "-m", "journal_agent", "view", "--no-open", "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = re.search(r"(http://\S+)", proc.stdout.readline()).group(1)  # type: ignore[union-attr]
        tab = Tab(url)
        entries = [
            f"/entries/e{rng.randrange(10_000_000) % ENTRIES[0]}.html" for _ in range(requests)
        ]
        out = {
            "baseline_stamp": _timed(tab, ["/api/stamp"] * requests),
            "first_page": _timed(tab, ["/index.html"] * requests),
            "entry_page": _timed(tab, entries),
            **_typing(tab, _typed(QUERIES) * max(1, requests // 60)),
        }
        out["server_rss_mb"] = round(psutil.Process(proc.pid).memory_info().rss / 1e6, 1)
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def export_and_measure(root: Path) -> dict[str, float]:
    from journal_agent.view.export import export_html
    from journal_agent.view.pages import Mode, Pages
    from journal_agent.view.site import Site
    from journal_agent.workspace import Workspace

    t = time.perf_counter()
    Pages(Site(Workspace(root)), Mode(live=False)).journal(1)
    baseline = time.perf_counter() - t
    with tempfile.TemporaryDirectory(prefix="bench-view-export-") as out:
        t, cpu = time.perf_counter(), os.times()
        done = export_html(Workspace(root), Path(out) / "site")
        elapsed, after = time.perf_counter() - t, os.times()
    # CPU of this process and of the worker processes it waited for: what the export costs
    # whatever else the machine runs (the wall time grows with the others' load).
    used = sum(after[:4]) - sum(cpu[:4])
    return {
        "export_html_s": round(elapsed, 2),
        "export_html_cpu_s": round(used, 2),
        "pages": done.pages,
        "first_page_alone_s": round(baseline, 3),
    }


ENTRIES = [10_000]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    ENTRIES[0] = args.entries
    gen = _generator()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory(prefix="bench-view-") as tmp:
        root = Path(tmp)
        gen._build(root, args.entries, rng)
        from journal_agent.journal.search.index import SearchIndex

        SearchIndex(root).stats()  # first use builds the index (as after `journal index`)
        meaning = gen._fill_vectors(root, rng)
        served = serve_and_measure(root, args.requests, rng)
        # The same server with search by meaning turned off (words only): no model in memory.
        (root / ".journal" / "settings.json").write_text('{"search": {"embedding_model": "off"}}')
        words_only = serve_and_measure(root, args.requests, rng)
        exported = export_and_measure(root)
    base = served["baseline_stamp"]["p50_ms"]  # type: ignore[index]
    measured = {
        "first_page_p95_ms": served["first_page"]["p95_ms"] - base,  # type: ignore[index]
        "entry_page_p95_ms": served["entry_page"]["p95_ms"] - base,  # type: ignore[index]
        "search_as_you_type_p95_ms": served["search_as_you_type"]["p95_ms"] - base,  # type: ignore[index]
        "search_with_meaning_p95_ms": served["search_with_meaning"]["p95_ms"] - base,  # type: ignore[index]
        "server_rss_mb": served["server_rss_mb"],
        "export_html_s": exported["export_html_s"],
    }
    print(
        json.dumps(
            {
                "entries": args.entries,
                "search_by_meaning": meaning,
                "served": served,
                "served_words_only": words_only,
                "export": exported,
                "server_time_minus_baseline": {k: round(v, 2) for k, v in measured.items()},  # type: ignore[arg-type]
                "targets": TARGETS,
                "met": {k: measured[k] <= v for k, v in TARGETS.items()},  # type: ignore[operator]
                "load_average": [round(x, 1) for x in os.getloadavg()],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
