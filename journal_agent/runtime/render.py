"""Rendering runtime events on the terminal with rich (the CLI's view of a run).

Progress goes to stderr — a line when a tool starts, one when it finishes — so stdout carries
only the final answer (or JSON) and can be piped.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape

from journal_agent.runtime.events import (
    AssistantText,
    Event,
    Notice,
    ToolCalled,
    ToolFinished,
    TurnStarted,
)
from journal_agent.runtime.result import RunResult

_INPUT_WIDTH = 80


def _brief_input(data: dict[str, Any]) -> str:
    """``file_path=notes.md, limit=20``: the call as one short line."""
    parts = []
    for key in ("file_path", "pattern", "command", "path", "subagent_type", "description"):
        if key in data:
            parts.append(f"{key}={data[key]}")
    if not parts:
        parts = [f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in data.items()]
    text = ", ".join(str(p) for p in parts).replace("\n", " ")
    return text if len(text) <= _INPUT_WIDTH else text[: _INPUT_WIDTH - 1] + "…"


def _first_line(text: str, width: int = 100) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


class Renderer:
    """An event sink that prints progress lines."""

    def __init__(self, console: Console | None = None, *, verbose: bool = False) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self.verbose = verbose

    def _who(self, agent: str) -> str:
        return "" if agent == "main" else f"[magenta]{escape(agent.removeprefix('main/'))}[/] "

    def __call__(self, event: Event) -> None:
        c, who = self.console, self._who(event.agent)
        if isinstance(event, TurnStarted) and (self.verbose or event.agent == "main"):
            c.print(f"[dim]{who}turn {event.turn} · {event.model}[/]")
        elif isinstance(event, AssistantText):
            c.print(f"{who}[cyan]✻[/] [dim]{escape(_first_line(event.text))}[/]")
        elif isinstance(event, ToolCalled):
            c.print(
                f"{who}[bold]⏺ {escape(event.name)}[/][dim]({escape(_brief_input(event.input))})[/]"
            )
        elif isinstance(event, ToolFinished):
            mark = "[red]✗[/]" if event.is_error else "[green]✓[/]"
            c.print(
                f"{who}  {mark} {escape(event.name)} [dim]{event.seconds:.1f}s · "
                f"{escape(_first_line(event.output))}[/]"
            )
        elif isinstance(event, Notice):
            c.print(f"{who}[yellow]! {escape(event.message)}[/]")


def format_cost(cost: float | None) -> str:
    if cost is None:
        return "unknown (no price for this model)"
    return f"${cost:.4f}"


def summary_lines(result: RunResult) -> list[str]:
    u = result.usage
    tools = ", ".join(f"{n}×{k}" for n, k in sorted(result.tools_used.items())) or "none"
    files = ", ".join(result.files_changed) or "none"
    head = {"completed": "[green]✓ completed[/]"}.get(
        result.status, f"[yellow]■ {result.status}[/]"
    )
    lines = [
        f"{head} · {result.turns} turn{'s' if result.turns != 1 else ''} · {result.model}",
        f"tools: {escape(tools)}",
        f"tokens: {u.prompt:,} in ({u.cache_read:,} cache read, {u.cache_write:,} cache write, "
        f"{u.input:,} uncached) · {u.output:,} out · cost {format_cost(result.cost_usd)}",
        f"files changed: {escape(files)}",
    ]
    if result.message:
        lines.insert(1, f"[yellow]{escape(result.message)}[/]")
    if result.transcript:
        lines.append(f"[dim]transcript: {escape(result.transcript)}[/]")
    return lines


def print_summary(console: Console, result: RunResult) -> None:
    console.rule(style="dim")
    for line in summary_lines(result):
        console.print(line)
