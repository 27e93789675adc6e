"""How a journal entry cites a measurement record: ``[m:<id>]`` (standard library only).

Apart from ``profiling.records`` (pydantic models) so that reading a journal, which finds
citations on every load, never imports pydantic: ``journal-agent journal list`` paid 0.05 s of
CPU for it (docs/architecture.md, start-up).
"""

from __future__ import annotations

import re

# A citation as written in an entry; the id may be empty or malformed (the checker says so).
CITATION = re.compile(r"\[m:(?P<id>[^\]\s]*)\]")


def cite(record_id: str) -> str:
    """The citation of a measurement record, ``[m:<id>]`` — the one place that spells it."""
    return f"[m:{record_id}]"


__all__ = ["CITATION", "cite"]
