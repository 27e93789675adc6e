"""Offline token estimates for --dry-run.

``messages.count_tokens`` needs the network, so this counts with the shared offline encoder
(:mod:`journal_agent.tokenizer`): an estimate, typically within some 10-20 % of Claude's count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from journal_agent.tokenizer import ENCODING, encoding

__all__ = ["ENCODING", "estimate_request", "estimate_tokens"]


def estimate_tokens(value: object) -> int:
    """Tokens of a string, or of a JSON value as the API would receive it."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return len(encoding().encode(text, disallowed_special=()))


def estimate_request(request: Mapping[str, object]) -> dict[str, int]:
    parts = {
        "tools": estimate_tokens(request.get("tools", [])),
        "system": estimate_tokens(request.get("system", "")),
        "messages": estimate_tokens(request.get("messages", [])),
    }
    parts["total"] = sum(parts.values())
    return parts
