"""Where cited lines are in a file's lines (capture/cited_place.py's ``where``, which every
PostToolUse placement and state uses): the recorded place first, then the guess, then the
first place that starts with the anchor's first line and holds the very lines."""

from __future__ import annotations

import hashlib

from journal_agent.capture.cited_place import where


def _anchor(lines: list[bytes], text: bool = True) -> dict[str, object]:
    digest = hashlib.sha256(b"\n".join(lines)).hexdigest()[:16]
    return {"hash": digest, **({"text": [x.decode() for x in lines]} if text else {})}


def test_the_first_place_holding_the_lines_is_found_past_lookalikes():
    cited = [b"def f():", b"    return 1"]
    lines = [b"x", b"def f():", b"    return 2", b"y", *cited, b"z", *cited]
    # Line 2 starts like them but holds other lines; 5 is the first that holds them (8 too).
    assert where(lines, (1, 2), _anchor(cited)) == 5
    assert where(lines, (8, 9), _anchor(cited)) == 8  # still where recorded
    assert where(lines, (1, 2), _anchor(cited), guess=8) == 8  # the guess before the search
    assert where(lines, (1, 2), _anchor(cited, text=False)) == 5  # no text kept: every place


def test_lines_found_nowhere_or_cut_at_the_end_are_changed():
    cited = [b"a = 1", b"b = 2"]
    assert where([b"q", b"a = 1"], (1, 2), _anchor(cited)) is None  # its first line at the end
    assert where([b"a = 1", b"b = 3"], (1, 2), _anchor(cited)) is None
    assert where([b"a = 1", b"b = 2"], (1, 2), {"hash": None}) is None
    # A first line kept as text that is not the hashed line (a non-UTF-8 line read back with
    # replacement characters): found only where recorded.
    latin = [b"caf\xe9 = 1", b"b = 2"]
    anchor = {**_anchor(latin, text=False), "text": ["caf\ufffd = 1", "b = 2"]}
    assert where([b"x", *latin], (1, 2), anchor) is None
    assert where([*latin, b"x"], (1, 2), anchor) == 1
