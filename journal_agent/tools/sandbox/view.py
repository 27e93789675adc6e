"""What a sandboxed command sees: which paths it may write, which stay read-only inside
them, which are hidden, and whether it has a network.

=====================  ============================================================
the call               what is writable
=====================  ============================================================
read-only (``default``  nothing but a private ``/tmp`` (the whole filesystem is read-only)
and ``plan`` modes)
writing (``acceptEdits``, the workspace and ``sandbox.filesystem.allowWrite``, **except** the
``bypassPermissions``,  protected paths, which stay read-only inside it
a command the user
approved or an allow
rule names)
=====================  ============================================================

Protected inside the writable roots: the one list of :mod:`journal_agent.tools.protected`
(``.claude/``, ``.claude-plugin/``, ``.mcp.json``, ``.journal/`` but ``drafts/``, the files of
every git directory (:mod:`._gitdirs`), gitfiles, journal-agent's own package in a checkout,
``sandbox.filesystem.denyWrite``), which Write and Edit also ask about. ``.journal/`` is never
writable inside (only ``.journal/drafts/``): journal-agent's own commands write their state
through the host (:mod:`journal_agent.tools.own_commands`, :mod:`.call`).

A protected path that does not exist cannot be mounted read-only: :attr:`View.guarded` lists
them all, and :mod:`.guard` moves whatever a command created of them into quarantine.
A masked file's other names in the workspace (hard links made before the call) are masked too
(:mod:`._hardlinks`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob as _glob
import itertools
import os
import re
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from journal_agent.tools import protected as _protected
from journal_agent.tools.protected import PRECREATE
from journal_agent.tools.sandbox import _gitdirs
from journal_agent.tools.sandbox._hardlinks import other_links
from journal_agent.tools.sandbox._hidden_files import SecretScan, home_secrets, name_regex
from journal_agent.tools.sandbox._redacted_configs import redacted_copies, remove_copies
from journal_agent.tools.sandbox.config import SandboxSettings

_GLOB_CHARS = re.compile(r"[*?\[]")
_MAX_GLOB = 10_000


@dataclass(frozen=True)
class View:
    root: Path
    writable: tuple[Path, ...]  # bound read-write, in this order
    read_only: tuple[Path, ...]  # bound read-only again, after the writable ones
    rewritable: tuple[Path, ...]  # writable again inside a protected path (.journal/drafts)
    masked: tuple[Path, ...]  # hidden: reading fails
    network: bool
    scan_truncated: bool = False
    created: tuple[Path, ...] = ()  # directories made only to be mount points
    # Every protected path a writing command might create (existing or not), for .guard.
    guarded: tuple[Path, ...] = ()
    # The git directories inside the writable roots before the call (see ._gitdirs), the
    # files of theirs among ``guarded`` (judged by ._gitfiles when created), and the workspace
    # scan that finds nested repositories again after the call.
    git: _gitdirs.GitDirs | None = None
    git_files: frozenset[Path] = frozenset()
    # (st_dev, st_ino) of each read_only path before the call: a command can rename a
    # directory that holds a read-only file (`mv .git old`) and put a new file in its place.
    read_only_ids: tuple[tuple[int, int], ...] = ()
    # What each directory on the way to a guarded path was before the call: "d" a directory,
    # "f" something else, "l:<target>" a symlink. The quarantine follows no link the call made.
    ancestors: dict[Path, str] = dataclasses.field(default_factory=dict, compare=False)
    scan: SecretScan | None = dataclasses.field(default=None, compare=False, repr=False)
    # Unix-domain sockets left reachable without network (sandbox.network.allowUnixSockets).
    allowed_sockets: tuple[Path, ...] = ()
    # The journal and the ledger (protected.OURS_FOR_BASH), bound read-only where they are
    # regular files; not compared after the call (our own writers replace them meanwhile).
    ours: tuple[Path, ...] = ()
    # (redacted copy, git config it covers) for each git config holding a secret, and the
    # folder of the copies (._redacted_configs): a command never reads a remote URL's token.
    redacted: tuple[tuple[Path, Path], ...] = ()
    redacted_dir: Path | None = None

    @property
    def writes(self) -> bool:
        return bool(self.writable)


def build_view(
    root: Path,
    settings: SandboxSettings,
    *,
    writes: bool,
    read_deny: tuple[str, ...] = (),
    home: Path | None = None,
) -> View:
    root = Path(os.path.realpath(root))
    home = Path(os.path.realpath(home or Path.home()))
    fs = settings.filesystem
    writable: list[Path] = []
    read_only: list[Path] = []
    rewritable: list[Path] = []
    created: list[Path] = []
    guarded: list[Path] = []
    git: _gitdirs.GitDirs | None = None
    git_files: list[Path] = []
    masked, truncated = masked_paths(root, settings, read_deny, home)
    scan = workspace_scan(root, settings, read_deny)
    redacted_dir, redacted = redacted_copies(dot_gits_of(root, scan.repos))
    read_only_ids: list[tuple[int, int]] = []
    ancestors: dict[Path, str] = {}
    ours: list[Path] = []
    if writes:
        created = [p for rel in PRECREATE if (p := _precreate(root, rel)) is not None]
        writable.append(root)
        writable += [p for e in fs.allow_write for p in _concrete(e, root, home) if p.exists()]
        rewritable.append(root / ".journal" / "drafts")
        git = _gitdirs.find(dot_gits_of(root, scan.repos), writable)
        git_files = [g / name for g in sorted(git.dirs) for name in _protected.GIT_FILES]
        protected = protected_paths(root, settings, home, git)
        protected += _trust_store_dir(writable)
        for p in protected:
            if _inside_any(p, writable) and (st := _lstat(p)) is not None:
                read_only.append(p)
                read_only_ids.append((st.st_dev, st.st_ino))
        rewritable = [p for p in rewritable if p.is_dir()]
        ours = [p for p in (root / n for n in _protected.OURS_FOR_BASH) if _regular(p)]
        concrete = [p for e in fs.deny_write for p in _concrete(e, root, home)]
        guarded = [p for p in dict.fromkeys([*protected, *concrete]) if _inside_any(p, writable)]
        ancestors = _ancestors(guarded, writable)
    return View(
        root=root,
        writable=tuple(writable),
        read_only=tuple(read_only),
        rewritable=tuple(rewritable),
        masked=tuple(masked),
        network=settings.network.all_allowed,
        allowed_sockets=tuple(
            p for e in settings.network.allow_unix_sockets for p in _concrete(e, root, home)
        ),
        scan_truncated=truncated,
        created=tuple(created),
        guarded=tuple(guarded),
        git=git,
        git_files=frozenset(git_files),
        read_only_ids=tuple(read_only_ids),
        ancestors=ancestors,
        scan=scan,
        ours=tuple(ours),
        redacted=redacted,
        redacted_dir=redacted_dir,
    )


def protected_paths(
    root: Path,
    settings: SandboxSettings,
    home: Path,
    git: _gitdirs.GitDirs,
) -> list[Path]:
    """The one list (:mod:`journal_agent.tools.protected`) as concrete paths for one call:
    read-only where they exist, guarded where they do not."""
    protected = _protected.workspace_paths(root)
    protected += _protected.top_git_paths(root)
    protected += [g / name for g in sorted(git.dirs) for name in _protected.GIT_FILES]
    # A gitfile, rewritten, would pick the git directory: the workspace's and nested ones.
    protected += [p.path for p in git.pointers if p.kind == "gitfile"]
    if (root / ".git").is_file() and not (root / ".git").is_symlink():
        protected.append(root / ".git")  # a gitfile that leads nowhere valid, too
    protected += _protected.package_paths(root)
    protected += [p for e in settings.filesystem.deny_write for p in _expand(e, root, home)]
    return _one_name_each(protected)


def _trust_store_dir(writable: list[Path]) -> list[Path]:
    """The trust store's directory (:mod:`journal_agent.trust_store`) when a writable root
    (``allowWrite: ["~/.config"]``, a workspace holding it) covers it: made first if missing,
    then kept read-only like a protected path. No command may approve a project's files."""
    from journal_agent.trust_store import store_dir

    folder = Path(os.path.realpath(store_dir()))
    if not _inside_any(folder, writable):
        return []
    with contextlib.suppress(OSError):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return [folder]


