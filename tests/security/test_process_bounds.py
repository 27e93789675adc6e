"""Findings 9 and 10 of the third review: what a sandboxed process tree inherits and how much
of the machine it may take.

- 9: the parent's secrets reached Bash in every mode (only the API key was removed);
- 10: a fork bomb starved the host (a process outside failed to fork), a 24 GB allocation ran
  until the host's OOM killer chose it, a command wrote gigabytes into the workspace and the
  sandbox's memory-backed /tmp.

The bounds in these tests are strict (64 processes, 512 MiB, 1 MiB files, 4 MiB of /tmp) so
that the attacks end quickly and the shared test machine never feels them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from journal_agent.tools.sandbox.config import SandboxLimits
from journal_agent.tools.sandbox.limits import prepare
from tests.trust_helpers import approve

MODES = [
    ("default", ()),
    ("plan", ("Bash",)),
    ("acceptEdits", ()),
    ("bypassPermissions", ()),
    ("default", ("Bash",)),
]
PARENT_SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY",
    "GITHUB_TOKEN": "ghp_PARENTTOKEN0123456789abcdefghijklmn",
    "OPENAI_API_KEY": "sk-proj-PARENTOPENAIKEY0123456789",
    "HF_TOKEN": "hf_PARENTHFTOKEN0123456789abcdefgh",
    "DATABASE_URL": "postgres://user:ParentDbPw99@db.internal/prod",
}
STRICT = {"processes": 64, "memory": "512M", "fileSize": "1M", "tmp": "4M"}


def _settings(lab, sandbox: dict) -> None:
    (lab.ws / ".claude").mkdir(exist_ok=True)
    (lab.ws / ".claude/settings.json").write_text(json.dumps({"sandbox": sandbox}))
    approve(lab.ws)


@pytest.fixture
def parent_secrets(monkeypatch):
    for name, value in PARENT_SECRETS.items():
        monkeypatch.setenv(name, value)
    return PARENT_SECRETS


@pytest.mark.parametrize(("mode", "allow"), MODES)
def test_finding_09_parent_secrets_never_reach_bash(lab, parent_secrets, mode, allow):
    # (python -c that only prints is read-only: default mode runs it unasked.)
    res = lab.bash('python3 -c "import os; print(os.environ)"', mode, allow)
    assert "PATH" in res.stdout, res.stdout  # it ran
    for name, value in parent_secrets.items():
        assert name not in res.stdout and value not in res.stdout, name
    lab.assert_no_secret(res.stdout)


def test_finding_09_parent_secrets_never_reach_bash_through_the_cli(lab, parent_secrets):
    res = lab.cli.process(
        "tool", "Bash", json.dumps({"command": "env"}), "--root", str(lab.ws), "--mode",
        "bypassPermissions",
        cwd=lab.ws, home=lab.home, env={**parent_secrets, "PATH": lab.env()["PATH"]},
    )  # fmt: skip
    assert "PATH=" in res.stdout
    for name, value in parent_secrets.items():
        assert name not in res.stdout and value not in res.stdout, name


def test_finding_09_names_the_user_lists_are_passed_and_values_set(lab, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_TOKEN", PARENT_SECRETS["HF_TOKEN"])
    (lab.ws / ".claude").mkdir()
    (lab.ws / ".claude/settings.json").write_text(json.dumps({
        "env": {"PROJECT_STAGE": "study"},
        "sandbox": {"env": ["WANDB_MODE", "HF_HUB_*"]},
    }))  # fmt: skip
    approve(lab.ws)
    out = lab.bash("env", "bypassPermissions").stdout
    assert "WANDB_MODE=offline" in out and "HF_HUB_OFFLINE=1" in out
    assert "PROJECT_STAGE=study" in out
    assert "HF_TOKEN" not in out


# A process of its own outside any sandbox, forking all along until the stop file appears. Not a
# thread of this test's process: the lab sets HOME in os.environ around each call, and a
# concurrent setenv can free the environ array that a thread's exec is reading (EFAULT, seen
# under load in CI) — a race of the test, not a starved host.
_FORKER = """
import json, os, subprocess, sys, time
stop, started, failures = sys.argv[1], 0, []
while not os.path.exists(stop):
    try:
        subprocess.run(["/bin/true"], check=True, timeout=10)
        started += 1
    except (OSError, subprocess.SubprocessError) as exc:
        failures.append(repr(exc))
    time.sleep(0.02)
