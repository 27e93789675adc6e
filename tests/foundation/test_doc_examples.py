"""The docs' examples print what the commands print today (docs/examples.py wrote them from
real runs). The ones marked ``checked`` are rerun — the closed-form estimates of profiling.md
and the README here, every other page's commands in the prepared workspaces of
docs/example_scenes.py in test_doc_examples_{journal,learning,tools}.py — and a change to what a
command prints fails until ``python docs/examples.py`` regenerates the docs. This file also
checks that the user-guide pages have no block of commands that is not generated."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.foundation.doc_examples import REPO, check, checked, examples, scenes

CHECKED = [
    e
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for e in examples.find(path)
    if "checked" in e.opts
]


# The pages of each test_doc_examples_*.py file.
JOURNAL = ["journal.md", "plugin.md"]
LEARNING = ["learning.md"]
TOOLS = ["tools.md", "runtime.md", "definitions.md", "security.md", "view.md"]
# The pages whose every block of commands is generated and checked (or manual, saying why).
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
    yield from scenes()


def test_there_are_checked_examples():
    assert len(CHECKED) >= 5  # the estimates of docs/profiling.md and the README's Python


@pytest.mark.parametrize("page", PAGES)
def test_every_command_example_of_a_page_is_checked(page):
    """A block of commands and what they print (```console, or a bare ``` starting with
    ``$ ``) on these pages is output someone can compare: each one runs."""
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    generated = {
        e.start
        for e in examples.find(REPO / "docs" / page)
        if "checked" in e.opts or "manual" in e.opts  # manual: the marker says why not
    }
    unchecked = [
        text[: m.start()].count("\n") + 1
        for m in examples.FENCE.finditer(text)
        if m.group(0).startswith(("```console\n$ ", "```\n$ ")) and m.start() not in generated
    ]
    assert not unchecked, f"docs/{page}: console examples not generated at lines {unchecked}"


@pytest.mark.parametrize("example", checked("README.md", "profiling.md"))
def test_a_documented_example_prints_what_the_docs_say(example):
    """The other pages' examples: test_doc_examples_*.py (spread over workers)."""
    check(example)


def test_every_checked_example_has_a_test_file():
    covered = {"README.md", "profiling.md", *JOURNAL, *LEARNING, *TOOLS}
    pages = {e.path.name for e in CHECKED}
    assert pages <= covered, pages - covered


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


def test_a_cut_whose_anchor_is_gone_is_named_not_left_whole_in_silence(tmp_path):
    """The docs cut long outputs at a line ``…``; when the line before it no longer appears in
    the new output, the generator keeps the whole output and says which block to cut by hand."""
    doc = tmp_path / "doc.md"
    head = "<!-- example: checked -->\n```\n$ printf 'one\\ntwo\\nthree\\nfour\\n'\n"
    doc.write_text(head + "zero\n…\nfour\n```\n", encoding="utf-8")

    def generate() -> str:
        return subprocess.run(
            [sys.executable, str(REPO / "docs" / "examples.py"), str(doc)],
            capture_output=True,
            text=True,
            check=True,
        ).stderr

    said = generate()
    assert "left whole:" in said and "'zero'" in said, said
    assert "one\ntwo\nthree\nfour\n" in doc.read_text(encoding="utf-8")  # not cut anywhere
    # with the anchor present the cut is made again, and nothing is said
    doc.write_text(head + "one\n…\nfour\n```\n", encoding="utf-8")
    assert "left whole" not in generate()
    assert "one\n…\nfour\n" in doc.read_text(encoding="utf-8")
