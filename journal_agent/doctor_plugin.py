"""``doctor``'s checks of the Claude Code plugin: the losses nothing else would show.

Each says what is wrong and the one command that fixes it: an unwritable ``.journal/`` (every
Insight lost), hooks that never ran since install (and why: no ``python3``, one too old), an MCP
server that could only say why it cannot work (no usable Python), the plugin's environment
failed, broken or stale, a failure Claude Code cached for our MCP server, a marketplace folder
that moved (the plugin vanishes without a word).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from journal_agent.check import Check


def plugin_checks(root: Path, home: Path | None = None) -> list[Check]:
    home = home or Path.home()
    return [
        check_journal_writable(root),
        check_hooks_ran(home),
        check_mcp_started(home),
        check_environment(),
        check_old_environments(),
        check_mcp_cache(home),
        check_marketplace(home),
    ]


def check_journal_writable(root: Path) -> Check:
    folder = root / ".journal"
    target = folder if folder.exists() else root
    if os.access(target, os.W_OK | os.X_OK):
        return Check("journal folder", True, f"{folder} is writable")
    return Check(
        "journal folder",
        False,
        f"{target} is not writable: the hooks lose every captured Insight; fix it with "
        f"`chmod u+w {target}` (or `sudo chown $USER {target}`)",
    )


def _data_dirs(home: Path) -> list[Path]:
    return sorted((home / ".claude" / "plugins" / "data").glob("journal-agent-*"))


def check_hooks_ran(home: Path) -> Check:
    dirs = _data_dirs(home)
    if not dirs:
        return Check("plugin hooks", True, "the plugin was never started by Claude Code here")
    for data in dirs:
        missing = data / "hooks-no-python3"
        if missing.exists():
            return Check(
                "plugin hooks",
                False,
                f"{missing.read_text().strip()}: capture is off; install Python 3.10 or newer "
                "(e.g. `sudo apt install python3`) where Claude Code finds it",
            )
        too_old = data / "hooks-python-too-old"
        if too_old.exists():
            sentence = too_old.read_text().strip().split(" ", 2)[-1]
            return Check("plugin hooks", False, sentence)
    ran = [d / "hooks-ran" for d in dirs if (d / "hooks-ran").exists()]
    if not ran:
        return Check(
            "plugin hooks",
            False,
            "never ran since the plugin was installed (no session start recorded in "
            f"{dirs[0]}): check `claude plugin details journal-agent` lists Hooks, and that "
            "no setting disables them (`disableAllHooks`, `claude --safe-mode`)",
        )
    last = max(ran, key=lambda p: p.stat().st_mtime).read_text().strip()
    return Check("plugin hooks", True, f"last session start: {last}")


def check_mcp_started(home: Path) -> Check:
    """The MCP server ran without a usable Python (journal_agent/plugin_env/degraded.sh): it
    answered, so Claude Code shows it connected, but its only tool says why it cannot work."""
    for data in _data_dirs(home):
        note = data / "mcp-degraded"
        if note.exists():
            return Check("plugin MCP server", False, note.read_text().strip())
    return Check("plugin MCP server", True, "no start without a usable Python recorded")


def check_environment() -> Check:
    from journal_agent.plugin_env.env import condition, envs_home, locate, read_state

    homes = sorted(Path(envs_home()).glob("env-*"))
    if not homes:
        return Check("plugin environment", True, "none prepared (not used as a plugin here)")
    problems, fine = [], []
    for folder in homes:
        try:
            root = (folder / "root.txt").read_text().strip()
        except OSError:
            continue
        if not Path(root).is_dir():
            problems.append(f"{folder} belongs to {root}, which is gone: `rm -r {folder}`")
            continue
        env = locate(root)
        word, why = condition(env)
        fix = f"`{root}/bin/journal-agent setup --rebuild`"
        if word in ("failed", "broken"):
            problems.append(f"{env.venv} is {word} ({why}; log {env.log}): {fix}")
        elif word == "stale":
            problems.append(f"{env.venv} is stale ({why}): {fix}")
        else:
            torch = read_state(env).get("torch") or "no torch yet"
            fine.append(f"{env.venv} {word} ({torch})")
    if problems:
        return Check("plugin environment", False, "; ".join(problems))
    return Check("plugin environment", True, "; ".join(fine) or "none prepared")


def check_old_environments() -> Check:
    """The earlier design's venvs (``$CLAUDE_PLUGIN_DATA/venv``): a preparation removes them,
    so one left means the plugin has not prepared its environment since it was updated."""
    import shlex

    from journal_agent.plugin_env.env import old_envs

    found = old_envs()
    if not found:
        return Check("old plugin environments", True, "none left")
    return Check(
        "old plugin environments",
        False,
        f"{len(found)} environment(s) of the plugin's earlier design, unused now: "
        f"`{shlex.join(['rm', '-r', *found])}` (the next preparation removes them too)",
    )


def check_mcp_cache(home: Path) -> Check:
    """Claude Code skips a server it recorded as failing for a while, without telling."""
    path = home / ".claude" / "mcp-needs-auth-cache.json"
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        return Check("MCP server", True, "no failure cached by Claude Code")
    ours = [k for k in (cached if isinstance(cached, dict) else {}) if "journal-agent" in k]
    if not ours:
        return Check("MCP server", True, "no failure of ours cached by Claude Code")
    return Check(
        "MCP server",
        False,
        f"Claude Code cached a failure of {', '.join(ours)} in {path} and skips the server "
        f"until it expires: remove the entry (`rm {path}` drops every cached failure)",
    )


def check_marketplace(home: Path) -> Check:
    path = home / ".claude" / "plugins" / "known_marketplaces.json"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        return Check("plugin marketplace", True, "no marketplace installed")
    entry = known.get("journal-agent") if isinstance(known, dict) else None
    source = entry.get("source") if isinstance(entry, dict) else None
    folder = source.get("path") if isinstance(source, dict) else None
    if not isinstance(folder, str):
        return Check("plugin marketplace", True, "journal-agent not installed from a folder")
    if Path(folder).is_dir():
        return Check("plugin marketplace", True, f"journal-agent from {folder}")
    return Check(
        "plugin marketplace",
        False,
        f"the marketplace folder {folder} is gone, so Claude Code drops the plugin without a "
        "word: `claude plugin marketplace add <its new folder>` and install it again",
    )
