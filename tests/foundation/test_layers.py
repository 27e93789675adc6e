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


def test_the_runtime_never_imports_the_cli() -> None:
    assert _offenders("journal_agent/runtime", ("journal_agent.cli",)) == []


def test_only_the_view_imports_the_web_stack() -> None:
    # starlette, uvicorn, jinja2 and genanki serve `journal-agent view` and its exports only.
    web = ("starlette", "uvicorn", "jinja2", "genanki")
    outside = _offenders("journal_agent", web)
    assert [o for o in outside if not o.startswith("journal_agent/view/")] == []
