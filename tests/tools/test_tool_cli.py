"""``journal-agent tool`` / ``tools`` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trust_helpers import approve


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


def test_runs_a_tool_and_prints_what_the_model_sees(cli, ws: Path, home: Path) -> None:
    (ws / "notes.md").write_text("alpha\nbeta\n")
    r = cli("tool", "Read", '{"file_path": "notes.md"}', cwd=ws, home=home)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1\talpha\n2\tbeta\n"
    r = cli("tool", "Grep", '{"pattern": "beta", "output_mode": "content"}', cwd=ws, home=home)
    assert (r.returncode, r.stdout) == (0, "notes.md:2:beta\n")


def test_a_tool_error_exits_1_with_the_message_on_stdout(cli, ws: Path, home: Path) -> None:
    r = cli("tool", "Read", '{"file_path": "/etc/passwd"}', cwd=ws, home=home)
    assert r.returncode == 1
    assert "outside the workspace" in r.stdout


def test_root_allow_deny_and_mode(cli, tmp_path: Path, ws: Path, home: Path) -> None:
    r = cli("tool", "Bash", '{"command": "touch made"}', "--root", str(ws), cwd=tmp_path, home=home)
    assert r.returncode == 1 and "needs approval" in r.stdout
    assert not (ws / "made").exists()
    r = cli("tool", "Bash", '{"command": "touch made"}', "--root", str(ws),
            "--allow", "Bash(touch:*)", cwd=tmp_path, home=home)  # fmt: skip
    assert r.returncode == 0 and (ws / "made").exists()
    r = cli("tool", "Bash", '{"command": "ls"}', "--root", str(ws), "--deny", "Bash(ls:*)",
            cwd=tmp_path, home=home)  # fmt: skip
    assert r.returncode == 1 and "denied by the rule Bash(ls:*)" in r.stdout
    r = cli("tool", "Write", '{"file_path": "n.txt", "content": "x"}', "--mode", "plan",
            cwd=ws, home=home)  # fmt: skip
    assert r.returncode == 1 and "plan mode" in r.stdout
    r = cli("tool", "Write", '{"file_path": "n.txt", "content": "x"}', "--mode", "acceptEdits",
            cwd=ws, home=home)  # fmt: skip
    assert r.returncode == 0 and (ws / "n.txt").read_text() == "x"


def test_settings_file_rules_apply(cli, ws: Path, home: Path) -> None:
    (ws / ".claude").mkdir()
    (ws / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["Bash(touch:*)"]}})
    )
    approve(ws)
    r = cli("tool", "Bash", '{"command": "touch ok"}', cwd=ws, home=home)
    assert r.returncode == 0 and (ws / "ok").exists()


def test_input_from_stdin(cli, ws: Path, home: Path) -> None:
    r = cli("tool", "Bash", "-", cwd=ws, home=home, input='{"command": "echo piped"}')
    assert r.returncode == 0 and r.stdout.startswith("piped\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("tool", "Grep", "{pattern: x}"), "not valid JSON"),
        (("tool", "Grep", "[1, 2]"), "must be a JSON object"),
        (("tool", "Nope", "{}"), "unknown tool 'Nope'; the tools are Read, Write, Edit"),
        (("tool", "Grep"), "give Grep's input as a JSON object"),
        (("tool",), "give a tool name"),
        (("tool", "Grep", '{"pattern": "x"}', "--mode", "yolo"), "unknown permission mode"),
    ],
)
def test_user_errors_are_one_sentence(cli, ws: Path, home: Path, args: tuple, message: str) -> None:
    r = cli(*args, cwd=ws, home=home)
    assert r.returncode == 1
    assert r.stderr.startswith("error: ") and message in r.stderr
    assert "Traceback" not in r.stderr


def test_invalid_fields_are_a_tool_error(cli, ws: Path, home: Path) -> None:
    r = cli("tool", "Grep", '{"patern": "x"}', cwd=ws, home=home)
    assert r.returncode == 1 and "Invalid input for Grep" in r.stdout


def test_list_tools(cli, ws: Path, home: Path) -> None:
    r = cli("tools", "--json", cwd=ws, home=home)
    assert r.returncode == 0
    defs = json.loads(r.stdout)
    assert [d["name"] for d in defs] == [
        "Read", "Write", "Edit", "Grep", "Glob", "Bash",
        "JournalAppend", "JournalSearch", "JournalCheck", "JournalInbox",
        "LedgerShow", "LedgerUpdate",
        "MemoryEstimate", "MemoryTrace", "MemoryProfile", "DeviceInfo",
    ]  # fmt: skip
    grep = next(d for d in defs if d["name"] == "Grep")
    assert {"-i", "-n", "-A", "-B", "-C", "head_limit"} <= set(grep["input_schema"]["properties"])
    r = cli("tool", "--list", cwd=ws, home=home)
    assert r.returncode == 0 and "Grep" in r.stdout and "head_limit?" in r.stdout


@pytest.mark.parametrize(("answer", "made", "code"), [(b"y\n", True, 0), (b"n\n", False, 1)])
def test_on_a_terminal_ask_means_a_prompt(
    cli, ws: Path, home: Path, answer: bytes, made: bool, code: int
) -> None:
    out, rc = cli.terminal(
        "tool", "Bash", '{"command": "touch made"}', cwd=ws, home=home, script=[(b"[y/N]", answer)]
    )
    assert "Allow Bash: touch made? [y/N]" in out
    assert (ws / "made").exists() is made and rc == code
    if not made:
        assert "refused by the user" in out


def test_tool_help_names_every_tool(cli):
    """`tool --help` names every tool the registry has, in its order (#33: it listed 6 of 16)."""
    from journal_agent.cli.tool_cmd import TOOL_NAMES
    from journal_agent.tools.registry import builtin_tools

    assert list(TOOL_NAMES) == list(builtin_tools())
    shown = " ".join(cli("tool", "--help", env={"COLUMNS": "200"}).stdout.split())
    assert ", ".join(TOOL_NAMES) in shown.replace("│ ", "").replace(" │", "")