def why_protected(
    root: Path, path: Path, settings: SandboxSettings | None = None, home: Path | None = None
) -> str | None:
    """Why ``path`` (absolute, resolved) is on the one protected list, or None: by its name
    (:func:`journal_agent.tools.protected.why_by_name`), as a file of a git directory found
    on disk (a ``.git`` symlink's target, a ``commondir``'s), or by ``denyWrite``."""
    root = Path(os.path.realpath(root))
    settings = settings or SandboxSettings()
    why = _protected.why_by_name(root, path)
    if why is None and root in path.parents and any(p in _protected.GIT_FILES for p in path.parts):
        scan = workspace_scan(root, settings, ())
        scan.paths()  # nested repositories as they are now
        dirs = _gitdirs.find(dot_gits_of(root, scan.repos), [root]).dirs
        hit = next((p for p in (path, *path.parents) if p.name in _protected.GIT_FILES
                    and p.parent in dirs and root in p.parents), None)  # fmt: skip
        why = _protected.GIT_WHY[hit.name] if hit is not None else None
    if why is None and _denied_write(root, path, settings, home):
        why = _protected.DENY_WRITE_WHY
    return why


def _denied_write(root: Path, path: Path, settings: SandboxSettings, home: Path | None) -> bool:
    from journal_agent.tools._pathrules import path_matches

    home = Path(os.path.realpath(home or Path.home()))
    for entry in settings.filesystem.deny_write:
        base, rel = anchor(entry, root, home)
        if path_matches("/" + os.path.join(str(base), rel.rstrip("/")), path, root):
            return True
    return False


