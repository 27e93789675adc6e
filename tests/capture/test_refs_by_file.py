"""The index of cited files PostToolUse reads instead of searching refs.jsonl (#33: p95 own time
with 10,000 entries; capture/refs_by_file.py): what the hook says with it is what refs.jsonl
says, whatever happened to refs.jsonl or the index since. The hook as a process, the real CLI's
journal append."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.capture.hook_helpers import run_hook
from tests.capture.test_touch_recall import ENTRY, TRAIN, make_project, post
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


def _row(index: Path) -> bytes:
    """The one row of src/train.py: ``offset first last hash entry``."""
    rows = [x for x in index.read_bytes().split(b"\n") if x.count(b" ") == 4 and x[:1].isdigit()]
    assert len(rows) == 1
    return rows[0]


def _lie(index: Path, row: bytes, *fields: bytes) -> None:
    """The row with other fields (the same length: the table's offsets stay right)."""
    lie = b" ".join(fields)
    assert len(lie) == len(row)
    index.write_bytes(index.read_bytes().replace(b"\n" + row + b"\n", b"\n" + lie + b"\n"))


def test_an_index_whose_rows_lie_makes_the_hook_say_nothing_else(project):
    """A row pointing at a line that does not cite those lines is found out when the line is
    read: refs.jsonl itself is searched, and the index built again."""
    assert ENTRY in _read(project, 2, 3, "a")
    index = project.joinpath(*INDEX)
    row = _row(index)
    offset, first, last, digest, entry = row.split(b" ")
    assert (first, last, entry) == (b"3", b"3", ENTRY.encode())
    _lie(index, row, offset, b"7", b"7", digest, entry)
    assert _read(project, 6, 3, "b") == ""  # the index says line 7; refs.jsonl does not
    assert ENTRY in _read(project, 2, 3, "c")  # (the row of line 3 is back)


def _edit_two(project: Path, number: int, session: str) -> str:
    """An Edit of lines ``number`` and the next of src/train.py that keeps the first as it
    was, told with a hunk that replaces both (as a diff may give it): the cited lines are
    still where they were, no search of the file reads their line of refs.jsonl."""
    path = project / "src" / "train.py"
    lines = path.read_text().split("\n")
    old = lines[number - 1 : number + 1]
    lines[number] += "  # edited"
    path.write_text("\n".join(lines))
    body = ["-" + x for x in old] + ["+" + x for x in lines[number - 1 : number + 1]]
    hunk = {"oldStart": number, "oldLines": 2, "newStart": number, "newLines": 2, "lines": body}
    return post(project, "Edit", {"file_path": str(path)}, {"structuredPatch": [hunk]}, session)


def test_an_index_cannot_make_an_edit_name_what_refs_jsonl_does_not_say(project):
    """An Edit places every reference from the index's rows without reading their lines
    (capture/edit_refs.py); one it would name is read first. A row saying the entry cites the
    edited lines, with their very hash, names nothing; a row naming another entry for the
    entry's line names the entry its line says."""
    assert ENTRY in _read(project, 2, 3, "a")  # (the index built)
    index = project.joinpath(*INDEX)
    row = _row(index)
    offset, _, _, digest, entry = row.split(b" ")
    line7 = hashlib.sha256(b"line 7").hexdigest()[:16].encode()
    _lie(index, row, offset, b"7", b"7", line7, entry)
    assert _edit_two(project, 7, "b") == ""
    assert not index.exists()  # dropped: built again at the next call
    (project / "src" / "train.py").write_text(TRAIN)
    assert ENTRY in _read(project, 2, 3, "c")
    row = _row(index)
    _lie(index, row, offset, b"3", b"3", digest, b"x" * len(entry))
    said = _edit_two(project, 3, "d")
    assert said == f"src/train.py:3 (fresh) is explained by journal-agent journal show {ENTRY}"


def test_an_edit_keeps_where_the_cited_lines_went_for_the_sessions_reads(project):
    """The places an Edit keeps from the index's rows (hash and lines, no line of refs.jsonl
    read) are what a Read of the session then finds: the entry named at its new line only."""
    path = project / "src" / "train.py"
    path.write_text("# one\n# two\n" + TRAIN)
    hunk = {"oldStart": 1, "oldLines": 2, "newStart": 1, "newLines": 4,
            "lines": ["+# one", "+# two", " line 1", " line 2"]}  # fmt: skip
    assert post(project, "Edit", {"file_path": str(path)}, {"structuredPatch": [hunk]}, "e") == ""
    places = (project / ".journal" / "capture" / "places.txt").read_text()
    assert places.startswith("e\t") and "\t3-3:" in places and ">5\tsrc/train.py" in places
    assert _read(project, 2, 3, "e") == ""  # its recorded line holds other code now
    said = _read(project, 4, 3, "e")
    assert said.startswith("src/train.py:3 (moved to line 5)") and ENTRY in said


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
        rebuilt.split(b"\n")[0].split()[-4]
        == str((project / ".journal" / "refs.jsonl").stat().st_size).encode()
    )  # it covers all of refs.jsonl
    assert second in _read(project, 3, 3, "b")
    assert run_hook("refresh", b"", project).returncode == 0
    assert index.read_bytes() == rebuilt  # nothing appended: left as it is
