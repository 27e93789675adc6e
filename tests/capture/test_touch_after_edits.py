"""A session's earlier edits move code (#33): PostToolUse compares the lines an Edit changed
with where an entry's cited lines were just before it, not with the lines recorded when the
entry was written (the replay of real sessions, benchmarks/bench_touch_replay.py, named entries
for hunks near where their lines used to be). A real file of this repository, the real CLI's
journal append, the hook as a process, Claude Code's structuredPatch."""

from __future__ import annotations

import json
from pathlib import Path

from tests.capture.test_touch_recall import post, tokens
from tests.capture.touch_replay import structured_patch
from tests.entries import render_entry

REAL = Path(__file__).resolve().parents[2] / "journal_agent" / "capture" / "touched.py"
ENTRY = "a-tool-path-is-in-the-workspace-or-none-2026-11-20"
SHIFT = 20  # lines the first edit inserts above the cited function (more than it holds)


def _cited(text: str) -> tuple[int, int]:
    """The lines of ``relative()`` in the file: its ``def`` through its ``return``."""
    lines = text.split("\n")
    first = next(i for i, x in enumerate(lines) if x.startswith("def relative(")) + 1
    last = next(i for i in range(first, len(lines)) if lines[i].startswith("    return full"))
    return first, last + 1


def _project(tmp_path: Path, cli) -> tuple[Path, Path, tuple[int, int]]:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    path = root / "src" / "touched.py"
    path.write_text(REAL.read_text())
    first, last = _cited(path.read_text())
    entry = render_entry(
        "A Tool Path Is In The Workspace Or None", "2026-11-20", context="The hook's paths.",
        question="Where does a tool's file_path land?",
        intuition=f"relative() cuts it to the workspace or None (src/touched.py:{first}-{last}).",
        tags="#capture",
    )  # fmt: skip
    done = cli("journal", "append", "-", "--root", str(root), input=entry)
    assert done.returncode == 0, done.stderr
    return root, path, (first, last)


def _edit(root: Path, path: Path, new: str, session: str) -> str:
    """Write ``new`` over the file and tell the hook as Claude Code does."""
    old = path.read_text()
    path.write_text(new)
    result = {"filePath": str(path), "structuredPatch": structured_patch(old, new)}
    return post(root, "Edit", {"file_path": str(path)}, result, session=session)


def _shifted(text: str) -> str:
    """The first edit: SHIFT lines of a new function after the imports, above relative()."""
    block = "".join(f"# a note {n} the first edit adds\n" for n in range(SHIFT - 2)) + "\n"
    mark = "from journal_agent import confined\n"
    return text.replace(mark, mark + "\n" + block, 1)


def _replace_line(text: str, number: int, new: str) -> str:
    lines = text.split("\n")
    lines[number - 1] = new
    return "\n".join(lines)


def test_an_edit_near_where_cited_lines_were_names_nothing(tmp_path, cli):
    root, path, (first, last) = _project(tmp_path, cli)
    assert _edit(root, path, _shifted(path.read_text()), "s1") == ""  # far from them
    assert _cited(path.read_text()) == (first + SHIFT, last + SHIFT)
    # The second edit changes a line at the cited lines' recorded place, which now holds the
    # first edit's notes: not the lines the entry explains.
    text = path.read_text()
    assert text.split("\n")[first].startswith("# a note")
    assert _edit(root, path, _replace_line(text, first + 1, "# a changed note"), "s1") == ""
    assert (
        not (root / ".journal" / "inbox.jsonl").exists()
        or "revise" not in (root / ".journal" / "inbox.jsonl").read_text()
    )


def test_an_edit_of_cited_lines_where_they_are_now_names_the_entry(tmp_path, cli):
    root, path, (first, last) = _project(tmp_path, cli)
    assert _edit(root, path, _shifted(path.read_text()), "s1") == ""
    text = path.read_text()
    body = first + SHIFT + 3  # a line of relative()'s body, where it is now
    assert text.split("\n")[body - 1].strip().startswith("return None")
    said = _edit(root, path, _replace_line(text, body, "        return ''"), "s1")
    assert said == (
        f"your edit changed lines {first}-{last}, explained by journal-agent journal show {ENTRY}"
    )
    assert tokens(said) <= 40
    moments = [json.loads(x) for x in (root / ".journal/inbox.jsonl").read_text().splitlines()]
    assert [m["entry"] for m in moments if m.get("kind") == "revise"] == [ENTRY]


