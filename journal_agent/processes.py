"""Stopping a process group: the one way journal_agent kills a command and everything it started.

The Bash tool starts each command in a session of its own, so the command's process group holds
the command and its background children. :func:`stop_groups` sends the groups SIGTERM, waits a
grace period for them to go, then SIGKILLs what is left. Used by the Bash tool (timeout,
interrupt, left-behind children) and by the runtime (commands still running when a run stops).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable

_POLL_S = 0.02


def stop_groups(
    pgids: Iterable[int],
    grace_s: float,
    *,
    leaders: Iterable[subprocess.Popen[bytes] | subprocess.Popen[str]] = (),
) -> list[int]:
    """SIGTERM each process group, SIGKILL what is left after ``grace_s``; return the groups hit.

    ``leaders`` are our own ``Popen`` objects among them: they are reaped before returning, so
    no zombie of ours is left. A group that no longer exists is skipped.
    """
    hit = [pgid for pgid in pgids if _signal(pgid, signal.SIGTERM)]
    procs = list(leaders)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if all(p.poll() is not None for p in procs) and not any(map(group_alive, hit)):
            break
        time.sleep(_POLL_S)
    for pgid in hit:
        _signal(pgid, signal.SIGKILL)
    for p in procs:
        if p.poll() is None:
            p.wait()
    return hit


def group_alive(pgid: int) -> bool:
    """Is any live (non-zombie) process left in the group?

    ``killpg(pgid, 0)`` also succeeds for zombies, which linger when the container's init
    does not reap orphans; /proc tells them apart.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state, ppid, pgrp, ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _signal(pgid: int, sig: signal.Signals) -> bool:
    with contextlib.suppress(PermissionError):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return False
    return True