def writable_base(path: Path, writable: tuple[Path, ...] | list[Path]) -> Path | None:
    """The (deepest) writable root ``path`` lies in, or None."""
    inside = [w for w in writable if w == path or w in path.parents]
    return max(inside, key=lambda w: len(w.parts)) if inside else None


def kind_of(path: Path) -> str | None:
    """ "d" a directory, "l:<target>" a symlink, "f" anything else; None if nothing is there."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            return "l:" + os.readlink(path)
    except OSError:
        return None
    return "d" if stat.S_ISDIR(mode) else "f"


def _ancestors(guarded: list[Path], writable: list[Path]) -> dict[Path, str]:
    out: dict[Path, str] = {}
    for path in guarded:
        base = writable_base(path, writable)
        if base is None:
            continue
        cur = base
        for part in path.parent.relative_to(base).parts:
            cur = cur / part
            if cur not in out and (kind := kind_of(cur)) is not None:
                out[cur] = kind
    return out


def dot_gits_of(root: Path, repos: list[Path]) -> list[Path]:
    """The ``.git`` of the workspace and of the nested repositories ``repos``."""
    return [d / ".git" for d in dict.fromkeys([root, *repos])]


def _regular(path: Path) -> bool:
    """A regular file itself (a symlink is never bound: the mount would land on its target)."""
    return (st := _lstat(path)) is not None and stat.S_ISREG(st.st_mode)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _one_name_each(paths: list[Path]) -> list[Path]:
    """One name per file (the first): ``.git/config`` through a ``.git`` symlink and the same
    file by its real path must be mounted, and moved aside, once."""
    seen: set[str] = set()
    out = []
    for p in paths:
        key = os.path.join(os.path.realpath(p.parent), p.name)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def masked_paths(
    root: Path, settings: SandboxSettings, read_deny: tuple[str, ...], home: Path
) -> tuple[list[Path], bool]:
    """(every path hidden from a command, the workspace scan stopped early?)"""
    masked, truncated = _masked_by_name(root, settings, read_deny, home)
    # Another name of a masked file (a hard link made before the call) must not show it.
    links, links_truncated = other_links(masked, root)
    return masked + links, truncated or links_truncated


def _masked_by_name(
    root: Path, settings: SandboxSettings, read_deny: tuple[str, ...], home: Path
) -> tuple[list[Path], bool]:
    fs = settings.filesystem
    scan = workspace_scan(root, settings, read_deny)
    masked = [*scan.paths(), *home_secrets(home), *_record_key()]
    for entry in (*fs.deny_read, *read_deny):
        if not _bare(entry):
            masked += _expand(entry, root, home)
    return _with_real_paths(masked), scan.truncated


def _record_key() -> list[Path]:
    """The key that seals this user's measurement records (:mod:`journal_agent.record_seal`):
    hidden, so no command can seal a record it forged."""
    from journal_agent.record_seal import key_path

    return [key_path()] if os.path.lexists(key_path()) else []


def hidden_links(
    root: Path, settings: SandboxSettings, read_deny: tuple[str, ...], home: Path | None
) -> set[Path]:
    """The names in ``root`` that are hard links to a hidden file, for the file tools (Read,
    Grep), which run outside the sandbox and judge a path by its name."""
    root = Path(os.path.realpath(root))
    home = Path(os.path.realpath(home or Path.home()))
    return set(other_links(_masked_by_name(root, settings, read_deny, home)[0], root)[0])


def _precreate(root: Path, rel: str) -> Path | None:
    """Make the directory (to be kept read-only or writable); return it if we made it. Never
    through a link (journal_agent.confined): a cloned `.journal -> ~/x` gets no `drafts`
    folder made in ~/x."""
    from journal_agent import confined

    try:
        return root / rel if confined.make_folder(root, rel) else None
    except OSError:
        return None  # a read-only workspace, a link on the way: nothing to protect then


def remove_precreated(view: View) -> None:
    """Remove the directories :func:`build_view` made, if the command left them empty, and the
    redacted copies of git configs it made."""
    for path in reversed(view.created):
        with contextlib.suppress(OSError):
            path.rmdir()
    remove_copies(view.redacted_dir)


def _inside_any(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def bare_names(entries: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The entries that are names (matched at any depth in the workspace), without a "/"."""
    return tuple(e.strip().rstrip("/") for e in entries if _bare(e))


