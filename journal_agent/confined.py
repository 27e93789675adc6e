"""The one room through which journal-agent writes, deletes and reads its own files on the host.

A cloned repository is hostile input: git keeps committed symlinks as symlinks, so a project can
commit ``.journal/inbox.jsonl -> ~/.bashrc`` or ``learning_journal.md -> ~/.ssh/id_ed25519``,
and a sandboxed command can plant a FIFO or a hard link where our files go. So every file of
ours — the journal and the ledger at the workspace root, everything under ``.journal/``, and
what an export writes — is reached here, and only here, the same way:

- from a directory descriptor of the *anchor* (the workspace root, or the folder the user named
  for an export), which is trusted as given; below it every component is opened with
  ``O_NOFOLLOW`` (folders with ``O_DIRECTORY``), so a symlink anywhere on the way is refused,
  never followed, whatever is swapped in between a check and the use;
- a file is used only if ``fstat`` of the opened descriptor says it is a regular file with one
  name: a FIFO (opened with ``O_NONBLOCK``, so it never blocks), a socket, a device, a folder
  or a hard link (another name whose content an in-place write would change, or which a copy
  would bring into the workspace) is refused;
- a refusal is :class:`Refused`, one sentence naming the path, what it is and the one command
  that fixes it; a full disk (``ENOSPC``, ``EDQUOT``, ``EFBIG``) is :class:`NoSpace`, one
  sentence, after undoing what was half done;
- a file is replaced through a temp name nobody can plant (random, ``O_CREAT | O_EXCL |
  O_NOFOLLOW``), fsynced, renamed over the target in the same folder (``renameat``), its mode
  kept; an append writes whole lines or nothing (under ``flock``, truncated back on any error).

Paths are given as ``(anchor, path)``: ``path`` relative to the anchor, or absolute and
lexically beneath it; ``..`` is refused (a bug of ours, ``ValueError``). Standard library only,
and light: the Claude Code hooks import it under ``python3 -I -S`` (no ``json``, ``re``,
``pathlib`` or ``typing`` at module level: tests/capture/test_hook_imports.py).
"""

from __future__ import annotations

import errno
import os
import stat

from journal_agent import _confined_walk as w
from journal_agent._confined_walk import TEMP_MARK, NoSpace, Refused
from profiling._nofollow import DIR

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import BinaryIO

    PathArg = str | os.PathLike[str]

__all__ = ["TEMP_MARK", "NoSpace", "Refused"]  # (and the functions below)


# -- reading ---------------------------------------------------------------------------------


def open_read(anchor: PathArg, path: PathArg, *, one_name: bool = True) -> BinaryIO | None:
    """``path`` opened for reading (a buffered binary file the caller closes), or None when it
    does not exist. :class:`Refused` when it or a folder on the way is not plain (a file with
    other names too, unless ``one_name`` is False: a file we only read, never rewrite)."""
    folder, name, shown = w.split_path(anchor, path)
    try:
        dir_fd = w.walk_to(anchor, folder, shown, create=False)
    except FileNotFoundError:
        return None
    try:
        fd = w.open_file(dir_fd, name, os.O_RDONLY, shown, "read", one_name=one_name)
    except FileNotFoundError:
        return None
    finally:
        os.close(dir_fd)
    return os.fdopen(fd, "rb")


def read(anchor: PathArg, path: PathArg) -> bytes | None:
    """The bytes of ``path``, or None when it does not exist (see :func:`open_read`)."""
    f = open_read(anchor, path)
    if f is None:
        return None
    with f:
        return f.read()


def snapshot(anchor: PathArg, path: PathArg) -> tuple[os.stat_result, bytes] | None:
    """``(stat, bytes)`` of ``path`` from one descriptor (the stat is of what was read), or None
    when it is missing: the journal's and the ledger's read-modify-replace starts here."""
    f = open_read(anchor, path)
    if f is None:
        return None
    with f:
        return os.fstat(f.fileno()), f.read()


