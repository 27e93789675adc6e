"""References that follow the code, measured on real history nobody here wrote; prints JSON.

Two released versions of a pure-Python package are fetched from the registry (`pip download
--no-deps`, cached), and N references are drawn at random inside its function bodies at the first
version (a stretch of 1 to 12 lines of one function, seeded). Each reference is recorded as
`journal append` records it (its anchor), then the workspace's code becomes the next version and
each reference is located again:

- **the truth**, from the code's own structure (ast): the function of the same qualified name
  in the next version (same module, else the one module that has it), and in it the one place
  holding exactly the cited lines; none (changed, deleted, or ambiguous in it) means the
  reference must be flagged;
- **journal-agent** (`journal_agent.journal.relocate`: fresh / moved / changed / gone);
- **baseline, exact line only**: fresh when the same line numbers hash as recorded, else flagged
  (what `journal check` did before anchors);
- **baseline, first match in the file**: the first place in the same file with the same lines
  (what the web view did before anchors).

Per strategy: the share relocated correctly, relocated wrongly (must be 0 for journal-agent) and
flagged — flagged split into "the lines did change" and "missed: they had only moved".

**The twin probe**: every drawn reference whose cited lines also occur elsewhere in the package
(a twin: ``Client.send`` and ``AsyncClient.send``) is tried twice on the first version, one file
edited each time: its own copy edited (one telling line gets a trailing comment) must be flagged,
never moved into the twin; the twin edited instead must leave it fresh where it is.

By default two packages are run (rich 13.6.0 → 13.7.0, httpx 0.27.0 → 0.28.1: a sync and an
async client, twins throughout); ``--package`` runs one.

    python benchmarks/bench_refs.py [--package rich --old 13.6.0 --new 13.7.0] [-n 400]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from journal_agent.journal.places import make_anchor
from journal_agent.journal.refs import CodeRef, FileCache, window_hash
from journal_agent.journal.relocate import Relocator

CACHE = Path.home() / ".cache" / "journal-agent" / "bench_refs"


@dataclass(frozen=True)
class Function:
    path: str  # workspace-relative module path
    qualname: str
    first: int  # first line of the body (1-based)
    last: int
    signature: str  # parameters and return annotation, to tell overloads apart


def fetch(package: str, version: str) -> Path:
    """The wheel of ``package==version`` (downloaded once into the cache)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    name = package.replace("-", "_").lower()
    found = [p for p in CACHE.glob("*.whl") if p.name.lower().startswith(f"{name}-{version}-")]
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(CACHE),
             f"{package}=={version}"],
            check=True,
        )  # fmt: skip
        found = [p for p in CACHE.glob("*.whl") if p.name.lower().startswith(f"{name}-{version}-")]
    return found[0]


def unpack(wheel: Path, into: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            if member.endswith(".py") and ".dist-info/" not in member:
                zf.extract(member, into)


def functions(root: Path) -> list[Function]:
    out = []
    for file in sorted(root.rglob("*.py")):
        rel = file.relative_to(root).as_posix()
        try:
            tree = ast.parse(file.read_bytes())
        except SyntaxError:
            continue
        out += _walk(tree, rel, "")
    return out


def _walk(node: ast.AST, path: str, prefix: str) -> list[Function]:
    out = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef) and child.end_lineno:
                returns = ast.unparse(child.returns) if child.returns else ""
                signature = f"({ast.unparse(child.args)}) -> {returns}"
                out.append(Function(path, name, child.body[0].lineno, child.end_lineno, signature))
            out += _walk(child, path, name + ".")
    return out


def lines_of(root: Path, path: str) -> list[bytes]:
    return FileCache(root).lines(path) or []


def draw(root: Path, funcs: list[Function], n: int, rng: random.Random) -> list[CodeRef]:
    """``n`` references: 1-12 lines inside one function's body, told apart within it."""
    refs: list[CodeRef] = []
    tries = 0
    while len(refs) < n and tries < n * 50:
        tries += 1
        f = rng.choice(funcs)
        size = rng.randint(1, min(12, f.last - f.first + 1))
        start = rng.randint(f.first, f.last - size + 1)
        lines = lines_of(root, f.path)
        cited = lines[start - 1 : start - 1 + size]
        if not any(x.strip() for x in cited):
            continue
        # A stretch repeated inside its own function is ambiguous as a citation already.
        if len(_places(lines[f.first - 1 : f.last], cited)) != 1:
            continue
        refs.append(CodeRef(f.path, start, start + size - 1, 0))
    return refs


def _places(lines: list[bytes], cited: list[bytes]) -> list[int]:
    digest = window_hash(cited)
    n = len(cited)
    return [i for i in range(len(lines) - n + 1) if window_hash(lines[i : i + n]) == digest]


