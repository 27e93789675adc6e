"""Bounds on every sandboxed process tree: processes, memory, file size, time, /tmp.

What works depends on who we are, and both are used where they can be:

- **A cgroup of its own per call** (``pids.max``, and ``memory.max`` / v1's
  ``memory.limit_in_bytes``), when we may make one under our own cgroup: root with cgroup v1
  controllers, or a delegated cgroup v2 subtree that has the controllers enabled. It bounds the
  whole tree, whoever it runs as. The tree joins it through a tiny ``sh`` that writes its own
  pid into ``cgroup.procs`` and then execs bubblewrap, so nothing forks before it is in.
- **Resource limits set inside the sandbox** (bash's ``ulimit``, after bubblewrap made the
  user namespace): ``RLIMIT_FSIZE`` (one file's size) for everyone; ``RLIMIT_NPROC``, which
  the kernel counts per user *namespace* since 5.14, so inside the sandbox's own namespace it
  counts the sandbox's processes only — but root (uid 0) is exempt from it, hence the cgroup;
  and, when no cgroup bounds memory, ``RLIMIT_DATA`` per process.
- **Time**: the call's timeout ends the sandbox's PID namespace, which kills every process in
  it (:mod:`journal_agent.tools.bash`).
- **/tmp, /var/tmp, /dev/shm**: tmpfs of a bounded size (``--size``), charged to the
  cgroup's memory where there is one.

Settings: ``sandbox.limits`` (see :class:`~.config.SandboxLimits` and docs/security.md).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from journal_agent.tools.sandbox.config import SandboxLimits

log = logging.getLogger(__name__)

_PREFIX = "journal-agent-"
_counter = itertools.count()
_EXIT_WAIT_S = 2.0


@dataclass
class TreeLimits:
    """The bounds of one call: its cgroups (made for it) and the ``ulimit`` line run first
    inside the sandbox."""

    cgroups: list[Path] = field(default_factory=list)
    inner: str = ""
    processes_bounded: bool = False
    memory_bounded: bool = False

    def outer(self, argv: list[str]) -> list[str]:
        """``argv`` started by a ``sh`` that first moves itself into the cgroups."""
        if not self.cgroups:
            return argv
        joins = "".join(f'echo $$ > "${i}" || exit 125; ' for i in range(1, len(self.cgroups) + 1))
        script = f'{joins}shift {len(self.cgroups)}; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *(str(c / "cgroup.procs") for c in self.cgroups),
                *argv]  # fmt: skip

    def wrap_inner(self, argv: list[str]) -> list[str]:
        """``argv`` run by a bash that sets the resource limits first (inside the sandbox)."""
        if not self.inner:
            return argv
        return ["bash", "-c", f'{self.inner}exec "$@"', "bash", *argv]

    def close(self) -> None:
        """Kill what is left in the cgroups (nothing, normally: the PID namespace ended) and
        remove them."""
        from profiling import watchdog

        for cg in self.cgroups:
            _remove(cg)
            watchdog.release(cgroup=cg)
        self.cgroups = []


def prepare(limits: SandboxLimits) -> TreeLimits:
    """Make the cgroups of one call and the ``ulimit`` line, as far as this machine allows."""
    tree = TreeLimits()
    memory = limits.memory_bytes()
    name = f"{_PREFIX}{os.getpid()}-{next(_counter)}"
    if limits.processes is not None:
        cg = _make(_controller_dir("pids"), name, {"pids.max": limits.processes})
        if cg is not None:
            tree.cgroups.append(cg)
            tree.processes_bounded = True
    if memory is not None:
        v2 = _controller_version("memory") == 2
        key = "memory.max" if v2 else "memory.limit_in_bytes"
        cg = _make(_controller_dir("memory"), name, {key: memory}, reuse=tree.cgroups)
        if cg is not None:
            if cg not in tree.cgroups:
                tree.cgroups.append(cg)
            if v2:
                with contextlib.suppress(OSError):
                    (cg / "memory.swap.max").write_text("0")
            tree.memory_bounded = True
    if tree.cgroups:
        from profiling import watchdog

        for cg in tree.cgroups:  # killed before close(): the watchdog empties and removes them
            watchdog.cgroup(cg)
    tree.inner = _ulimits(limits, memory, memory_in_cgroup=tree.memory_bounded)
    # Unprivileged, RLIMIT_NPROC counts the sandbox's own user namespace only.
    tree.processes_bounded = tree.processes_bounded or (
        limits.processes is not None and os.geteuid() != 0
    )
    return tree


def _ulimits(limits: SandboxLimits, memory: int | None, memory_in_cgroup: bool) -> str:
    # bash's ulimit sets the soft and the hard limit; without CAP_SYS_RESOURCE nothing inside
    # can raise them again. A limit already lower stays (the error is silenced).
    parts = []
    if limits.processes is not None:
        parts.append(f"ulimit -u {limits.processes}")
    if limits.file_size is not None:
        parts.append(f"ulimit -f {max(1, limits.file_size // 1024)}")  # 1024-byte blocks
    if memory is not None and not memory_in_cgroup:
        parts.append(f"ulimit -d {max(1, memory // 1024)}")  # KiB, per process
    return "".join(f"{p} 2>/dev/null; " for p in parts)


def _make(
    parent: Path | None, name: str, values: dict[str, int], reuse: Sequence[Path] = ()
) -> Path | None:
    """A new cgroup ``name`` under ``parent`` with ``values`` written; None if not allowed."""
    if parent is None:
        return None
    path = parent / name
    for existing in reuse:  # cgroup v2: one directory carries every controller
        if existing == path:
            try:
                for key, value in values.items():
                    (path / key).write_text(str(value))
            except OSError:
                return None
            return path
    try:
        path.mkdir()
    except OSError as exc:
        log.debug("no cgroup under %s: %s", parent, exc)
        return None
    try:
        for key, value in values.items():
            (path / key).write_text(str(value))
    except OSError as exc:
        log.debug("cgroup %s cannot be limited: %s", path, exc)
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    return path


def _remove(cg: Path) -> None:
    deadline = time.monotonic() + _EXIT_WAIT_S
    while True:
        try:
            cg.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            pass
        for pid in _pids(cg):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            log.debug("cgroup %s still busy; left for the next start to remove", cg)
            return
        time.sleep(0.01)


def _pids(cg: Path) -> list[int]:
    try:
        return [int(x) for x in (cg / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


# -- where our cgroups are ---------------------------------------------------------------------


@lru_cache(maxsize=4)
def _controller_dir(controller: str) -> Path | None:
    """The directory of our own cgroup in which a child cgroup gets ``controller``."""
    found = _own_cgroups().get(controller)
    if found is None:
        return None
    path, version = found
    if version == 2:
        try:
            enabled = (path / "cgroup.subtree_control").read_text().split()
        except OSError:
            return None
        if controller not in enabled:
            return None
    if not os.access(path, os.W_OK):
        return None
    _remove_stale(path)
    return path


def _controller_version(controller: str) -> int | None:
    found = _own_cgroups().get(controller)
    return found[1] if found else None


@lru_cache(maxsize=1)
def _own_cgroups() -> dict[str, tuple[Path, int]]:
    """controller → (our cgroup's directory, hierarchy version), from /proc/self."""
    try:
        cgroup_lines = Path("/proc/self/cgroup").read_text().splitlines()
        mount_lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return {}
    mounts: dict[str, tuple[str, str]] = {}  # controller (or "" for v2) → (mount root, point)
    for line in mount_lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] == "cgroup2":
            mounts.setdefault("", (fields[3], fields[4]))
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                mounts.setdefault(option, (fields[3], fields[4]))
    out: dict[str, tuple[Path, int]] = {}
    for line in cgroup_lines:
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        names = controllers.split(",") if controllers else [""]
        for name in names:
            mount = mounts.get(name)
            if mount is None:
                continue
            root, point = mount
            rel = path[len(root) :] if path.startswith(root) and root != "/" else path
            where = Path(point) / rel.lstrip("/")
            if hid == "0" and name == "":
                for ctrl in ("pids", "memory"):
                    out.setdefault(ctrl, (where, 2))
            else:
                out[name] = (where, 1)
    return out


