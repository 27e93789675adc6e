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
            u = _USD.match(part)
            if t and (t.group(2) or t.group(3)):
                scale = {"k": 1_000, "m": 1_000_000}.get((t.group(2) or "").lower(), 1)
                kind, amount = "token count", float(t.group(1)) * scale
            elif u:
                kind, amount = "cost", float(u.group(1))
            else:
                raise UserError(
                    f"--budget '{part}' is neither a cost nor a token count; write e.g. "
                    "--budget 0.50 (USD), --budget 200k (tokens), or --budget '0.5,200k'."
                )
            # '1,000' would otherwise be $1 then $0 (the comma separates two budgets).
            if (usd if kind == "cost" else tokens) is not None:
                raise UserError(
                    f"--budget {', '.join(values)!r} gives two {kind}s; give at most one cost "
                    "and one token count, without thousands separators (e.g. 1000tok or 1k)."
                )
            if amount <= 0:
                raise UserError(f"--budget '{part}' is zero; give a positive cost or token count.")
            if kind == "cost":
                usd = amount
            else:
                tokens = int(amount)
    return usd, tokens