def truth(
    old: Path, new: Path, ref: CodeRef, old_funcs: list[Function], new_funcs: list[Function]
) -> tuple[str, int, int] | None:
    """Where the cited lines are in the new version, by the code's structure; None: flag."""
    # The innermost function holding all the lines (draw took them from one function's body;
    # a nested function's lines are its own, not its parent's, which may repeat them).
    owner = min(
        (f for f in old_funcs if f.path == ref.path and f.first <= ref.start <= ref.end <= f.last),
        key=lambda f: f.last - f.first,
    )
    cited = lines_of(old, ref.path)[ref.start - 1 : ref.end]
    f = _counterpart(new, owner, cited, old_funcs, new_funcs)
    if f is None:
        return None
    body = lines_of(new, f.path)[f.first - 1 : f.last]
    places = _places(body, cited)
    if len(places) != 1:
        return None
    start = f.first + places[0]
    return f.path, start, start + len(cited) - 1


def _counterpart(
    new: Path,
    owner: Function,
    cited: list[bytes],
    old_funcs: list[Function],
    new_funcs: list[Function],
) -> Function | None:
    """The function of the new version that is the old ``owner``: the same qualified name (in
    the same module, else anywhere); among several (overloads, property setters), the k-th of
    k when their number is unchanged, else the one with the same signature (unless it holds
    no cited line and exactly one other does: overloads were added, and the stub kept the
    signature the implementation had), else the one that holds the cited lines."""
    twins = [f for f in old_funcs if (f.path, f.qualname) == (owner.path, owner.qualname)]
    same = [f for f in new_funcs if (f.path, f.qualname) == (owner.path, owner.qualname)]
    if not same:
        same = [f for f in new_funcs if f.qualname == owner.qualname]
    if len(same) == len(twins):
        return same[twins.index(owner)]
    holding = [f for f in same if _places(lines_of(new, f.path)[f.first - 1 : f.last], cited)]
    signed = [f for f in same if f.signature == owner.signature]
    if len(signed) == 1 and (signed[0] in holding or len(holding) != 1):
        return signed[0]
    return holding[0] if len(holding) == 1 else None


def exact_line(new_files: FileCache, ref: CodeRef, digest: str) -> tuple[str, int, int] | None:
    lines = new_files.lines(ref.path)
    if lines is None or ref.end > len(lines):
        return None
    same = window_hash(lines[ref.start - 1 : ref.end]) == digest
    return (ref.path, ref.start, ref.end) if same else None


def first_match(new_files: FileCache, ref: CodeRef, digest: str) -> tuple[str, int, int] | None:
    lines = new_files.lines(ref.path) or []
    n = ref.end - ref.start + 1
    for i in range(len(lines) - n + 1):
        if window_hash(lines[i : i + n]) == digest:
            return ref.path, i + 1, i + n
    return None


def ours(relocator: Relocator, ref: CodeRef, anchor) -> tuple[str, int, int] | None:
    found = relocator.locate(ref, anchor)
    return (found.path, found.start, found.end) if found.state in ("fresh", "moved") else None


def tally(results: list[tuple[tuple | None, tuple | None]]) -> dict[str, object]:
    n = len(results)
    correct = sum(1 for got, want in results if got is not None and got == want)
    wrong = sum(1 for got, want in results if got is not None and got != want)
    flagged_changed = sum(1 for got, want in results if got is None and want is None)
    missed = sum(1 for got, want in results if got is None and want is not None)
    return {
        "relocated_correctly": round(correct / n, 4),
        "relocated_wrongly": round(wrong / n, 4),
        "flagged": round((flagged_changed + missed) / n, 4),
        "flagged_changed": round(flagged_changed / n, 4),
        "flagged_missed": round(missed / n, 4),
        "counts": {
            "correct": correct,
            "wrong": wrong,
            "flagged_changed": flagged_changed,
            "flagged_missed": missed,
        },
    }


def twin_places(root: Path, refs: list[CodeRef]) -> list[list[tuple[str, int]]]:
    """For each reference, the other places of the package holding its lines (path, start)."""
    by_line: dict[bytes, list[tuple[str, int]]] = {}
    files = FileCache(root)
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    for path in paths:
        for i, line in enumerate(files.lines(path) or []):
            if line.strip():
                by_line.setdefault(line, []).append((path, i))
    out = []
    for ref in refs:
        cited = (files.lines(ref.path) or [])[ref.start - 1 : ref.end]
        digest = window_hash(cited)
        first = next((k for k, x in enumerate(cited) if x.strip()), 0)
        found = []
        for path, i in by_line.get(cited[first], []):
            start = i - first + 1
            if (path, start) == (ref.path, ref.start) or start < 1:
                continue
            lines = files.lines(path) or []
            if window_hash(lines[start - 1 : start - 1 + len(cited)]) == digest:
                found.append((path, start))
        out.append(found)
    return out


def _edited(lines: list[bytes], start: int, count: int) -> list[bytes] | None:
    """The file with one telling line of ``start..start+count-1`` edited (a trailing comment)."""
    for i in range(start - 1, start - 1 + count):
        if len(lines[i].strip()) >= 4:
            return [*lines[:i], lines[i] + b"  # edited", *lines[i + 1 :]]
    return None


