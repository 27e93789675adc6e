"""Rendering runtime events on the terminal with rich (the CLI's view of a run).

Progress goes to stderr — a line when a tool starts, one when it finishes — so stdout carries
only the final answer (or JSON) and can be piped.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from journal_agent.runtime.events import (
    AssistantText,
    Done,
    Event,
    Notice,
    ToolCalled,
    ToolFinished,
    TurnStarted,
    UsageReported,
)
from journal_agent.runtime.result import RunResult
from journal_agent.runtime.transcript import Scrubber
from journal_agent.runtime.usage import TokenUsage
from journal_agent.terminal_text import visible

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


_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Renderer:
    """An event sink that prints progress.

    On a terminal, a live region shows one updating line per tool call in flight (and per
    agent waiting for the model), with a spinner and the elapsed time; when a call finishes
    its line is printed for good with ✓ or ✗. Elsewhere (a pipe, a log file, CI) each call
    gets a plain line when it starts and one when it finishes.
    """

    def __init__(
        self, console: Console | None = None, *, verbose: bool = False, live: bool | None = None
    ) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self.verbose = verbose
        self.live_enabled = self.console.is_terminal if live is None else live
        self._lock = threading.RLock()
        self._inflight: dict[str, tuple[str, str, str, float]] = {}
        self._waiting: dict[str, tuple[int, str, float]] = {}
        self._live: Any = None
        self._paused = 0
        # What a tool printed (``cat .env``) lands on screens and in background runs' logs.
        self._scrub = Scrubber()

    # -- the live region --------------------------------------------------------------------

    def _render(self) -> Text:
        now = time.monotonic()
        frame = _SPINNER[int(now * 10) % len(_SPINNER)]
        lines = Text()
        # No self._lock here: rich calls this from its refresh thread while holding the Live's
        # lock, and an event handler holding self._lock waits for that lock in console.print
        # (lock-order inversion: the run froze). list() of a dict view is atomic under the GIL.
        waiting = list(self._waiting.items())
        inflight = list(self._inflight.values())
        for agent, (turn, model, start) in waiting:
            lines.append(f"{frame} ", "cyan")
            lines.append_text(Text.from_markup(self._who(agent)))
            lines.append(f"waiting for {model} · turn {turn} · {now - start:.0f}s\n", "dim")
        for agent, name, brief, start in inflight:
            lines.append(f"{frame} ", "cyan")
            lines.append_text(Text.from_markup(self._who(agent)))
            lines.append(name, "bold")
            lines.append(f"({brief}) {now - start:.1f}s\n", "dim")
        lines.rstrip()
        return lines

    def _ensure_live(self) -> None:
        if not self.live_enabled or self._live is not None or self._paused:
            return
        from rich.live import Live

        self._live = Live(
            get_renderable=self._render,
            console=self.console,
            transient=True,
            refresh_per_second=10,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No live region while the user is asked something on the terminal."""
        with self._lock:
            self._paused += 1
            self._stop_live()
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1
                if self._inflight or self._waiting:
                    self._ensure_live()

    def close(self) -> None:
        with self._lock:
            self._inflight.clear()
            self._waiting.clear()
            self._stop_live()

    # -- events -----------------------------------------------------------------------------

    def _who(self, agent: str) -> str:
        return "" if agent == "main" else f"[magenta]{_shown(agent.removeprefix('main/'))}[/] "

    def __call__(self, event: Event) -> None:
        with self._lock:
            self._handle(event)

    def _handle(self, event: Event) -> None:
        c, who = self.console, self._who(event.agent)
        live = self.live_enabled
        if isinstance(event, TurnStarted):
            if self.verbose or event.agent == "main":
                c.print(f"[dim]{who}turn {event.turn} · {event.model}[/]")
            if live:
                self._waiting[event.agent] = (event.turn, event.model, time.monotonic())
                self._ensure_live()
        elif isinstance(event, UsageReported):
            self._waiting.pop(event.agent, None)
            if self.verbose or event.agent == "main":
                c.print(f"[dim]{who}  ↳ {usage_line(event.usage, event.cost_usd)}[/]")
        elif isinstance(event, AssistantText):
            text = self._scrub.text(_first_line(event.text))
            c.print(f"{who}[cyan]✻[/] [dim]{_shown(text)}[/]")
        elif isinstance(event, ToolCalled):
            brief = visible(self._scrub.text(_brief_input(event.input)))
            if live:
                self._inflight[event.tool_use_id] = (
                    event.agent,
                    visible(event.name),
                    brief,
                    time.monotonic(),
                )
                self._ensure_live()
            else:
                c.print(f"{who}[bold]⏺ {_shown(event.name)}[/][dim]({escape(brief)})[/]")
        elif isinstance(event, ToolFinished):
            mark = "[red]✗[/]" if event.is_error else "[green]✓[/]"
            call = self._inflight.pop(event.tool_use_id, None)
            shown = (
                f"{_shown(event.name)}[dim]({escape(call[2])})[/]" if call else _shown(event.name)
            )
            indent = "" if live else "  "
            output = self._scrub.text(_first_line(event.output))
            c.print(f"{who}{indent}{mark} {shown} [dim]{event.seconds:.1f}s · {_shown(output)}[/]")
        elif isinstance(event, Notice):
            c.print(f"{who}[yellow]! {_shown(event.message)}[/]")
        elif isinstance(event, Done) and event.agent != "main":
            r = event.result
            c.print(
                f"{who}[dim]finished: {r.status} · {r.turns} turns · "
                f"{usage_line(r.usage, r.cost_usd)}[/]"
            )
        if live and not self._inflight and not self._waiting:
            self._stop_live()


def _shown(text: str) -> str:
    """Text from the model, a tool or a file in a line of markup: control characters written
    out (a terminal would obey them: journal_agent/terminal_text.py), markup escaped."""
    return escape(visible(text))


def format_cost(cost: float | None) -> str:
    if cost is None:
        return "unknown (no price for this model)"
    return f"${cost:.4f}"


def usage_line(u: TokenUsage, cost: float | None) -> str:
    """One request's tokens and cost: ``7,888 in (7,255 cache read, 633 cache write) · 45 out
    · $0.0021``."""
    cache = (
        f" ({u.cache_read:,} cache read, {u.cache_write:,} cache write)"
        if (u.cache_read or u.cache_write)
        else ""
    )
    price = "cost unknown" if cost is None else f"${cost:.4f}"
    return f"{u.prompt:,} in{cache} · {u.output:,} out · {price}"


def summary_lines(result: RunResult) -> list[str]:
    u = result.usage
    tools = ", ".join(f"{n}×{k}" for n, k in sorted(result.tools_used.items())) or "none"
    files = ", ".join(result.files_changed) or "none"
    head = {"completed": "[green]✓ completed[/]"}.get(
        result.status, f"[yellow]■ {result.status}[/]"
    )
    lines = [
        f"{head} · {result.turns} turn{'s' if result.turns != 1 else ''} · {result.model}",
        f"tools: {_shown(tools)}",
        f"tokens: {u.prompt:,} in ({u.cache_read:,} cache read, {u.cache_write:,} cache write, "
        f"{u.input:,} uncached) · {u.output:,} out · cost {format_cost(result.cost_usd)}",
        f"files changed: {_shown(files)}",
    ]
    if result.message:
        lines.insert(1, f"[yellow]{_shown(result.message)}[/]")
    if result.transcript:
        lines.append(f"[dim]transcript: {_shown(result.transcript)}[/]")
    return lines


def print_summary(console: Console, result: RunResult) -> None:
    console.rule(style="dim")
    for line in summary_lines(result):
        console.print(line)