def test_a_wrong_place_kept_by_the_sessions_last_edit_moves_nothing(tmp_path, cli):
    """The next edit tries where the session's last edit left cited lines before searching
    the file (capture/edit_refs.py); a place that does not hold them (places.txt edited by
    another hand) is passed over: the edit is still compared with where they are."""
    root, path, (first, last) = _project(tmp_path, cli)
    assert _edit(root, path, _shifted(path.read_text()), "s1") == ""
    places = root / ".journal" / "capture" / "places.txt"
    kept = places.read_text()
    assert f">{first + SHIFT}\t" in kept
    places.write_text(kept.replace(f">{first + SHIFT}\t", f">{first}\t"))  # (the notes)
    text = path.read_text()
    assert _edit(root, path, _replace_line(text, first + 1, "# a changed note"), "s1") == ""
    body = first + SHIFT + 3
    said = _edit(root, path, _replace_line(path.read_text(), body, "        return ''"), "s1")
    assert said.startswith(f"your edit changed lines {first}-{last}") and ENTRY in said


def _read(root: Path, path: Path, span: tuple[int, int], session: str = "s1") -> str:
    """A Read of exactly ``span``, as Claude Code gives it."""
    window = {"file_path": str(path), "offset": span[0], "limit": span[1] - span[0] + 1}
    return post(root, "Read", window, {"type": "text"}, session=session)


def test_a_read_after_an_edit_is_compared_with_where_cited_lines_are_now(tmp_path, cli):
    root, path, (first, last) = _project(tmp_path, cli)
    assert _edit(root, path, _shifted(path.read_text()), "s1") == ""
    now = (first + SHIFT, last + SHIFT)
    assert _cited(path.read_text()) == now
    # Their recorded lines now hold the first edit's notes: not what the entry explains.
    assert path.read_text().split("\n")[first].startswith("# a note")
    assert _read(root, path, (first, last)) == ""
    said = _read(root, path, now)
    # (the id is long: the line gives way to "lines N-M (moved)" to stay within 40 tokens)
    assert (
        said == f"lines {first}-{last} (moved) is explained by journal-agent journal show {ENTRY}"
    )
    assert tokens(said) <= 40
    assert _read(root, path, now) == ""  # once per session


def test_a_grep_hit_where_an_edit_moved_cited_lines_names_the_entry(tmp_path, cli):
    root, path, (first, last) = _project(tmp_path, cli)
    assert _edit(root, path, _shifted(path.read_text()), "s1") == ""
    hit = {"mode": "content", "content": f"{path}:{first + SHIFT + 1}:    if not isinstance("}
    said = post(root, "Grep", {"pattern": "isinstance", "output_mode": "content"}, hit)
    assert (
        said == f"lines {first}-{last} (moved) is explained by journal-agent journal show {ENTRY}"
    )
    old = {"mode": "content", "content": f"{path}:{first + 1}:# a note 0 the first edit adds"}
    assert post(root, "Grep", {"pattern": "a note"}, old, session="s1") == ""


def test_places_kept_by_an_edit_stop_counting_once_another_hand_changes_the_file(tmp_path, cli):
    """The edit moved the function; then something outside the session put the file back: a
    Read of the function where it is again (its recorded lines) names the entry as fresh."""
    root, path, (first, last) = _project(tmp_path, cli)
    original = path.read_text()
    assert _edit(root, path, _shifted(original), "s1") == ""
    assert (root / ".journal" / "capture" / "places.txt").is_file()
    path.write_text(original)  # (not this session's edit: no hook call)
    assert _read(root, path, (first + SHIFT, last + SHIFT)) == ""
    said = _read(root, path, (first, last))
    assert (
        said == f"lines {first}-{last} (fresh) is explained by journal-agent journal show {ENTRY}"
    )


def test_another_session_and_an_unedited_file_keep_the_recorded_lines(tmp_path, cli):
    root, path, (first, last) = _project(tmp_path, cli)
    assert _edit(root, path, _shifted(path.read_text()), "s1") == ""
    # A session that did not make the edit has no places of it: as before, the recorded lines.
    said = _read(root, path, (first, last), session="s2")
    assert (
        said == f"lines {first}-{last} (moved) is explained by journal-agent journal show {ENTRY}"
    )
    assert _read(root, path, (first + SHIFT, last + SHIFT), session="s3") == ""


def test_a_link_planted_at_the_places_file_is_not_written_through(tmp_path, cli):
    root, path, (first, last) = _project(tmp_path, cli)
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    places = root / ".journal" / "capture" / "places.txt"
    places.parent.mkdir(parents=True, exist_ok=True)
    places.symlink_to(outside)
    assert _edit(root, path, _shifted(path.read_text()), "s1") == ""  # (post: no stderr)
    assert outside.read_text() == "precious\n" and places.is_symlink()
    # Nothing kept: the Read is compared with the recorded lines, as before.
    assert _read(root, path, (first + SHIFT, last + SHIFT)) == ""
    outside.write_text(f"s1\t1\t1\t1\t{first}-{last}:0>1\tsrc/touched.py\n")
    assert _read(root, path, (1, last - first + 1)) == ""  # a link is not read either
