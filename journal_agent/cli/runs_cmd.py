"""``runs`` and ``wait``: the background runs that ``run … --background`` started.

Module level stays light (typer only): the runtime and rich are imported inside the commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import JsonOption, RootOption, cell, echo, print_json, resolve_root

if TYPE_CHECKING:
    from journal_agent.runtime.background import RunStatus


@app.command("runs")
def runs_command(root: RootOption = None, as_json: JsonOption = False) -> None:
    """List background runs, oldest first."""
    from journal_agent.runtime import background

    base = resolve_root(root)
    statuses = [background.refresh(base, s) for s in background.list_runs(base)]
    if as_json:
        print_json(statuses)
        return
    from rich.console import Console
    from rich.table import Table

    if not statuses:
        echo("no background runs (start one with `journal-agent run AGENT PROMPT -b`).")
        return
    table = Table(title=f"background runs ({len(statuses)})", title_justify="left")
    table.add_column("id", no_wrap=True)
    # the id starts with the UTC start time (YYYYmmdd-HHMMSS)
    for col in ("status", "target", "cost", "prompt"):
        table.add_column(col)
    for s in statuses:
        cost = (s.get("result") or {}).get("cost_usd")
        prompt = (s.get("prompt") or "").replace("\n", " ")
        table.add_row(  # (status.json is a file: written out, no markup read)
            cell(s["id"]),
            cell(s.get("status", "?")),
            cell(s.get("target", "")),
            "—" if cost is None else f"${cost:.4f}",
            cell(prompt[:40] + ("…" if len(prompt) > 40 else "")),
        )
    Console().print(table)


@app.command("wait")
def wait_command(
    run_ids: Annotated[
        list[str], typer.Argument(help="Run ids `run --background` printed (one or more).")
    ],
    root: RootOption = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Give up after this many seconds.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Wait for background runs; print their results; exit with the worst exit code."""
    import time

    from journal_agent.runtime import background

    base = resolve_root(root)
    for run_id in run_ids:  # unknown ids fail before any waiting
        background.read_status(base, run_id)
    deadline = None if timeout is None else time.monotonic() + timeout
    statuses = []
    for run_id in run_ids:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        statuses.append(background.wait(base, run_id, timeout=left))
    if as_json:
        print_json(statuses[0] if len(statuses) == 1 else statuses)
    else:
        for status in statuses:
            _print_waited(status)
    code = max(int(s.get("exit_code") or 0) for s in statuses)
    if code:
        raise typer.Exit(code)


def _print_waited(status: RunStatus) -> None:
    result = status.get("result") or {}
    if result.get("final_text"):
        echo(result["final_text"])
    line = f"{status['id']}: {status.get('status')}"
    if message := status.get("message"):
        line += f" — {message}"
    if result.get("cost_usd") is not None:
        line += f" · cost ${result['cost_usd']:.4f}"
    if result.get("files_changed"):
        line += f" · files changed: {', '.join(result['files_changed'])}"
    echo(line, err=True)
