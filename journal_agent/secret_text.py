"""One detector for secrets in text: what the journal, the ledger and Write/Edit into them refuse,
and what the inbox, the feedback history, transcripts and every tool result redact.

It looks for (the rules, as data, are in :mod:`journal_agent._secret_rules`):

- API keys and tokens of the major providers by their shape (Anthropic, OpenAI, GitHub, GitLab,
  Hugging Face, Slack, Google, Stripe, AWS, npm, PyPI, SendGrid, Groq, Replicate, Databricks,
  Vault …), JSON web tokens, private-key blocks (also base64-encoded, as in a kubeconfig);
- a credential where it sits, whatever it looks like: the password in a URL
  (``https://user:TOKEN@host``), ``Authorization: Bearer|Basic …``, a ``.netrc`` line,
  ``mysql -pPASS``, ``sshpass -p PASS``, ``curl -u user:PASS``, ``--password PASS``, Azure's
  ``AccountKey=`` and SAS ``sig=``, ``Password=…;`` in a connection string, a W&B key after
  "wandb … key|login", a 40-character AWS secret shortly after "aws", "secret" or a key id;
- ``password = "…"`` (any value) and ``api_key: …`` / ``token = …`` (a random-looking value),
  ``.env`` lines (``HF_TOKEN=…``), and prose: "the password is hunter2".

Placeholders (``<your key>``, ``YOUR_API_KEY``, ``xxxx``, ``***``, ``[REDACTED]``, ``$VAR``,
``os.environ[...]``, the AWS documentation's ``…EXAMPLE`` keys) are not secrets.

Public API: :func:`find_secrets`, :func:`redact_secrets`, :func:`refuse_secrets` (raises
:class:`SecretInText`, a :class:`~journal_agent.errors.UserError`, with one sentence naming
the line and showing it redacted).

Stdlib only, and cheap where it can be: the Claude Code hooks redact with it on every captured
turn. A text holding none of the rules' hints (see :mod:`journal_agent._secret_rules`) is
decided without importing ``re``; a text that does is scanned only by the rules it hints at,
each compiled on first use.
"""

from __future__ import annotations

from journal_agent._secret_rules import ASSIGNMENT, ENV_LINE, PLACEHOLDER, PLACES, PROVIDERS
from journal_agent.errors import UserError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

REDACTED = "[REDACTED]"

_RULES = (*PROVIDERS, *PLACES, ASSIGNMENT, ENV_LINE)
_HINTS = tuple(sorted({h for _, hints, _, _ in _RULES for h in hints}))
# Characters that IGNORECASE matching takes for an ASCII letter although str.lower() does not
# give that letter (or gives it with a combining mark): folded first, so the hints see them.
_FOLD = {ord("\u0130"): "i", ord("\u0131"): "i", ord("\u017f"): "s", ord("\u212a"): "k"}
_FOLD_CHARS = tuple(map(chr, _FOLD))
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


def redact_secrets(text: str, replacement: str = REDACTED) -> str:
    """``text`` with every secret's value replaced (names and surrounding text kept)."""
    found = find_secrets(text)
    if not found:
        return text
    parts, at = [], 0
    for f in found:
        parts += [text[at : f.start], replacement]
        at = f.end
    parts.append(text[at:])
    return "".join(parts)


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


def find_secrets(text: str) -> list[SecretFinding]:
    """Every secret in ``text``, in order of position (of findings that overlap, the first
    rule's; see :func:`_without_overlaps`)."""
    folded = _folded(text)
    return _find(text, _hinted(folded), folded)


def _folded(text: str) -> str:
    """``text`` in lower case with the letters IGNORECASE takes for ASCII ones made ASCII: what
    the hints and the case-insensitive rules look at. Same length, same offsets (U+0130 is the
    only character whose lower case is longer, and it is folded first)."""
    if not any(c in text for c in _FOLD_CHARS):  # (most texts: translate() costs far more)
        return text.lower()
    return text.translate(_FOLD).lower()


