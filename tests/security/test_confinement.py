"""Which confinement is active, what happens without one, the network switch, and the attacks
once more through the agent runtime (a scripted model calling Bash)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.trust_helpers import approve


def cli(lab, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "journal_agent", *args, "--root", str(lab.ws)],
        cwd=lab.ws,
        env={**lab.env(), **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def bash_json(command: str) -> str:
    return json.dumps({"command": command})


BROKEN = {"JOURNAL_AGENT_BWRAP": "/bin/false"}  # a bubblewrap that cannot start

PLAIN = ["ls", "cat pat.txt", "wc -l pat.txt", "grep hello pat.txt"]
NOT_PLAIN = [
    "git status --short",
    "cat {.,}env",
    "ls $HOME",
    "LD_PRELOAD=./x.so ls",
    "tools/ls",
    "PATH=tools ls",
    "env ls",
    "grep -f/etc/hostname pat.txt",
    "sort -oout.txt pat.txt",
    "python3 -c 'print(1)'",
    "cat pat.txt > copy.txt",
    "ls *",
]


def test_without_a_sandbox_one_sentence_at_start_up_and_plain_reads_still_run(lab):
    for command in PLAIN:
        done = cli(lab, "tool", "Bash", bash_json(command), env=BROKEN)
        assert done.returncode == 0, (command, done.stdout)
        warning = done.stderr.strip().splitlines()
        assert len(warning) == 1 and "without an OS sandbox" in warning[0]
        assert "bubblewrap cannot start here" in warning[0]


@pytest.mark.parametrize("command", NOT_PLAIN)
def test_without_a_sandbox_everything_else_needs_approval(lab, command):
    done = cli(lab, "tool", "Bash", bash_json(command), env=BROKEN)
    assert done.returncode == 1
    refusals = ("needs approval", "is not readable", "outside the workspace")
    assert any(r in done.stdout for r in refusals), done.stdout  # refused: it did not run
    lab.assert_nothing_outside()
    lab.assert_no_secret(done.stdout)


def test_sandbox_turned_off_in_settings_is_said_too(lab):
    (lab.ws / ".claude").mkdir()
    (lab.ws / ".claude/settings.json").write_text('{"sandbox": {"enabled": false}}')
    approve(lab.ws)
    done = cli(lab, "tool", "Bash", bash_json("git status --short"))
    assert "turned off in settings" in done.stderr and "needs approval" in done.stdout
    doctor = cli(lab, "doctor", "--json")
    check = next(c for c in json.loads(doctor.stdout) if c["name"] == "sandbox")
    assert not check["ok"] and "sandbox.enabled is false" in check["detail"]


def test_doctor_says_which_confinement_is_active(lab):
    done = cli(lab, "doctor", "--json")
    assert done.returncode == 0
    checks = {c["name"]: c for c in json.loads(done.stdout)}
    assert checks["sandbox"]["ok"] and "bubblewrap" in checks["sandbox"]["detail"]
    assert {"ripgrep", "torch", "NVML", "api key"} <= set(checks)
    assert any(name.startswith("optional: ") for name in checks)
    broken = json.loads(cli(lab, "doctor", "--json", env=BROKEN).stdout)
    sandbox = next(c for c in broken if c["name"] == "sandbox")
    assert not sandbox["ok"] and "cannot start" in sandbox["detail"]
    text = cli(lab, "doctor").stdout
    assert text.splitlines()[0].startswith("ok sandbox")


@pytest.fixture
def server():
    """A TCP server on the host's loopback: reachable only with the host's network."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield srv.getsockname()[1]
    stop.set()
    thread.join()
    srv.close()


CONNECT = (
    "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); "
    "print('CONNECTED')\""
)


@pytest.mark.parametrize(
    ("network", "reaches"),
    [(None, False), (["example.com"], False), (["*"], True)],
    ids=["default", "particular-domains", "all"],
)
def test_network_only_when_the_settings_allow_all_of_it(lab, server, network, reaches):
    if network is not None:
        (lab.ws / ".claude").mkdir()
        settings = {"sandbox": {"network": {"allowedDomains": network}}}
        (lab.ws / ".claude/settings.local.json").write_text(json.dumps(settings))
    done = cli(lab, "tool", "Bash", bash_json(CONNECT.format(port=server)),
               "--mode", "bypassPermissions")  # fmt: skip
    assert ("CONNECTED" in done.stdout) is reaches, done.stdout
    if network == ["example.com"]:
        assert "cannot enforce" in done.stderr


def test_the_attacks_through_the_agent_runtime(lab, monkeypatch):
    from journal_agent.runtime import run_agent
    from journal_agent.testing import ScriptedModel, reply, tool_use

    monkeypatch.setenv("HOME", str(lab.home))
    (lab.ws / ".claude/agents").mkdir(parents=True)
    (lab.ws / ".claude/agents/dev.md").write_text(
        "---\nname: dev\ndescription: runs commands\ntools: Bash\n---\nYou run commands.\n"
    )
    attacks = [
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor "
        f'GIT_CONFIG_VALUE_0="id >{lab.out}; false" git status --short',
        f"python3 -c \"import os; os.execvp('sh', ['sh', '-c', 'id > {lab.out}'])\"",
        "cp evil.json .claude/settings.local.json",
        "cat {.,}env; git grep --no-index sk-ant",
        "setsid sleep 999.401 &",
    ]
    model = ScriptedModel(
        [reply(*(tool_use("Bash", {"command": c}) for c in attacks)), reply("done")]
    )
    run_agent("dev", "go", root=lab.ws, client=model.client(), mode="acceptEdits",
              home=lab.home)  # fmt: skip
    results = json.dumps(model.requests[1].body["messages"][-1]["content"])
    lab.assert_no_secret(results)
    lab.assert_nothing_outside()
    assert sorted(os.listdir(lab.ws / ".claude")) == ["agents"]
    assert lab.none_left("999.401")
    transcripts = "".join(p.read_text() for p in Path(lab.ws, ".journal/transcripts").glob("*"))
    lab.assert_no_secret(transcripts)
