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

from journal_agent.errors import UserError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

REDACTED = "[REDACTED]"

# (kind, hints, pattern) for secrets recognisable by their shape alone; the whole match is
# secret. Every match contains one of its hints (lower-cased): a text holding no hint of any
# pattern holds no secret, which is decided without compiling a pattern (see _may_hold).
_SHAPES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("private key block", ("-----begin",), r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"
     r"[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)"),
    ("Anthropic API key", ("sk-",), r"\bsk-ant-[A-Za-z0-9_\-]{8,}"),
    ("OpenAI API key", ("sk-",), r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("GitHub token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
     r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
    ("GitLab token", ("glpat-",), r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("Hugging Face token", ("hf_",), r"\bhf_[A-Za-z0-9]{20,}"),
    ("Slack token", ("xox",), r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    ("AWS access key id", ("akia", "asia", "agpa", "aida", "aroa"),
     r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b"),
    ("Google API key", ("aiza",), r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("Google OAuth token", ("ya29.",), r"\bya29\.[0-9A-Za-z_\-]{20,}"),
    ("Stripe key", ("k_live_", "k_test_"), r"\b[rsp]k_(?:live|test)_[0-9A-Za-z]{16,}"),
    ("npm token", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("PyPI token", ("pypi-",), r"\bpypi-AgE[A-Za-z0-9_\-]{40,}"),
    ("SendGrid key", ("sg.",), r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    ("bearer token", ("bearer ",), r"(?<=Bearer )[A-Za-z0-9._~+/\-]{20,}=*"),
)  # fmt: skip

# "pw" / "pass" only as a suffix (db_pw, DB_PASS) or "pw" alone: "bypass:" is prose.
_PASSWORD_NAME = r"(?:password|passwd|passphrase|pwd|(?<=[_.\-])(?:pw|pass)|(?<![A-Za-z0-9_.\-])pw)"
_KEY_NAME = (
    r"(?:secret|token|api_?key|apikey|access_?key|secret_?key|private_?key|auth|"
    r"credentials?|client_?secret|signing_?key)"
)
# NAME <sep> VALUE, NAME ending in a secret-like word (``my_db_pw``, ``AWS_SECRET_ACCESS_KEY``),
# the separator "=", ":" or ":=", the value quoted (spaces allowed) or a bare word.
_ASSIGN = (
    r"(?P<name>\b[A-Za-z0-9_.\-]*?(?:(?P<pw>" + _PASSWORD_NAME + r")|" + _KEY_NAME + r")s?)"
    r"[\"']?[ \t]*(?::=|=|:)[ \t]*"
    r"(?:(?P<q>[\"'])(?P<qval>[^\"'\n]{4,200})(?P=q)|(?P<val>[^\s\"',;)\]}]{6,200}))"
)
_ASSIGN_HINTS = ("pass", "pw", "secret", "token", "key", "auth", "credential")  # of both names
# The password in a URL's user information: postgres://user:PASSWORD@host/db,
# https://:TOKEN@host. Only the password is secret; scheme, user and host stay readable.
_URL_CREDENTIAL = (
    r"\b[A-Za-z][A-Za-z0-9+.\-]{1,30}://[^/\s:@'\"]*:(?P<pw>[^/\s@'\"]{1,200})@[^\s/@'\"]"
)
_URL_HINTS = ("://",)
_PLACEHOLDER = (
    r"^(?:<.*>|\[.*\]|\{.*\}|\$.*|%.*%|\*+|x+|\.+|-+|_+|your[_\- ].*|.*example.*|changeme|"
    r"none|null|nil|true|false|undefined|redacted|secret|password|token|env|"
    r"os\.environ.*|os\.getenv.*|getenv.*|process\.env.*|settings\..*|config\..*)$"
)
_HINTS = tuple(
    sorted({h for _, hints, _ in _SHAPES for h in hints} | {*_ASSIGN_HINTS, *_URL_HINTS})
)
# Characters that IGNORECASE matching takes for an ASCII letter although str.lower() does not
# give that letter (or gives it with a combining mark): folded first, so _may_hold sees them.
_FOLD = {ord("\u0130"): "i", ord("\u0131"): "i", ord("\u017f"): "s", ord("\u212a"): "k"}
_MIN_ENTROPY = 3.0  # bits per character: random keys are well above, words and code below
_MIN_RANDOM_LEN = 16


class SecretFinding:
    """A secret in a text: its kind ("Anthropic API key", "password assignment", ...), the
    1-based line where it starts, and the offsets of its value (the name stays).

    A plain class rather than a dataclass or a named tuple: the Claude Code hooks redact with
    this module, and importing dataclasses or collections costs every captured turn time.
    """

    __slots__ = ("end", "kind", "line", "start")

    def __init__(self, kind: str, line: int, start: int, end: int) -> None:
        self.kind, self.line, self.start, self.end = kind, line, start, end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretFinding) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"SecretFinding{self._key()!r}"

    def _key(self) -> tuple[str, int, int, int]:
        return (self.kind, self.line, self.start, self.end)


class SecretInText(UserError):
    """Text to be saved holds a secret; the message names the line and how to redact it."""

    def __init__(self, message: str, findings: list[SecretFinding]) -> None:
        super().__init__(message)
        self.findings = findings


def find_secrets(text: str) -> list[SecretFinding]:
    """Every secret in ``text``, in order of position."""
    return _find(text) if _may_hold(text) else []


def _may_hold(text: str) -> bool:
    """False when ``text`` holds no hint of any pattern, so that none can match: most texts
    are decided without compiling the patterns (and importing ``re``), which a hook would pay
    for on every captured turn. True says nothing: the patterns decide."""
    folded = text.translate(_FOLD).lower()
    return any(hint in folded for hint in _HINTS)


_compiled: dict[str, re.Pattern[str]] = {}


def _pattern(name: str) -> re.Pattern[str]:
    """The compiled pattern ``name`` (on first use; most processes never need one)."""
    if not _compiled:
        import re

        shapes = "|".join(f"(?P<s{i}>{p})" for i, (_, _, p) in enumerate(_SHAPES))
        _compiled["shape"] = re.compile(shapes)
        _compiled["assign"] = re.compile(_ASSIGN, re.IGNORECASE)
        _compiled["url"] = re.compile(_URL_CREDENTIAL)
        _compiled["placeholder"] = re.compile(_PLACEHOLDER, re.IGNORECASE)
        _compiled["number"] = re.compile(r"[\d.,_eE+\-]+")
        _compiled["identifier"] = re.compile(r"[a-z_]+(?:\.[a-z_]+)*")
    return _compiled[name]


def _find(text: str) -> list[SecretFinding]:
    found: list[SecretFinding] = []
    for m in _pattern("shape").finditer(text):
        i = int(next(k for k, v in m.groupdict().items() if v is not None)[1:])
        found.append(_finding(text, _SHAPES[i][0], m.start(), m.end()))
    for m in _pattern("url").finditer(text):
        if not _pattern("placeholder").match(m.group("pw")):
            found.append(_finding(text, "password in a URL", m.start("pw"), m.end("pw")))
    for m in _pattern("assign").finditer(text):
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
    if not v or _pattern("placeholder").match(v) or "REDACTED" in v.upper():
        return False
    if _pattern("number").fullmatch(v):  # a number: max_tokens = 4096
        return False
    if password:
        return len(v) >= 6
    return len(v) >= _MIN_RANDOM_LEN and _entropy(v) >= _MIN_ENTROPY and _mixed(v)


def _mixed(v: str) -> bool:
    """Random-looking: letters and digits together, no spaces, not a dotted/snake identifier."""
    if " " in v or _pattern("identifier").fullmatch(v):
        return False
    return any(c.isdigit() for c in v) and any(c.isalpha() for c in v)


def _entropy(v: str) -> float:
    import math

    counts: dict[str, int] = {}
    for c in v:
        counts[c] = counts.get(c, 0) + 1
    return -sum(n / len(v) * math.log2(n / len(v)) for n in counts.values())


def _without_overlaps(found: list[SecretFinding]) -> list[SecretFinding]:
    out: list[SecretFinding] = []
    for f in sorted(found, key=lambda f: (f.start, -(f.end - f.start))):
        if out and f.start < out[-1].end:
            continue
        out.append(f)
    return out