def _bare(entry: str) -> bool:
    """A name without a slash (``*.pem``, ``secrets.txt``): matched at any depth."""
    e = entry.strip().rstrip("/")
    return "/" not in e and not e.startswith("~")


def anchor(entry: str, root: Path, home: Path) -> tuple[Path, str]:
    e = entry.strip()
    if e.startswith("//"):
        return Path("/"), e[2:]
    if e == "~" or e.startswith("~/"):
        return home, e[2:]
    if e.startswith("./"):
        return root, e[2:]
    if e.startswith("/"):
        # Claude Code's sandbox paths: "/x" is absolute (unlike a Read rule's "/x").
        return Path("/"), e[1:]
    return root, e


def _concrete(entry: str, root: Path, home: Path) -> list[Path]:
    base, rel = anchor(entry, root, home)
    rel = rel.rstrip("/")
    if rel.endswith("/**"):
        rel = rel[:-3]
    if _GLOB_CHARS.search(rel):
        return []
    return [Path(os.path.normpath(base / rel))]


def _expand(entry: str, root: Path, home: Path) -> list[Path]:
    """The existing paths an anchored entry names (globs expanded, bounded)."""
    concrete = _concrete(entry, root, home)
    if concrete:
        return [p for p in concrete if os.path.lexists(p)]
    base, rel = anchor(entry, root, home)
    it = _glob.iglob(str(base / rel), recursive=True, include_hidden=True)
    return [Path(p) for p in itertools.islice(it, _MAX_GLOB)]


def _with_real_paths(paths: list[Path]) -> list[Path]:
    """Each path and, when it is a symlink, what it leads to: a bind mount follows the link."""
    out: dict[Path, None] = {}
    for p in paths:
        out[p] = None
        real = Path(os.path.realpath(p))
        if real != p and real.exists():
            out[real] = None
    return list(out)


def workspace_scan(root: Path, settings: SandboxSettings, read_deny: tuple[str, ...]) -> SecretScan:
    """The (cached) walk of the workspace for secret names, which notes nested repositories."""
    fs = settings.filesystem
    return _scan(root, tuple(p for p in (*fs.deny_read, *read_deny) if _bare(p)))


@lru_cache(maxsize=16)
def _scan(root: Path, extra_names: tuple[str, ...]) -> SecretScan:
    from journal_agent.tools._rules import SECRET_EXCEPTIONS, SECRET_PATTERNS

    patterns = (*SECRET_PATTERNS, *bare_names(extra_names))
    return SecretScan(root, name_regex(patterns, SECRET_EXCEPTIONS))