def _remove_stale(parent: Path) -> None:
    """Cgroups an earlier journal-agent left (killed before it could remove them)."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            if not entry.name.startswith(_PREFIX):
                continue
            pid = entry.name[len(_PREFIX) :].split("-")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(OSError):
                    entry.rmdir()


def describe(limits: SandboxLimits) -> str:
    """One line for ``journal-agent doctor``: what bounds a sandboxed tree here."""
    tree = prepare(limits)
    try:
        said = []
        if limits.processes is not None:
            how = "cgroup" if any((c / "pids.max").exists() for c in tree.cgroups) else "rlimit"
            said.append(
                f"{limits.processes} processes ({how})"
                if tree.processes_bounded
                else "processes NOT bounded (root without a pids cgroup)"
            )
        memory = limits.memory_bytes()
        if memory is not None:
            said.append(
                f"{_size(memory)} memory "
                + ("for the tree (cgroup)" if tree.memory_bounded else "per process (rlimit)")
            )
        if limits.file_size is not None:
            said.append(f"{_size(limits.file_size)} per file")
        if limits.tmp is not None:
            said.append(f"{_size(limits.tmp)} per /tmp")
        return "; ".join(said) or "no limits"
    finally:
        tree.close()


def _size(n: int) -> str:
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n} B"
