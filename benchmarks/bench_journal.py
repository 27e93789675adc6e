"""Journal benchmarks on generated journals of 1,000 and 10,000 entries; prints JSON.

Wall and CPU times are both reported: on a shared machine the CPU time shows our own cost.

Measures: append (validate + duplicate check + locked atomic append + index update + the
entry's embedding), search p50/p95 (words and meaning fused: FTS5 BM25 over the analysed query,
the query embedded with all-MiniLM-L6-v2, reciprocal-rank fusion, snippets), index build,
re-index after a hand edit, and `journal check` time per 1,000 code references. Baselines
measured in the same run: rewriting a file of the journal's size atomically (temp + fsync +
rename, the floor for any append that never truncates), reading + decoding it (the floor for
parsing), and the same searches by words only.

    python benchmarks/bench_journal.py [--sizes 1000 10000] [--queries 200]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from journal_agent import confined
from journal_agent.journal import api
from journal_agent.journal.model import parse_journal
from journal_agent.journal.search import ranking
from journal_agent.journal.search.index import SearchIndex
from journal_agent.journal.store import HEADER
from journal_agent.journal.verify import check_journal
from journal_agent.paths import measurements_dir
from journal_agent.workspace import Workspace
from profiling.records import MeasurementRecord, Quantity, RecordStore

TARGETS = {
    "search_p50_ms": 20.0,  # words and meaning fused, query embedded on CPU
    "append_ms": 300.0,  # incl. the duplicate check and embedding the entry
    "reindex_after_hand_edit_ms": 200.0,
    "check_s_per_1000_refs": 1.0,
}
TERMS = [
    "zero",
    "fsdp",
    "deepspeed",
    "optimizer",
    "adamw",
    "momentum",
    "variance",
    "gradient",
    "activation",
    "checkpointing",
    "recomputation",
    "sharding",
    "allreduce",
    "reducescatter",
    "allgather",
    "bucket",
    "overlap",
    "pipeline",
    "bubble",
    "tensor",
    "parallel",
    "sequence",
    "attention",
    "flash",
    "kernel",
    "softmax",
    "logits",
    "vocabulary",
    "embedding",
    "lora",
    "qlora",
    "quantization",
    "nf4",
    "bf16",
    "fp16",
    "fp32",
    "autocast",
    "scaler",
    "master",
    "weights",
    "offload",
    "nvme",
    "cpu",
    "pinned",
    "memory",
    "allocator",
    "fragmentation",
    "cache",
    "reserved",
    "allocated",
    "peak",
    "snapshot",
    "profiler",
    "throughput",
    "latency",
    "warmup",
    "schedule",
    "cosine",
    "linear",
    "decay",
    "clipping",
    "norm",
    "layernorm",
    "rmsnorm",
    "dropout",
    "residual",
    "transformer",
    "llama",
    "gpt",
    "mistral",
    "batch",
    "microbatch",
    "accumulation",
    "dataloader",
    "prefetch",
    "workers",
    "collate",
    "padding",
    "packing",
    "tokens",
    "context",
    "window",
    "rope",
    "alibi",
    "kv",
    "cache",
]
N_FILES, FILE_LINES, REFS_PER_ENTRY = 40, 300, 2
GIB = 2.0**30


def _words(rng: random.Random, n: int) -> str:
    return " ".join(
        rng.choice(TERMS) if rng.random() < 0.7 else f"w{rng.randrange(20000)}" for _ in range(n)
    )


def _entry(
    rng: random.Random, n: int, record_ids: list[str], sizes: dict[str, float]
) -> tuple[str, list[str]]:
    title = f"{rng.choice(TERMS).title()} {rng.choice(TERMS)} {n}"
    refs = []
    lines = [f"## {title} (2026-{1 + n % 12:02d}-{1 + n % 28:02d})", f"<!-- entry: e{n} -->", ""]
    lines += [
        f"**Context**: {_words(rng, 25)}.",
        "",
        f"**The Key Question I Had**: *{_words(rng, 12)}?*",
        "",
    ]
    lines += ["### 🎯 Intuition", _words(rng, 60) + ".", "", "### 🔍 Key Insights"]
    for k in range(REFS_PER_ENTRY):
        f = rng.randrange(N_FILES)
        start = rng.randrange(1, FILE_LINES - 10)
        ref = f"src/mod{f}.py:{start}-{start + rng.randrange(0, 8)}"
        refs.append(ref)
        lines.append(f"{k + 1}. {_words(rng, 20)} (`{ref}`)")
    rid = rng.choice(record_ids)
    lines.append(f"3. Peak is {sizes[rid]:.1f} GiB per GPU [m:{rid}].")
    lines += ["", "### 🧮 Mathematical Explanation", "```", "7e9 × 16 bytes = 112 GB", "```", ""]
    lines += ["### 🏷️ Tags", f"#{rng.choice(TERMS)} #{rng.choice(TERMS)}", "", "---", ""]
    return "\n".join(lines) + "\n", refs


def _build(root: Path, entries: int, rng: random.Random) -> int:
    files: dict[str, list[bytes]] = {}
    for f in range(N_FILES):
        body = [f"x_{f}_{i} = {i}  # {_words(rng, 4)}".encode() for i in range(1, FILE_LINES + 1)]
        files[f"src/mod{f}.py"] = body
        (root / "src").mkdir(exist_ok=True)
        (root / f"src/mod{f}.py").write_bytes(b"\n".join(body) + b"\n")
    store = RecordStore(measurements_dir(root))
    record_ids, sizes = [], {}
    for r in range(20):
        rid = f"est-{r:08x}"
        size = rng.uniform(5, 120)
        store.save(
            MeasurementRecord(
                id=rid,
                kind="estimated",
                title=f"r{r}",
                results=[Quantity(name="peak", value=size * GIB, unit="B")],
            )
        )
        record_ids.append(rid)
        sizes[rid] = size
    parts, hashes, n_refs = [HEADER, "\n"], {}, 0
    for n in range(entries):
        text, refs = _entry(rng, n, record_ids, sizes)
        parts.append(text)
        entry_hashes = {}
        for ref in refs:
            path, span = ref.rsplit(":", 1)
            a, b = (int(x) for x in span.split("-"))
            key = ref if a != b else f"{path}:{a}"
            entry_hashes[key] = hashlib.sha256(b"\n".join(files[path][a - 1 : b])).hexdigest()[:16]
        hashes[f"e{n}"] = entry_hashes
        n_refs += len(refs)
    (root / "learning_journal.md").write_text("".join(parts), encoding="utf-8")
    (root / ".journal").mkdir(exist_ok=True)
    (root / ".journal/refs.jsonl").write_text(
        "".join(json.dumps({"entry": e, "refs": h}) + "\n" for e, h in hashes.items())
    )
    return n_refs


def _fill_vectors(root: Path, rng: random.Random) -> bool:
    """Give every generated entry a vector in the cache, as if embedded at append.

    Embedding 10,000 entries for real takes about 25 minutes on a 2-core machine; search costs
    the same whatever the vectors hold (one matrix-vector product), so the generated entries
    get random unit vectors under the real model's id. Queries and appends embed for real.
    Returns whether meaning is on (the embeddings extra installed).
    """
    from journal_agent.journal.search import fusion
    from journal_agent.journal.search.embeddings import Unavailable, VectorStore, get_embedder

    try:
        embedder = get_embedder(root)
    except Unavailable:
        return False
    import numpy as np

    conn = SearchIndex(root).connect()
    keys = [k for (k,) in conn.execute("SELECT embed_key FROM entries")]
    conn.close()
    gen = np.random.default_rng(rng.randrange(2**32))
    vectors = gen.standard_normal((len(keys), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vconn = VectorStore(root).connect()
    fusion._put(vconn, embedder.model_id, list(zip(keys, vectors, strict=True)))
    vconn.close()
    return True


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench(entries: int, queries: int, appends: int, seed: int = 0) -> dict[str, object]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="bench-journal-") as tmp:
        root = Path(tmp)
        ws = Workspace(root)
        n_refs = _build(root, entries, rng)
        journal_path = root / "learning_journal.md"
        size = journal_path.stat().st_size

        t = time.perf_counter()
        text = journal_path.read_text(encoding="utf-8")
        read_s = time.perf_counter() - t
        journal = parse_journal(text)
        parse_s = time.perf_counter() - t - read_s
        assert len(journal.entries) == entries

        data = journal_path.read_bytes()
        floor = []
        for _ in range(5):
            t = time.perf_counter()
            confined.replace(root, "copy.md", data)
            floor.append(time.perf_counter() - t)

        t = time.perf_counter()
        SearchIndex(root).stats()  # first use builds the index
        rebuild_s = time.perf_counter() - t
        semantic = _fill_vectors(root, rng)

        search_times, search_cpu, words_only, words_only_cpu = [], [], [], []
        for _ in range(queries):
            words = rng.sample(TERMS, rng.choice((1, 2)))
            tags = [f"#{rng.choice(TERMS)}"] if rng.random() < 0.2 else []
            t, c = time.perf_counter(), time.process_time()
            api.search(ws, " ".join(words), tags, limit=10)
            search_times.append(time.perf_counter() - t)
            search_cpu.append(time.process_time() - c)
            # Baseline in the same run: the same query, by words only.
            t, c = time.perf_counter(), time.process_time()
            ranking.search(SearchIndex(root), " ".join(words), tags, limit=10, semantic=False)
            words_only.append(time.perf_counter() - t)
            words_only_cpu.append(time.process_time() - c)

        append_times, append_cpu = [], []
        record_ids = [f"est-{r:08x}" for r in range(20)]
        for k in range(appends):
            text, _ = _entry(rng, entries + k, record_ids, {rid: 1.0 for rid in record_ids})
            text = text.replace(text.splitlines()[1] + "\n", "")  # let append assign the id
            text = "\n".join(x for x in text.splitlines() if "Peak is" not in x) + "\n"
            t, c = time.perf_counter(), time.process_time()
            outcome = api.append_entry(ws, text)
            append_times.append(time.perf_counter() - t)
            append_cpu.append(time.process_time() - c)
            assert outcome.appended, outcome.problems
        # The appended entries were indexed in place: searching needs no rebuild.
        t = time.perf_counter()
        api.search(ws, "zero")
        search_after_append = time.perf_counter() - t

        # A hand edit in the middle: re-indexing parses and re-indexes only the edited stretch;
        # the next search also embeds the edited entry (its text changed).
        text = journal_path.read_text(encoding="utf-8")
        middle = f"<!-- entry: e{entries // 2} -->\n"
        journal_path.write_text(text.replace(middle, middle + "Edited by hand.\n"), "utf-8")
        t, c = time.perf_counter(), time.process_time()
        SearchIndex(root).stats()
        reindex_after_edit = time.perf_counter() - t
        reindex_cpu = time.process_time() - c
        t = time.perf_counter()
        assert api.search(ws, "edited hand")
        search_after_edit = time.perf_counter() - t

        t, c = time.perf_counter(), time.process_time()
        report = check_journal(root)
        check_s = time.perf_counter() - t
        check_cpu = time.process_time() - c
        checked_refs = n_refs + appends * REFS_PER_ENTRY
        assert report.ok, report.problems[:3]

    return {
        "entries": entries,
        "journal_mb": round(size / 1e6, 2),
        "code_refs": checked_refs,
        "append_ms_median": _ms(statistics.median(append_times)),
        "append_ms_max": _ms(max(append_times)),
        "append_cpu_ms_median": _ms(statistics.median(append_cpu)),
        "baseline_atomic_rewrite_ms": _ms(statistics.median(floor)),
        "baseline_read_decode_ms": _ms(read_s),
        "parse_ms": _ms(parse_s),
        "index_build_ms": _ms(rebuild_s),
        "reindex_after_hand_edit_ms": _ms(reindex_after_edit),
        "reindex_after_hand_edit_cpu_ms": _ms(reindex_cpu),
        "search_after_hand_edit_ms": _ms(search_after_edit),
        "meaning": semantic,
        "search_p50_ms": _ms(statistics.median(search_times)),
        "baseline_search_words_only_p50_ms": _ms(statistics.median(words_only)),
        "baseline_search_words_only_cpu_p50_ms": _ms(statistics.median(words_only_cpu)),
        "search_p95_ms": _ms(_percentile(search_times, 0.95)),
        "search_cpu_p50_ms": _ms(statistics.median(search_cpu)),
        "search_after_append_ms": _ms(search_after_append),
        "check_s": round(check_s, 3),
        "check_s_per_1000_refs": round(check_s / checked_refs * 1000, 3),
        "check_cpu_s_per_1000_refs": round(check_cpu / checked_refs * 1000, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--appends", type=int, default=10)
    args = parser.parse_args()
    results = [bench(n, args.queries, args.appends) for n in args.sizes]
    largest = results[-1]
    verdict = {
        "search_p50_ms": largest["search_p50_ms"] < TARGETS["search_p50_ms"],
        "append_ms": largest["append_ms_median"] < TARGETS["append_ms"],
        "reindex_after_hand_edit_ms": largest["reindex_after_hand_edit_ms"]
        < TARGETS["reindex_after_hand_edit_ms"],
        "check_s_per_1000_refs": max(r["check_s_per_1000_refs"] for r in results)
        < TARGETS["check_s_per_1000_refs"],
    }
    out = {
        "benchmark": "journal",
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "targets_at_largest": TARGETS,
        "meets_targets": verdict,
        "results": results,
    }
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]  # other work on the machine
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
