"""The operating system's confinement of the commands the Bash tool runs (and of ripgrep for
Grep and Glob): bubblewrap on Linux, sandbox-exec on macOS. See docs/security.md.

- :mod:`.config`: the ``sandbox`` section of settings.json (Claude Code's shape);
- :mod:`.confinement`: which confinement this machine offers (found once per process);
- :mod:`.view`: what one command may write, what stays read-only inside that, what is hidden;
- :mod:`.linux` / :mod:`.macos`: the bubblewrap command line / the Seatbelt profile;
- :mod:`.call`: one sandboxed call from start to end (view, limits, outbox, quarantine);
- :mod:`.environment`: the allow-listed environment of every sandboxed process;
- :mod:`.limits`: bounds on the process tree (cgroups, resource limits, sized /tmp);
- :mod:`.guard`: protected paths a writing command created, moved into quarantine after it;
- :mod:`.history`: hidden paths committed to git (for ``journal-agent doctor``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from journal_agent.tools.sandbox.config import SandboxSettings
from journal_agent.tools.sandbox.confinement import Confinement, available_confinement, notice
from journal_agent.tools.sandbox.view import View, build_view

__all__ = [
    "Confinement",
    "SandboxSettings",
    "View",
    "available_confinement",
    "build_view",
    "confined_argv",
    "notice",
]


def confined_argv(
    conf: Confinement,
    view: View,
    argv: list[str],
    *,
    tmp_size: int | None = None,
    binds: tuple[tuple[Path, Path], ...] = (),
) -> list[str]:
    """``argv`` wrapped to run inside ``view`` under ``conf`` (which must be active).

    ``tmp_size``: the bytes of each private temporary directory; ``binds``: (host directory,
    path inside) made writable on top (the call's outbox, see .call)."""
    if conf.kind == "sandbox-exec":
        from journal_agent.tools.sandbox.macos import sandbox_exec_argv

        return sandbox_exec_argv(conf.program or "sandbox-exec", view, argv)
    from journal_agent.tools.sandbox.linux import bwrap_argv

    keep = (Path(sys.prefix), Path(sys.executable).parent, *own_source())
    return bwrap_argv(
        conf.program or "bwrap", view, argv, keep=keep, tmp_size=tmp_size, binds=binds
    )


def own_source() -> tuple[Path, ...]:
    """The folders our code and its dependencies are imported from. A sandboxed child of ours
    (a trace, a profile, our own commands) imports them, and the sandbox gives it a private
    /tmp: an editable checkout under /tmp or /var/tmp, or a folder a ``.pth`` file adds (a
    torch lent to the plugin's environment, dependencies lent to a venv), would be hidden
    without this (bwrap_argv binds back, read-only, those under the private folders). The
    child runs as ``python -I``: neither ``PYTHONPATH`` nor the current folder is on its path,
    so neither is bound here."""
    import journal_agent
    import profiling

    found = [os.path.dirname(p.__file__ or ".") for p in (journal_agent, profiling)]
    left_out = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)}
    left_out.add(os.path.realpath(os.getcwd()))
    # A private folder itself, bound back whole, would undo its privacy.
    from journal_agent.tools.sandbox.linux import PRIVATE_TMP

    left_out.update(os.path.realpath(t) for t in PRIVATE_TMP)
    found += [p for p in sys.path[1:] if p and os.path.isdir(p)]  # ([0]: the script's folder)
    out: list[Path] = []
    for folder in found:
        real = Path(os.path.realpath(folder))
        if str(real) not in left_out and real not in out:
            out.append(real)
    return tuple(out)
