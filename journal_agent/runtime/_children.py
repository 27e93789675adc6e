"""Stopping the commands a run started when the run itself is stopped.

The Bash tool starts each command in a session of its own (so that it can kill the whole
group). A Bash call in a parallel sub-agent runs on a daemon thread; when the run ends by
Ctrl-C or a failed model call, nothing would stop those commands: they would outlive the
run (a training script, a benchmark) unseen. :func:`stop_started` kills exactly those: our
child processes that lead their own session and did not exist when the run began — never
anything the calling program started before.
"""

from __future__ import annotations

import contextlib
import os
import signal

GRACE_S = 2.0


def children() -> set[int]:
    import psutil

    try:
        return {p.pid for p in psutil.Process().children()}
    except psutil.Error:
        return set()


def stop_started(before: set[int]) -> list[int]:
    """SIGTERM (then SIGKILL) the process group of every new session-leading child."""
    import psutil

    try:
        procs = [
            p
            for p in psutil.Process().children()
            if p.pid not in before and os.getsid(p.pid) == p.pid
        ]
    except (psutil.Error, OSError):
        return []
    for p in procs:
        _signal_group(p.pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=GRACE_S)
    for p in alive:
        _signal_group(p.pid, signal.SIGKILL)
    return [p.pid for p in procs]


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
