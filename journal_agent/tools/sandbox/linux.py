"""The bubblewrap command line for one :class:`~.view.View`."""

from __future__ import annotations

import os
from pathlib import Path

from journal_agent.tools.sandbox.view import View

# Every command: its own user namespace that cannot create more (so no mount tricks to undo
# the read-only binds), no capabilities even when run as root, its own PID, IPC and UTS
# namespaces (it sees only its own processes, and cannot signal ours), killed when we die,
# and a new session (no TIOCSTI into a terminal). bwrap sets no_new_privs itself.
BASE_FLAGS = (
    "--unshare-user",
    "--disable-userns",
    "--cap-drop", "ALL",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--new-session",
)  # fmt: skip
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def bwrap_argv(bwrap: str, view: View, argv: list[str], keep: tuple[Path, ...] = ()) -> list[str]:
    """``bwrap … -- argv``: the filesystem read-only, a private /tmp, then ``view`` on top.

    ``keep``: paths under the private temp directories that must stay visible (the Python
    environment running us, should it live in /tmp).
    """
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for tmp in PRIVATE_TMP:
        args += ["--tmpfs", tmp]
    hidden_by_tmp = [p for p in (view.root, *keep) if _under_tmp(p) and p.exists()]
    for p in hidden_by_tmp:
        args += ["--ro-bind", str(p), str(p)]
    for p in view.writable:
        args += ["--bind", str(p), str(p)]
    for p in view.read_only:
        args += ["--ro-bind", str(p), str(p)]
    for p in view.rewritable:
        args += ["--bind", str(p), str(p)]
    for p in view.masked:
        if p.is_dir() and not p.is_symlink():
            args += ["--tmpfs", str(p), "--remount-ro", str(p)]
        elif os.path.lexists(p) and not p.is_symlink():
            args += ["--ro-bind", "/dev/null", str(p)]
    args += BASE_FLAGS
    if not view.network:
        args.append("--unshare-net")
    args += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(view.root), "--", *argv]
    return args


def _under_tmp(p: Path) -> bool:
    return any(p == Path(t) or Path(t) in p.parents for t in PRIVATE_TMP)
