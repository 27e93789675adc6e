"""The walk and the checks behind :mod:`journal_agent.confined` (that module's docstring says the
rule): reaching a name from an anchor without following a link, telling what a name is when it
cannot be ours, and the one sentence that says so. Standard library only (the hooks import it).
"""

from __future__ import annotations

import errno
import os
import stat

# What is refused (a `..`, a link on the way, a name that is no plain file) has one home for
# both packages, profiling/_nofollow.py (profiling never imports journal_agent); the sentences
# and the errors are ours.
from profiling._nofollow import FILE, kind_of, oddity, parts_of, printable
from profiling._nofollow import walk_to as _walk

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    from collections.abc import Iterable

    PathArg = str | os.PathLike[str]

# Temp files are ``.<name>.tmp-<random>``: hidden, next to the target, findable by
# :func:`remove_stale_temps`; the name is cut so the temp name fits NAME_MAX. The random part
# is os.urandom's (importing secrets costs each hook milliseconds).
TEMP_MARK = ".tmp-"
NAME_KEPT = 64
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class Refused(OSError):
    """A name of ours that is not a plain file (or folder) with one name: a symlink, FIFO,
    socket, device, folder where a file belongs (or the reverse), or a hard link. ``str()``
    is the sentence to show: the path, what it is, the command that fixes it."""

    def __init__(self, sentence: str, path: str) -> None:
        super().__init__(errno.ELOOP, sentence, path)
        self.sentence = sentence

    def __str__(self) -> str:
        return self.sentence


class NoSpace(OSError):
    """A write the disk refused (full, over quota, over the file-size limit); nothing of it was
    left behind. ``str()`` is the sentence to show."""

    def __init__(self, sentence: str, path: str, code: int) -> None:
        super().__init__(code, sentence, path)
        self.sentence = sentence

    def __str__(self) -> str:
        return self.sentence


def split_path(anchor: PathArg, path: PathArg) -> tuple[str, str, str]:
    """``(folder, name, shown)``: the folder part relative to the anchor ('' for the anchor),
    the last name ('' when ``path`` is the anchor), and the path as the user sees it.

    ``path`` is relative to the anchor, or absolute beneath it; a relative path that begins
    with a relative anchor (``Path("proj") / ".journal" / …``, as a store builds its paths
    from the root it was given) is taken as already joined to it."""
    anchor = os.fspath(anchor)
    path = os.fspath(path)
    base = os.path.normpath(anchor)
    if os.path.isabs(path):
        rel = _beneath(os.path.normpath(path), os.path.abspath(anchor), path, anchor)
    elif not os.path.isabs(anchor) and base != "." and _under(os.path.normpath(path), base):
        rel = _beneath(os.path.normpath(path), base, path, anchor)
    else:
        rel = path
    parts = parts_of(rel)
    if parts is None:
        raise ValueError(f"{path!r} climbs out of {anchor} ('..')")
    shown = shown_path(anchor, "/".join(parts))
    if not parts:
        return "", "", shown
    return os.sep.join(parts[:-1]), parts[-1], shown


def _under(full: str, base: str) -> bool:
    return full == base or full.startswith(base.rstrip(os.sep) + os.sep)


def _beneath(full: str, base: str, path: str, anchor: str) -> str:
    if not _under(full, base):
        raise ValueError(f"{path} is not beneath {anchor}")
    return full[len(base) :].lstrip(os.sep)


def join_rel(folder: str, name: str) -> str:
    return os.path.join(folder, name) if folder else name


def shown_path(anchor: str | os.PathLike[str], rel: str) -> str:
    full = os.path.join(os.fspath(anchor), rel) if rel else os.fspath(anchor)
    return printable(full)


def walk_to(anchor: PathArg, folder: str, shown: str, *, create: bool) -> int:
    """A descriptor of ``anchor/folder`` reached with ``O_NOFOLLOW`` on every component below
    the anchor (made on the way with ``create``). FileNotFoundError when a folder is missing
    (and not made); :class:`Refused` when one is a link or not a folder."""

    def refuse(done: str, fd: int, name: str) -> Exception | None:
        what = oddity(fd, name, want_dir=True)
        if what in (None, "missing"):
            return None
        return Refused(refusal(printable(done), what, "use"), printable(done))

    def made(exc: OSError, done: str) -> Exception:
        return as_no_space(exc, printable(done))

    parts = folder.split(os.sep) if folder else []
    return _walk(anchor, parts, create=create, refuse=refuse, made=made)


