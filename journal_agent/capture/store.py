"""The inbox file itself, as the hooks write it: ``.journal/inbox.jsonl``.

One JSON object per line, append-only, through :func:`journal_agent.confined.append` (whole
lines or nothing, never through a link a clone committed at ``.journal/inbox.jsonl``; appenders
hold ``flock`` only for the moment of their write, so concurrent sessions never interleave or
lose lines). A moment is written once by a hook and never rewritten; dismissing one appends a
tombstone ``{"dismissed": "<id>", "reason", "time"}``. Nothing rewrites the file, and readers
take no lock, so a hook never waits for a CLI command.

A moment's fields (``journal_agent.capture.inbox.Moment`` reads them):
``id`` (first 12 hex digits of ``hash``), ``kind`` (insight | measurement | revise), ``text``,
``time``
(ISO 8601 UTC), ``session_id``, ``prompt_id``, ``agent`` (the sub-agent's type, "" for the main
thread), ``files`` ([{"path", "lines": [[start, end], ...]}]), ``records`` (record ids),
``hash`` (sha256 of kind, text and records: the same moment is written once); a ``revise``
moment also has ``entry``, the id of the entry whose code changed.

Light on purpose: the hooks import this under ``python3 -I -S`` on every turn, so it uses
plain dicts and ``os.path`` (no dataclasses, typing, pathlib or json: each costs milliseconds to
import; JSON goes through :mod:`journal_agent.lightjson`). A root is a ``str`` or a ``Path``.
"""

from __future__ import annotations

import os
import time

from journal_agent import confined
from journal_agent.lightjson import dumps

INBOX = "inbox.jsonl"
# Each append of ours to the inbox, as a line {"at": offset, "n": bytes, "sha256"}: what lets
# journal_agent.foreign_changes tell our appends from another hand's change.
APPENDS = "written-inbox.jsonl"
TEXT_LIMIT = 8000  # characters of one moment's text; an Insight block is a few hundred
_TAIL = 4 << 20  # bytes of the inbox read for dedupe hashes: years of moments


def inbox_file(root: str | os.PathLike[str]) -> str:
    return os.path.join(root, ".journal", INBOX)


def now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def content_hash(kind: str, text: str, records: list[str]) -> str:
    """What makes two moments the same: their kind, their whitespace-normalised text, records."""
    norm = " ".join(text.split())
    return _sha256()(f"{kind}\0{norm}\0{','.join(records)}".encode()).hexdigest()


def _sha256():
    """SHA-256 from CPython's built-in module when there is one: hashlib loads OpenSSL, about
    3 ms of CPU on each captured turn. The digests are the same."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found]  # CPython 3.12+, no stub
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found]  # CPython 3.11, no stub
        except ImportError:
            from hashlib import sha256
    return sha256


def new_moment(kind: str, text: str, **fields: object) -> dict[str, object]:
    """A moment as stored; ``fields``: session_id, prompt_id, agent, files, records."""
    text = text[:TEXT_LIMIT]
    records = [str(r) for r in fields.pop("records", None) or []]  # type: ignore[union-attr]  # a list of ids
    digest = content_hash(kind, text, records)
    moment: dict[str, object] = {
        "id": digest[:12],
        "kind": kind,
        "text": text,
        "time": now_utc(),
        "session_id": "",
        "prompt_id": "",
        "agent": "",
        "files": [],
        "records": records,
        "hash": digest,
    }
    moment.update(fields)
    return moment


def revise_moment(
    entry_id: str,
    title: str,
    refs: list[str],
    why: str,
    changes: str,
    files: list[dict[str, object]],
    **fields: object,
) -> dict[str, object]:
    """A ``revise`` moment: the code an entry explains changed (``why``: how it was noticed),
    so the entry may need revising. ``changes`` says what changed, so a later change of the
    same lines is a moment of its own."""
    text = (
        f"The code the entry **{title}** explains changed ({', '.join(refs)}; {why}). "
        f"Does its explanation still hold?\n{changes}\n"
        f"Revise the entry (`journal-agent journal show {entry_id}`), then record the code as it "
        f"is now: `journal-agent journal refresh {entry_id}` (`journal-agent journal check` "
        "says which references to accept)."
    )
    return new_moment("revise", text, files=files, entry=entry_id, **fields)


def known_hashes(root: str | os.PathLike[str]) -> set[str]:
    """The hashes of moments already in the inbox (its last few MB), waiting or dismissed."""
    data = confined.read_tail(root, inbox_file(root), _TAIL)
    if data is None:
        return set()
    out: set[str] = set()
    for raw in data.splitlines():
        start = raw.find(b'"hash": "')
        if start >= 0:
            out.add(raw[start + 9 : start + 73].decode("ascii", "replace"))
    return out


def lines(root: str | os.PathLike[str]) -> list[dict[str, object]]:
    """Every object in the inbox, in order; lines that are not JSON objects are skipped."""
    from journal_agent.jsonl import read_objects

    return read_objects(root, inbox_file(root))


def waiting_count(root: str | os.PathLike[str]) -> int:
    """How many moments wait (not dismissed)."""
    ids, done = set(), set()
    for item in lines(root):
        if isinstance(item.get("dismissed"), str):
            done.add(item["dismissed"])
        elif isinstance(item.get("id"), str) and isinstance(item.get("text"), str):
            ids.add(item["id"])
    return len(ids - done)


def _redacted(item: dict[str, object]) -> dict[str, object]:
    """``item`` with no secret in its text: the inbox's one writer redacts what every writer
    hands it (a moment's text, a dismissal's reason), whoever wrote it."""
    from journal_agent.secret_text import redact_secrets

    out = dict(item)
    for key in ("text", "reason"):
        value = out.get(key)
        if isinstance(value, str):
            out[key] = redact_secrets(value)
    return out


def append(root: str | os.PathLike[str], items: list[dict[str, object]]) -> None:
    """Append ``items`` whole or not at all (a full disk leaves no torn line), secrets
    redacted."""
    if not items:
        return
    data = b"".join(dumps(_redacted(item), sort_keys=True).encode() + b"\n" for item in items)
    confined.append(root, inbox_file(root), data, then=lambda at, done: _stamp(root, at, done))


def _stamp(root: str | os.PathLike[str], at: int, data: bytes) -> None:
    """Under the inbox's lock, after our append of ``data`` at ``at``: its stamp. Never fails
    the append (a stamp lost to a full disk makes the next read say the inbox changed, once)."""
    digest = _sha256()(data).hexdigest()
    line = b'{"at": %d, "n": %d, "sha256": "%s"}\n' % (at, len(data), digest.encode())
    try:  # noqa: SIM105 (contextlib costs the hooks an import)
        confined.append(root, os.path.join(root, ".journal", APPENDS), line)
    except OSError:
        pass
