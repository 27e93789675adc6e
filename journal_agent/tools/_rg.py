"""Finding and running the ripgrep binary that the ``ripgrep`` wheel installs."""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from journal_agent.errors import ToolError

# Flags every search shares: .gitignore honoured even outside a git repository, hidden files
# searched (configs like .github/ matter) but never the VCS directory, no colour, no config file.
COMMON_FLAGS = (
    "--no-require-git",
    "--hidden",
    "--glob",
    "!.git",
    "--color",
    "never",
    "--no-config",
)
RG_TIMEOUT_S = 60


@lru_cache(maxsize=1)
def rg_binary() -> str:
    """The path of ``rg``: next to this Python first (the venv's wheel), then on PATH."""
    here = Path(sys.executable).parent / "rg"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("rg")
    if found:
        return found
    raise ToolError(
        "ripgrep (rg) is not installed, so Grep and Glob cannot run; install it with "
        "`pip install ripgrep==14.1.0` in this environment."
    )


def rg_command(args: list[str], cwd: Path, root: Path | None = None) -> list[str]:
    """The command line running rg with ``args`` in ``cwd``, inside a view of the filesystem
    that holds only the workspace ``root`` (default: ``cwd``)."""
    from journal_agent.tools.sandbox.search import search_argv

    return search_argv([rg_binary(), *COMMON_FLAGS, *args], root or cwd, cwd)


def run_rg(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            rg_command(args, cwd),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=RG_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ToolError(
            f"The search took longer than {RG_TIMEOUT_S} s and was stopped; narrow it with "
            "path, glob or type."
        ) from None
    except OSError as exc:
        raise ToolError(f"Could not run ripgrep: {exc.strerror}.") from None


def reject_nul(params: object) -> None:
    """A NUL byte cannot be passed to a program; say so instead of crashing in Popen."""
    for name, value in vars(params).items():
        if isinstance(value, str) and "\0" in value:
            raise ToolError(f"{name} contains a NUL byte, which ripgrep cannot take; remove it.")


def decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def rg_paths_by_mtime(
    args: list[str],
    cwd: Path,
    prefix: str = "",
    visible: Callable[[str], bool] | None = None,
    root: Path | None = None,
) -> tuple[list[str], int, str]:
    """Run rg printing NUL-separated paths; return them newest first, rg's code and stderr.

    Each path is stat'ed as soon as rg prints it, so our per-file work overlaps rg's own
    (multi-threaded) walk instead of following it. ``prefix`` is prepended to every path
    (the search directory relative to the workspace root); paths ``visible`` rejects are
    dropped.
    """
    base = str(cwd) + os.sep
    try:
        proc = subprocess.Popen(
            rg_command(["--null", *args], cwd, root),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        raise ToolError(f"Could not run ripgrep: {exc.strerror}.") from None
    assert proc.stdout is not None and proc.stderr is not None
    keyed: list[tuple[int, str]] = []
    err = bytearray()
    pending = b""
    deadline = time.monotonic() + RG_TIMEOUT_S
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        open_streams = 2
        while open_streams:
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise ToolError(
                    f"The search took longer than {RG_TIMEOUT_S} s and was stopped; narrow it "
                    "with path, glob or type."
                )
            for key, _ in sel.select(timeout=1.0):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                if key.fileobj is proc.stderr:
                    err += chunk
                    continue
                *done, pending = (pending + chunk).split(b"\0")
                for raw in done:
                    rel = prefix + raw.decode("utf-8", "replace")
                    if visible is None or visible(rel):
                        try:
                            mtime = os.stat(base + rel[len(prefix) :]).st_mtime_ns
                        except OSError:
                            mtime = 0
                        keyed.append((-mtime, rel))
    code = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    keyed.sort()
    return [p for _, p in keyed], code, decode(bytes(err))


class UnignoredFiles:
    """``rg --files`` with the ignore rules and no glob, run alongside a globbed search.

    rg's ``--glob`` overrides .gitignore: ``--glob '*.log'`` lists an ignored ``app.log``
    (directories stay pruned, files do not). Intersecting with this listing restores the
    rule. It runs concurrently, so it costs a second walk of CPU but little wall time.
    """

    def __init__(self, cwd: Path, paths: list[str] | None = None, prefix: str = "") -> None:
        self._prefix = prefix
        self._out = b""
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                rg_command(["--null", "--files", *(paths or [])], cwd),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise ToolError(f"Could not run ripgrep: {exc.strerror}.") from None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        self._out = self._proc.stdout.read()
        self._proc.stdout.close()
        self._proc.wait()

    def paths(self) -> set[str]:
        self._reader.join(RG_TIMEOUT_S)
        if self._reader.is_alive() and self._proc is not None:
            self._proc.kill()
            self._reader.join()
            raise ToolError(
                f"The search took longer than {RG_TIMEOUT_S} s and was stopped; narrow it "
                "with path, glob or type."
            )
        return {self._prefix + p for p in decode(self._out).split("\0") if p}

    def filter(self, visible: Callable[[str], bool] | None) -> Callable[[str], bool]:
        """A ``visible`` filter that also drops ignored files (waits for the listing once)."""
        keep: set[str] | None = None

        def check(rel: str) -> bool:
            nonlocal keep
            if keep is None:
                keep = self.paths()
            return rel in keep and (visible is None or visible(rel))

        return check