def open_file(
    dir_fd: int, name: str, flags: int, shown: str, verb: str, *, one_name: bool = True
) -> int:
    """``name`` in ``dir_fd`` opened without following a link or blocking on a FIFO, and kept
    only when it is a regular file (with one name, unless ``one_name`` is False)."""
    try:
        fd = os.open(name, flags | FILE, 0o666, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        what = oddity(dir_fd, name, want_dir=False)
        if what in (None, "missing"):
            raise
        raise Refused(refusal(shown, what, verb), shown) from exc
    try:
        st = os.fstat(fd)
        what = kind_of(st, want_dir=False)
        if what is not None and what.startswith("a file with") and not one_name:
            what = None
        if what is not None:
            if what.startswith("a symlink"):  # (cannot be: O_NOFOLLOW)
                what = "a symlink"
            raise Refused(refusal(shown, what, verb), shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


def kept_mode(dir_fd: int, name: str, shown: str, *, one_name: bool = True) -> int:
    """The permission bits a replacement of ``name`` keeps (a new file's for a missing one);
    :class:`Refused` when ``name`` is there but not a plain file (with one name)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return 0o666 & ~umask()
    what = kind_of(st, want_dir=False)
    if what is not None and what.startswith("a file with") and not one_name:
        what = None
    if what is not None:
        if what.startswith("a symlink"):
            what = oddity(dir_fd, name, want_dir=False) or what
        raise Refused(refusal(shown, what, "write"), shown)
    return stat.S_IMODE(st.st_mode)


def replace_in(
    dir_fd: int,
    name: str,
    data: bytes | Iterable[bytes],
    mode: int,
    durable: bool,
    *,
    exclusive: bool = False,
) -> os.stat_result:
    """``data``: the bytes, or pieces of them written as they come (an export of a 100 MB
    journal is never held whole)."""
    tmp = f".{name[:NAME_KEPT]}{TEMP_MARK}{os.urandom(6).hex()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
    try:
        try:
            for piece in (data,) if isinstance(data, bytes) else data:
                write_all(fd, piece)
            os.fchmod(fd, mode)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            link_new(dir_fd, tmp, name)
        else:
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:  # noqa: SIM105
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


def link_new(dir_fd: int, tmp: str, name: str) -> None:
    """Give the written ``tmp`` the name ``name`` only if nothing has it (FileExistsError)."""
    try:
        # link() never replaces: the name stays with whoever had it first.
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        # A file system without hard links: check, then rename (a narrow race, on such disks).
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), name) from None
    os.unlink(tmp, dir_fd=dir_fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def refusal(shown: str, what: str, verb: str) -> str:
    """One sentence: the path, what it is, that we refuse it, and the command that fixes it."""
    q = shell_quote(shown)
    aside = f"move it aside (`mv {q} {q}.aside`) and try again."
    if what == "a directory":
        return f"{shown} is a directory where journal-agent needs a file; {aside}"
    if what == "a file":
        return f"{shown} is a file where journal-agent needs a directory; {aside}"
    if what.startswith("a symlink"):
        fix = f"remove the link (`rm {q}`; what it points to is left alone)"
    elif what.startswith("a file with"):
        fix = f"give it a name of its own (`cp -p {q} {q}.copy && mv {q}.copy {q}`)"
    else:
        fix = f"remove it (`rm {q}`)"
    return (
        f"{shown} is {what}, and journal-agent will not {verb} it: its own files are plain "
        f"files with one name, never reached through a link; {fix} and try again."
    )


def as_no_space(exc: OSError, shown: str) -> OSError:
    """``exc`` as :class:`NoSpace` when the disk refused the write, else ``exc`` itself."""
    if exc.errno not in FULL or isinstance(exc, NoSpace | Refused):
        return exc
    why = "a file-size limit was reached" if exc.errno == errno.EFBIG else "the disk is full"
    return NoSpace(
        f"could not write {shown}: {why} ({os.strerror(exc.errno or 0)}); nothing of this "
        "write was kept, so free some space and run it again.",
        shown,
        exc.errno or errno.ENOSPC,
    )


SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789@%+=:,./-_~")


def shell_quote(text: str) -> str:
    """``text`` as one shell word (shlex.quote's rule, without importing shlex and re)."""
    if text and all(c in SAFE for c in text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


def umask() -> int:
    # Read from /proc: os.umask() would change it process-wide for a moment, racing other threads.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
