"""One detector for secrets in text: what the journal, the ledger and Write/Edit into them refuse,
and what transcripts redact.

It looks for:

- API keys of the major providers by their shape (Anthropic, OpenAI, GitHub, GitLab, Hugging
  Face, Slack, Google, Stripe, npm, PyPI, SendGrid), AWS access key ids, bearer tokens;
- private-key blocks (``-----BEGIN … PRIVATE KEY-----``);
- the password in a URL (``postgres://user:PASSWORD@host/db``);
- assignments to a password-like name (``password = "…"``, ``db_pass: …``, ``my_db_pw: …``,
  ``PGPASSWORD=…``), whatever the value;
- assignments to a token- or key-like name (``api_key``, ``aws_secret_access_key``,
  ``HF_TOKEN``, ``client_secret``) whose value looks random (long, high entropy) — so that
  ``max_tokens = 4096`` or ``tokens = batch * seq`` in a note about training are left alone.

Placeholders (``<your key>``, ``YOUR_API_KEY``, ``xxxx``, ``***``, ``[REDACTED]``, ``$VAR``,
``os.environ[...]``) are not secrets.

Public API: :func:`find_secrets`, :func:`redact_secrets`, :func:`refuse_secrets` (raises
:class:`SecretInText`, a :class:`~journal_agent.errors.UserError`, with one sentence naming
the line and showing it redacted).
"""

from __future__ import annotations

import math
import re
from collections import Counter, namedtuple

from journal_agent.errors import UserError

REDACTED = "[REDACTED]"

