"""Peak memory of every command and view page that reads the journal, on a 100 MB journal;
prints JSON. Each is measured the new way and the old way side by side, in the same run.

A journal of ``--mb`` megabytes is generated (bench_journal.py's entries: code references,
cited records, tags; about 72,000 entries at 100 MB), with its refs.jsonl, a ledger whose
insight quotes an entry, and the search index built. Then, for the code of this checkout
(``new``) and for the code of ``--old REF`` (``old``, taken with ``git archive`` into a
temporary folder and run from there: by default the parent of the commit that added
journal/stream.py, before the journal was read an entry at a time), on the same files:

- each command runs as the user runs it (``python -m journal_agent …``, a fresh process); its
  peak RSS is the kernel's (``wait4``'s ``ru_maxrss``), with its wall time, exit code and
  whether its output equals the other side's (``same_output``: the same answer, cheaper);
- the index rebuild is ``journal search`` on a workspace whose index was deleted;
- the view server (``journal-agent view --no-open``), a fresh one for each page, answers the
  page once, then ``--concurrent`` requests of it at once (the review page of a 100 MB journal
  took 1.1 GB a request, 5.2 GB four at once); the server's peak RSS (``VmHWM``, reset between
  the two through ``/proc/PID/clear_refs``) is reported for each, with the server's own floor
  (``api/stamp``) as the baseline.

A command's peak is what Linux reports of the process (``ru_maxrss``), and Linux carries the
peak of the process that started it into that number (exec keeps the larger of the two): a
command started by a benchmark that had grown to 900 MB reports 900 MB, whatever it used
itself. So the journal is generated in a process of its own (``--setup-only``), the benchmark
stays small, and its own peak is printed (``benchmark_peak_rss_mb``): a row at that value
(``floor_is_the_benchmark``) used that much or less.

Search by meaning is off (``JOURNAL_AGENT_EMBEDDING_MODEL=off``): embedding 72,000 entries
takes hours here, and the model's memory is the same whatever the journal's size.

    python benchmarks/bench_memory.py [--mb 100] [--old REF | --no-old] [--concurrent 4]
        [--only NAME ...] [--skip NAME ...] [--workspace DIR (generated once, kept)]
        [--setup-only (generate the workspace and stop)]
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import re
import resource
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

TARGET_MB = 300.0  # issue 29: every command and page on a 100 MB journal
BYTES_PER_ENTRY = 1430  # bench_journal.py's entries, on average
REPO = Path(__file__).resolve().parent.parent
STREAM = "journal_agent/journal/stream.py"


def _generator():
    path = Path(__file__).with_name("bench_journal.py")
    spec = importlib.util.spec_from_file_location("bench_journal", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _env() -> dict[str, str]:
    return {**os.environ, "JOURNAL_AGENT_EMBEDDING_MODEL": "off", "NO_COLOR": "1"}


class Code:
    """One version of journal_agent to run: this checkout, or an old commit's files."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name, self.folder = name, folder

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "journal_agent", *args]

    def env(self) -> dict[str, str]:
        return {**_env(), "PYTHONPATH": str(self.folder)}

    def check(self) -> str:
        """Where ``journal_agent`` is imported from (the folder, or the benchmark is wrong)."""
        out = subprocess.run(
            [sys.executable, "-c", "import journal_agent; print(journal_agent.__file__)"],
            cwd=self.folder,
            env=self.env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert Path(out).resolve().is_relative_to(self.folder.resolve()), out
        return out


def _before_stream() -> str:
    """The commit before the journal was read an entry at a time (the one that added
    journal/stream.py): the old way."""
    added = subprocess.run(
        ["git", "-C", str(REPO), "log", "--diff-filter=A", "--format=%H", "--", STREAM],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return f"{added[-1]}^"


def _old_code(ref: str, into: Path) -> Code:
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref, "journal_agent", "profiling"],
        capture_output=True,
        check=True,
    ).stdout
    into.mkdir()
    with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return Code(f"old ({ref})", into)


