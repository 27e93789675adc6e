"""Issue #29, bounds: the detached refresh child SessionStart starts ran 224 s of CPU with no
bound. It now runs under RLIMIT_CPU and RLIMIT_AS (journal_agent/capture/limits.py); meeting
either ends it with one line in .journal/hooks.log, and the cached status is left as it was.

``JOURNAL_AGENT_REFRESH_LIMITS`` lowers the limits (never raises them), so the tests run into
them in a second instead of two minutes.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from journal_agent.capture.limits import CPU_S, MEMORY_MB, limits
from tests.capture.hook_helpers import run_hook


def _costly_references(root: Path) -> None:
    """2,000 references whose lines changed, each looked for again in a 20,000-line file:
    about 30 s of CPU for the refresh child."""
    (root / "src").mkdir()
    (root / "src/a.py").write_text("".join(f"x_{i} = {i}\n" for i in range(20_000)))
    (root / ".journal").mkdir()
    with open(root / ".journal/refs.jsonl", "w") as f:
        for e in range(2_000):
            ref = f"src/a.py:{10 + e}-{12 + e}"
            f.write(json.dumps({"entry": f"e{e}", "refs": {ref: "f" * 16}}) + "\n")


def _children_of(root: Path) -> list[int]:
    """Live processes started for this project (the detached child carries it in its
    environment, not on its command line)."""
    marker = f"CLAUDE_PROJECT_DIR={root}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in environ and state != "Z":
            found.append(int(entry))
    return found


def _logged(root: Path, wait_s: float) -> str:
    log = root / ".journal" / "hooks.log"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().strip():
            return log.read_text()
        time.sleep(0.1)
    return ""


def test_finding_the_refresh_child_is_stopped_at_its_cpu_time_limit(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    _costly_references(root)
    # The real path: SessionStart sees no status yet and starts the detached child.
    done = run_hook("SessionStart", {"session_id": "s1", "source": "startup"}, root,
                    env={"JOURNAL_AGENT_REFRESH_LIMITS": "cpu=1"})  # fmt: skip
    assert done.returncode == 0 and done.stdout == b""
    said = _logged(root, wait_s=120)
    assert "refresh stopped at its CPU time limit (1 s)" in said, said
    assert "journal check" in said and len(said.splitlines()) == 1
    deadline = time.monotonic() + 10
    while _children_of(root) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _children_of(root) == []
    assert not (root / ".journal/capture/status.json").exists()  # nothing half computed saved


def test_finding_the_refresh_child_is_stopped_at_its_memory_limit(tmp_path):
    # A planted refs.jsonl line that decodes to a list of 20 million numbers (40 MB of text).
    (tmp_path / ".journal").mkdir()
    with open(tmp_path / ".journal/refs.jsonl", "w") as f:
        f.write('{"entry": "e1", "refs": {}, "pad": [' + "0," * 20_000_000 + "0]}\n")
    done = run_hook("refresh", b"", tmp_path, env={"JOURNAL_AGENT_HOOK": "1",
                    "JOURNAL_AGENT_REFRESH_LIMITS": "memory=96"}, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout == b"" and done.stderr == b""
    said = (tmp_path / ".journal/hooks.log").read_text()
    assert "refresh stopped at its memory limit (96 MiB)" in said, said
    assert len(said.splitlines()) == 1
    assert not (tmp_path / ".journal/capture/status.json").exists()


def test_the_limits_can_be_lowered_never_raised(monkeypatch):
    monkeypatch.setenv("JOURNAL_AGENT_REFRESH_LIMITS", "cpu=100000,memory=100000")
    assert limits() == (CPU_S, MEMORY_MB)
    monkeypatch.setenv("JOURNAL_AGENT_REFRESH_LIMITS", "cpu=3")
    assert limits() == (3, MEMORY_MB)
    monkeypatch.setenv("JOURNAL_AGENT_REFRESH_LIMITS", "memory=-5,cpu=zero")
    assert limits() == (CPU_S, MEMORY_MB)