def _hinted(folded: str) -> list[int]:
    """The rules whose hints the folded text holds: only they can match. Most texts hold none,
    and are decided without compiling a pattern (or importing ``re``)."""
    present = {h for h in _HINTS if h in folded}
    if not present:
        return []
    return [i for i, rule in enumerate(_RULES) if not present.isdisjoint(rule[1])]


_compiled: dict[object, re.Pattern[str]] = {}


def _pattern(key: int | str) -> re.Pattern[str]:
    """Rule ``key``'s compiled pattern, or a helper's by name (on first use: most processes
    never need one)."""
    found = _compiled.get(key)
    if found is None:
        import re

        if isinstance(key, int):
            found = re.compile(_RULES[key][2].removeprefix("(?i)"))
        else:
            source = {
                "placeholder": PLACEHOLDER,
                "number": r"[\d.,_eE+\-]+",
                "identifier": r"[a-z_]+(?:\.[a-z_]+)*",
                "reference": r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+",
            }[key]
            found = re.compile(source, re.IGNORECASE if key == "placeholder" else 0)
        _compiled[key] = found
    return found


def _find(text: str, rules: list[int] | range, folded: str | None = None) -> list[SecretFinding]:
    found: list[tuple[int, SecretFinding]] = []
    for i in rules:
        kind, _, source, check = _RULES[i]
        if source.startswith("(?i)"):  # written in lower case for the folded text
            folded = _folded(text) if folded is None else folded
            matches = _pattern(i).finditer(folded)
        else:
            matches = _pattern(i).finditer(text)
        for m in matches:
            span = _value_span(m)
            value = text[span[0] : span[1]]
            if check and not _CHECKS[check](value, m, text):
                continue
            if kind == "assignment":
                kind_found = "password assignment" if m.group("pw") else "secret assignment"
            else:
                kind_found = kind
            found.append((i, _finding(text, kind_found, *span)))
    return _without_overlaps(text, found)


def _value_span(m: re.Match[str]) -> tuple[int, int]:
    """Where the secret is: the first ``v…`` group that took part, else the whole match."""
    for name in ("v", "v2", "v3"):
        if name in m.re.groupindex and m.group(name) is not None:
            return m.span(name)
    return m.span()


def _finding(text: str, kind: str, start: int, end: int) -> SecretFinding:
    return SecretFinding(kind, text.count("\n", 0, start) + 1, start, end)


def _without_overlaps(text: str, found: list[tuple[int, SecretFinding]]) -> list[SecretFinding]:
    """One finding per stretch of text: of those starting at the same place, the first rule's
    (the more specific: ``https://token:SECRET@host`` is a URL's password, not a ``token:``
    setting whose value runs on through the host); one inside another is dropped, and the part
    of one that runs on past another is kept."""
    out: list[SecretFinding] = []
    for _, f in sorted(found, key=lambda p: (p[1].start, p[0])):
        if out and f.start < out[-1].end:
            if f.end > out[-1].end:  # runs on past it: what is left is secret too
                out.append(_finding(text, f.kind, out[-1].end, f.end))
            continue
        out.append(f)
    return out


# -- what a value must also be ------------------------------------------------------------------


def _stands_for_one(v: str) -> bool:
    """A placeholder, a variable, a number or an already-redacted value: no secret."""
    return (
        not v
        or _pattern("placeholder").match(v) is not None
        or "REDACTED" in v.upper()
        or _pattern("number").fullmatch(v) is not None
    )


def _random(v: str) -> bool:
    """Random-looking: long, high entropy, letters and digits together, no spaces, not a
    dotted/snake identifier."""
    v = v.strip()
    if len(v) < _MIN_RANDOM_LEN or _stands_for_one(v) or " " in v:
        return False
    if _pattern("identifier").fullmatch(v) or _entropy(v) < _MIN_ENTROPY:
        return False
    return any(c.isdigit() for c in v) and any(c.isalpha() for c in v)


