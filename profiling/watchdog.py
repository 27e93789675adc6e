"""What goes when its owner dies, however it dies: processes it started, temp folders, cgroups.

A process that starts children and makes temp folders cleans up in ``finally`` — which never
runs when it is killed (SIGKILL, an OOM kill, SIGTERM without a handler). Killing
``profile --nproc 2`` left torchrun and both ranks running and its folders in /tmp; killing a
host that sandboxes a command left the call's outbox and device nodes there.

The watchdog is a small process of its own (``python -I -S``, a session of its own so that
Ctrl-C and a kill of the owner's process group do not reach it), started on first use, one per
owner process. The owner tells it, one line at a time through a pipe only the owner holds,
what to take care of; when the pipe closes — the owner ended, by any means — it:

- stops every process that carries the owner's mark in its environment (``mark()``:
  ``JOURNAL_AGENT_OWNER=<token>``, which everything a child starts inherits; torchrun puts each
  rank in a session of its own, so no process group holds them all): SIGTERM, then SIGKILL
  after a grace period;
- kills what is left in each cgroup given and removes it (``cgroup()``);
- removes each temp folder given (``folder()``).

What the owner cleans up itself it takes back (``release()``), so the watchdog never touches a
folder or a mark after the owner is done with it. Standard library only; Linux's /proc finds the
marked processes (elsewhere the marks are ignored and the folders still go).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

OWNER_ENV = "JOURNAL_AGENT_OWNER"

# The watchdog itself: reads commands until EOF, then does what is left of them.
_WATCHDOG = r"""
import os, shutil, signal, sys, time
ENV, GRACE = sys.argv[1], float(sys.argv[2])
marks, cgroups, folders = set(), set(), set()
for line in sys.stdin.buffer:
    verb, _, arg = line.rstrip(b"\n").decode("utf-8", "surrogateescape").partition("\t")
    kind = {"mark": marks, "cgroup": cgroups, "folder": folders}.get(verb.lstrip("-"))
    if kind is not None:
        (kind.discard if verb.startswith("-") else kind.add)(arg)

def marked():
    if not marks or not os.path.isdir("/proc"):
        return []
    wanted = [("%s=%s" % (ENV, m)).encode() + b"\0" for m in marks]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as f:
                env = b"\0" + f.read()
        except OSError:
            continue
        if any(b"\0" + w in env for w in wanted):
            found.append(int(entry))
    return found

def members(cg):
    try:
        with open(os.path.join(cg, "cgroup.procs")) as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []

def kill(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass

kill(marked(), signal.SIGTERM)
deadline = time.monotonic() + GRACE
while marked() and time.monotonic() < deadline:
    time.sleep(0.05)
for _ in range(50):
    left = marked() + [p for cg in cgroups for p in members(cg)]
    if not left:
        break
    kill(left, signal.SIGKILL)
    time.sleep(0.02)
for cg in cgroups:
    try:
        os.rmdir(cg)
    except OSError:
        pass
for folder in folders:
    shutil.rmtree(folder, ignore_errors=True)
"""
GRACE_S = 3.0  # between SIGTERM and SIGKILL for marked processes (torchrun stops its ranks)

_lock = threading.Lock()
_state: dict[str, object] = {}  # "proc": the watchdog of process "pid", or None (cannot run)


def _send(verb: str, arg: str, *, start: bool = True) -> None:
    """Give the watchdog one line, starting it first (``start``) if it is not running."""
    line = f"{verb}\t{arg}\n".encode("utf-8", "surrogateescape")
    with _lock:
        if _state.get("pid") != os.getpid():  # none yet, or a fork of the owner: its own
            _state.clear()
        if "proc" not in _state:
            if not start:
                return
            _state.update(pid=os.getpid(), proc=_start())
        proc = _state["proc"]
        if not isinstance(proc, subprocess.Popen) or proc.stdin is None:
            return  # no watchdog here: what it would do is done by the owner's finally only
        try:
            proc.stdin.write(line)
            proc.stdin.flush()
        except (OSError, ValueError):
            pass


def _start() -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, OWNER_ENV, str(GRACE_S)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None


def mark() -> str:
    """A new mark: put ``{OWNER_ENV: mark}`` in the environment of what you start; every process
    carrying it is stopped when this process ends, unless :func:`release` comes first."""
    token = secrets.token_hex(8)
    _send("mark", token)
    return token


def folder(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` (a temp folder of ours) when this process ends, unless released."""
    _send("folder", str(Path(path).absolute()))


def cgroup(path: str | os.PathLike[str]) -> None:
    """Kill what is in the cgroup ``path`` and remove it when this process ends, unless released."""
    _send("cgroup", str(Path(path).absolute()))


def release(*, mark: str | None = None, folder: str | os.PathLike[str] | None = None,
            cgroup: str | os.PathLike[str] | None = None) -> None:  # fmt: skip
    """Take back what the owner has cleaned up itself."""
    if mark is not None:
        _send("-mark", mark, start=False)
    if folder is not None:
        _send("-folder", str(Path(folder).absolute()), start=False)
    if cgroup is not None:
        _send("-cgroup", str(Path(cgroup).absolute()), start=False)


__all__ = ["GRACE_S", "OWNER_ENV", "cgroup", "folder", "mark", "release"]
