"""What the hooks may do: the ``capture`` object of ``.journal/settings.json`` and one switch.

    {"capture": {"enabled": true, "session_start": true, "recall": true,
                 "recall_inject": false, "recall_touch": true, "session_row": true,
                 "draft": false, "draft_max_tokens": 100000, "draft_daily_tokens": 500000}}

``JOURNAL_AGENT_CAPTURE=0`` in the environment Claude Code runs in turns every hook off, and
``inbox draft`` too (``=1`` turns a disabled project's capture back on, never drafting: that
spends API tokens, so only the settings file turns it on). Stdlib only: the hooks read this under
``python3 -I -S``; a broken settings file means the defaults, never a failed hook.

The file counts only once you approved it on your terminal (``journal-agent trust``; see
:mod:`journal_agent.project_trust`): a cloned repository cannot switch ``recall_inject`` or
``draft`` on. Until then the defaults hold, and SessionStart says so in its line.
"""

from __future__ import annotations

import os

from journal_agent.lightjson import loads
from journal_agent.trust_store import read_approved

ENV_SWITCH = "JOURNAL_AGENT_CAPTURE"
SETTINGS_REL = ".journal/settings.json"
# Set in the environment of anything the hooks start, and by nothing else: a hook that sees it
# was started, directly or not, by one of ours, and does nothing (no recursion).
GUARD = "JOURNAL_AGENT_HOOK"

DEFAULTS: dict[str, bool] = {
    "enabled": True,  # Stop / SubagentStop capture moments into .journal/inbox.jsonl
    "session_start": True,  # SessionStart prints one line when something is due
    "recall": True,  # UserPromptSubmit looks up related entries and logs them
    "recall_inject": False,  # … and gives them to the model (precision not yet measured)
    # PostToolUse / SubagentStart name the entries that explain the code touched (capture/
    # touch.py); a clone's journal only once the project is approved. On: precision 1.0 on the
    # scripted sessions of benchmarks/bench_touch_replay.py, the bar is 0.9; 0.818 on the sessions
    # of this repository's history (tests/capture/touch_replay_real.py): the bar not met there.
    "recall_touch": True,
    "session_row": True,  # SessionEnd proposes a 📚 session row for the ledger
    "draft": False,  # `inbox draft` may call the Messages API (no hook ever does)
}
# Token caps of `inbox draft`, counted from the API's usage (input, output, cache writes and
# reads): one draft's run, and every draft of a day together (journal_agent/drafts/caps.py).
LIMITS: dict[str, int] = {"draft_max_tokens": 100_000, "draft_daily_tokens": 500_000}


def capture_settings(root: str | os.PathLike[str]) -> dict[str, bool]:
    """The effective switches for ``root``: defaults, the project's file, then the env switch.

    A file changed since the user approved it counts for nothing, but what the user turned off
    in the version they approved stays off: a commit (a pull, a teammate's change) cannot turn
    a hook the user switched off back on by changing the file."""
    out = dict(DEFAULTS)
    section, off = _section_or_kept(root)
    if isinstance(section, dict):
        out.update({k: v for k, v in section.items() if k in DEFAULTS and isinstance(v, bool)})
    out.update(dict.fromkeys((k for k in off if k in out), False))
    switch = os.environ.get(ENV_SWITCH, "").strip().lower()
    if switch in ("0", "false", "off", "no"):
        out = dict.fromkeys(out, False)
    elif switch in ("1", "true", "on", "yes"):
        out["enabled"] = True
    return out


def capture_section(root: str | os.PathLike[str]) -> object:
    """The ``capture`` object of the project's settings (None when missing, unreadable or not
    approved)."""
    return _capture(read_approved(root, SETTINGS_REL))


def _capture(data: bytes | None) -> object:
    if data is None:
        return None
    try:
        parsed = loads(data)
    except ValueError:
        return None
    return parsed.get("capture") if isinstance(parsed, dict) else None


def _section_or_kept(root: str | os.PathLike[str]) -> tuple[object, list[str]]:
    """The approved ``capture`` object, else (a file there, not as approved) None and the
    switches the user's last approved version turned off. No file: no store read at all."""
    if not os.path.lexists(os.path.join(root, SETTINGS_REL)):
        return None, []
    from journal_agent.trust_store import kept_with, load

    store = load()
    section = _capture(read_approved(root, SETTINGS_REL, store))
    if section is not None:
        return section, []
    off = kept_with(root, SETTINGS_REL, store).get("off")
    return None, [k for k in off if isinstance(k, str)] if isinstance(off, list) else []


def switched_off(data: bytes) -> list[str]:
    """The switches a settings file turns off (kept with its approval, :func:`capture_settings`)."""
    section = _capture(data)
    if not isinstance(section, dict):
        return []
    return sorted(k for k, v in section.items() if k in DEFAULTS and v is False and DEFAULTS[k])


def settings_ignored(root: str | os.PathLike[str]) -> bool:
    """Whether the project has a ``.journal/settings.json`` that is left out, not approved."""
    if not os.path.lexists(os.path.join(root, SETTINGS_REL)):
        return False
    return read_approved(root, SETTINGS_REL) is None