def read_tail(anchor: PathArg, path: PathArg, size: int) -> bytes | None:
    """The last ``size`` bytes of ``path`` (all of a smaller file), or None when it is missing."""
    f = open_read(anchor, path)
    if f is None:
        return None
    with f:
        end = f.seek(0, os.SEEK_END)
        f.seek(max(0, end - size))
        return f.read()


def read_planted(
    anchor: PathArg, path: PathArg, limit: int, *, one_name: bool = True
) -> bytes | None:
    """At most ``limit + 1`` bytes of a file something untrusted may have written (a draft, a
    record in a sandboxed command's outbox), or None for anything that is not a plain file of
    at most ``limit`` bytes when opened — missing, a link, a FIFO, a folder, a hard link,
    unreadable — for the caller to skip. More than ``limit`` bytes back means it grew after
    it was opened; the caller refuses or cuts it. ``one_name=False`` reads a hard-linked file
    too (one only read, whose content must be seen whatever its names: a git config)."""
    try:
        f = open_read(anchor, path, one_name=one_name)
        if f is None:
            return None
        with f:
            if os.fstat(f.fileno()).st_size > limit:
                return None
            return f.read(limit + 1)
    except OSError:
        return None


def sqlite_file(anchor: PathArg, path: PathArg, *, create: bool = False) -> str | None:
    """The path to give ``sqlite3.connect`` for the database ``path`` (a cache of ours), once
    it and the folders on the way are checked: the database and its ``-wal``, ``-shm`` and
    ``-journal`` files plain or missing. None when the database is missing (with ``create``,
    its folders are made and the path is given all the same).

    SQLite opens by name and follows a link at the database (its own side files it opens with
    ``O_NOFOLLOW``), and a FIFO there would block it for good; so nothing but a plain file of
    one name gets this far, and :class:`Refused` says what is there instead."""
    folder, name, shown = w.split_path(anchor, path)
    try:
        dir_fd = w.walk_to(anchor, folder, shown, create=create)
    except FileNotFoundError:
        return None
    try:
        missing = False
        for suffix in ("", "-wal", "-shm", "-journal"):
            what = w.oddity(dir_fd, name + suffix, want_dir=False)
            if what == "missing":
                missing = missing or not suffix
            elif what is not None:
                side = shown + suffix
                raise Refused(w.refusal(side, what, "open"), side)
    finally:
        os.close(dir_fd)
    if missing and not create:
        return None
    return os.path.join(os.fspath(anchor), folder, name)


def lstat(anchor: PathArg, path: PathArg) -> os.stat_result | None:
    """The stat of ``path`` itself (a link is not followed), or None when it is missing or a
    folder on the way is not plain (nothing of ours is there)."""
    folder, name, shown = w.split_path(anchor, path)
    try:
        dir_fd = w.walk_to(anchor, folder, shown, create=False)
    except (FileNotFoundError, Refused):
        return None
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False) if name else os.fstat(dir_fd)
    except FileNotFoundError:
        return None
    finally:
        os.close(dir_fd)


def listdir(anchor: PathArg, path: PathArg) -> list[str]:
    """The names in the folder ``path`` (sorted; [] when it is missing). :class:`Refused` when
    it is a link or not a folder."""
    folder, name, shown = w.split_path(anchor, path)
    try:
        fd = w.walk_to(anchor, w.join_rel(folder, name), shown, create=False)
    except FileNotFoundError:
        return []
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


def problem(anchor: PathArg, path: PathArg, *, folder: bool = False) -> str | None:
    """The sentence :class:`Refused` would say of ``path`` (a folder with ``folder``), or None
    when it is plain or missing: ``doctor`` names every oddity with it, without opening one."""
    where, name, shown = w.split_path(anchor, path)
    try:
        dir_fd = w.walk_to(anchor, where, shown, create=False)
    except FileNotFoundError:
        return None
    except Refused as exc:
        return exc.sentence
    try:
        what = w.oddity(dir_fd, name, want_dir=folder)
    finally:
        os.close(dir_fd)
    return None if what in (None, "missing") else w.refusal(shown, what, "use")


