"""Every bad input of the third review's finding 12 gets one sentence, a non-zero exit (CLI) or
an error result (tool), no traceback, and overwrites nothing without ``--force``; damaged
state gives one sentence or repairs itself. Real CLI, real files, real SQLite, real MCP server.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest

from journal_agent.tools import make_context
from journal_agent.tools.registry import builtin_tools, product_tools
from tests.entries import render_entry


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return Path(os.path.realpath(root))


@pytest.fixture
def run(cli, ws, tmp_path):
    (tmp_path / "home").mkdir()
    return lambda *args: cli(*args, cwd=ws, home=tmp_path / "home")


@pytest.fixture
def journal(ws, run) -> Path:
    entry = ws / "e.md"
    text = render_entry("ZeRO stage two", "2026-11-20", context="c", question="q?",
                        intuition="ZeRO two shards gradients.", tags="#zero")  # fmt: skip
    entry.write_text(text)
    assert run("journal", "append", "--file", str(entry)).returncode == 0
    return ws / "learning_journal.md"


def one_sentence(done, code: int = 1) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 or code == 2, done.stderr  # (click draws a box for usage errors)
    return done.stderr


@pytest.mark.parametrize("flag", ["--csv", "--plot"])
def test_finding_12_profile_refuses_an_existing_file_without_force(ws, run, flag):
    target = ws / ("out.csv" if flag == "--csv" else "out.png")
    target.write_text("keep me\n")
    said = one_sentence(run("profile", "--model", "tiny-gpt2", flag, str(target)))
    assert "already exists; pass --force" in said
    assert target.read_text() == "keep me\n"


def test_finding_12_profile_timeout_inf_is_a_usage_error(run):
    said = one_sentence(run("profile", "--model", "tiny-gpt2", "--timeout", "inf"), code=2)
    assert "--timeout" in said


def test_finding_12_estimate_plot_where_no_file_can_be(run):
    said = one_sentence(run("estimate", "--model", "tiny-gpt2", "--plot", "/proc/self/x.png"))
    assert "/proc/self/x.png" in said


def test_finding_12_estimate_tp_must_divide_the_heads(ws, run):
    said = one_sentence(run("estimate", "--model", "llama-7b", "--tp", "3"))
    assert "--tp 3 does not divide the model's 32 attention heads" in said
    assert not list((ws / ".journal/measurements").glob("*.json"))
    assert run("estimate", "--model", "llama-7b", "--tp", "4").returncode == 0


@pytest.mark.parametrize("query", ["the", "...", "\u0000", "a the of"])
def test_finding_12_a_search_of_only_stop_words_or_punctuation(ws, run, journal, query):
    said = one_sentence(run("journal", "search", query))
    assert "no word to look for" in said
    done = product_tools()["JournalSearch"].call(make_context(ws), {"query": query})
    assert done.is_error and "no word to look for" in done.content


def test_finding_12_a_corrupt_measurement_record_is_reported(ws, run):
    assert run("estimate", "--model", "tiny-gpt2").returncode == 0
    [good] = (ws / ".journal/measurements").glob("*.json")
    (ws / ".journal/measurements/est-00000000.json").write_text('{"id": 3, "kind": ')
    done = run("measurements")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "est-00000000.json is corrupt" in done.stderr and good.stem in done.stdout


def test_finding_12_an_index_missing_its_fts_table_repairs_itself(ws, run, journal):
    assert "ZeRO" in run("journal", "search", "zero").stdout
    with sqlite3.connect(ws / ".journal/index.sqlite") as conn:
        conn.execute("DROP TABLE entries_fts")
    done = run("journal", "search", "zero")
    assert done.returncode == 0 and "ZeRO" in done.stdout, done.stderr


@pytest.mark.parametrize(
    ("damage", "args", "expected"),
    [
        ("index-dir", ("journal", "search", "zero"), "is a directory where"),
        ("ledger-dir", ("ledger", "add-item", "developing", "x y"), "is a directory"),
        ("lock-dir", ("journal", "append", "--file", "e2.md"), "is a directory where"),
        ("state-file", ("journal", "search", "zero"), "is a file where journal-agent needs a "
         "directory"),
    ],
)  # fmt: skip
def test_finding_12_damaged_state_gives_one_sentence(ws, run, journal, damage, args, expected):
    state = ws / ".journal"
    (ws / "e2.md").write_text(render_entry("Checkpointing", "2026-11-21", context="c",
                                           question="why?", intuition="Recompute to save.",
                                           tags="#memory"))  # fmt: skip
    if damage == "index-dir":
        for p in state.glob("index.sqlite*"):
            p.unlink()
        (state / "index.sqlite").mkdir()
    elif damage == "ledger-dir":
        (ws / "learning_ledger.md").mkdir()
    elif damage == "lock-dir":
        (state / "journal.lock").unlink(missing_ok=True)
        (state / "journal.lock").mkdir()
    else:
        import shutil

        shutil.rmtree(state)
        state.write_text("")
    before = journal.read_bytes()
    said = one_sentence(run(*args))
    assert expected in said
    assert journal.read_bytes() == before


def _mcp(ws: Path, lines: list[str]) -> list[dict]:
    from tests.conftest import CLI

    proc = subprocess.Popen(
        CLI.command("mcp"), cwd=ws, env=CLI.environment(), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n".join(lines) + "\n")
    proc.stdin.flush()
    answers = []
    timer = threading.Timer(60, proc.kill)
    timer.start()
    try:
        while len(answers) < len(lines) - 1:  # the notification gets no answer
            line = proc.stdout.readline()
            if not line:
                break
            answers.append(json.loads(line))
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
    return answers


def test_finding_12_mcp_requests_with_an_id_of_the_wrong_type_are_answered(ws):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    answers = _mcp(
        ws,
        [
            json.dumps(init),
            '{"jsonrpc":"2.0","method":"notifications/initialized"}',
            '{"jsonrpc":"2.0","id":true,"method":"tools/list"}',
            '{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}',
            '{"jsonrpc":"2.0","id":7,"method":"ping"}',
        ],
    )
    assert [a.get("id") for a in answers] == [1, None, None, 7]
    for bad in answers[1:3]:
        assert bad["error"]["code"] == -32600 and "id must be" in bad["error"]["message"]


def test_finding_12_grep_and_glob_under_a_directory_swap_answer_without_a_traceback(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "d").mkdir(parents=True)
    outside.mkdir()
    for i in range(5):
        (ws / "d" / f"f{i}.txt").write_text("NEEDLE\n")
        (outside / f"o{i}.txt").write_text("NEEDLE LEAKED\n")
    stop = threading.Event()

    def swap() -> None:
        d, real = ws / "d", ws / "d.real"
        while not stop.is_set():
            os.rename(d, real)
            os.symlink(outside, d)
            os.unlink(d)
            os.rename(real, d)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    ctx = make_context(ws)
    tools = builtin_tools()
    try:
        for _ in range(150):
            for name, params in (("Grep", {"pattern": "NEEDLE", "path": "d"}),
                                 ("Glob", {"pattern": "*", "path": "d"})):  # fmt: skip
                done = tools[name].call(ctx, params)  # never raises
                assert "LEAKED" not in done.content and "o0.txt" not in done.content
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize("name", [".ENV", ".Env.Local", "ID_RSA", "Server.PEM"])
def test_finding_12_secret_names_in_any_case_are_secrets(ws, name):
    from journal_agent.tools.sandbox import available_confinement

    (ws / name).write_text("TOKEN=upper-case-secret-xyzzy\n")
    read = builtin_tools()["Read"].call(make_context(ws), {"file_path": name})
    assert read.is_error and "looks like a secret" in read.content
    if not available_confinement().active:
        return
    # Through the sandbox too, by a name the rules cannot see.
    sneaky = f"f={name[:-1]}; cat ${{f}}{name[-1]}"
    done = builtin_tools()["Bash"].call(
        make_context(ws, mode="bypassPermissions"), {"command": sneaky}
    )
    assert "upper-case-secret" not in done.content
