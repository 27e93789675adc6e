"""Issue #29, bounds: killing `profile --nproc 2` (SIGTERM, SIGKILL, Ctrl-C) left torchrun and
both ranks running, and device nodes / outbox folders in /tmp.

Now torchrun runs in a session of its own with a temp folder of its own, each rank asks the
kernel to kill it when torchrun dies (PR_SET_PDEATHSIG), and a watchdog process
(profiling/watchdog.py) stops every process of the launch and removes its folders when the
parent ends — by any signal. A sandboxing host's outbox and device-node folders go the same way.

Each test kills the parent for real and looks at the machine afterwards.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from journal_agent.tools.sandbox import SandboxSettings, available_confinement
from tests.processes import none_left, running


def _environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k.decode(): v.decode(errors="replace") for k, _, v in pairs}


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").replace("\0", " ")
    except OSError:
        return ""


def _ranks(root: Path, parent: int) -> list[int]:
    """The two ranks, once both run torch."""
    found = [p for p in running(str(root)) if p != parent]
    ranks = [p for p in found if "torch.distributed.run" not in _cmdline(p)]
    return ranks if len(ranks) == 2 and all(map(_torch_loaded, ranks)) else []


def _torch_loaded(pid: int) -> bool:
    """A rank well into its work: torch's library is mapped (seconds after it started)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "libtorch" in f.read()
    except OSError:
        return False


def _wait_for(what, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.2)
    return None


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT],
                         ids=["SIGKILL", "SIGTERM", "Ctrl-C"])  # fmt: skip
def test_finding_killed_profile_nproc_leaves_no_rank_and_no_temp_folder(cli, tmp_path, sig):
    root = tmp_path / f"ranks-{sig.name}"  # in every rank's command line: finds them
    root.mkdir()
    args = ["profile", "--model", "tiny-gpt2", "--nproc", "2", "--steps", "100000",
            "--warmup", "0", "--no-trace", "--root", str(root)]  # fmt: skip
    # Its own process group, as a shell runs a foreground job: Ctrl-C signals the group.
    parent = subprocess.Popen(cli.command(*args), env=cli.environment(), cwd=root,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        ranks = _wait_for(lambda: _ranks(root, parent.pid), seconds=240)
        assert ranks, "the ranks never started"
        folder = Path(_environ(ranks[0]).get("TMPDIR", ""))
        assert folder.name.startswith("journal-agent-ranks-") and folder.is_dir()
        assert any(folder.iterdir())  # torchrun's own logs are in there, not loose in /tmp
        if sig == signal.SIGINT:
            os.killpg(parent.pid, sig)
        else:
            parent.send_signal(sig)
        parent.wait(timeout=60)
        assert none_left(str(root), wait_s=30), f"left running: {running(str(root))}"
        assert _wait_for(lambda: not folder.exists(), seconds=15), f"{folder} remains"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


@pytest.mark.parametrize(
    ("tool", "call", "marker", "made_kind"),
    [
        # A command: the device nodes the sandbox binds (made when we run as root).
        ("Bash", {"command": "sleep 86399"}, "sleep 86399", "dev"),
        # A measuring child: the outbox its records come back through.
        ("MemoryTrace", {"model": "hf:llama-3.1-70b", "timeout": 599.25}, "599.25", "outbox"),
    ],
)
def test_finding_a_killed_sandboxing_host_leaves_no_folder_in_tmp(
    cli, tmp_path, tool, call, marker, made_kind
):
    if not available_confinement(SandboxSettings(), tmp_path).active:
        pytest.skip("no sandbox on this machine: nothing is made in /tmp for a call")
    if made_kind == "dev" and os.geteuid() != 0:
        pytest.skip("the sandbox makes device nodes of its own only when run as root")
    host = subprocess.Popen(
        cli.command("tool", tool, json.dumps(call), "--root", str(tmp_path),
                    "--mode", "bypassPermissions"),
        env=cli.environment(), cwd=tmp_path, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:

        def cmdlines() -> str:
            return " ".join(_cmdline(pid) for pid in running(marker))

        # bubblewrap's command line holds the binds of the call's folders.
        wanted = f"/tmp/journal-agent-{made_kind}-"
        line = _wait_for(lambda: cmdlines() if wanted in cmdlines() else "", seconds=120)
        assert line, "the command never started"
        made = {Path(m) for m in re.findall(r"/tmp/journal-agent-(?:outbox|dev)-\w+", line)}
        assert made and all(p.exists() for p in made)
        host.kill()  # SIGKILL: no finally, no atexit
        host.wait(timeout=30)
        assert none_left(marker, wait_s=30)
        assert _wait_for(lambda: not any(p.exists() for p in made), seconds=15), made
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


def test_a_rank_never_outlives_torchrun(cli, tmp_path):
    # torchrun SIGKILLed alone (it cannot stop its ranks): the kernel ends them
    # (PR_SET_PDEATHSIG), and the parent says the run failed and cleans up.
    root = tmp_path / "ranks-torchrun"
    root.mkdir()
    args = ["profile", "--model", "tiny-gpt2", "--nproc", "2", "--steps", "100000",
            "--warmup", "0", "--no-trace", "--root", str(root)]  # fmt: skip
    parent = subprocess.Popen(cli.command(*args), env=cli.environment(), cwd=root,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        ranks = _wait_for(lambda: _ranks(root, parent.pid), seconds=240)
        assert ranks, "the ranks never started"
        folder = Path(_environ(ranks[0]).get("TMPDIR", ""))
        torchrun = [p for p in running(str(root)) if "torch.distributed.run" in _cmdline(p)]
        assert len(torchrun) == 1
        os.kill(torchrun[0], signal.SIGKILL)
        assert _wait_for(lambda: not any(map(_torch_loaded, ranks)), seconds=10)
        _, err = parent.communicate(timeout=60)
        assert parent.returncode == 1
        assert err.strip() == (
            "error: torchrun was killed by SIGKILL; its ranks were stopped with it and nothing "
            "was measured"
        )
        assert none_left(str(root), wait_s=10)
        assert not folder.exists()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
