"""Capture: the learning moments Claude Code's hooks catch, and the inbox they wait in.

The library side of ``hooks/capture.py`` and what the CLI, the MCP tool and the web view read::

    from journal_agent.capture import read_inbox, accept, dismiss, Moment

Names resolve on first use: the hooks import modules of this package on every turn and must
not pay for the dataclasses of :mod:`journal_agent.capture.inbox` (nor for the typing module
``profiling._lazy.lazy_exports`` imports).
"""

from __future__ import annotations

# Type checkers read the imports below as if true (what __getattr__ returns); at run time they
# never run, and the flag is a plain False so that the hooks do not import typing for it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from journal_agent.capture.inbox import (
        FileEdit,
        Inbox,
        Moment,
        accept,
        dismiss,
        find,
        inbox_path,
        read_inbox,
        waiting_count,
    )

__all__ = [
    "FileEdit",
    "Inbox",
    "Moment",
    "accept",
    "dismiss",
    "find",
    "inbox_path",
    "read_inbox",
    "waiting_count",
]


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from journal_agent.capture import inbox  # (not importlib: one more import for the hooks)

    return getattr(inbox, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
