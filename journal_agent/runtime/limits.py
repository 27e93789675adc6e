"""``--budget`` values: USD (``0.50``, ``$0.50``) and/or tokens (``200k``, ``150000tok``)."""

from __future__ import annotations

import re

from journal_agent.errors import UserError

_USD = re.compile(r"^\$?(\d+(?:\.\d*)?|\.\d+)\s*(?:usd)?$", re.IGNORECASE)
_TOKENS = re.compile(r"^(\d+(?:\.\d+)?)\s*([km])?\s*(tok|tokens)?$", re.IGNORECASE)


def parse_budget(values: list[str]) -> tuple[float | None, int | None]:
    """Each value (or comma-separated part) is a cost in USD or a token count.

    A bare number is USD unless it has a k/M suffix or a ``tok``/``tokens`` unit; ``$`` and
    ``usd`` make USD explicit.
    """
    usd: float | None = None
    tokens: int | None = None
    for value in values:
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            t = _TOKENS.match(part)
            if t and (t.group(2) or t.group(3)):
                scale = {"k": 1_000, "m": 1_000_000}.get((t.group(2) or "").lower(), 1)
                tokens = int(float(t.group(1)) * scale)
                continue
            u = _USD.match(part)
            if u:
                usd = float(u.group(1))
                continue
            raise UserError(
                f"--budget '{part}' is neither a cost nor a token count; write e.g. "
                "--budget 0.50 (USD), --budget 200k (tokens), or --budget '0.5,200k'."
            )
    return usd, tokens