# -- writing ---------------------------------------------------------------------------------


def replace(
    anchor: PathArg, path: PathArg, data: bytes | str | Iterable[bytes], *, durable: bool = True
) -> os.stat_result:
    """Replace ``path`` whole with ``data`` (``str`` as UTF-8, or pieces of bytes written as
    they come); return the new file's stat.

    A temp file beside it (random name, ``O_EXCL | O_NOFOLLOW``), fsynced, renamed over the
    target, the folder fsynced; the target keeps its permission bits (a new one gets ``0o666 &
    ~umask``). Missing folders are made. The target must be a plain file or missing: a link or
    FIFO there is :class:`Refused` (``rename`` would replace the link itself, but a name of ours
    that something planted is worth a sentence, not a silent fix). ``durable=False`` skips the
    fsyncs, for caches. On any failure the temp file is gone and the old file is as it was.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder, name, shown = w.split_path(anchor, path)
    dir_fd = w.walk_to(anchor, folder, shown, create=True)
    try:
        mode = w.kept_mode(dir_fd, name, shown)
        try:
            return w.replace_in(dir_fd, name, data, mode, durable)
        except OSError as exc:
            raise w.as_no_space(exc, shown) from None
    finally:
        os.close(dir_fd)


def replace_at(dir_fd: int, name: str, data: bytes, *, durable: bool = True) -> os.stat_result:
    """:func:`replace` in a folder the caller reached itself (the Write and Edit tools walk to a
    user's file with ``tools.confined_paths``): the same temp name, fsync and rename, mode kept.
    A link, FIFO or folder at ``name`` is :class:`Refused`; a hard-linked user file is replaced
    (its other names keep the old content)."""
    mode = w.kept_mode(dir_fd, name, w.printable(name), one_name=False)
    try:
        return w.replace_in(dir_fd, name, data, mode, durable)
    except OSError as exc:
        raise w.as_no_space(exc, w.printable(name)) from None


def create(
    anchor: PathArg, path: PathArg, data: bytes | str | Iterable[bytes], *, durable: bool = True
) -> bool:
    """Write a new file at ``path`` (its name must be free); False when something already has
    the name (``O_EXCL``: never over anything, link or not). Written whole or not at all.
    ``data`` may come in pieces, each written as it comes (an export never held whole)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder, name, shown = w.split_path(anchor, path)
    dir_fd = w.walk_to(anchor, folder, shown, create=True)
    try:
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            return False
        except FileNotFoundError:
            pass
        try:
            w.replace_in(dir_fd, name, data, 0o666 & ~w.umask(), durable, exclusive=True)
        except FileExistsError:
            return False
        except OSError as exc:
            raise w.as_no_space(exc, shown) from None
        return True
    finally:
        os.close(dir_fd)


def append(
    anchor: PathArg,
    path: PathArg,
    data: bytes | str,
    *,
    durable: bool = False,
    then: Callable[[int, bytes], None] | None = None,
) -> int:
    """Append ``data`` (whole lines) to ``path``, created if missing: all of it or none; return
    the size the file had before (for :func:`cut_back`, should what it went with fail).
    ``then(offset, bytes written)`` runs after it, under the ``flock`` (the inbox's stamps).

    Appenders take ``flock`` on the file for the moment of the write, so the size read before
    is the offset ours starts at; a previous line torn by a crash is ended first (ours stays
    whole); on a full disk or any error the file is cut back to that size, so no torn line is
    left, and :class:`NoSpace` (or the error) is raised. Readers take no lock. ``durable``
    fsyncs the file before returning (a log another record refers to).
    """
    import fcntl

    if isinstance(data, str):
        data = data.encode("utf-8")
    folder, name, shown = w.split_path(anchor, path)
    dir_fd = w.walk_to(anchor, folder, shown, create=True)
    try:
        fd = w.open_file(dir_fd, name, os.O_RDWR | os.O_APPEND | os.O_CREAT, shown, "append to")
    finally:
        os.close(dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if data and size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # a crash tore the previous line: keep ours whole
        try:
            w.write_all(fd, data)
            if durable:
                os.fsync(fd)
        except BaseException as exc:
            try:  # noqa: SIM105 (contextlib costs the hooks an import)
                os.ftruncate(fd, size)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise w.as_no_space(exc, shown) from None
            raise
        if then is not None:
            then(size, data)
        return size
    finally:
        os.close(fd)  # (closing releases the flock)


def cut_back(anchor: PathArg, path: PathArg, size: int) -> None:
    """Undo an :func:`append` whose companion write failed: cut ``path`` back to ``size`` bytes
    (under the same ``flock``). Call it under the lock the appends were made under, so nothing
    appended after ours is cut."""
    import fcntl

    folder, name, shown = w.split_path(anchor, path)
    try:
        dir_fd = w.walk_to(anchor, folder, shown, create=False)
    except FileNotFoundError:
        return
    try:
        fd = w.open_file(dir_fd, name, os.O_WRONLY, shown, "cut back")
    except FileNotFoundError:
        return
    finally:
        os.close(dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_size > size:
            os.ftruncate(fd, size)
    finally:
        os.close(fd)


def open_append(anchor: PathArg, path: PathArg) -> BinaryIO:
    """``path`` (created if missing) opened for appending, as a buffered binary file the caller
    closes: for a log another process writes to as it goes (a background run's output). The
    writer of JSON lines uses :func:`append` instead: whole lines or nothing."""
    folder, name, shown = w.split_path(anchor, path)
    dir_fd = w.walk_to(anchor, folder, shown, create=True)
    try:
        fd = w.open_file(dir_fd, name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, shown, "append to")
    except OSError as exc:
        raise w.as_no_space(exc, shown) from None
    finally:
        os.close(dir_fd)
    return os.fdopen(fd, "ab")


def make_folder(anchor: PathArg, path: PathArg) -> bool:
    """Make the folder ``path`` (and those above it), never through a link; True when this
    call made it, False when it was there. :class:`Refused` when a link or a file is on the
    way (nothing is made outside)."""
    folder, name, shown = w.split_path(anchor, path)
    parent = w.walk_to(anchor, folder, shown, create=True)
    try:
        try:
            os.mkdir(name, 0o777, dir_fd=parent)
            made = True
        except FileExistsError:
            made = False
        except OSError as exc:
            raise w.as_no_space(exc, shown) from None
        os.close(w.walk_to(anchor, w.join_rel(folder, name), shown, create=False))
        return made
    finally:
        os.close(parent)


def unlink(anchor: PathArg, path: PathArg) -> bool:
    """Remove the name ``path`` (a link is removed, never what it names); False when it was
    missing. A folder is :class:`Refused` (nothing of ours removes folders by name here)."""
    folder, name, shown = w.split_path(anchor, path)
    try:
        dir_fd = w.walk_to(anchor, folder, shown, create=False)
    except FileNotFoundError:
        return False
    try:
        os.unlink(name, dir_fd=dir_fd)
        return True
    except FileNotFoundError:
        return False
    except IsADirectoryError:
        raise Refused(w.refusal(shown, "a directory", "remove"), shown) from None
    except OSError as exc:
        if exc.errno == errno.EPERM and w.oddity(dir_fd, name, want_dir=False) == "a directory":
            raise Refused(w.refusal(shown, "a directory", "remove"), shown) from None
        raise
    finally:
        os.close(dir_fd)


def rename(anchor: PathArg, source: PathArg, target: PathArg, *, overwrite: bool = True) -> bool:
    """Move the plain file ``source`` to ``target`` (folders made as needed), both beneath the
    anchor; False when ``source`` is missing. With ``overwrite=False`` an existing ``target``
    (anything) makes it False too. :class:`Refused` when ``source`` is not a plain file."""
    s_folder, s_name, s_shown = w.split_path(anchor, source)
    t_folder, t_name, t_shown = w.split_path(anchor, target)
    try:
        s_fd = w.walk_to(anchor, s_folder, s_shown, create=False)
    except FileNotFoundError:
        return False
    try:
        what = w.oddity(s_fd, s_name, want_dir=False)
        if what == "missing":
            return False
        if what is not None:
            raise Refused(w.refusal(s_shown, what, "move"), s_shown)
        t_fd = w.walk_to(anchor, t_folder, t_shown, create=True)
        try:
            if not overwrite and w.oddity(t_fd, t_name, want_dir=False) != "missing":
                return False
            if overwrite:
                w.kept_mode(t_fd, t_name, t_shown)  # refuses a link or FIFO as the target
            os.rename(s_name, t_name, src_dir_fd=s_fd, dst_dir_fd=t_fd)
            return True
        except FileNotFoundError:
            return False  # another process moved it first
        finally:
            os.close(t_fd)
    finally:
        os.close(s_fd)


def open_lock(anchor: PathArg, path: PathArg) -> int:
    """A descriptor of the lock file ``path`` (created, never truncated, never through a link)
    for ``fcntl.flock``; the caller closes it. :func:`journal_agent.locks.held` and the hooks'
    detached child lock through it."""
    folder, name, shown = w.split_path(anchor, path)
    dir_fd = w.walk_to(anchor, folder, shown, create=True)
    try:
        return w.open_file(dir_fd, name, os.O_RDWR | os.O_CREAT, shown, "lock")
    except OSError as exc:
        raise w.as_no_space(exc, shown) from None
    finally:
        os.close(dir_fd)


def remove_stale_temps(anchor: PathArg, path: PathArg) -> None:
    """Remove temp files of ``path`` left by a writer killed mid-write. Call it only under the
    lock that serializes the writers of ``path``."""
    folder, name, shown = w.split_path(anchor, path)
    prefix = f".{name[: w.NAME_KEPT]}{TEMP_MARK}"
    try:
        dir_fd = w.walk_to(anchor, folder, shown, create=False)
    except (FileNotFoundError, Refused):
        return
    try:
        for stale in os.listdir(dir_fd):
            if stale.startswith(prefix):
                try:  # noqa: SIM105
                    os.unlink(stale, dir_fd=dir_fd)
                except OSError:
                    pass
    finally:
        os.close(dir_fd)


def walk_files(anchor: PathArg, path: PathArg) -> Iterator[tuple[str, str | None]]:
    """Every name under the folder ``path`` (relative to the anchor, ``/``-separated), with the
    sentence of its oddity or None: ``doctor``'s survey of ``.journal/``. Folders are entered
    only when plain; the walk never follows a link."""
    folder, name, shown = w.split_path(anchor, path)
    start = w.join_rel(folder, name)
    try:
        top = w.walk_to(anchor, start, shown, create=False)
    except FileNotFoundError:
        return
    except Refused as exc:
        yield start, exc.sentence
        return
    stack = [(top, start)]
    while stack:
        fd, rel = stack.pop()
        try:
            names = sorted(os.listdir(fd))
            for child in names:
                child_rel = f"{rel}/{child}" if rel else child
                st = os.stat(child, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    try:
                        stack.append((os.open(child, DIR, dir_fd=fd), child_rel))
                    except OSError:
                        yield child_rel, None
                    continue
                what = w.oddity(fd, child, want_dir=False)
                shown_child = w.shown_path(anchor, child_rel)
                yield child_rel, None if what is None else w.refusal(shown_child, what, "use")
        finally:
            os.close(fd)
