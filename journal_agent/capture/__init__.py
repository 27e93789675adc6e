"""Capture: the learning moments Claude Code's hooks catch, and the inbox they wait in.

The library side of ``hooks/capture.py`` (stdlib only, like everything this package's hook
modules import) and what the CLI, the MCP tool and the web view read::

    from journal_agent.capture import read_inbox, dismiss, Moment
"""

from journal_agent.capture.inbox import (
    FileEdit,
    Moment,
    dismiss,
    find,
    inbox_path,
    read_inbox,
    waiting_count,
)

__all__ = ["FileEdit", "Moment", "dismiss", "find", "inbox_path", "read_inbox", "waiting_count"]
