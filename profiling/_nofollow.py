"""Reaching a name beneath an anchor without following a link, and telling what a name is when
it cannot be a plain file of ours: the one home of these refusals for both packages.

:mod:`journal_agent._confined_walk` (the journal, ``.journal/``, the hooks) and
:mod:`profiling._files` (measurement records, reports) each say the refusal in their own
sentence and raise their own error; what is refused — a ``..``, a symlink on the way (committed
ones too), a FIFO, socket, device, folder or hard link where a plain file belongs — is decided
here. It lives in profiling because profiling never imports journal_agent; standard library only
and nothing at import time (the hooks import it under ``python -I -S``, with ``profiling``'s own
``__init__`` left out: hooks/capture.py).
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    from collections.abc import Callable

DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def parts_of(rel: str) -> list[str] | None:
    """The names of a relative path (``.`` and empty ones dropped); None when one is ``..``
    (it climbs out of the anchor: each caller says so in its own words)."""
    parts = [p for p in rel.split(os.sep) if p not in ("", ".")]
    return None if ".." in parts else parts


def walk_to(
    anchor: str | os.PathLike[str],
    parts: list[str],
    *,
    create: bool,
    refuse: Callable[[str, int, str], Exception | None],
    made: Callable[[OSError, str], Exception] | None = None,
    follow_anchor: bool = True,
) -> int:
    """A descriptor of ``anchor/parts…`` reached with ``O_NOFOLLOW`` on every name below the
    anchor (made on the way with ``create``). FileNotFoundError when a folder is missing (and
    not made). A name that cannot be opened as a folder: ``refuse(path so far, descriptor of
    its folder, name)`` gives the error to raise (None: the open's own). ``made(error, path)``:
    what a failed ``mkdir`` raises (else its own error). ``follow_anchor=False``: the anchor itself
    must not be a link either (a real path resolved earlier, which a swap must not redirect).
    The caller closes the descriptor."""
    fd = os.open(
        os.fspath(anchor), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC if follow_anchor else DIR
    )
    done = os.fspath(anchor)
    try:
        for name in parts:
            done = os.path.join(done, name)
            if create:
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # a folder (fine), or not one: the open below says which
                except OSError as exc:
                    if made is None:
                        raise
                    raise made(exc, done) from None
            try:
                inner = os.open(name, DIR, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError:
                error = refuse(done, fd, name)
                if error is None:
                    raise
                raise error from None
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def kind_of(st: os.stat_result, *, want_dir: bool) -> str | None:
    """What ``st`` is when it is not what a name of ours may be (None when it is)."""
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return None if want_dir else "a directory"
    if want_dir:
        return "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else other_kind(mode)
    if stat.S_ISREG(mode):
        return None if st.st_nlink <= 1 else f"a file with {st.st_nlink} names (hard links)"
    return "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else other_kind(mode)


def other_kind(mode: int) -> str:
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    return "a file" if stat.S_ISREG(mode) else "not a regular file"


def oddity(dir_fd: int, name: str, *, want_dir: bool) -> str | None:
    """What ``name`` is when it cannot be ours, "missing" when it is not there, else None."""
    if not name:
        return None
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return None
    what = kind_of(st, want_dir=want_dir)
    if what == "a symlink":
        try:
            target = os.readlink(name, dir_fd=dir_fd)
        except OSError:
            return what
        return f"a symlink to {printable(target)}"
    return what


def printable(text: str) -> str:
    """``text`` with control characters (terminal escapes a planted name or link could carry)
    shown as ``?``, cut to 300 characters."""
    out = "".join(c if c.isprintable() else "?" for c in text)
    return out if len(out) <= 300 else out[:297] + "..."
