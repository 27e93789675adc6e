"""The index of cited files PostToolUse reads instead of searching refs.jsonl (#33: p95 own time
with 10,000 entries; capture/refs_by_file.py): what the hook says with it is what refs.jsonl
says, whatever happened to refs.jsonl or the index since. The hook as a process, the real CLI's
journal append."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.capture.hook_helpers import run_hook
from tests.capture.test_touch_recall import ENTRY, make_project, post
from tests.entries import render_entry

INDEX = (".journal", "capture", "refs-by-file.idx")


@pytest.fixture
def project(tmp_path: Path, cli) -> Path:
    return make_project(tmp_path, cli)


def _append(root, cli, title: str, cites: str) -> str:
    entry = render_entry(
        title, "2026-11-21", context="Sizing.", question="Why?",
        intuition=f"Because ({cites}).", tags="#memory",
    )  # fmt: skip
    done = cli("journal", "append", "-", "--root", str(root), input=entry)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[1]


def _read(root, offset: int, limit: int, session: str) -> str:
    window = {"file_path": str(root / "src" / "train.py"), "offset": offset, "limit": limit}
    return post(root, "Read", window, session=session)


def test_lines_appended_after_the_index_are_read_from_refs_jsonl_and_win(project, cli):
    assert ENTRY in _read(project, 2, 3, "a")  # the first call builds the index
    index = project.joinpath(*INDEX)
    built = index.read_bytes()
    assert b"\0src/train.py\n" in built
    second = _append(project, cli, "Second Look", "src/train.py:4")
    assert second in _read(project, 3, 3, "b")
    # The entry's newest line moves its reference to line 7: line 3 names it no more.
    refs = project / ".journal" / "refs.jsonl"
    line = next(json.loads(x) for x in refs.read_text().splitlines() if ENTRY in x)
    (anchor,) = line["anchors"].values()
    line["anchors"] = {"src/train.py:7": anchor}
    with refs.open("a") as f:
        f.write(json.dumps(line) + "\n")
    assert ENTRY not in _read(project, 2, 3, "c")
    assert ENTRY in _read(project, 6, 3, "d")
    assert index.read_bytes() == built  # (what was appended was read, not indexed again)


def test_refs_jsonl_replaced_or_cut_back_is_indexed_again(project, cli):
    assert ENTRY in _read(project, 2, 3, "a")
    refs = project / ".journal" / "refs.jsonl"
    line = json.loads(refs.read_text().splitlines()[-1])
    (anchor,) = line["anchors"].values()
    line["anchors"] = {"src/train.py:7": anchor}
    line["refs"] = {"src/train.py:7": anchor["hash"]}
    # Another hand writes a new file (a new inode, a different end).
    replaced = refs.with_name("refs.new")
    replaced.write_text(json.dumps(line) + "\n")
    os.replace(replaced, refs)
    assert _read(project, 2, 3, "b") == ""
    assert ENTRY in _read(project, 6, 3, "c")
    # Cut back in place (the same inode) below what the index covered: nothing cites it now.
    os.truncate(refs, 0)
    assert _read(project, 6, 3, "d") == ""


def test_an_index_whose_rows_lie_makes_the_hook_say_nothing_else(project):
    """A row pointing at a line that does not cite those lines is found out when the line is
    read: refs.jsonl itself is searched, and the index built again."""
    assert ENTRY in _read(project, 2, 3, "a")
    index = project.joinpath(*INDEX)
    offset, first, last = index.read_bytes().split(b"\0src/train.py\n")[1].split(b"\n")[0].split()
    assert (first, last) == (b"3", b"3")
    index.write_bytes(index.read_bytes().replace(b"\n%s 3 3\n" % offset, b"\n%s 7 7\n" % offset))
    assert _read(project, 6, 3, "b") == ""  # the index says line 7; refs.jsonl does not
    assert ENTRY in _read(project, 2, 3, "c")  # (the row of line 3 is back)


def test_a_link_planted_at_the_index_is_neither_read_nor_written(project, tmp_path):
    outside = tmp_path / "outside.idx"
    outside.write_bytes(b"journal-agent refs-by-file 1 0 0 \n\0\n")
    index = project.joinpath(*INDEX)
    index.parent.mkdir(parents=True, exist_ok=True)
    index.symlink_to(outside)
    assert ENTRY in _read(project, 2, 3, "a")  # refs.jsonl searched
    assert outside.read_bytes() == b"journal-agent refs-by-file 1 0 0 \n\0\n"
    assert index.is_symlink()


def test_an_index_cut_short_or_garbled_is_built_again(project):
    assert ENTRY in _read(project, 2, 3, "a")
    index = project.joinpath(*INDEX)
    built = index.read_bytes()
    index.write_bytes(built[: len(built) // 2])  # cut short: no end mark
    assert ENTRY in _read(project, 2, 3, "b")
    assert index.read_bytes() == built
    index.write_bytes(built.replace(b"\0src/train.py\n", b"\0src/train.py\nnot a row\n"))
    assert ENTRY in _read(project, 2, 3, "c")
    assert index.read_bytes() == built


def test_the_detached_refresh_indexes_lines_appended_since(project, cli):
    """SessionStart and SessionEnd start it: a session's calls then find the index whole."""
    assert ENTRY in _read(project, 2, 3, "a")
    index = project.joinpath(*INDEX)
    built = index.read_bytes()
    second = _append(project, cli, "Second Look", "src/train.py:4")
    assert run_hook("refresh", b"", project).returncode == 0
    rebuilt = index.read_bytes()
    assert rebuilt != built and rebuilt.count(b"\n\0src/train.py\n") == 1
    assert (
        rebuilt.split(b"\n")[0].split()[-3]
        == str((project / ".journal" / "refs.jsonl").stat().st_size).encode()
    )  # it covers all of refs.jsonl
    assert second in _read(project, 3, 3, "b")
    assert run_hook("refresh", b"", project).returncode == 0
    assert index.read_bytes() == rebuilt  # nothing appended: left as it is
