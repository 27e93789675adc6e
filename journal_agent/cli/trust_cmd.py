"""``journal-agent trust``: approve this project's own settings, command and agent files."""

from __future__ import annotations

from typing import Annotated

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import JsonOption, RootOption, echo, print_json, resolve_root

ListOption = Annotated[
    bool, typer.Option("--list", help="Only show each file's state; approve nothing.")
]
RevokeOption = Annotated[
    bool, typer.Option("--revoke", help="Forget every approval of this project.")
]


@app.command("trust")
def trust_command(
    root: RootOption = None,
    list_only: ListOption = False,
    revoke: RevokeOption = False,
    as_json: JsonOption = False,
) -> None:
    """Approve this project's own settings, command and agent files (a clone's count only
    once you did); asks you to type yes on your terminal, where no tool call can."""
    from journal_agent.project_trust import approve_all, project_files
    from journal_agent.project_trust import revoke as revoke_all

    where = resolve_root(root)
    if revoke:
        revoke_all(where)
        echo(f"forgot every approval of {where}; its own files count again once approved.")
        return
    files = project_files(where)
    if as_json or list_only:
        rows = [{"file": f.rel, "state": f.state, "sha256": f.sha256} for f in files]
        if as_json:
            print_json({"root": str(where), "files": rows})
            return
        for f in files:
            echo(f"{f.state:<13} {f.rel}")
        if not files:
            echo("this project has no settings, command or agent files of its own.")
        return
    for f in files:
        if f.state == "unreadable":
            echo(f"{f.rel} is not a regular file of at most 1 MiB; it is not taken.")
    pending = [f for f in files if f.state in ("not approved", "changed")]
    if not pending:
        echo("nothing to approve: every file of this project that needs it is approved.")
        return
    kept = approve_all(where, files)
    for f in pending:
        if f in kept:
            echo(f"approved {f.rel}")
        else:
            echo(f"not approved {f.rel}: it changed while you were asked; run this again.")
