"""Read: numbering, ranges, long lines, odd files, token budget, schema, memory on big files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from journal_agent.tools.edit import Edit
from journal_agent.tools.permissions import PermissionPolicy
from journal_agent.tools.read import Read
from journal_agent.tools.write import Write


def numbered(first: int, lines: list[str]) -> str:
    return "\n".join(f"{n}\t{line}" for n, line in enumerate(lines, start=first))


def write_lines(path: Path, count: int, fmt: str = "line {}") -> None:
    path.write_text("".join(fmt.format(i) + "\n" for i in range(1, count + 1)))


def test_lines_are_numbered_from_one_with_a_tab(ws: Path, call) -> None:
    (ws / "a.py").write_text("import os\n\n    x = 1\n")
    result = call("Read", file_path=str(ws / "a.py"))
    assert not result.is_error
    assert result.content == "1\timport os\n2\t\n3\t    x = 1"


def test_relative_path_is_taken_from_the_root(ws: Path, call) -> None:
    (ws / "notes").mkdir()
    (ws / "notes" / "a.md").write_text("hello")
    assert call("Read", file_path="notes/a.md").content == "1\thello"


def test_offset_is_the_one_based_first_line_and_limit_the_count(ws: Path, call) -> None:
    write_lines(ws / "f.txt", 10)
    result = call("Read", file_path="f.txt", offset=4, limit=3)
    assert result.content.startswith(numbered(4, ["line 4", "line 5", "line 6"]))
    assert "use offset=7 to read further" in result.content
    # Offset 0 means the start, as in Claude Code.
    assert call("Read", file_path="f.txt", offset=0, limit=1).content.startswith("1\tline 1\n")


def test_reading_to_the_end_has_no_continuation_note(ws: Path, call) -> None:
    write_lines(ws / "f.txt", 10)
    result = call("Read", file_path="f.txt", offset=8)
    assert result.content == numbered(8, ["line 8", "line 9", "line 10"])


def test_default_is_2000_lines_with_a_note_saying_how_to_continue(ws: Path, call) -> None:
    write_lines(ws / "f.txt", 2500)
    content = call("Read", file_path="f.txt").content
    assert "2000\tline 2000" in content
    assert "2001\t" not in content
    assert "Showing lines 1-2000 of 2500" in content
    assert "offset=2001" in content


def test_last_line_without_newline_is_shown(ws: Path, call) -> None:
    (ws / "f.txt").write_text("a\nb")
    assert call("Read", file_path="f.txt").content == "1\ta\n2\tb"


def test_long_lines_are_cut_at_2000_characters_with_a_marker(ws: Path, call) -> None:
    (ws / "wide.txt").write_text("short\n" + "é" * 5000 + "\nafter\n")
    content = call("Read", file_path="wide.txt").content
    line2 = content.split("\n")[1]
    assert line2.startswith("2\t" + "é" * 2000 + "…")
    assert "é" * 2001 not in line2
    assert "line truncated" in line2
    assert content.endswith("3\tafter")


def test_line_of_exactly_2000_characters_is_not_cut(ws: Path, call) -> None:
    (ws / "f.txt").write_text("x" * 2000 + "\n")
    assert call("Read", file_path="f.txt").content == "1\t" + "x" * 2000


def test_empty_file_says_so_without_being_an_error(ws: Path, call) -> None:
    (ws / "empty.md").write_text("")
    result = call("Read", file_path="empty.md")
    assert not result.is_error
    assert "exists but is empty" in result.content


def test_offset_past_the_end_says_how_long_the_file_is(ws: Path, call) -> None:
    write_lines(ws / "f.txt", 3)
    result = call("Read", file_path="f.txt", offset=10)
    assert "has 3 lines" in result.content
    assert "offset 10" in result.content


def test_binary_file_is_refused_clearly(ws: Path, call) -> None:
    (ws / "blob.dat").write_bytes(b"abc\x00\x01\x02" * 100)
    result = call("Read", file_path="blob.dat")
    assert result.is_error
    assert "binary file" in result.content
    (ws / "weights.pt").write_bytes(b"PK\x03\x04 not text")
    assert "binary file" in call("Read", file_path="weights.pt").content


def test_directory_is_refused_with_a_hint_to_list_it(ws: Path, call) -> None:
    (ws / "src").mkdir()
    result = call("Read", file_path="src")
    assert result.is_error
    assert "is a directory" in result.content
    assert "Glob" in result.content


def test_missing_file_is_refused_with_a_suggestion(ws: Path, call) -> None:
    (ws / "README.md").write_text("x")
    result = call("Read", file_path="README.txt")
    assert result.is_error
    assert f"File does not exist: {ws / 'README.txt'}" in result.content
    assert f"Did you mean {ws / 'README.md'}?" in result.content
    typo = call("Read", file_path="REDME.md")
    assert f"Did you mean {ws / 'README.md'}?" in typo.content


def test_fifo_is_refused_without_blocking(ws: Path, call) -> None:
    os.mkfifo(ws / "pipe")
    result = call("Read", file_path="pipe")
    assert result.is_error
    assert "not a regular file" in result.content


def test_crlf_lines_are_shown_without_carriage_returns(ws: Path, call) -> None:
    (ws / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    assert call("Read", file_path="win.txt").content == "1\tone\n2\ttwo"


def test_invalid_utf8_is_shown_with_replacement_characters(ws: Path, call) -> None:
    (ws / "latin.txt").write_bytes("café\n".encode("latin-1"))
    assert call("Read", file_path="latin.txt").content == "1\tcaf\ufffd"


def test_outside_paths_are_refused(ws: Path, outside: Path, call) -> None:
    result = call("Read", file_path=str(outside / "secret.txt"))
    assert result.is_error
    assert "outside the workspace root" in result.content


def test_permission_policy_denial_is_an_error_result(ws: Path, make_ctx) -> None:
    (ws / ".env").write_text("API_KEY=1\n")
    (ws / "private").mkdir()
    (ws / "private" / "a.md").write_text("x\n")
    ctx = make_ctx(policy=PermissionPolicy(ws, deny=["Read(./private/**)"]))
    denied = Read().call(ctx, {"file_path": "private/a.md"})
    assert denied.is_error
    assert "private" in denied.content
    secret = Read().call(ctx, {"file_path": ".env"})
    assert secret.is_error
    assert "API_KEY" not in secret.content


def test_result_over_the_token_budget_is_cut_with_a_narrowing_hint(ws: Path, call) -> None:
    # 2000 lines of ~1000 characters: far beyond 25,000 tokens.
    write_lines(ws / "huge.txt", 2000, fmt="{} " + "lorem ipsum dolor sit amet " * 37)
    content = call("Read", file_path="huge.txt").content
    assert len(content) < 200_000
    assert content.startswith("1\t1 lorem")
    # Cut at a whole line, and the note says exactly where to go on.
    *numbered, _, note = content.split("\n")
    last = int(numbered[-1].split("\t")[0])
    assert last == len(numbered) > 10
    assert f"[Showing lines 1-{last} of 2,000" in note and f"offset={last + 1}" in note
    from journal_agent.tools._budget import count_tokens

    assert count_tokens(content) <= 25_000
    follow = call("Read", file_path="huge.txt", offset=last + 1).content
    assert follow.startswith(f"{last + 1}\t{last + 1} lorem")


def test_invalid_input_is_an_error_result(ws: Path, call) -> None:
    assert call("Read", file_path="a", limit=0).is_error
    assert call("Read", file_path="a", offset=-1).is_error
    extra = call("Read", file_path="a", pages="1-2")
    assert extra.is_error
    assert "pages" in extra.content


# Claude Code 2.1.197's schemas (descriptions removed), from the request it sent.
CLAUDE_CODE_SCHEMAS = {
    "Read": {
        "type": "object",
        "properties": {
            "file_path": {"type": "string"},
            "offset": {"type": "integer", "minimum": 0, "maximum": 9007199254740991},
            "limit": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9007199254740991},
        },
        "required": ["file_path"],
        "additionalProperties": False,
    },
    "Write": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["file_path", "content"],
        "additionalProperties": False,
    },
    "Edit": {
        "type": "object",
        "properties": {
            "file_path": {"type": "string"},
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
            "replace_all": {"default": False, "type": "boolean"},
        },
        "required": ["file_path", "old_string", "new_string"],
        "additionalProperties": False,
    },
}


@pytest.mark.parametrize("tool", [Read, Write, Edit])
def test_schema_is_claude_codes_apart_from_descriptions(tool) -> None:
    schema = tool.definition()["input_schema"]
    for prop in schema["properties"].values():
        assert prop.pop("description")
    assert json.loads(json.dumps(schema)) == CLAUDE_CODE_SCHEMAS[tool.name]
    assert tool.definition()["description"]


BIG_FILE_SCRIPT = textwrap.dedent(
    """
    import json, re, sys
    from pathlib import Path
    from journal_agent.tools.base import ToolContext
    from journal_agent.tools.read import Read

    def hwm_kb():  # this process's own peak (ru_maxrss survives exec: it holds the parent's)
        return int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))

    root, name, offset = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    ctx = ToolContext(root=root)
    Read().call(ctx, {"file_path": "warmup.txt"})  # imports and first-use costs
    before = hwm_kb()
    result = Read().call(ctx, {"file_path": name, "offset": offset})
    after = hwm_kb()
    print(json.dumps({"growth_kb": after - before, "head": result.content[:200],
                      "tail": result.content[-200:], "error": result.is_error}))
    """
)


def _read_in_subprocess(ws: Path, name: str, offset: int) -> dict:
    (ws / "warmup.txt").write_text("x\n")
    out = subprocess.run(
        [sys.executable, "-c", BIG_FILE_SCRIPT, str(ws), name, str(offset)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


@pytest.mark.slow
def test_reading_the_end_of_a_large_file_keeps_memory_flat(ws: Path) -> None:
    line = "x" * 99 + "\n"  # 100 bytes a line
    lines = 1_200_000  # 120 MB
    chunk = line * 10_000
    with open(ws / "big.log", "w") as f:
        for _ in range(lines // 10_000):
            f.write(chunk)
    report = _read_in_subprocess(ws, "big.log", lines - 99)
    assert not report["error"]
    assert report["head"].startswith(f"{lines - 99}\t" + "x" * 99)
    assert report["tail"].endswith(f"{lines}\t" + "x" * 99)
    assert report["growth_kb"] < 50 * 1024, report


@pytest.mark.slow
def test_a_single_enormous_line_keeps_memory_flat(ws: Path) -> None:
    with open(ws / "one-line.json", "w") as f:
        for _ in range(80):
            f.write("y" * (1 << 20))  # 80 MB, no newline
    report = _read_in_subprocess(ws, "one-line.json", 1)
    assert not report["error"]
    assert "line truncated" in report["tail"]
    assert report["growth_kb"] < 50 * 1024, report
