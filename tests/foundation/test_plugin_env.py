"""The plugin's first minute, without Claude Code: the launcher in bin/, the MCP front, the
environment's states (journal_agent/plugin_env). tests/e2e/test_plugin_alone.py runs the same
in the real CLIs, and builds a real environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.capture.hook_helpers import run_hook
from tests.e2e.claude_helpers import exec_shim, ready_plugin_env

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "bin" / "journal-agent"
VENV_BIN = Path(sys.executable).parent
MCP_PREFIX = "mcp__plugin_journal-agent_journal__"


def _folder_with(tmp_path: Path, **links: Path) -> Path:
    """A folder of scripts named after ``links`` (``journal_agent`` → ``journal-agent``) that
    run their target (a venv's python is only that venv's when run by its path)."""
    folder = tmp_path / "path-bin"
    folder.mkdir(exist_ok=True)
    for name, target in links.items():
        exec_shim(folder / name.replace("_", "-"), target)
    return folder


def _env(tmp_path: Path, *folders: Path) -> dict[str, str]:
    path = os.pathsep.join([*map(str, folders), "/usr/bin", "/bin"])
    return {"PATH": path, "HOME": str(tmp_path), "LANG": "C.UTF-8"}


def _launch(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LAUNCHER), *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def _env_home(tmp_path: Path) -> Path | None:
    found = list((tmp_path / ".cache" / "journal-agent").glob("env-*"))
    return found[0] if found else None


def _python3(tmp_path: Path) -> Path:
    """A python3 (the base interpreter: it has no journal_agent) alone in a PATH folder."""
    base = getattr(sys, "_base_executable", sys.executable)
    return _folder_with(tmp_path, python3=Path(base))


def test_version_and_help_answer_without_preparing_anything(tmp_path):
    env = _env(tmp_path, _python3(tmp_path))
    version = _launch(tmp_path, "--version", env=env)
    from journal_agent import __version__

    assert (version.returncode, version.stdout) == (0, f"journal-agent {__version__}\n")
    helped = _launch(tmp_path, "--help", env=env)
    assert helped.returncode == 0 and "not prepared yet; any command prepares it" in helped.stdout
    assert _launch(tmp_path, "inbox", "--help", env=env).returncode == 0
    time.sleep(0.5)
    assert _env_home(tmp_path) is None  # no folder, no lock, no log: nothing started


def test_the_users_own_journal_agent_runs_and_the_launcher_never_runs_itself(tmp_path):
    # A copy of the launcher (another plugin install) on PATH is not "the user's own".
    other = tmp_path / "other-plugin"
    other.mkdir()
    (other / "journal-agent").write_text(LAUNCHER.read_text())
    (other / "journal-agent").chmod(0o755)
    env = _env(tmp_path, REPO / "bin", other, _python3(tmp_path))
    assert _launch(tmp_path, "--version", env=env).stdout.startswith("journal-agent 0.")
    assert _env_home(tmp_path) is None  # answered by a launcher, not by a prepared environment
    own = _folder_with(tmp_path, journal_agent=VENV_BIN / "journal-agent")
    done = _launch(tmp_path, "inbox", "--json", env=_env(tmp_path, REPO / "bin", own))
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")
    assert _env_home(tmp_path) is None


def test_a_link_in_the_users_path_finds_the_plugin(tmp_path):
    folder = tmp_path / "local-bin"
    folder.mkdir()
    (folder / "journal-agent").symlink_to(LAUNCHER)  # what `setup` prints
    own = _folder_with(tmp_path, journal_agent=VENV_BIN / "journal-agent")
    env = _env(tmp_path, folder)
    done = subprocess.run(
        ["journal-agent", "setup"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1  # not prepared: it says where it would be, and how to link it
    assert f"plugin: {REPO}" in done.stdout
    assert f"on your own PATH: ln -s '{LAUNCHER}' ~/.local/bin/" in done.stdout
    env = _env(tmp_path, folder, own)
    assert subprocess.run(["journal-agent", "inbox"], env=env, cwd=tmp_path).returncode == 0


def _fake_ready_env(tmp_path: Path, *, python: Path) -> Path:
    """An environment as a preparation leaves it, whose interpreter is ``python``."""
    return ready_plugin_env(tmp_path / ".cache" / "journal-agent", python)


def test_a_broken_environment_is_named_at_session_start_and_rebuilt(tmp_path, project):
    gone = tmp_path / "old-python" / "python3.11"
    home = _fake_ready_env(tmp_path, python=gone)  # a system upgrade removed its Python
    env = {
        "CLAUDE_PLUGIN_ROOT": str(REPO),
        "HOME": str(tmp_path),
        "PATH": os.pathsep.join([str(_python3(tmp_path)), "/usr/bin", "/bin"]),
        "JOURNAL_AGENT_INSTALLER": "pip",
        "PIP_NO_INDEX": "1",  # the rebuild fails at once: nothing is downloaded in a test
    }
    line = run_hook("SessionStart", {"session_id": "s1", "source": "startup"}, project, env=env)
    text = line.stdout.decode()
    assert text.startswith(f"journal-agent: its environment was broken (its interpreter ({gone})")
    assert "rebuilding it" in text and text.count("\n") == 1
    state = _rebuild_failed(home)
    assert "exited with" in state["error"]
    assert (home / "venv" / "bin" / "python").exists()  # made afresh: no longer dangling
    again = run_hook("SessionStart", {"session_id": "s2", "source": "startup"}, project, env=env)
    assert again.stdout.decode().startswith("journal-agent: preparing its environment failed (")
    assert "`journal-agent setup --rebuild` tries again." in again.stdout.decode()


def _rebuild_failed(home: Path) -> dict:
    """state.json once the detached rebuild has failed and let go of its lock."""
    from journal_agent.plugin_env.env import Env, preparing

    env = Env(str(REPO), str(home))
    for _ in range(1200):
        state = json.loads((home / "state.json").read_text())
        if state.get("phase") == "failed" and not preparing(env):
            return state
        time.sleep(0.1)
    raise AssertionError(f"the rebuild did not end: {state}")


def _system_python3(tmp_path: Path, target: Path) -> Path:
    """/usr/bin/python3 as a system has it: the one name a venv's interpreter links to, whose
    Python an upgrade replaces (here a script running ``target``)."""
    return exec_shim(tmp_path / "usr-bin" / "python3", target)


def test_an_interpreter_that_no_longer_runs_the_package_is_broken_not_ready(tmp_path, project):
    python3 = _system_python3(tmp_path, Path(sys.executable))  # the Python it was made from
    home = _fake_ready_env(tmp_path, python=python3)
    env = {
        "CLAUDE_PLUGIN_ROOT": str(REPO),
        "HOME": str(tmp_path),
        "PATH": os.pathsep.join([str(_python3(tmp_path)), "/usr/bin", "/bin"]),
        "JOURNAL_AGENT_INSTALLER": "pip",
        "PIP_NO_INDEX": "1",  # the rebuild fails at once: nothing is downloaded in a test
    }
    start = {"session_id": "s1", "source": "startup"}
    assert run_hook("SessionStart", start, project, env=env).stdout == b""
    checked = (home / "interpreter.ok").read_text()  # checked once, by running it
    assert checked.endswith(str(python3))
    assert run_hook("SessionStart", start, project, env=env).stdout == b""
    assert (home / "interpreter.ok").read_text() == checked

    # A system upgrade: the same name now runs another Python, without the venv's packages.
    # The link is not dangling and state.json still says ready; the package does not import.
    base = getattr(sys, "_base_executable", sys.executable)
    _system_python3(tmp_path, Path(base))
    line = run_hook("SessionStart", start, project, env=env).stdout.decode()
    assert line.startswith(
        f"journal-agent: its environment was broken (its interpreter ({python3}) no longer "
        "runs it); rebuilding it"
    ), line
    assert "exited with" in _rebuild_failed(home)["error"]  # rebuilt afresh (no index here)
    assert not (home / "interpreter.ok").exists()  # the old stamp went with the old venv


def test_a_ready_environment_runs_and_session_start_says_nothing(tmp_path, project):
    _fake_ready_env(tmp_path, python=_system_python3(tmp_path, Path(sys.executable)))
    env = _env(tmp_path, _python3(tmp_path))
    done = _launch(tmp_path, "inbox", "--json", env=env)
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr
    hook_env = {**env, "CLAUDE_PLUGIN_ROOT": str(REPO)}
    assert run_hook("SessionStart", {"session_id": "s"}, project, env=hook_env).stdout == b""


# -- the MCP front -------------------------------------------------------------------------------


class Client:
    """A line-at-a-time MCP client of ``bin/journal-agent mcp``."""

    def __init__(self, tmp_path: Path, env: dict[str, str], argv: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(
            argv or [str(LAUNCHER), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if argv else None,
            cwd=tmp_path,
            env=env,
        )
        self.n = 0

    def send(self, method: str, params: dict | None = None, *, notify: bool = False) -> object:
        message: dict = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self.n += 1
            message["id"] = self.n
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        return message.get("id")

    def read(self) -> dict:
        assert self.proc.stdout is not None
        return json.loads(self.proc.stdout.readline())

    def ask(self, method: str, params: dict | None = None) -> dict:
        id_ = self.send(method, params)
        while True:
            message = self.read()
            if message.get("id") == id_:
                return message

    def initialize(self) -> dict:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
        answer = self.ask("initialize", init)
        self.send("notifications/initialized", notify=True)
        return answer

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


def _names(listed: dict) -> list[str]:
    return [t["name"] for t in listed["result"]["tools"]]


def test_the_front_answers_in_every_state_and_says_what_is_being_prepared(tmp_path):
    # No environment yet, no journal-agent anywhere: initialize, the tools and the status.
    client = Client(tmp_path, _env(tmp_path, _python3(tmp_path)))
    answer = client.initialize()["result"]
    assert answer["capabilities"]["tools"] == {"listChanged": True}
    assert "Its environment is being prepared" in answer["instructions"]
    names = _names(client.ask("tools/list"))
    assert names[-1] == "JournalAgentStatus" and "MemoryEstimate" in names
    status = client.ask("tools/call", {"name": "JournalAgentStatus", "arguments": {}})["result"]
    assert "the first tool call prepares it" in status["content"][0]["text"]
    bad = client.ask("nonsense/method")
    assert bad["error"]["code"] == -32601
    assert client.close() == 0
    assert _env_home(tmp_path) is None  # listing and asking started nothing


def test_the_front_answers_on_the_lightest_modules(tmp_path, project):
    """Claude Code waits for the front at every session start: until a tool is called it
    imports neither threading (functools, collections) nor signal (enum), json or subprocess;
    while preparing (its status thread) as once ready."""
    never = {"threading", "signal", "enum", "functools", "json", "re", "subprocess", "typing"}
    env = _env(tmp_path, _python3(tmp_path))
    base = getattr(sys, "_base_executable", sys.executable)
    entry = REPO / "journal_agent" / "plugin_env" / "entry.py"
    argv = [base, "-I", "-S", "-X", "importtime", str(entry), "launch", "mcp"]
    for ready in (False, True):
        if ready:
            _fake_ready_env(tmp_path, python=_system_python3(tmp_path, Path(sys.executable)))
            hook_env = {**env, "CLAUDE_PLUGIN_ROOT": str(REPO)}  # (its interpreter checked once)
            assert (
                run_hook("SessionStart", {"session_id": "s"}, project, env=hook_env).stdout == b""
            )
        client = Client(tmp_path, env, argv)
        assert (
            "Its environment is being prepared" in client.initialize()["result"]["instructions"]
        ) is not ready
        assert ("JournalAgentStatus" in _names(client.ask("tools/list"))) is not ready
        assert client.close() == 0
        assert client.proc.stderr is not None
        names = {
            line.rsplit("|", 1)[1].strip()
            for line in client.proc.stderr.read().decode().splitlines()
            if line.startswith("import time:") and "|" in line
        }
        assert "journal_agent.plugin_env.front" in names  # (-X importtime reached it)
        assert names & never == set(), ready


def test_the_front_leaves_at_once_and_quietly_when_claude_code_ends_it(tmp_path):
    import signal

    for number in (signal.SIGINT, signal.SIGTERM):  # what Claude Code sends, in that order
        proc = subprocess.Popen(
            [str(LAUNCHER), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=tmp_path, env=_env(tmp_path, _python3(tmp_path)),
        )  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        proc.send_signal(number)
        _, err = proc.communicate(timeout=10)
        assert (proc.returncode, err) == (0, b"")  # no KeyboardInterrupt traceback


def test_a_failed_preparation_is_one_sentence_naming_the_fix(tmp_path):
    env = _env(tmp_path, _python3(tmp_path))
    client = Client(tmp_path, env | {"JOURNAL_AGENT_INSTALLER": "pip", "PIP_NO_INDEX": "1"})
    client.initialize()
    call = client.ask("tools/call", {"name": "JournalSearch", "arguments": {"query": "zero"}})
    text = call["result"]["content"][0]["text"]
    assert call["result"]["isError"] and text.startswith("journal-agent: preparing its environm")
    assert "`journal-agent setup --rebuild` tries again." in text
    assert client.close() == 0


def test_once_ready_the_status_tool_goes_and_calls_reach_the_full_server(tmp_path):
    client = Client(tmp_path, _env(tmp_path, _python3(tmp_path)))
    client.initialize()
    assert "JournalAgentStatus" in _names(client.ask("tools/list"))
    _fake_ready_env(tmp_path, python=_system_python3(tmp_path, Path(sys.executable)))  # prepared
    assert client.read() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    listed = client.ask("tools/list")
    assert "JournalAgentStatus" not in _names(listed)
    estimate = {"name": "MemoryEstimate", "arguments": {"model": "llama-7b", "zero": 2}}
    result = client.ask("tools/call", estimate)["result"]
    assert not result["isError"] and "[m:est-" in result["content"][0]["text"]
    assert (tmp_path / ".journal" / "measurements").is_dir()
    assert client.close() == 0


def test_the_shipped_tool_list_is_the_servers_and_costs_under_2500_tokens():
    from journal_agent.mcp_server import listing
    from journal_agent.plugin_env.tool_list import TOOLS_JSON, generated
    from journal_agent.tokenizer import encoding

    assert TOOLS_JSON.read_text() == generated(), (
        "run `python -m journal_agent.plugin_env.tool_list`"
    )
    tools: list[dict] = json.loads(json.dumps(listing()))  # (as the wire carries them)
    # As Claude Code 2.1.197 sends them with every request (tests/e2e checks the real one).
    sent = [
        {"name": MCP_PREFIX + t["name"], "description": t["description"],
         "input_schema": t["inputSchema"]}
        for t in tools
    ]  # fmt: skip
    assert len(encoding().encode(json.dumps(sent, ensure_ascii=False))) < 2500
    schemas = {t["name"]: t["inputSchema"] for t in tools}
    assert schemas["MemoryEstimate"]["properties"]["zero"]["maximum"] == 3


@pytest.mark.parametrize("argv", [["trace", "--model", "x"], ["tool", "MemoryTrace", "{}"]])
def test_profiling_commands_are_the_ones_that_ask_for_torch(argv):
    sys.path.insert(0, str(REPO))
    from journal_agent.plugin_env.launch import needs_torch

    assert needs_torch(argv)
    assert not needs_torch(["estimate", "--model", "llama-7b"])
    assert not needs_torch(["tool", "JournalSearch", "{}"])


# -- no usable Python ------------------------------------------------------------------------------


def _degraded_session(tmp_path: Path, env: dict[str, str]) -> tuple[str, list[str], dict]:
    """initialize, tools/list and a tools/call of the MCP server: (instructions, tool names,
    the call's result)."""
    client = Client(tmp_path, env)
    instructions = client.initialize()["result"]["instructions"]
    names = _names(client.ask("tools/list"))
    called = client.ask("tools/call", {"name": names[0], "arguments": {}})["result"]
    assert client.ask("ping") == {"jsonrpc": "2.0", "id": client.n, "result": {}}
    assert client.close() == 0
    return instructions, names, called


def test_with_no_python_at_all_the_server_answers_and_says_why(tmp_path):
    empty = tmp_path / "empty-bin"  # a PATH with no python3 (nor anything else)
    empty.mkdir()
    data = tmp_path / ".claude" / "plugins" / "data" / "journal-agent-inline"
    data.mkdir(parents=True)
    env = {"PATH": str(empty), "HOME": str(tmp_path), "CLAUDE_PLUGIN_DATA": str(data)}
    instructions, names, called = _degraded_session(tmp_path, env)
    why = f"journal-agent's tools are unavailable: there is no python3 on PATH ({empty})"
    assert instructions.startswith(why) and "install Python 3.11 or newer" in instructions
    assert names == ["JournalAgentStatus"]
    assert called["isError"] and called["content"][0]["text"] == instructions
    # doctor names it (from a Python the user has elsewhere), and a real start clears it.
    from journal_agent.doctor_plugin import check_mcp_started

    check = check_mcp_started(tmp_path)
    assert not check.ok and check.detail == instructions
    # Any other command says the same in one line, and exits 127 (command not found).
    done = _launch(tmp_path, "inbox", env=env)
    assert done.returncode == 127 and done.stdout == ""
    assert done.stderr.startswith("journal-agent: there is no python3 on PATH (")
    client = Client(
        tmp_path, _env(tmp_path, _python3(tmp_path)) | {"CLAUDE_PLUGIN_DATA": str(data)}
    )
    assert "being prepared" in client.initialize()["result"]["instructions"]
    assert client.close() == 0 and check_mcp_started(tmp_path).ok


def _pyenv(minor: int) -> Path:
    import glob

    found = sorted(
        glob.glob(os.path.expanduser(f"~/.pyenv/versions/3.{minor}.*/bin/python3.{minor}"))
    )
    if not found:
        pytest.skip(f"no Python 3.{minor} under pyenv here")
    return Path(found[-1])


def test_an_old_python3_hands_over_to_a_newer_one_or_the_server_says_why(tmp_path):
    old = _folder_with(tmp_path, python3=_pyenv(9))  # macOS's python3
    env = {"PATH": str(old), "HOME": str(tmp_path)}
    instructions, names, called = _degraded_session(tmp_path, env)
    assert instructions.startswith(
        "journal-agent's tools are unavailable: the python3 on PATH is 3.9."
    )
    assert names == ["JournalAgentStatus"] and called["isError"]
    # A python3.N new enough further on PATH runs it instead.
    newer = tmp_path / "newer-bin"
    newer.mkdir()
    base = Path(getattr(sys, "_base_executable", sys.executable))
    minor = sys.version_info[1]
    (newer / f"python3.{minor}").symlink_to(base)
    env["PATH"] = os.pathsep.join([str(old), str(newer)])
    client = Client(tmp_path, env)
    assert "being prepared" in client.initialize()["result"]["instructions"]
    assert "MemoryEstimate" in _names(client.ask("tools/list"))
    assert client.close() == 0


SMI_HEADER = "| NVIDIA-SMI 570.86.15    Driver Version: 570.86.15    CUDA Version: {cuda}     |\n"


@pytest.mark.parametrize(
    ("smi", "index", "why"),
    [
        (None, "cpu", "no NVIDIA driver: the CPU build"),
        # A laptop with the tools but no driver loaded: nvidia-smi fails, no CUDA line.
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
         "cpu", "no NVIDIA driver: the CPU build"),
        (SMI_HEADER.format(cuda="13.0"), "cu130", "the driver supports CUDA 13.0"),
        (SMI_HEADER.format(cuda="12.8"), "cu128", "the driver supports CUDA 12.8"),
        (SMI_HEADER.format(cuda="12.7"), "cu126", "the driver supports CUDA 12.7"),
        (SMI_HEADER.format(cuda="11.4"), "cpu",
         "the driver's CUDA 11.4 is older than any PyTorch build: the CPU one"),
    ],
)  # fmt: skip
def test_the_torch_index_follows_the_nvidia_driver(tmp_path, monkeypatch, smi, index, why):
    from journal_agent.plugin_env.build import torch_index

    folder = tmp_path / "bin"
    folder.mkdir()
    if smi is not None:  # nvidia-smi as the driver's tools print it (its edge, faked)
        (folder / "out.txt").write_text(smi)
        code = 0 if "CUDA Version" in smi else 9
        script = f'#!/bin/sh\n/bin/cat "{folder / "out.txt"}"\nexit {code}\n'
        (folder / "nvidia-smi").write_text(script)
        (folder / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.delenv("JOURNAL_AGENT_TORCH_INDEX", raising=False)
    assert torch_index() == (f"https://download.pytorch.org/whl/{index}", why)
    monkeypatch.setenv("JOURNAL_AGENT_TORCH_INDEX", str(tmp_path))  # the settings win
    assert torch_index() == (str(tmp_path), "JOURNAL_AGENT_TORCH_INDEX")
