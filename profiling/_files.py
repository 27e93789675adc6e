"""profiling's own few lines of ``journal_agent.confined``: profiling never imports journal_agent
(docs/architecture.md), yet its records live under a project's ``.journal/measurements/``, which
a cloned repository may have planted with links, and its reports go to a path the user named.

The same rule, the minimum of it: from an *anchor* trusted as given (the project above
``.journal/``, or the folder the user named), every folder is opened with ``O_NOFOLLOW |
O_DIRECTORY``; a file is read only when ``fstat`` says it is a regular file with one name
(opened ``O_NONBLOCK``: a FIFO never blocks), and written through a random temp name (``O_EXCL |
O_NOFOLLOW``), fsynced and renamed over the name (a link at the name is refused, never
followed). What is refused is :class:`profiling.errors.ProfilingError`, one sentence.
"""

from __future__ import annotations

import os
from pathlib import Path

from profiling._nofollow import kind_of, oddity, parts_of, walk_to
from profiling.errors import ProfilingError

_STATE = ".journal"  # (spelled here too: profiling cannot import journal_agent.paths)


def anchor_of(path: Path) -> Path:
    """The project above the last ``.journal`` in ``path``, else ``path``'s own folder."""
    for parent in (path, *path.parents):
        if parent.name == _STATE:
            return parent.parent
    return path.parent


def _refused(shown: Path, what: str) -> ProfilingError:
    aside = f"move it aside (`mv {shown} {shown}.aside`) and try again."
    if what == "a file":
        return ProfilingError(f"{shown} is a file where a folder belongs; {aside}")
    if what == "a directory":
        return ProfilingError(f"{shown} is a directory where a file belongs; {aside}")
    if what.startswith("a file with"):
        fix = f"give it a name of its own (`cp -p {shown} {shown}.copy && mv {shown}.copy {shown}`)"
    else:
        fix = f"remove it (`rm {shown}`)"
    return ProfilingError(
        f"{shown} is {what}, and a measurement file is only ever a plain file with one name "
        f"(and its folder a folder), never reached through a link; {fix} and try again."
    )


def _kind(st: os.stat_result) -> str | None:
    """What ``st`` is when it is not a plain file with one name (None when it is)."""
    return _plain(kind_of(st, want_dir=False))


def _what(dir_fd: int, name: str) -> str | None:
    what = oddity(dir_fd, name, want_dir=False)
    return None if what == "missing" else _plain(what)


def _plain(what: str | None) -> str | None:
    # (A socket or a device file: one kind for a measurement file.)
    return "a socket or device file" if what in _OTHER else what


_OTHER = ("a socket", "a device file", "not a regular file")


def open_dir(anchor: Path, folder: Path, *, create: bool) -> int | None:
    """A descriptor of ``folder`` (beneath ``anchor``) reached without following a link; None
    when it is missing and not made. The caller closes it."""
    rel = os.path.relpath(folder, anchor) if folder.is_absolute() else str(folder)
    parts = parts_of(rel)
    if parts is None:
        raise ValueError(f"{folder} is not beneath {anchor}")

    def refuse(done: str, fd: int, name: str) -> Exception:
        return _refused(Path(done), _what(fd, name) or "a file")

    try:
        return walk_to(anchor, parts, create=create, refuse=refuse)
    except FileNotFoundError:
        return None


def read(anchor: Path, path: Path) -> bytes | None:
    """The bytes of the plain file ``path``; None when it (or its folder) is missing."""
    dir_fd = open_dir(anchor, path.parent, create=False)
    if dir_fd is None:
        return None
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(path.name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError:
            raise _refused(path, _what(dir_fd, path.name) or "not a plain file") from None
    finally:
        os.close(dir_fd)
    try:  # (before fdopen, which raises IsADirectoryError for a folder planted there)
        what = _kind(os.fstat(fd))
        if what is not None:
            raise _refused(path, what)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        return f.read()


def names(anchor: Path, folder: Path) -> list[str]:
    """The names in ``folder`` (sorted), [] when it is missing."""
    fd = open_dir(anchor, folder, create=False)
    if fd is None:
        return []
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


def replace(anchor: Path, path: Path, data: bytes) -> None:
    """Write ``data`` as ``path`` whole: random temp name, fsync, rename (folders made)."""
    dir_fd = open_dir(anchor, path.parent, create=True)
    assert dir_fd is not None  # (made)
    try:
        odd = _what(dir_fd, path.name)
        if odd is not None:
            raise _refused(path, odd)
        tmp = f".{path.name[:64]}.tmp-{os.urandom(6).hex()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o666, dir_fd=dir_fd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:  # noqa: SIM105
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            raise
    finally:
        os.close(dir_fd)
