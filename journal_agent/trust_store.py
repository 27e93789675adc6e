"""The trust store: which of a project's own files the user approved, kept outside every project.

A repository can commit ``.claude/settings.json``, ``.journal/settings.json`` and command or
agent files; what they say counts only once the user approved them on their terminal
(:mod:`journal_agent.project_trust` says which files, :mod:`journal_agent.terminal_confirm`
how approval is asked). An approval is the SHA-256 of the file's bytes as the user saw them,
recorded here, per project (its real path) and file (its path in the project):

    {"version": 1, "projects": {"/home/me/proj": {
        ".claude/settings.json": {"sha256": "9f86…", "approved": "2026-01-15T09:30:12Z"}}}}

An approval of ``.journal/settings.json`` also keeps the hook switches it turned off
(``"kept": {"off": ["recall_touch"]}``): they stay off while the file is changed and not approved
again (:func:`journal_agent.capture.settings.capture_settings`).

The store is ``$XDG_CONFIG_HOME/journal-agent/trust.json`` (``~/.config/journal-agent/`` when
that is unset): outside the workspace, so neither a clone nor a command writing the workspace
can plant it, and never writable inside the sandbox, even when ``sandbox.filesystem.allowWrite``
covers it (:mod:`journal_agent.tools.sandbox.view` binds it read-only). A changed file has
another hash and is not approved any more.

Standard library only, with neither ``json`` nor ``pathlib`` at module level: the Claude Code
hooks read ``.journal/settings.json`` through :func:`read_approved` under ``python3 -I -S``.
"""

from __future__ import annotations

import os
import stat

from journal_agent.lightjson import loads

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    from collections.abc import Mapping

STORE_NAME = "trust.json"
# A settings, command or agent file is a few kilobytes; past this it is not read at all.
MAX_FILE_BYTES = 1 << 20
_MAX_STORE_BYTES = 16 << 20


def store_dir() -> str:
    """``$XDG_CONFIG_HOME/journal-agent`` (an absolute XDG_CONFIG_HOME only, as the XDG spec
    says), else ``~/.config/journal-agent``."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "journal-agent")


def store_path() -> str:
    return os.path.join(store_dir(), STORE_NAME)


def digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def project_key(root: str | os.PathLike[str]) -> str:
    return os.path.realpath(root)


def read_file(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes, else None
    (missing, a FIFO, a directory, too big, unreadable; under ``.journal/``, ours, a symlink
    too). Read once: the caller hashes and parses the same bytes, so a file swapped in between
    is never taken for the approved one."""
    ours = os.path.basename(os.path.dirname(os.fspath(path))) == ".journal"
    try:
        fd = os.open(
            path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if ours else 0)
        )
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, limit + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return None if total > limit else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def load() -> dict:
    """The whole store; a missing or damaged one approves nothing, and so does one that is a
    link, a FIFO or a file with other names (read through the room from its own folder, never
    followed: a store that is a link is not the store we wrote)."""
    from journal_agent import confined

    data = confined.read_planted(store_dir(), STORE_NAME, _MAX_STORE_BYTES)
    if data is None or len(data) > _MAX_STORE_BYTES:
        return {}
    try:
        parsed = loads(data)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _entry(root: str | os.PathLike[str], store: dict | None) -> dict:
    projects = (store if store is not None else load()).get("projects")
    entry = projects.get(project_key(root)) if isinstance(projects, dict) else None
    return entry if isinstance(entry, dict) else {}


def approvals(root: str | os.PathLike[str], store: dict | None = None) -> dict[str, str]:
    """{path in the project: approved SHA-256} for ``root``."""
    entry = _entry(root, store)
    out = {}
    for rel, item in entry.items():
        sha = item.get("sha256") if isinstance(item, dict) else None
        if isinstance(rel, str) and isinstance(sha, str):
            out[rel] = sha
    return out


def is_approved(
    root: str | os.PathLike[str], rel: str, sha256: str, store: dict | None = None
) -> bool:
    return approvals(root, store).get(rel) == sha256


def kept_with(root: str | os.PathLike[str], rel: str, store: dict | None = None) -> dict:
    """What was kept with the user's last approval of ``rel`` (:func:`record`'s ``kept``),
    whether or not the file is still as approved; {} when nothing was."""
    item = _entry(root, store).get(rel)
    kept = item.get("kept") if isinstance(item, dict) else None
    return kept if isinstance(kept, dict) else {}


def read_approved(
    root: str | os.PathLike[str], rel: str, store: dict | None = None
) -> bytes | None:
    """The bytes of the project's file ``rel`` if the user approved exactly them, else None
    (missing, unreadable or not approved: the caller uses its defaults). ``store``: the store
    as the caller loaded it (read once for several questions)."""
    from journal_agent import confined

    # Through the room: a link there (committed, or planted by a command) is never followed
    # and counts as no file at all, as a FIFO or a hard link does.
    data = confined.read_planted(root, rel, MAX_FILE_BYTES)
    if data is None or len(data) > MAX_FILE_BYTES:
        return None
    if not is_approved(root, rel, digest(data), store):
        return None
    return data


# -- writing: only after a confirmation typed on the user's terminal ---------------------------


def record(
    root: str | os.PathLike[str],
    files: Mapping[str, str | None],
    kept: Mapping[str, dict] | None = None,
) -> None:
    """Record ``{rel: sha256}`` as approved for ``root`` (None forgets ``rel``), under the
    store's lock, replacing the store atomically; ``kept``: what to remember of an approved
    file beyond its hash (:func:`kept_with`). The caller has asked the user
    (:func:`journal_agent.terminal_confirm.confirm`); nothing else may call this."""
    folder = store_dir()
    try:
        _record(folder, root, files, kept or {})
    except OSError as exc:
        from journal_agent.errors import UserError

        raise UserError(
            f"cannot write the trust store {os.path.join(folder, STORE_NAME)} "
            f"({exc.strerror or exc}): nothing was approved; approve from a terminal of your "
            "own, outside any sandbox (inside one the store is read-only)."
        ) from None


def _record(
    folder: str,
    root: str | os.PathLike[str],
    files: Mapping[str, str | None],
    kept: Mapping[str, dict],
) -> None:
    import fcntl
    import json
    import time

    from journal_agent import confined

    # Outside every workspace by design (a clone cannot plant it; the sandbox binds it
    # read-only): the folder is the anchor, made 0700; below it the room's rule holds — the
    # lock and the store are never reached through a link, the store is replaced through a
    # random O_EXCL temp name.
    os.makedirs(folder, mode=0o700, exist_ok=True)
    lock = confined.open_lock(folder, ".trust.lock")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        store = load()
        projects = store.setdefault("projects", {})
        if not isinstance(projects, dict):
            projects = store["projects"] = {}
        key = project_key(root)
        entry = projects.get(key)
        entry = dict(entry) if isinstance(entry, dict) else {}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for rel, sha in files.items():
            if sha is None:
                entry.pop(rel, None)
            else:
                entry[rel] = {"sha256": sha, "approved": now}
                if kept.get(rel):
                    entry[rel]["kept"] = dict(kept[rel])
        if entry:
            projects[key] = entry
        else:
            projects.pop(key, None)
        store["version"] = 1
        text = json.dumps(store, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
        confined.replace(folder, STORE_NAME, text)  # (the user's own folder: the anchor)
    finally:
        os.close(lock)  # releases the lock
