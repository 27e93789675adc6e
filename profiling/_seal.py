"""The seal on a measurement record: which records this user's own hand saved.

A record is a JSON file under ``.journal/measurements/``, and a repository can commit one:
``git clone`` then brings a ``meas-….json`` holding whatever numbers its author liked, and an
entry citing it would check out as a measurement. So :meth:`profiling.records.RecordStore.save`
puts ``extra.seal`` on every record it writes: an HMAC-SHA256 of the record's content under a
key of this user's, ``$XDG_CONFIG_HOME/journal-agent/records.key`` (``~/.config/journal-agent``
without it; beside journal-agent's trust store, 0600, made on first use). The key lies outside
every workspace, is read-only and hidden inside journal-agent's sandbox (so what a sandboxed
command saves, in its outbox, is sealed by the host that collects it, and nothing a command
forges can be), and never travels with a repository. A record whose seal does not verify —
committed by a repository, made on another machine, changed by another hand — is one the user
did not make here (journal_agent.record_seal says what that means for a citation).

Anything that saves a record seals it: code must never load a record it did not make and save
it again, except ``journal-agent measurements adopt``, which asks the user first.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from profiling.errors import ProfilingError

# A profiling.records.MeasurementRecord (not imported: records imports this module).
MeasurementRecord = Any

KEY_NAME = "records.key"
_KEY_HEX = 64  # 32 random bytes, written as hex


def key_dir() -> Path:
    """``$XDG_CONFIG_HOME/journal-agent`` (an absolute XDG_CONFIG_HOME only), else
    ``~/.config/journal-agent``: journal_agent.trust_store.store_dir, spelled here because
    profiling never imports journal_agent (a test holds them equal)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "journal-agent"


def key_path() -> Path:
    return key_dir() / KEY_NAME


def _read_key() -> bytes | None:
    from profiling import _files

    folder = key_dir()
    try:
        data = _files.read(folder, folder / KEY_NAME)  # (the folder is the anchor: no link)
    except (ProfilingError, OSError):
        return None  # a link, a FIFO, hidden by the sandbox: no key
    text = (data or b"").strip()
    if len(text) != _KEY_HEX:
        return None
    try:
        return bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None


def _make_key() -> None:
    """Write a new key where there is none: O_EXCL | O_NOFOLLOW, mode 0600, never over
    anything (two processes making one at once: the first wins, the other reads it)."""
    folder = key_dir()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    tmp = f".{KEY_NAME}.tmp-{secrets.token_hex(6)}"
    fd = os.open(folder / tmp, flags, 0o600)
    try:
        os.write(fd, (secrets.token_hex(_KEY_HEX // 2) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(folder / tmp, folder / KEY_NAME)  # whole or not at all, never over a file
    except FileExistsError:
        pass
    finally:
        os.unlink(folder / tmp)


def _key(create: bool) -> bytes | None:
    """This user's key, made first when ``create`` and there is none; None when it cannot be
    read or made (inside the sandbox: its folder is read-only and the key hidden)."""
    key = _read_key()
    if key is not None or not create:
        return key
    try:
        _make_key()
    except OSError:
        return None
    return _read_key()


def _content(record: MeasurementRecord) -> bytes:
    data = record.model_dump(mode="json")
    data["extra"] = {k: v for k, v in data.get("extra", {}).items() if k != "seal"}
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _mac(key: bytes, record: MeasurementRecord) -> str:
    return hmac.new(key, _content(record), hashlib.sha256).hexdigest()


def seal(record: MeasurementRecord) -> bool:
    """Put this user's seal on ``record``; False (and no seal) when there is no key to be had."""
    key = _key(create=True)
    if key is None:
        record.extra.pop("seal", None)
        return False
    record.extra["seal"] = _mac(key, record)
    return True


def sealed_here(record: MeasurementRecord) -> bool:
    """Whether ``record``, as it is now, carries this user's seal."""
    given = record.extra.get("seal")
    if not isinstance(given, str):
        return False
    key = _key(create=False)
    return key is not None and hmac.compare_digest(given, _mac(key, record))
