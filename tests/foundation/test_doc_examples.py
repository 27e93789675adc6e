"""The docs' examples print what the commands print today (docs/examples.py wrote them from
real runs). The cheap ones (closed-form estimates, marked ``checked``) are rerun here; a change
to what a command prints fails until ``python docs/examples.py`` regenerates the docs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _examples_module():
    spec = importlib.util.spec_from_file_location("doc_examples", REPO / "docs" / "examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["doc_examples"] = module
    spec.loader.exec_module(module)
    return module


examples = _examples_module()
CHECKED = [
    e
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for e in examples.find(path)
    if "checked" in e.opts
]


def test_there_are_checked_examples():
    assert len(CHECKED) >= 5  # the estimates of docs/profiling.md and the README's Python


@pytest.mark.parametrize("example", CHECKED, ids=[e.where for e in CHECKED])
def test_a_documented_example_prints_what_the_docs_say(example):
    now = examples.elide(example.body, examples.run(example))
    assert examples.normalize(now) == examples.normalize(example.body), (
        f"{example.where} drifted from what the command prints; run python docs/examples.py"
    )


def test_a_drifted_example_is_caught(tmp_path):
    """The check can fail: one changed digit in a documented output is drift."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- example: checked -->\n```\n$ journal-agent estimate --model tiny-gpt2 --json "
        "| jq .per_gpu_bytes\n1\n```\n",
        encoding="utf-8",
    )
    (example,) = examples.find(doc)
    now = examples.run(example)
    assert examples.normalize(now) != examples.normalize(example.body)
    examples.rewrite(doc, [example], [now])
    (again,) = examples.find(doc)
    assert examples.normalize(examples.run(again)) == examples.normalize(again.body)
