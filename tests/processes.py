"""Which processes are still alive, seen from the host: for tests that check a command left
nothing behind. (Inside the sandbox a command sees its own PID namespace, so the pids it prints
mean nothing out here; a marker in the command line finds them.)"""

from __future__ import annotations

import os
import time


def running(marker: str) -> list[int]:
    """Host pids of live processes (not zombies) whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        # An orphan's zombie may linger if init does not reap it: it runs nothing.
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def none_left(marker: str, wait_s: float = 3.0) -> bool:
    """Whether every process with ``marker`` is gone within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while running(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(marker)
