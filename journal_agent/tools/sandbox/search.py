"""ripgrep for Grep and Glob, in a view of the filesystem that holds the workspace alone.

rg does not follow symlinks, but a directory swapped for a symlink while rg walks the tree is
opened through the link: an adversarial test leaked files from outside the workspace in 40 of
1,000 Grep and 15 of 1,000 Glob calls that way. Inside this view there is nothing outside the
workspace to lead to: only the workspace (read-only), the system's library directories rg
needs to start (``/usr``, read-only), and the rg binary itself.

Only the mount namespace is new (with a user namespace that cannot make more, no
capabilities): a PID or network namespace would add cost and protect nothing here, since rg
is our own program with our own arguments.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from journal_agent.tools.sandbox.confinement import available_confinement

_SYSTEM = ("usr", "lib", "lib64", "lib32", "bin", "sbin")


def search_argv(argv: list[str], root: Path, cwd: Path) -> list[str]:
    """``argv`` (rg and its arguments) to run with only ``root`` visible; unchanged when
    bubblewrap is not available (the path checks of Grep and Glob still stand then)."""
    conf = available_confinement(None, root)
    if conf.kind != "bubblewrap" or conf.program is None:
        return argv
    exe = os.path.realpath(argv[0])
    root_s = os.path.realpath(root)
    return [
        conf.program,
        *_system_binds(),
        "--ro-bind", root_s, root_s,
        "--ro-bind", exe, exe,
        "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
        "--die-with-parent",
        "--chdir", os.path.realpath(cwd),
        "--", exe, *argv[1:],
    ]  # fmt: skip


@lru_cache(maxsize=1)
def _system_binds() -> tuple[str, ...]:
    out: list[str] = []
    for name in _SYSTEM:
        path = Path("/", name)
        if path.is_symlink():
            out += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            out += ["--ro-bind", str(path), str(path)]
    if os.path.exists("/etc/ld.so.cache"):
        out += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return tuple(out)