print(json.dumps({"started": started, "failures": failures}))
"""


def _bounded(what: str) -> None:
    tree = prepare(SandboxLimits())
    try:
        if what == "processes" and not tree.processes_bounded:
            pytest.skip("no pids cgroup and running as root: processes are not bounded here")
        if what == "memory" and not tree.memory_bounded:
            pytest.skip("no memory cgroup here: memory is bounded per process only")
    finally:
        tree.close()


def test_finding_10_a_fork_bomb_ends_within_the_timeout_and_the_host_keeps_forking(lab, tmp_path):
    _bounded("processes")
    _settings(lab, {"limits": STRICT})
    stop = tmp_path / "stop"
    outside = subprocess.Popen([sys.executable, "-c", _FORKER, str(stop)], stdout=subprocess.PIPE,
                               text=True)  # fmt: skip
    t0 = time.monotonic()
    try:
        res = lab.bash("f(){ f|f & }; f; sleep 60 # forkbomb-marker", "bypassPermissions",
                       timeout=3)  # fmt: skip
    finally:
        stop.touch()
        report, _ = outside.communicate(timeout=30)
    elapsed = time.monotonic() - t0
    assert "timed out after 3 s" in res.stdout
    assert elapsed < 3 + 10  # the timeout, plus the kill and the clean-up
    forked = json.loads(report)
    assert forked["failures"] == [] and forked["started"] > 10
    assert lab.none_left("forkbomb-marker")


def test_finding_10_memory_is_bounded_for_the_whole_tree(lab):
    _bounded("memory")
    _settings(lab, {"limits": STRICT})
    res = lab.bash(
        "python3 -c 'x = bytearray(2 * 1024**3); print(\"allocated\", len(x))'",
        "bypassPermissions", timeout=30,
    )  # fmt: skip
    assert "allocated 2147483648" not in res.stdout
    assert "Killed" in res.stdout or "MemoryError" in res.stdout or "SIGKILL" in res.stdout


def test_finding_10_file_size_and_tmp_are_bounded(lab):
    _settings(lab, {"limits": STRICT})
    res = lab.bash("head -c 3000000 /dev/zero > big.bin; ls -l big.bin", "bypassPermissions")
    assert (lab.ws / "big.bin").stat().st_size <= 2**20
    res = lab.bash("head -c 8000000 /dev/zero > $TMPDIR/x", "bypassPermissions")
    assert "File size limit exceeded" in res.stdout or "No space left" in res.stdout
    # Files of 1 MiB each (within the file size limit) fill /tmp only up to its 4 MiB.
    res = lab.bash("for i in 1 2 3 4 5 6; do head -c 1000000 /dev/zero > $TMPDIR/f$i; done; "
                   "du -sbx $TMPDIR | cut -f1", "bypassPermissions")  # fmt: skip
    # (-x: the tmpfs alone, not the folders bound back into it, such as a venv under /tmp)
    used = [int(line) for line in res.stdout.splitlines() if line.strip().isdigit()]
    assert "No space left" in res.stdout and used and used[-1] <= 4 * 2**20 + 65536


def test_finding_10_limits_can_be_raised_in_settings(lab):
    _settings(lab, {"limits": {"fileSize": "4M", "tmp": "16M"}})
    lab.bash("head -c 3000000 /dev/zero > big.bin", "bypassPermissions")
    assert (lab.ws / "big.bin").stat().st_size == 3000000
    res = lab.bash(
        "head -c 8000000 /dev/zero > $TMPDIR/x && wc -c < $TMPDIR/x", "bypassPermissions"
    )
    assert "8000000" in res.stdout


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="runs the sandbox as another user, which needs root")  # fmt: skip
def test_finding_10_as_a_normal_user_the_process_limit_counts_the_sandbox_only(tmp_path):
    """Unprivileged, RLIMIT_NPROC is set inside the sandbox's user namespace: it bounds the
    sandbox's processes, and the user's processes outside do not count against it."""
    from journal_agent.tools.sandbox import available_confinement

    conf = available_confinement()
    if not conf.active:
        pytest.skip("no sandbox")
    tree = prepare(SandboxLimits(processes=20))
    tree.close()
    inner = tree.inner
    outside = [subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                 "sleep", "20"]) for _ in range(30)]  # fmt: skip
    try:
        argv = [
            "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", conf.program or "bwrap",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-user",
            "--unshare-pid", "--die-with-parent", "--", "bash", "-c",
            f"{inner}n=0; for i in $(seq 10); do sleep 1 & done; wait; echo ten-ok; "
            "for i in $(seq 40); do sleep 2 & done 2>&1 | grep -m1 fork; wait",
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    finally:
        for p in outside:
            p.kill()
            p.wait()
    out = done.stdout + done.stderr
    assert "ten-ok" in out  # 30 processes of the same user outside did not count
    assert "bash: fork:" in out  # 40 inside did
