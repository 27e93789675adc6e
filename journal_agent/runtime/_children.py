"""Stopping the commands a run started when the run itself is stopped.

The Bash tool starts each command in a session of its own (so that it can kill the whole
group). A Bash call in a parallel sub-agent runs on a daemon thread; when the run ends by
Ctrl-C or a failed model call, nothing would stop those commands: they would outlive the
run (a training script, a benchmark) unseen. :func:`stop_started` kills exactly those: our
child processes that lead their own session and did not exist when the run began — never
anything the calling program started before.
"""

from __future__ import annotations

import os

from journal_agent.processes import stop_groups

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
    return stop_groups([p.pid for p in procs], GRACE_S)
