"""Run transcripts: one JSONL file per run under ``.journal/transcripts/``.

Each line is a record: ``run_start``, ``request`` (the exact body sent), ``response``,
``tool_call``, ``tool_result``, ``usage``, ``notice``, ``done`` (``interrupted`` when the run
ended by an exception). Secrets never reach the file, wherever they come from (the prompt, a
tool's output such as ``cat .env``, the model's reply): everything the one detector,
:mod:`journal_agent.secret_text`, finds (token shapes of the major providers, ``password = "…"``,
``.env`` lines, the password in a URL, ``.netrc`` lines, private-key blocks, AWS key pairs …),
the API key's value, the values of environment variables named like secrets (``*TOKEN*``,
``*KEY*``, ``*SECRET*``, ``*PASSWORD*``), header-like fields (authorization, x-api-key,
api_key), and any value the detector found earlier in the run, quoted again later where it
would not be found on its own (the model repeating a password in prose).
"""

from __future__ import annotations

import json
import os
import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journal_agent import confined
from journal_agent.paths import transcripts_dir
from journal_agent.secret_text import find_secrets, redact_secrets

if TYPE_CHECKING:
    from journal_agent.runtime.wire import ChatMessage, RequestBody

REDACTED = "[REDACTED]"
_SECRET_FIELDS = {"authorization", "x-api-key", "api_key", "api-key", "auth_token", "apikey"}
_SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
# Other environment variables whose values are secrets (HF_TOKEN, AWS_SECRET_ACCESS_KEY,
# GITHUB_TOKEN, DB_PASSWORD, ...): a tool may print them (``env``, ``cat .env``).
_SECRET_ENV_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_MIN_ENV_SECRET = 8  # shorter values ("1", "true") are not worth hiding and would mangle text


# Values the detector found, remembered (process-wide) so that the model quoting one later, in
# prose, is redacted too.
_LEARNED: set[str] = set()
_LEARNED_LOCK = threading.Lock()
_MIN_LEARNED = 6


def _secrets_from_env() -> list[str]:
    out = [v for name in _SECRET_ENV if (v := os.environ.get(name)) and len(v) >= 4]
    out += [
        v
        for name, v in os.environ.items()
        if _SECRET_ENV_NAME.search(name)
        and len(v) >= _MIN_ENV_SECRET
        and not v.isdigit()
        and not v.startswith(("/", "~", "."))  # a path (GOOGLE_APPLICATION_CREDENTIALS=/…)
    ]
    return out


class Scrubber:
    """Replaces secrets in strings and nested JSON values with ``[REDACTED]``."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        values = {*(secrets or []), *_secrets_from_env()}
        # Longest first so a key that contains another is replaced whole.
        self._secrets = sorted((s for s in values if s), key=len, reverse=True)

    def text(self, value: str) -> str:
        # The one detector (token shapes, passwords and URL passwords, key blocks, AWS pairs…),
        # which the journal and the ledger refuse by; what it finds is remembered.
        found = find_secrets(value)
        if found:
            with _LEARNED_LOCK:
                _LEARNED.update(
                    v for f in found if len(v := value[f.start : f.end].strip()) >= _MIN_LEARNED
                )
            value = redact_secrets(value, REDACTED)
        with _LEARNED_LOCK:
            learned = sorted(_LEARNED, key=len, reverse=True) if _LEARNED else []
        for secret in (*self._secrets, *learned):
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def __call__(self, value: Any) -> Any:  # JSON in, the same shape out
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                k: (REDACTED if str(k).lower() in _SECRET_FIELDS else self(v))
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self(v) for v in value]
        return value


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + os.urandom(3).hex()


class Transcript:
    """Thread-safe JSONL writer (sub-agents write to their parent's transcript).

    Each record is one :func:`journal_agent.confined.append`: a whole line or none (a full disk
    leaves no torn record), never through a link planted at the file or a folder above it."""

    def __init__(self, path: Path, *, secrets: list[str] | None = None) -> None:
        from journal_agent.paths import anchor_of

        self.path = path
        self._anchor = anchor_of(path)
        self._scrub = Scrubber(secrets)
        self._lock = threading.Lock()
        self._closed = False
        confined.append(self._anchor, path, b"")  # made now: a link there stops the run first

    @classmethod
    def for_run(cls, root: Path, run_id: str, *, secrets: list[str] | None = None) -> Transcript:
        return cls(transcripts_dir(root) / f"{run_id}.jsonl", secrets=secrets)

    def write(self, kind: str, agent: str, **data: object) -> None:
        record = {"type": kind, "agent": agent, "time": datetime.now(UTC).isoformat(), **data}
        line = json.dumps(self._scrub(record), ensure_ascii=False, default=str)
        # backslashreplace: a stray lone surrogate in some value must not lose the record.
        raw = (line + "\n").encode("utf-8", "backslashreplace")
        with self._lock:
            if self._closed:  # a sub-agent still winding down after the run ended
                return
            confined.append(self._anchor, self.path, raw)

    def close(self) -> None:
        with self._lock:
            self._closed = True


def read_transcript(path: Path) -> list[dict[str, Any]]:
    from journal_agent.paths import anchor_of

    data = confined.read(anchor_of(path), path)  # (a link there is refused, never followed)
    if data is None:
        raise FileNotFoundError(path)
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line]


def replay_requests(records: list[dict[str, Any]], agent: str = "main") -> list[RequestBody]:
    """The exact request bodies one agent sent, rebuilt from its delta ``request`` records."""
    from journal_agent.runtime.caching import with_message_breakpoints

    head: dict[str, Any] = {}  # tools, system, thinking: logged once, by the first request
    history: list[ChatMessage] = []
    out: list[RequestBody] = []
    for r in records:
        if r.get("type") != "request" or r.get("agent") != agent:
            continue
        head.update({k: r[k] for k in ("tools", "system", "thinking") if k in r})
        history = history[: r["messages_before"]] + r["new_messages"]
        body: RequestBody = {"model": r["model"], "max_tokens": r["max_tokens"]}
        if "tools" in head:
            body["tools"] = head["tools"]
        body["system"] = head["system"]
        body["messages"] = with_message_breakpoints(history, r["cache_breakpoints"])
        if "thinking" in head:
            body["thinking"] = head["thinking"]
        out.append(body)
    return out
