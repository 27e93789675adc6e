"""Shared by the test_doc_examples*.py files: docs/examples.py loaded once per process, and the
check that one documented example still prints what the docs say.

The pages' examples are spread over several test files so that pytest-xdist (``--dist
loadfile``) runs them on several workers; within a file (one worker) the prepared workspaces of
docs/example_scenes.py are built once and shared by its pages."""

from __future__ import annotations

import difflib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _examples_module() -> ModuleType:
    if "doc_examples" in sys.modules:
        return sys.modules["doc_examples"]
    spec = importlib.util.spec_from_file_location("doc_examples", REPO / "docs" / "examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["doc_examples"] = module
    spec.loader.exec_module(module)
    return module


examples = _examples_module()


def checked(*pages: str) -> list:
    """The ``checked`` examples of these pages (README.md or docs/NAME.md), as test params."""
    paths = [REPO / p if p == "README.md" else REPO / "docs" / p for p in pages]
    return [
        pytest.param(e, id=e.where, marks=[pytest.mark.slow] if e.scene else [])
        for path in paths
        for e in examples.find(path)
        if "checked" in e.opts
    ]


def scenes() -> Iterator[None]:
    """A module fixture's body: the prepared workspaces go when the module's tests are done."""
    yield
    examples.example_scenes.cleanup()


def check(example) -> None:
    if "tool Bash" in example.body:
        from journal_agent.tools.sandbox import available_confinement

        conf = available_confinement()
        if not conf.active:  # the examples show what Bash prints inside the sandbox
            pytest.skip(f"no OS sandbox on this machine: {conf.reason}")
    now = examples.normalize(examples.elide(example.body, examples.run(example)))
    said = examples.normalize(example.body)
    # the drift itself, so that a failure seen only in CI says what changed
    drift = "".join(difflib.unified_diff(said.splitlines(True), now.splitlines(True), "doc", "now"))
    assert now == said, (
        f"{example.where} drifted from what the command prints; run python docs/examples.py\n"
        + drift
    )
