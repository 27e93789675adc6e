"""What the hooks may do: the ``capture`` object of ``.journal/settings.json`` and one switch.

    {"capture": {"enabled": true, "session_start": true, "recall": true,
                 "recall_inject": false, "session_row": true}}

``JOURNAL_AGENT_CAPTURE=0`` in the environment Claude Code runs in turns every hook off
(``=1`` turns a disabled project back on). Stdlib only: the hooks read this under
``python3 -I -S``; a broken settings file means the defaults, never a failed hook.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ENV_SWITCH = "JOURNAL_AGENT_CAPTURE"
# Set in the environment of anything the hooks start, and by nothing else: a hook that sees it
# was started, directly or not, by one of ours, and does nothing (no recursion).
GUARD = "JOURNAL_AGENT_HOOK"

DEFAULTS: dict[str, bool] = {
    "enabled": True,  # Stop / SubagentStop capture moments into .journal/inbox.jsonl
    "session_start": True,  # SessionStart prints one line when something is due
    "recall": True,  # UserPromptSubmit looks up related entries and logs them
    "recall_inject": False,  # … and gives them to the model (precision not yet measured)
    "session_row": True,  # SessionEnd proposes a 📚 session row for the ledger
}


def capture_settings(root: Path) -> dict[str, bool]:
    """The effective switches for ``root``: defaults, the project's file, then the env switch."""
    out = dict(DEFAULTS)
    try:
        data = json.loads((Path(root) / ".journal" / "settings.json").read_text(encoding="utf-8"))
        section = data.get("capture") if isinstance(data, dict) else None
    except (OSError, ValueError):
        section = None
    if isinstance(section, dict):
        out.update({k: v for k, v in section.items() if k in DEFAULTS and isinstance(v, bool)})
    switch = os.environ.get(ENV_SWITCH, "").strip().lower()
    if switch in ("0", "false", "off", "no"):
        out = dict.fromkeys(out, False)
    elif switch in ("1", "true", "on", "yes"):
        out["enabled"] = True
    return out
