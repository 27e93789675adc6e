"""The one way journal_agent replaces a file that a reader, or a crash, must only ever see whole.

A temp file in the same directory (so the rename cannot cross file systems), its bytes fsynced,
``os.replace`` over the target, then the directory fsynced (the rename is durable only once the
directory entry is on disk). The target keeps its permission bits; a new file gets the usual
``0o666 & ~umask``. The temp file is removed on any failure, so a failed write leaves the old
file and nothing beside it. Callers that must not follow symlinks on the way to the directory
(the Write tool) open the directory themselves and pass ``dir_fd``.

``profiling`` keeps its own copy (``profiling.records``): it must not import journal_agent.
"""

from __future__ import annotations

import os
import stat

# Neither pathlib nor contextlib at import time: the Claude Code hooks write through this module
# under ``python3 -I -S``, and the two cost each hook several milliseconds (docs/plugin.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

# Temp files are ``.<name>.tmp-<random>``: hidden, next to the target, findable by
# :func:`remove_stale_temps`. The name is cut so the temp name fits NAME_MAX.
TEMP_MARK = ".tmp-"
_NAME_KEPT = 64
# (The random part comes from os.urandom, as secrets.token_hex would give it: the Claude Code
# hooks write through this module, and importing secrets costs each of them milliseconds.)


def atomic_write(
    path: Path | str, data: bytes | str, *, dir_fd: int | None = None, durable: bool = True
) -> os.stat_result:
    """Replace ``path`` with ``data``; return the stat of the file as written.

    ``data`` as ``str`` is written as UTF-8. With ``dir_fd`` (a descriptor of ``path``'s
    directory) only the file name of ``path`` is used and no directory is created; without it
    the missing parent directories are created. ``durable=False`` skips the fsyncs, for caches
    that may be lost. Raises ``OSError``; the temp file is gone by then.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder, name = os.path.split(os.fspath(path))
    if dir_fd is not None:
        return _write_in(dir_fd, name, data, durable)
    folder = folder or "."
    os.makedirs(folder, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _write_in(fd, name, data, durable)
    finally:
        os.close(fd)


def _write_in(dir_fd: int, name: str, data: bytes, durable: bool) -> os.stat_result:
    try:
        mode = stat.S_IMODE(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    tmp = f".{name[:_NAME_KEPT]}{TEMP_MARK}{os.urandom(6).hex()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:  # noqa: SIM105 (contextlib costs the hooks an import)
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    if durable:
        try:  # noqa: SIM105
            os.fsync(dir_fd)
        except OSError:
            pass  # some file systems refuse fsync on a directory
    return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


def remove_stale_temps(path: Path) -> None:
    """Remove temp files of ``path`` left by a writer that was killed mid-write.

    Call it only under the lock that serializes the writers of ``path``.
    """
    for stale in path.parent.glob(f".{path.name[:_NAME_KEPT]}{TEMP_MARK}*"):
        try:  # noqa: SIM105
            stale.unlink()
        except OSError:
            pass


def _umask() -> int:
    # Read from /proc: os.umask() would change it process-wide for a moment, racing other threads.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
