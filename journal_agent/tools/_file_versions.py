"""Earlier versions of agent and command files, kept when an agent rewrites them.

The /learn command improves its own file after each entry (the user's feedback loop). That is
a feature, and also a way to lose a good prompt to a bad edit: before Write or Edit replaces a
file under ``.claude/commands/`` or ``.claude/agents/``, the old bytes are copied to
``.journal/history/<relative path>/<UTC timestamp>.md``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from journal_agent import confined
from journal_agent.paths import state_dir

_KEPT = ((".claude", "commands"), (".claude", "agents"))


def history_dir(root: Path) -> Path:
    return state_dir(root) / "history"


def keep_previous(root: Path, path: Path, old: bytes | None) -> Path | None:
    """Save ``old`` (the file's bytes before this write) if ``path`` is a definition file."""
    if old is None:
        return None
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    if rel.parts[:2] not in _KEPT or rel.suffix != ".md":
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    target = history_dir(root) / rel / f"{stamp}.md"
    confined.replace(root, target, old)
    return target
