"""The docs' examples print what the commands print today (docs/examples.py wrote them from
real runs). The ones marked ``checked`` are rerun here — the closed-form estimates, and every
page's commands in the prepared workspaces of docs/example_scenes.py (built once for this file:
pytest-xdist's ``--dist loadfile`` keeps the file on one worker); a change to what a command
prints fails until ``python docs/examples.py`` regenerates the docs."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
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


# The pages whose every command example is generated and checked.
PAGES = [
    "journal.md",
    "learning.md",
    "tools.md",
    "runtime.md",
    "plugin.md",
    "view.md",
    "definitions.md",
    "security.md",
]


@pytest.fixture(scope="module", autouse=True)
def _scenes() -> Iterator[None]:
    yield
    examples.example_scenes.cleanup()


def test_there_are_checked_examples():
    assert len(CHECKED) >= 5  # the estimates of docs/profiling.md and the README's Python


@pytest.mark.parametrize("page", PAGES)
def test_every_command_example_of_a_page_is_checked(page):
    """A block of commands and what they print (```console, or a bare ``` starting with
    ``$ ``) on these pages is output someone can compare: each one runs."""
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    checked = {
        e.start
        for e in examples.find(REPO / "docs" / page)
        if "checked" in e.opts or "manual" in e.opts  # manual: the marker says why not
    }
    unchecked = [
        text[: m.start()].count("\n") + 1
        for m in examples.FENCE.finditer(text)
        if m.group(0).startswith(("```console\n$ ", "```\n$ ")) and m.start() not in checked
    ]
    assert not unchecked, f"docs/{page}: console examples not generated at lines {unchecked}"


def _params() -> list:
    return [
        pytest.param(e, id=e.where, marks=[pytest.mark.slow] if e.scene else []) for e in CHECKED
    ]


@pytest.mark.parametrize("example", _params())
def test_a_documented_example_prints_what_the_docs_say(example):
    if "tool Bash" in example.body:
        from journal_agent.tools.sandbox import available_confinement

        conf = available_confinement()
        if not conf.active:  # the examples show what Bash prints inside the sandbox
            pytest.skip(f"no OS sandbox on this machine: {conf.reason}")
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


def test_normalizing_hides_the_moment_a_command_ran_but_no_number_a_user_checks():
    a = (
        "#1  2026-11-23T13:20:18Z  learn.md  +1 -1\n→ good; next review 2026-11-23 13:29 UTC\n"
        "backup written to /tmp/demo/learning_journal.md.bak-20261122-002138\n"
        "[m:est-a8eb5992] 64.80 GB  learning_journal.md:12  meaning 0.93\n"
    )
    b = (
        "#1  2027-01-02T08:00:00Z  learn.md  +1 -1\n→ good; next review 2027-01-02 08:09 UTC\n"
        "backup written to /tmp/demo/learning_journal.md.bak-20270102-080000\n"
        "[m:est-0badcafe] 64.80 GB  learning_journal.md:12  meaning 0.93\n"
    )
    assert examples.normalize(a) == examples.normalize(b)
    for old, new in (
        ("64.80 GB", "64.81 GB"),
        ("learning_journal.md:12", "learning_journal.md:13"),
        ("meaning 0.93", "meaning 0.92"),
        ("+1 -1", "+2 -1"),
    ):
        assert examples.normalize(a.replace(old, new)) != examples.normalize(b), new
