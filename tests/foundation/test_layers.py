"""The rooms and what each may import (docs/architecture.md), read from the sources' imports.

Every import counts, those inside functions too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _imports(package: str) -> dict[str, set[str]]:
    """module file (relative) -> the absolute module names it imports."""
    out: dict[str, set[str]] = {}
    for path in sorted((REPO / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
        out[str(path.relative_to(REPO))] = names
    return out


def _offenders(package: str, forbidden: tuple[str, ...], allowed_files=()) -> list[str]:
    return [
        f"{file} imports {name}"
        for file, names in _imports(package).items()
        if file not in allowed_files
        for name in sorted(names)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]


def test_profiling_never_imports_journal_agent() -> None:
    # `pip install journal-agent` then `import profiling` in a training script: no agent needed.
    assert _offenders("profiling", ("journal_agent",)) == []


@pytest.mark.parametrize(
    "room", ["journal_agent/tools", "journal_agent/journal", "journal_agent/view"]
)
def test_tools_and_the_journal_never_reach_up_to_the_runtime_or_the_cli(room: str) -> None:
    assert _offenders(room, ("journal_agent.runtime", "journal_agent.cli")) == []


def test_only_the_entry_point_imports_the_cli() -> None:
    outside = _offenders(
        "journal_agent", ("journal_agent.cli",), allowed_files=("journal_agent/__main__.py",)
    )
    assert [o for o in outside if not o.startswith("journal_agent/cli/")] == []


def test_only_the_cli_imports_the_drafting_room() -> None:
    # `inbox draft` sits above the runtime: nothing below the CLI may start a drafting run.
    outside = _offenders("journal_agent", ("journal_agent.drafts",))
    assert [
        o for o in outside if not o.startswith(("journal_agent/cli/", "journal_agent/drafts/"))
    ] == []
    assert _offenders("journal_agent/drafts", ("journal_agent.cli",)) == []


def test_the_runtime_never_imports_the_cli() -> None:
    assert _offenders("journal_agent/runtime", ("journal_agent.cli",)) == []


def test_only_the_view_imports_the_web_stack() -> None:
    # starlette, uvicorn, jinja2 and genanki serve `journal-agent view` and its exports only.
    web = ("starlette", "uvicorn", "jinja2", "genanki")
    outside = _offenders("journal_agent", web)
    assert [o for o in outside if not o.startswith("journal_agent/view/")] == []


# --------------------------------------------------------------------------- wings and circles


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package in ("journal_agent", "profiling"):
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _module_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (lazy ones too).

    ``from package import submodule`` depends on the submodule, not on the package's
    ``__init__``: every module runs its parents' ``__init__`` anyway, so counting it would make
    each package a circle with its own children.
    """
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                subs = [f"{node.module}.{a.name}" for a in node.names]
                deps.update(s for s in subs if s in modules)
                if not all(s in modules for s in subs):
                    deps.add(node.module)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle() -> None:
    assert _circles(_module_graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    # The check above must be able to fail.
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# Each wing of profiling, and the wings it must never import (a floor may import those below).
PROFILING_FLOORS = {
    "profiling/models": (
        "profiling.estimate.memory",
        "profiling.trace.step",
        "profiling.measure.run",
        "profiling.fit",
        "profiling.api",
        "profiling.config",
    ),
    "profiling/recipes": (
        "profiling.estimate",
        "profiling.trace",
        "profiling.measure",
        "profiling.fit",
        "profiling.api",
    ),
    "profiling/estimate": (
        "profiling.trace.step",
        "profiling.measure.run",
        "profiling.fit",
        "profiling.api",
    ),
    "profiling/trace": ("profiling.measure.run", "profiling.fit", "profiling.api"),
    "profiling/measure": ("profiling.fit", "profiling.api"),
}


@pytest.mark.parametrize("wing", sorted(PROFILING_FLOORS))
def test_profiling_wings_never_import_a_floor_above(wing: str) -> None:
    assert _offenders(wing, PROFILING_FLOORS[wing]) == []


def test_entries_never_import_search_or_learning() -> None:
    # An entry and its checks are the ground floor of the journal; ``api.py`` is the journal's
    # front door and the one module that joins entries and search.
    found = _offenders(
        "journal_agent/journal",
        ("journal_agent.journal.search", "journal_agent.learning"),
        allowed_files=("journal_agent/journal/api.py",),
    )
    assert [f for f in found if not f.startswith("journal_agent/journal/search/")] == []


def test_search_never_imports_learning_or_the_journal_front_door() -> None:
    assert (
        _offenders(
            "journal_agent/journal/search",
            ("journal_agent.learning", "journal_agent.journal.api", "journal_agent.tools"),
        )
        == []
    )


def test_learning_never_reaches_up_to_the_runtime_or_the_cli() -> None:
    assert (
        _offenders("journal_agent/learning", ("journal_agent.runtime", "journal_agent.cli")) == []
    )


MAX_MODULE_LINES = 500
# Modules still over the limit, each being split by the issue that owns its area; the entry
# goes when the split lands (this list only ever shrinks).
OVERSIZED: set[str] = set()


def test_no_module_over_the_limit() -> None:
    sizes = {
        str(path.relative_to(REPO)): len(path.read_text(encoding="utf-8").splitlines())
        for path in _modules().values()
    }
    over = {name for name, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert over <= OVERSIZED, f"over {MAX_MODULE_LINES} lines: {sorted(over - OVERSIZED)}"
    # A module that was split leaves the list.
    assert sorted(n for n in OVERSIZED if sizes.get(n, 0) <= MAX_MODULE_LINES) == []
