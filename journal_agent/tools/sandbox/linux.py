"""The bubblewrap command line for one :class:`~.view.View`."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from journal_agent.tools.sandbox.view import View

# Every command: its own user namespace that cannot create more (so no mount tricks to undo
# the read-only binds), no capabilities even when run as root, its own PID and IPC namespaces
# (it sees only its own processes and shared memory, and cannot signal ours), killed when we
# die, and a new session (no TIOCSTI into a terminal). bwrap sets no_new_privs itself. Not
# unshared, each costing milliseconds per call for little: UTS (without capabilities the
# hostname cannot be changed anyway) and the cgroup namespace (it only hides the cgroup path).
BASE_FLAGS = (
    "--unshare-user",
    "--disable-userns",
    "--cap-drop", "ALL",
    "--unshare-pid",
    "--unshare-ipc",
    "--die-with-parent",
    "--new-session",
)  # fmt: skip
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def bwrap_argv(
    bwrap: str,
    view: View,
    argv: list[str],
    keep: tuple[Path, ...] = (),
    *,
    tmp_size: int | None = None,
    binds: tuple[tuple[Path, Path], ...] = (),
) -> list[str]:
    """``bwrap … -- argv``: the filesystem read-only, a private /tmp, then ``view`` on top.

    ``keep``: paths under the private temp directories that must stay visible (the Python
    environment running us, should it live in /tmp). ``tmp_size``: bytes of each private temp
    directory (a tmpfs, held in memory). ``binds``: writable (host, inside) pairs on top.
    """
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", *_own_device_nodes(), *_gpu_nodes(),
            "--proc", "/proc"]  # fmt: skip
    for tmp in PRIVATE_TMP:
        if tmp_size is not None:
            args += ["--size", str(tmp_size)]
        args += ["--tmpfs", tmp]
    for host, inside in binds:
        args += ["--bind", str(host), str(inside)]
    hidden_by_tmp = [p for p in (view.root, *keep) if _under_tmp(p) and p.exists()]
    for p in hidden_by_tmp:
        args += ["--ro-bind", str(p), str(p)]
    for p in view.writable:
        args += ["--bind", str(p), str(p)]
    for p in (*view.read_only, *view.ours):
        args += ["--ro-bind", str(p), str(p)]
    for p in view.rewritable:
        args += ["--bind", str(p), str(p)]
    if not view.network:
        # Folders under the private temporary directories that are bound back in (the Python
        # environment, allowWrite, the workspace's own binds) bring their sockets with them.
        back = (*hidden_by_tmp, *view.writable, *view.read_only, *view.rewritable)
        for p in host_sockets(
            view.root, view.allowed_sockets, tuple(b for b in back if _under_tmp(b))
        ):
            args += ["--ro-bind", "/dev/null", str(p)]
    for p in view.masked:
        if p.is_dir() and not p.is_symlink():
            args += ["--tmpfs", str(p), "--remount-ro", str(p)]
        elif os.path.lexists(p) and not p.is_symlink():
            args += ["--ro-bind", "/dev/null", str(p)]
    for copy, config in view.redacted:  # a git config's secrets, redacted (after its own bind)
        args += ["--ro-bind", str(copy), str(config)]
    args += BASE_FLAGS
    if not view.network:
        args.append("--unshare-net")
    args += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(view.root), "--", *argv]
    return args


def _gpu_nodes() -> tuple[str, ...]:
    """NVIDIA's device nodes, so that a measured run (and ``nvidia-smi``) sees the GPU: the
    sandbox's own /dev holds only the basic nodes. Changing a GPU's settings needs
    capabilities the sandbox does not have."""
    import glob

    nodes = sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/nvidia-caps/*"))
    return tuple(a for n in nodes if not os.path.isdir(n) for a in ("--dev-bind-try", n, n))


def host_sockets(
    root: Path, allowed: tuple[Path, ...] = (), bound_back: tuple[Path, ...] = ()
) -> list[Path]:
    """The Unix-domain sockets bound on this machine outside the workspace, which a command
    without network must not reach: a socket file is connectable through a read-only mount,
    and ``--unshare-net`` only separates the abstract ones. (``/run/docker.sock``, the user's
    D-Bus and ``$XDG_RUNTIME_DIR`` are where they usually live; /proc/net/unix lists every
    bound one of this network namespace.) Each is covered by /dev/null: a connect is refused.
    Those under the private temporary directories are hidden already, except in the folders
    ``bound_back`` into them (a virtual environment or an ``allowWrite`` folder under /tmp,
    where an ssh-agent's ``/tmp/ssh-*/agent.*`` may live); ``allowed``
    (``sandbox.network.allowUnixSockets``) stay reachable."""
    import stat

    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return []
    out: dict[Path, None] = {}
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) < 8 or not fields[7].startswith("/"):
            continue  # unnamed, or abstract ("@…": separated by the network namespace)
        path = Path(fields[7])
        if path in out or path in allowed or path == root or root in path.parents:
            continue
        if _under_tmp(path) and not any(b == path or b in path.parents for b in bound_back):
            continue
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                out[path] = None
        except OSError:
            continue
    return list(out)


def _under_tmp(p: Path) -> bool:
    return any(p == Path(t) or Path(t) in p.parents for t in PRIVATE_TMP)


_DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9),
            "tty": (5, 0)}  # fmt: skip
_NOBODY = 65534


@lru_cache(maxsize=1)
def _own_device_nodes() -> tuple[str, ...]:
    """When we run as root, bwrap's /dev/null is the host's node, which the sandboxed root owns:
    ``chmod 000 /dev/null`` inside would change it for the whole machine (a fuzz test did).
    Nodes of our own, owned by nobody, cannot be changed by a process without capabilities.
    Not needed for other users (they do not own the host's nodes); without the right to make
    device nodes (some containers), bwrap's own stay — ``journal-agent doctor`` says so."""
    if os.geteuid() != 0:
        return ()
    import atexit
    import shutil
    import stat
    import tempfile

    from profiling import watchdog

    base = Path(tempfile.mkdtemp(prefix="journal-agent-dev-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    watchdog.folder(base)  # however this process ends (atexit does not run on SIGKILL)
    args: list[str] = []
    try:
        for name, (major, minor) in _DEVICES.items():
            node = base / name
            os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
            os.chmod(node, 0o666)
            os.chown(node, _NOBODY, _NOBODY)
            args += ["--dev-bind", str(node), f"/dev/{name}"]
    except OSError:
        return ()
    return tuple(args)


def device_nodes_protected() -> bool:
    return os.geteuid() != 0 or bool(_own_device_nodes())