def run_command(code: Code, args: list[str]) -> dict[str, object]:
    """One command in a fresh process: its peak RSS (MB), wall time, exit code, output."""
    floor = _own_peak_mb()  # the least this command can report (see the module's note)
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        proc = subprocess.Popen(
            code.argv(*args), cwd=code.folder, env=code.env(), stdout=out, stderr=out
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - t
        out.seek(0)
        output = out.read()
    peak = round(usage.ru_maxrss / 1024, 1)
    row: dict[str, object] = {"peak_rss_mb": peak, "wall_s": round(elapsed, 2)}
    if peak <= floor:
        row["floor_is_the_benchmark"] = True
    return {**row, "rc": proc.returncode, "_output": output}


def _own_peak_mb() -> float:
    """This process's peak RSS: every command it starts reports at least that much."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _setup_apart(root: Path, mb: float) -> None:
    """Generate the workspace in a process of its own: generating 100 MB of entries takes
    about 900 MB, which every command started from here afterwards would report as its own."""
    argv = [sys.executable, __file__, "--setup-only", "--workspace", str(root), "--mb", str(mb)]
    subprocess.run(argv, check=True, env=_env())


def _hwm_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


def _reset_hwm(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak RSS starts again from now


class Server:
    def __init__(self, code: Code, root: Path) -> None:
        self.proc = subprocess.Popen(
            code.argv("view", "--no-open", "--root", str(root)),
            cwd=code.folder,
            env=code.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        url = re.search(r"(http://\S+)", self.proc.stdout.readline())
        assert url, "the view printed no address"
        parts = urlsplit(url.group(1))
        self.port = parts.port
        self.cookie = f"journal_agent_view_{parts.port}={parts.query.removeprefix('token=')}"

    def get(self, path: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        headers = {"Host": f"127.0.0.1:{self.port}", "Cookie": self.cookie}
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        conn.close()
        return response.status

    def page(self, path: str, concurrent: int) -> dict[str, object]:
        """The server's peak RSS answering ``path`` once, then ``concurrent`` at once."""
        _reset_hwm(self.proc.pid)
        t = time.perf_counter()
        status = self.get(path)
        one, elapsed = _hwm_mb(self.proc.pid), time.perf_counter() - t
        _reset_hwm(self.proc.pid)
        statuses: list[int] = []
        threads = [
            threading.Thread(target=lambda: statuses.append(self.get(path)))
            for _ in range(concurrent)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return {
            "peak_rss_mb": round(one, 1),
            f"peak_rss_mb_{concurrent}_at_once": round(_hwm_mb(self.proc.pid), 1),
            "wall_s": round(elapsed, 2),
            "status": status,
            "all_ok": status == 200 and statuses == [200] * concurrent,
        }

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _commands(mid: str) -> dict[str, list[str]]:
    return {
        "journal list": ["journal", "list"],
        "journal list --json": ["journal", "list", "--json"],
        "journal show": ["journal", "show", mid],
        "journal check --json": ["journal", "check", "--json"],
        "journal search": ["journal", "search", "zero sharding", "--json"],
        "journal related": ["journal", "related", "--file", "DRAFT"],
        "review --list": ["review", "--list"],
        "review --list --all --json": ["review", "--list", "--all", "--json"],
        "review --suggest": ["review", "--suggest", "--json"],
        "ledger check": ["ledger", "check", "--json"],
        "export json": ["export", "json", "OUT"],
        "measurements --unreferenced": ["measurements", "--unreferenced", "--json"],
    }


def _pages(mid: str, entries: int) -> dict[str, str]:
    return {
        "api/stamp (the server's floor)": "/api/stamp",
        "journal page (index.html)": "/index.html",
        "a journal page in the middle": f"/pages/{max(1, entries // 400)}.html",
        "tag page": "/tags/zero.html",
        "entry page": f"/entries/{mid}.html",
        "review page": "/review.html",
        "ledger page": "/ledger.html",
        "inbox page": "/inbox.html",
        "record page": "/records/est-00000000.html",
        "code page": "/code/src/mod0.py.html",
        "search (words)": "/api/search?q=zero+sharding&words=1",
        "search": "/api/search?q=zero+sharding",
        "related": f"/api/related?id={mid}",
        "disagreements": "/api/disagreements",
    }


def _setup(root: Path, mb: float, new: Code) -> tuple[str, int]:
    gen = _generator()
    import random

    entries = int(mb * 1_000_000 / BYTES_PER_ENTRY)
    gen._build(root, entries, random.Random(0))
    mid = f"e{entries // 2}"
    (root / "DRAFT").write_text(
        "## Sharding the optimizer state (2026-11-29)\n\nzero sharding optimizer momentum.\n"
    )
    for args in (
        ["ledger", "init"],
        ["ledger", "insight", "Sharding", "ZeRO shards the optimizer state.", "-s", mid],
        ["journal", "search", "zero"],  # builds the index
    ):
        done = run_command(new, [*args, "--root", str(root)])
        assert done["rc"] == 0, (args, done["_output"])
    return mid, entries


@dataclass
class Choice:
    only: list[str]
    skip: list[str]

    def __call__(self, name: str) -> bool:
        if self.only and not any(word in name for word in self.only):
            return False
        return not any(word in name for word in self.skip)


def _progress(code: Code, name: str, row: dict[str, object]) -> None:
    """Each row on stderr as it is measured (a long run keeps what it measured so far)."""
    shown = {k: v for k, v in row.items() if k != "_output"}
    print(json.dumps({"code": code.name, "what": name, **shown}), file=sys.stderr, flush=True)


def measure(
    codes: list[Code], root: Path, mid: str, entries: int, concurrent: int, chosen: Choice
) -> dict[str, dict[str, dict[str, object]]]:
    out: dict[str, dict[str, dict[str, object]]] = {}
    index = root / ".journal" / "index.sqlite"
    for code in codes:
        rows: dict[str, dict[str, object]] = {}
        for name, args in _commands(mid).items():
            if not chosen(name):
                continue
            args = [str(root / a) if a in ("DRAFT", "OUT") else a for a in args]
            rows[name] = run_command(code, [*args, "--root", str(root)])
            _progress(code, name, rows[name])
            (root / "OUT").unlink(missing_ok=True)
        rebuild = "index rebuild (journal search, no index)"
        if chosen(rebuild):
            for suffix in ("", "-wal", "-shm"):
                Path(f"{index}{suffix}").unlink(missing_ok=True)
            rows[rebuild] = run_command(code, ["journal", "search", "zero", "--root", str(root)])
            _progress(code, rebuild, rows[rebuild])
        for name, path in _pages(mid, entries).items():
            if not chosen(f"view: {name}"):
                continue
            server = Server(code, root)  # a fresh one: a page's peak, not the ones before it
            try:
                rows[f"view: {name}"] = server.page(path, concurrent)
                _progress(code, f"view: {name}", rows[f"view: {name}"])
            finally:
                server.close()
        out[code.name] = rows
    return out


def _report(measured: dict[str, dict[str, dict[str, object]]]) -> dict[str, object]:
    """Per command or page: each version's row side by side, whether their outputs are the
    same, and whether the first version measured kept to the target."""
    names = list(measured)
    rows: dict[str, object] = {}
    for name, row in measured[names[0]].items():
        line: dict[str, object] = {
            code: {k: v for k, v in measured[code][name].items() if k != "_output"}
            for code in names
        }
        if len(names) > 1 and "_output" in row:
            line["same_output"] = row["_output"] == measured[names[1]][name]["_output"]
        peaks = [v for k, v in row.items() if k.startswith("peak_rss_mb")]
        line["within_target"] = max(peaks) <= TARGET_MB  # type: ignore[type-var]
        if row.get("rc", 0) != 0:
            line["output_tail"] = row["_output"][-400:].decode("utf-8", "replace")  # type: ignore[index]
        rows[name] = line
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument(
        "--old", help="the commit to compare with (default: the one before journal/stream.py)"
    )
    parser.add_argument("--no-old", action="store_true", help="measure this checkout only")
    parser.add_argument("--no-new", action="store_true", help="measure the old commit only")
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument(
        "--skip", nargs="*", default=[], help="leave out what has one of these in its name"
    )
    parser.add_argument(
        "--only", nargs="*", default=[], help="measure only what has one of these in its name"
    )
    parser.add_argument(
        "--workspace", type=Path, help="generate the journal here once and reuse it (kept)"
    )
    parser.add_argument(
        "--setup-only", action="store_true", help="generate the --workspace, measure nothing"
    )
    args = parser.parse_args()
    if args.setup_only:
        root = args.workspace.resolve()
        root.mkdir(parents=True, exist_ok=True)
        (root / "made.json").write_text(json.dumps(_setup(root, args.mb, Code("new", REPO))))
        return
    new = Code("new", REPO)
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        root = args.workspace.resolve() if args.workspace else Path(tmp) / "ws"
        old = None if args.no_old else args.old or _before_stream()
        codes = [] if args.no_new else [new]
        if old is not None:
            codes.append(_old_code(old, Path(tmp) / "old"))
        for code in codes:
            code.check()
        made = root / "made.json"
        if not made.exists():
            _setup_apart(root, args.mb)
        mid, entries = json.loads(made.read_text())
        size = (root / "learning_journal.md").stat().st_size
        chosen = Choice(args.only, args.skip)
        measured = measure(codes, root, mid, entries, args.concurrent, chosen)
    report = _report(measured)
    print(
        json.dumps(
            {
                "journal_mb": round(size / 1e6, 1),
                "entries": entries,
                "old": old,
                "target_peak_rss_mb": TARGET_MB,
                "measured": report,
                "all_within_target": all(r["within_target"] for r in report.values()),  # type: ignore[index]
                "within_target_of": next(iter(measured), None),
                "benchmark_peak_rss_mb": _own_peak_mb(),
                "load_average": [round(x, 1) for x in os.getloadavg()],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