# (kind, pattern) for secrets recognisable by their shape alone; the whole match is secret.
_SHAPES: tuple[tuple[str, str], ...] = (
    ("private key block", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?"
     r"(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)"),
    ("Anthropic API key", r"\bsk-ant-[A-Za-z0-9_\-]{8,}"),
    ("OpenAI API key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("GitHub token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
    ("GitLab token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("Hugging Face token", r"\bhf_[A-Za-z0-9]{20,}"),
    ("Slack token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    ("AWS access key id", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b"),
    ("Google API key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("Google OAuth token", r"\bya29\.[0-9A-Za-z_\-]{20,}"),
    ("Stripe key", r"\b[rsp]k_(?:live|test)_[0-9A-Za-z]{16,}"),
    ("npm token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("PyPI token", r"\bpypi-AgE[A-Za-z0-9_\-]{40,}"),
    ("SendGrid key", r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    ("bearer token", r"(?<=Bearer )[A-Za-z0-9._~+/\-]{20,}=*"),
)  # fmt: skip
_SHAPE_RE = re.compile("|".join(f"(?P<s{i}>{p})" for i, (_, p) in enumerate(_SHAPES)))

# "pw" / "pass" only as a suffix (db_pw, DB_PASS) or "pw" alone: "bypass:" is prose.
_PASSWORD_NAME = r"(?:password|passwd|passphrase|pwd|(?<=[_.\-])(?:pw|pass)|(?<![A-Za-z0-9_.\-])pw)"
_KEY_NAME = (
    r"(?:secret|token|api_?key|apikey|access_?key|secret_?key|private_?key|auth|"
    r"credentials?|client_?secret|signing_?key)"
)
# NAME <sep> VALUE, NAME ending in a secret-like word (``my_db_pw``, ``AWS_SECRET_ACCESS_KEY``),
# the separator "=", ":" or ":=", the value quoted (spaces allowed) or a bare word.
_ASSIGN_RE = re.compile(
    r"(?P<name>\b[A-Za-z0-9_.\-]*?(?:(?P<pw>" + _PASSWORD_NAME + r")|" + _KEY_NAME + r")s?)"
    r"[\"']?[ \t]*(?::=|=|:)[ \t]*"
    r"(?:(?P<q>[\"'])(?P<qval>[^\"'\n]{4,200})(?P=q)|(?P<val>[^\s\"',;)\]}]{6,200}))",
    re.IGNORECASE,
)
# The password in a URL's user information: postgres://user:PASSWORD@host/db,
# https://:TOKEN@host. Only the password is secret; scheme, user and host stay readable.
_URL_CREDENTIAL_RE = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.\-]{1,30}://[^/\s:@'\"]*:(?P<pw>[^/\s@'\"]{1,200})@[^\s/@'\"]"
)
_PLACEHOLDER = re.compile(
    r"^(?:<.*>|\[.*\]|\{.*\}|\$.*|%.*%|\*+|x+|\.+|-+|_+|your[_\- ].*|.*example.*|changeme|"
    r"none|null|nil|true|false|undefined|redacted|secret|password|token|env|"
    r"os\.environ.*|os\.getenv.*|getenv.*|process\.env.*|settings\..*|config\..*)$",
    re.IGNORECASE,
)
_MIN_ENTROPY = 3.0  # bits per character: random keys are well above, words and code below
_MIN_RANDOM_LEN = 16


class SecretFinding(namedtuple("SecretFinding", "kind line start end")):
    """A secret in a text: its kind ("Anthropic API key", "password assignment", ...), the
    1-based line where it starts, and the offsets of its value (the name stays).

    A named tuple rather than a dataclass: the Claude Code hooks redact with this module, and
    importing dataclasses (inspect, ast) would cost every captured turn milliseconds.
    """

    __slots__ = ()


class SecretInText(UserError):
    """Text to be saved holds a secret; the message names the line and how to redact it."""

    def __init__(self, message: str, findings: list[SecretFinding]) -> None:
        super().__init__(message)
        self.findings = findings


def find_secrets(text: str) -> list[SecretFinding]:
    """Every secret in ``text``, in order of position."""
    found: list[SecretFinding] = []
    for m in _SHAPE_RE.finditer(text):
        i = int(next(k for k, v in m.groupdict().items() if v is not None)[1:])
        found.append(_finding(text, _SHAPES[i][0], m.start(), m.end()))
    for m in _URL_CREDENTIAL_RE.finditer(text):
        if not _PLACEHOLDER.match(m.group("pw")):
            found.append(_finding(text, "password in a URL", m.start("pw"), m.end("pw")))
    for m in _ASSIGN_RE.finditer(text):
        group = "qval" if m.group("qval") is not None else "val"
        value = m.group(group)
        if _is_secret_value(value, password=m.group("pw") is not None):
            kind = "password assignment" if m.group("pw") else "secret assignment"
            found.append(_finding(text, kind, m.start(group), m.end(group)))
    return _without_overlaps(found)


def redact_secrets(text: str, replacement: str = REDACTED) -> str:
    """``text`` with every secret's value replaced (names and surrounding text kept)."""
    for f in reversed(find_secrets(text)):
        text = text[: f.start] + replacement + text[f.end :]
    return text


def refuse_secrets(text: str, where: str) -> None:
    """Raise :class:`SecretInText` if ``text`` (to be saved into ``where``) holds a secret."""
    findings = find_secrets(text)
    if not findings:
        return
    first = findings[0]
    line = text.splitlines()[first.line - 1] if text.splitlines() else text
    shown = redact_secrets(line).strip()
    if len(shown) > 120:
        shown = shown[:117] + "..."
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    raise SecretInText(
        f"not saved to {where}: line {first.line} holds what looks like a {first.kind}{more}; "
        f"quote it redacted instead, e.g. `{shown}`, and try again.",
        findings,
    )


def _finding(text: str, kind: str, start: int, end: int) -> SecretFinding:
    return SecretFinding(kind, text.count("\n", 0, start) + 1, start, end)


def _is_secret_value(value: str, *, password: bool) -> bool:
    v = value.strip()
    if not v or _PLACEHOLDER.match(v) or "REDACTED" in v.upper():
        return False
    if re.fullmatch(r"[\d.,_eE+\-]+", v):  # a number: max_tokens = 4096
        return False
    if password:
        return len(v) >= 6
    return len(v) >= _MIN_RANDOM_LEN and _entropy(v) >= _MIN_ENTROPY and _mixed(v)


def _mixed(v: str) -> bool:
    """Random-looking: letters and digits together, no spaces, not a dotted/snake identifier."""
    if " " in v or re.fullmatch(r"[a-z_]+(?:\.[a-z_]+)*", v):
        return False
    return any(c.isdigit() for c in v) and any(c.isalpha() for c in v)


def _entropy(v: str) -> float:
    counts = Counter(v)
    return -sum(n / len(v) * math.log2(n / len(v)) for n in counts.values())


def _without_overlaps(found: list[SecretFinding]) -> list[SecretFinding]:
    out: list[SecretFinding] = []
    for f in sorted(found, key=lambda f: (f.start, -(f.end - f.start))):
        if out and f.start < out[-1].end:
            continue
        out.append(f)
    return out
