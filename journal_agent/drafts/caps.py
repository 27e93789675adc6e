"""Whether ``inbox draft`` may run, and how many tokens it may spend.

The switch and the caps are the ``capture`` object of ``.journal/settings.json``
(:mod:`journal_agent.capture.settings`): ``draft`` (off by default), ``draft_max_tokens`` (one
draft's run) and ``draft_daily_tokens`` (every draft of a day together). Tokens are counted from
the API's usage of each response — input, output, cache writes and cache reads, as ``--budget``
counts them — and added to ``.journal/draft-usage.json`` under a lock as each response arrives,
so a run that is interrupted is counted too. A day is the local calendar day.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from journal_agent import confined
from journal_agent.errors import UserError
from journal_agent.paths import draft_usage_path, state_dir

_KEPT_DAYS = 31
_LOCK_TIMEOUT_S = 30.0
SETTINGS = '"capture": {"draft": true} in .journal/settings.json'


@dataclass(frozen=True)
class Caps:
    per_draft: int
    daily: int


def ensure_enabled(root: Path) -> None:
    """One sentence, saying how to turn it on, unless drafting is on."""
    from journal_agent.capture.settings import ENV_SWITCH, capture_settings

    if capture_settings(root)["draft"]:
        return
    if os.environ.get(ENV_SWITCH, "").strip().lower() in ("0", "false", "off", "no"):
        raise UserError(
            f"inbox draft is off: {ENV_SWITCH}=0 in the environment turns every capture feature "
            f"off; unset it, and turn drafting on with {SETTINGS}."
        )
    from journal_agent.capture.settings import settings_ignored

    if settings_ignored(root):
        raise UserError(
            "inbox draft is off: this project's .journal/settings.json is not approved yet (a "
            "cloned or changed file counts only once you approve it); read it and run "
            "`journal-agent trust` in your terminal."
        )
    raise UserError(
        "inbox draft is off by default (it calls the Anthropic API and spends tokens); turn it "
        f"on with {SETTINGS}."
    )


def drafting_caps(root: Path) -> Caps:
    """The caps in effect; a cap set to something other than a positive whole number is one
    sentence rather than a silent default (it guards money)."""
    from journal_agent.capture.settings import LIMITS, capture_section

    section = capture_section(root)
    values = dict(LIMITS)
    if isinstance(section, dict):
        for key in LIMITS:
            if key not in section:
                continue
            value = section[key]
            if type(value) is not int or value <= 0:
                raise UserError(
                    f'"capture.{key}" in .journal/settings.json is {json.dumps(value)}; give a '
                    f"positive whole number of tokens (the default is {LIMITS[key]})."
                )
            values[key] = value
    return Caps(values["draft_max_tokens"], values["draft_daily_tokens"])


def today() -> str:
    return date.today().isoformat()


def used_today(root: Path) -> int:
    """Tokens ``inbox draft`` spent today in this project."""
    return _read(root).get(today(), 0)


def add_usage(root: Path, tokens: int) -> int:
    """Count ``tokens`` more for today (under the lock, replaced atomically); today's total."""
    from journal_agent.locks import held

    path = draft_usage_path(root)
    busy = f"another command has held the lock on {path} for {_LOCK_TIMEOUT_S:.0f} s; try again."
    with held(state_dir(root) / "locks" / "draft-usage.lock", _LOCK_TIMEOUT_S, busy):
        days = _read(root)
        day = today()
        days[day] = days.get(day, 0) + max(0, int(tokens))
        oldest = (date.today() - timedelta(days=_KEPT_DAYS)).isoformat()
        kept = {d: n for d, n in days.items() if d >= oldest}
        confined.replace(root, path, json.dumps({"days": kept}, indent=1, sort_keys=True) + "\n")
        return kept[day]


def _read(root: Path) -> dict[str, int]:
    try:
        raw = confined.read(root, draft_usage_path(root))
        if raw is None:
            return {}
        data = json.loads(raw)
    except confined.Refused:
        raise
    except (OSError, ValueError) as exc:
        # Unreadable, it would count as nothing spent: the daily cap must not silently reset.
        raise UserError(
            f"{draft_usage_path(root)} is unreadable ({exc}); fix or delete it (it only counts "
            "the tokens inbox draft spent each day)."
        ) from None
    days = data.get("days") if isinstance(data, dict) else None
    if not isinstance(days, dict):
        return {}
    return {str(d): int(n) for d, n in days.items() if isinstance(n, int) and n >= 0}


def remaining(root: Path, caps: Caps) -> tuple[int, int]:
    """(tokens the next draft may spend, tokens spent today); one sentence when none are left."""
    used = used_today(root)
    left = caps.daily - used
    if left <= 0:
        raise UserError(
            f"today's drafting cap is used up ({used:,} of {caps.daily:,} tokens); nothing was "
            'sent. Draft again tomorrow, or raise "capture.draft_daily_tokens" in '
            ".journal/settings.json."
        )
    return min(caps.per_draft, left), used
