"""``journal-agent doctor``: which confinement is active, and the rest of the environment."""

from __future__ import annotations

from journal_agent.cli._app import app
from journal_agent.cli._common import JsonOption, RootOption, echo, open_workspace, print_json


@app.command("doctor")
def doctor_command(root: RootOption = None, as_json: JsonOption = False) -> None:
    """Check the environment: the sandbox for Bash, secrets committed to git, ripgrep, the API
    key, torch, NVML, the Claude Code hooks and their recent failures, extras."""
    from journal_agent.doctor import run_checks

    checks = run_checks(open_workspace(root))
    if as_json:
        print_json([c.as_dict() for c in checks])
        return
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = "ok " if c.ok else "-- "
        echo(f"{mark}{c.name.ljust(width)}  {c.detail}")