def twin_probe(old: Path, refs: list[CodeRef], anchors: list) -> dict[str, object]:
    """Edit one copy of every reference that has a twin: its own (must be flagged, never
    moved to the twin), then the twin's (must stay fresh where it is)."""
    twins = twin_places(old, refs)
    probes = [(r, a, t) for r, a, t in zip(refs, anchors, twins, strict=True) if t and a]
    own = {"flagged": 0, "moved_into_a_twin": 0, "moved_elsewhere": 0, "fresh": 0}
    untold = 0  # no line of four characters or more to edit
    other = {"fresh": 0, "moved": 0, "flagged": 0}
    in_same_file = sum(1 for r, _, t in probes if any(p == r.path for p, _ in t))
    for ref, anchor, places in probes:
        count = ref.end - ref.start + 1
        original = FileCache(old).lines(ref.path) or []
        edited = _edited(list(original), ref.start, count)
        if edited is None:
            untold += 1
            continue
        found = _locate_with(old, ref.path, edited, ref, anchor)
        if found.state == "moved":
            key = "moved_into_a_twin" if (found.path, found.start) in places else "moved_elsewhere"
            own[key] += 1
        else:
            own["fresh" if found.state == "fresh" else "flagged"] += 1
        path, start = places[0]
        twin_file = FileCache(old).lines(path) or []
        edited_twin = _edited(list(twin_file), start, count)
        if edited_twin is None:
            continue
        found = _locate_with(old, path, edited_twin, ref, anchor)
        other[
            "fresh" if found.state == "fresh" else "moved" if found.state == "moved" else "flagged"
        ] += 1
    return {
        "references_with_a_twin": len(probes),
        "twin_in_the_same_file": in_same_file,
        "not_probed_no_telling_line": untold,
        "cited_copy_edited": own,
        "twin_edited": other,
        "wrong": own["moved_into_a_twin"] + own["moved_elsewhere"] + own["fresh"] + other["moved"],
    }


def _locate_with(root: Path, path: str, lines: list[bytes], ref: CodeRef, anchor):
    """Locate ``ref`` with ``path`` holding ``lines`` for the moment (then put back)."""
    full = root / path
    saved = full.read_bytes()
    try:
        full.write_bytes(b"\n".join(lines) + b"\n")
        return Relocator(root, FileCache(root)).locate(ref, anchor)
    finally:
        full.write_bytes(saved)


def run(package: str, old_v: str, new_v: str, n: int, seed: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="bench-refs-") as tmp:
        old, new = Path(tmp) / "old", Path(tmp) / "new"
        unpack(fetch(package, old_v), old)
        unpack(fetch(package, new_v), new)
        old_funcs, new_funcs = functions(old), functions(new)
        refs = draw(old, old_funcs, n, random.Random(seed))
        old_files = FileCache(old)
        anchors = [make_anchor(ref, old_files) for ref in refs]
        truths = [truth(old, new, ref, old_funcs, new_funcs) for ref in refs]
        new_files = FileCache(new)
        relocator = Relocator(new, new_files)
        t = time.perf_counter()
        located = [ours(relocator, ref, a) for ref, a in zip(refs, anchors, strict=True)]
        ours_s = time.perf_counter() - t
        t = time.perf_counter()
        exact = [exact_line(new_files, ref, a.hash) for ref, a in zip(refs, anchors, strict=True)]
        exact_s = time.perf_counter() - t
        first = [first_match(new_files, ref, a.hash) for ref, a in zip(refs, anchors, strict=True)]
        t = time.perf_counter()
        probe = {**twin_probe(old, refs, anchors), "seconds": time.perf_counter() - t}
        changed_files = sum(
            1
            for p in sorted({r.path for r in refs})
            if hashlib.sha256((old / p).read_bytes()).digest()
            != (hashlib.sha256((new / p).read_bytes()).digest() if (new / p).exists() else b"")
        )
    return {
        "package": package,
        "old": old_v,
        "new": new_v,
        "references": len(refs),
        "seed": seed,
        "cited_files": len({r.path for r in refs}),
        "cited_files_changed": changed_files,
        "truth_moved_or_same": sum(1 for t in truths if t is not None),
        "truth_changed": sum(1 for t in truths if t is None),
        "journal_agent": {**tally(list(zip(located, truths, strict=True))), "seconds": ours_s},
        "baseline_exact_line": {**tally(list(zip(exact, truths, strict=True))), "seconds": exact_s},
        "baseline_first_match": tally(list(zip(first, truths, strict=True))),
        "twin_probe": probe,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", help="one package (default: rich, then httpx)")
    parser.add_argument("--old", default="13.6.0")
    parser.add_argument("--new", default="13.7.0")
    parser.add_argument("-n", type=int, default=400, help="references drawn")
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args()
    pairs = (
        [(args.package, args.old, args.new)]
        if args.package
        else [("rich", "13.6.0", "13.7.0"), ("httpx", "0.27.0", "0.28.1")]
    )
    runs = [run(package, old, new, args.n, args.seed) for package, old, new in pairs]
    print(json.dumps(runs[0] if args.package else {"runs": runs}, indent=2))


if __name__ == "__main__":
    main()