def _password(v: str) -> bool:
    """A value given to a password-like name: anything but a placeholder, a number, a
    reference (``args.password``) or a word too short to be one."""
    v = v.strip()
    return len(v) >= 6 and not _stands_for_one(v) and not _pattern("reference").fullmatch(v)


def _basic(v: str) -> bool:
    """base64 of ``user:password``, as HTTP Basic authentication sends it."""
    import binascii

    if len(v) % 4:
        return False
    try:
        raw = binascii.a2b_base64(v, strict_mode=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, colon, password = raw.partition(":")
    return bool(colon and user and password) and raw.isprintable()


def _pem(v: str) -> bool:
    import binascii

    head = v[:96]
    try:
        raw = binascii.a2b_base64(head[: len(head) - len(head) % 4])
    except (binascii.Error, ValueError):
        return False
    return b"PRIVATE KEY" in raw


def _aws(v: str) -> bool:
    """40 characters of mixed case and digits, as random as a key (the rule found AWS, a secret
    or a key id shortly before)."""
    if not (any(c.isupper() for c in v) and any(c.islower() for c in v)):
        return False
    # Camel-case identifiers of 40 characters stay near 4.1 bits a character; 40 random
    # base64 characters, above 4.27 (10,000 drawn).
    return any(c.isdigit() for c in v) and "example" not in v.lower() and _entropy(v) >= 4.25


def _prose(v: str, name: str, quoted: bool) -> bool:
    """ "the password is hunter2": a password is what follows (quoted, or one word that is not
    plain prose); a secret, token or key only if it looks random."""
    if not name.lower().startswith("pass"):
        return _random(v) or (quoted and _basic(v))
    v = v.strip() if quoted else v.rstrip(".,;:!?)")
    if len(v) < 4 or _stands_for_one(v):
        return False
    if quoted:
        return v.count(" ") <= 2
    return any(not c.isalpha() for c in v) or any(c.isupper() for c in v[1:])


def _env(v: str, m: re.Match[str], text: str) -> bool:
    """A value of an upper-case NAME ending in KEY, TOKEN, PASSWORD …; the rest of NAME, before
    the match, is upper case, digits and underscores (HF_TOKEN, not tokenizer_KEY)."""
    at = m.start()
    while at > 0 and (text[at - 1].isupper() or text[at - 1].isdigit() or text[at - 1] == "_"):
        at -= 1
    if at > 0 and (text[at - 1].isalnum() or text[at - 1] in "._-"):
        return False
    password = m.group("pw") is not None
    v = v.strip()
    if len(v) < (6 if password else 8) or _stands_for_one(v):
        return False
    return not v.startswith(("/", "~", "./", "../"))


def _entropy(v: str) -> float:
    import math

    counts: dict[str, int] = {}
    for c in v:
        counts[c] = counts.get(c, 0) + 1
    return -sum(n / len(v) * math.log2(n / len(v)) for n in counts.values())


def _quoted(m: re.Match[str]) -> bool:
    return m.re.groupindex.get("v") is not None and m.group("v") is not None


_CHECKS = {
    "shape": lambda v, m, t: "example" not in v.lower(),
    "pem": lambda v, m, t: _pem(v),
    "aws": lambda v, m, t: _aws(v),
    "token": lambda v, m, t: _random(v) or (_basic(v) and len(v) >= 8),
    "basic": lambda v, m, t: _basic(v),
    "placeholder": lambda v, m, t: not _stands_for_one(v),
    "command": lambda v, m, t: len(v.strip()) >= 3 and not _stands_for_one(v.strip()),
    "password": lambda v, m, t: _password(v),
    "prose": lambda v, m, t: _prose(v, m.group("n"), _quoted(m)),
    "assignment": lambda v, m, t: _password(v) if m.group("pw") else (_random(v) or _basic(v)),
    "env": lambda v, m, t: _env(v, m, t),
}
