"""Running an agent or a slash command end to end: definition → spec → loop → result.

This is the Python API behind ``journal-agent run`` / ``command`` / ``learn``::

    from journal_agent.runtime import run_agent
    result = run_agent("learning-journal", "Record what ZeRO-2 shards", root=Path("."))
    print(result.final_text, result.cost_usd, result.files_changed)
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journal_agent.errors import UserError
from journal_agent.runtime import _children, _files
from journal_agent.runtime.client import make_client
from journal_agent.runtime.dispatch import valid_unicode
from journal_agent.runtime.events import EventSink, Notice, ignore
from journal_agent.runtime.loop import AgentLoop, AgentSpec, RunOptions, Session
from journal_agent.runtime.models import ModelTable, model_table
from journal_agent.runtime.prompt import GENERAL_SYSTEM_PROMPT, select_tools, system_prompt
from journal_agent.runtime.result import RunResult
from journal_agent.runtime.task import GENERAL_PURPOSE, task_tool
from journal_agent.runtime.transcript import Transcript, new_run_id
from journal_agent.tools.base import Tool, ToolContext, ToolError
from journal_agent.workspace import Workspace

if TYPE_CHECKING:
    from journal_agent.definitions import AgentDefinition
    from journal_agent.runtime.wire import RequestBody
    from journal_agent.settings import Settings


@dataclass
class RunConfig:
    """Everything about *how* to run, independent of *what* runs."""

    root: Path
    model: str | None = None  # --model: wins over the definition's model
    options: RunOptions = field(default_factory=RunOptions)
    mode: str | None = None  # permission mode; else the agent's permissionMode, else settings
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: Callable[[str], str | None] | None = None  # the user's reply to a model's question
    permission_prompt: Callable[[str, str], bool] | None = None
    emit: EventSink = ignore
    home: Path | None = None
    tools: dict[str, Tool] | None = None  # default: the built-in registry
    client: Any = None  # see Session.client; default: from ANTHROPIC_API_KEY / _BASE_URL
    max_retries: int = 2
    run_id: str | None = None
    transcript: bool = True

    @cached_property
    def workspace(self) -> Workspace:
        """The run's workspace: every agent of the run (sub-agents too) shares its stores."""
        return Workspace.at(self.root)


@dataclass
class Prepared:
    """A run ready to start (or to print, for --dry-run)."""

    spec: AgentSpec
    prompt: str
    config: RunConfig
    table: ModelTable
    agents: dict[str, AgentDefinition]  # for the Task tool
    missing_tools: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # said once the run starts
    permission_mode: str | None = None
    allow: tuple[str, ...] = ()  # a command's allowed-tools: permitted without asking
    _launcher: _Launcher | None = None

    def first_request(self) -> RequestBody:
        """The exact body of the first request."""
        loop = AgentLoop(
            Session(client=None, options=self.config.options),
            self.spec,
            ToolContext.of(self.config.workspace),
        )
        loop.messages.append({"role": "user", "content": valid_unicode(self.prompt)})
        return loop.build_request()


# -- building -------------------------------------------------------------------------------


def _settings(root: Path, home: Path | None) -> Settings:
    from journal_agent.settings import load_settings

    return load_settings(root, home)


def _registry(config: RunConfig) -> dict[str, Tool]:
    if config.tools is not None:
        return dict(config.tools)
    from journal_agent.tools.registry import builtin_tools

    return dict(builtin_tools())


def _context(config: RunConfig, mode: str | None, allow: tuple[str, ...] = ()) -> ToolContext:
    """A fresh context (own read tracking) for each agent; the same permission rules."""
    from journal_agent.tools.registry import make_context

    if config.home is None:
        return make_context(
            config.workspace,
            mode=config.mode or mode,
            allow=(*config.allow, *allow),
            deny=config.deny,
            prompt=config.permission_prompt,
        )
    # make_context reads ~/.claude/settings.json from the real home; honour ``home`` instead.
    from journal_agent.tools.permissions import PermissionPolicy
    from journal_agent.tools.read_tracking import ReadTracker

    ws = config.workspace
    policy = PermissionPolicy.from_settings(
        ws.root,
        mode=config.mode or mode,
        allow=(*config.allow, *allow),
        deny=config.deny,
        prompt=config.permission_prompt,
        home=config.home,
    )
    return ToolContext.of(ws, policy, ReadTracker())


def _discover(config: RunConfig) -> dict[str, AgentDefinition]:
    from journal_agent.definitions import discover_agents

    return dict(discover_agents(config.root, config.home).found)


def _find_agent(agents: dict[str, AgentDefinition], name: str) -> AgentDefinition | None:
    if name in agents:
        return agents[name]
    # ``plugin:agent`` and bare ``agent`` address the same plugin agent
    short = name.split(":")[-1]
    matches = [a for key, a in agents.items() if key.split(":")[-1] == short]
    return matches[0] if len(matches) == 1 else None


def _with_task(
    tools: dict[str, Tool],
    wanted: list[str] | None,
    disallowed: list[str],
    launcher: _Launcher,
    agents: dict[str, AgentDefinition],
) -> dict[str, Tool]:
    from journal_agent.runtime.prompt import tool_names

    names = tool_names(wanted)
    if (names is not None and "Task" not in names) or "Task" in (tool_names(disallowed) or []):
        return tools
    task = task_tool(launcher, {n: a.description for n, a in agents.items()})
    return {**tools, "Task": task}


def prepare_agent(name: str, prompt: str, config: RunConfig) -> Prepared:
    """``journal-agent run NAME PROMPT``: the agent's body is the system prompt."""
    from journal_agent.approvals import agent_mode
    from journal_agent.definitions import load_agent

    definition = load_agent(name, config.root, config.home)
    mode = agent_mode(definition, config.root)
    table = model_table(_settings(config.root, config.home))
    model = table.resolve(config.model or definition.model)
    agents = _discover(config)
    tools, missing = select_tools(_registry(config), definition.tools, definition.disallowed_tools)
    prepared = Prepared(
        spec=AgentSpec(
            name=definition.name,
            system=system_prompt(definition.system_prompt, config.root, model),
            tools=tools,
            model=model,
            max_turns=definition.max_turns,
        ),
        prompt=prompt,
        config=config,
        table=table,
        agents=agents,
        missing_tools=missing,
        notices=[mode.notice] if mode.notice else [],
        permission_mode=mode.allowed[0] if mode.allowed else None,
    )
    _attach_task(prepared, definition.tools, definition.disallowed_tools)
    return prepared


def prepare_slash_command(name: str, arguments: str, config: RunConfig) -> Prepared:
    """``journal-agent command NAME ARGS`` / ``learn TOPIC``: the expanded command text is the
    first user message; the system prompt is the general one."""
    from journal_agent.approvals import command_grants
    from journal_agent.definitions import expand_command, load_command

    command = load_command(name, config.root, config.home)
    # A project file's grants beyond the plugin's and what the user approved are ignored.
    grants = command_grants(command, config.root)
    text = expand_command(command, arguments, config.root, allowed=list(grants.allowed))
    table = model_table(_settings(config.root, config.home))
    model = table.resolve(config.model or command.model)
    agents = _discover(config)
    tools, missing = select_tools(_registry(config), command.allowed_tools)
    prepared = Prepared(
        spec=AgentSpec(
            name=f"/{command.name}",
            system=system_prompt(GENERAL_SYSTEM_PROMPT, config.root, model),
            tools=tools,
            model=model,
        ),
        prompt=text,
        config=config,
        table=table,
        agents=agents,
        missing_tools=missing,
        notices=[grants.notice] if grants.notice else [],
        # As in Claude Code, a command's allowed-tools run without asking while it runs.
        allow=grants.allowed,
    )
    _attach_task(prepared, command.allowed_tools)
    return prepared


def _attach_task(
    prepared: Prepared, wanted: list[str] | None, disallowed: list[str] | None = None
) -> None:
    launcher = _Launcher(prepared)
    prepared._launcher = launcher
    prepared.spec.tools = _with_task(
        prepared.spec.tools, wanted, list(disallowed or []), launcher, prepared.agents
    )


# -- sub-agents -----------------------------------------------------------------------------


class _Launcher:
    """Starts sub-agents for the Task tool, in the parent's session (budget, transcript)."""

    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.session: Session | None = None
        self._count = itertools.count(1)
        self._lock = threading.Lock()

    def __call__(
        self, subagent_type: str, prompt: str, description: str, model: str | None = None
    ) -> RunResult:
        p, config = self.prepared, self.prepared.config
        if self.session is None:
            raise ToolError("sub-agents can only start during a run")
        registry = {n: t for n, t in _registry(config).items() if n != "Task"}
        definition = _find_agent(p.agents, subagent_type)
        requested = model
        if definition is not None:
            from journal_agent.approvals import agent_mode

            model = p.table.resolve(definition.model, inherit=p.spec.model)
            tools, _ = select_tools(registry, definition.tools, definition.disallowed_tools)
            granted = agent_mode(definition, config.root)
            if granted.notice:
                self.session.emit(Notice("main", granted.notice))
            body, max_turns, mode = (
                definition.system_prompt,
                definition.max_turns,
                granted.allowed[0] if granted.allowed else None,
            )
        elif subagent_type in (GENERAL_PURPOSE, ""):
            model, tools, body, max_turns, mode = (
                p.spec.model,
                registry,
                GENERAL_SYSTEM_PROMPT,
                None,
                None,
            )
        else:
            names = ", ".join([GENERAL_PURPOSE, *sorted(p.agents)])
            raise ToolError(f"Unknown subagent_type '{subagent_type}'. Available: {names}.")
        if requested:  # the caller's choice for this one task (Claude Code's Agent.model)
            model = p.table.resolve(requested, inherit=p.spec.model)
        with self._lock:
            n = next(self._count)
        spec = AgentSpec(
            name=subagent_type or GENERAL_PURPOSE,
            system=system_prompt(body, config.root, model),
            tools=tools,
            model=model,
            max_turns=max_turns,
        )
        label = f"main/{spec.name}#{n}"
        self.session.log("notice", label, message=f"sub-agent started: {description}")
        loop = AgentLoop(self.session, spec, _context(config, mode), label=label, interactive=False)
        return loop.run(prompt)


# -- running --------------------------------------------------------------------------------


def _relative(root: Path, path: str) -> str:
    p = Path(path)
    if p.is_absolute():
        try:
            return str(p.resolve().relative_to(root.resolve()))
        except ValueError:
            return str(p)
    return os.path.normpath(path)


def _serialized(prompt: Callable[[str, str], bool] | None) -> Callable[[str, str], bool] | None:
    """Parallel tools must not ask the user two questions at once."""
    if prompt is None:
        return None
    lock = threading.Lock()

    def ask(tool: str, subject: str) -> bool:
        with lock:
            return prompt(tool, subject)

    return ask


def execute(prepared: Prepared) -> RunResult:
    """Run a prepared agent or slash command to its end.

    Takes what :func:`prepare_agent` / :func:`prepare_slash_command` return (the agent's spec,
    its expanded prompt, the :class:`RunConfig`). Builds the model client, the permission
    policy, the transcript and the Task tool's sub-agent launcher, runs the
    :class:`~journal_agent.runtime.loop.AgentLoop`, and stops the commands it started if it is
    interrupted. Returns the :class:`RunResult` with the files changed and the run-wide usage
    (sub-agents included); its ``exit_code`` is the CLI's. Raises
    :class:`~journal_agent.errors.UserError` when the run cannot start or the model cannot be
    called (no API key, a cost budget without a price, a rejected request).
    """
    config = prepared.config
    if config.options.budget_usd is not None and prepared.table.price(prepared.spec.model) is None:
        # Its cost would count as nothing: the budget could never stop the run.
        raise UserError(
            f"a cost budget needs a price for model '{prepared.spec.model}', and there is none; "
            f'add "prices": {{"{prepared.spec.model}": {{"input": …, "output": …, '
            '"cache_write": …, "cache_read": …}} to .journal/settings.json, or give a token '
            "budget (e.g. --budget 200k)."
        )
    client = config.client or make_client(max_retries=config.max_retries)
    run_id = config.run_id or new_run_id()
    transcript = None
    if config.transcript:
        secrets = [
            s for s in (getattr(client, "api_key", None), getattr(client, "auth_token", None)) if s
        ]
        transcript = Transcript.for_run(config.root, run_id, secrets=secrets)
    config.permission_prompt = _serialized(config.permission_prompt)
    session = Session(
        client=client,
        options=config.options,
        table=prepared.table,
        emit=config.emit,
        transcript=transcript,
        ask=config.ask,
    )
    if prepared._launcher is not None:
        prepared._launcher.session = session
    for name in prepared.missing_tools:
        session.emit(Notice("main", f"tool '{name}' is not available here; skipped"))
    for notice in prepared.notices:
        session.emit(Notice("main", notice))
    before = _files.snapshot(config.root)
    processes_before = _children.children()
    try:
        ctx = _context(config, prepared.permission_mode, prepared.allow)
        loop = AgentLoop(session, prepared.spec, ctx)
        result = loop.run(prepared.prompt)
    except BaseException:
        # Ctrl-C or a failed model call: commands that sub-agents' Bash calls started on
        # other threads would otherwise outlive the run.
        _children.stop_started(processes_before)
        raise
    finally:
        if transcript is not None:
            transcript.close()
    changed = _files.changed(before, _files.snapshot(config.root))
    written = {_relative(config.root, p) for p in session.written}
    result.files_changed = sorted(written | set(changed or []))
    result.tools_used = dict(session.tools_used)
    # Run-wide totals: the sub-agents' tokens and cost are part of this run.
    result.usage = session.meter.usage
    result.cost_usd = None if session.meter.unpriced else session.meter.cost_usd
    result.per_turn = list(session.meter.per_turn)
    result.transcript = str(transcript.path) if transcript is not None else None
    return result


def run_agent(name: str, prompt: str, *, root: Path, **kwargs: Any) -> RunResult:
    """Run agent definition ``name`` on ``prompt``; keyword arguments are RunConfig fields."""
    return execute(prepare_agent(name, prompt, RunConfig(root=Path(root), **kwargs)))


def run_slash_command(name: str, arguments: str = "", *, root: Path, **kwargs: Any) -> RunResult:
    """Run slash command ``name`` with ``arguments``; keyword arguments are RunConfig fields."""
    return execute(prepare_slash_command(name, arguments, RunConfig(root=Path(root), **kwargs)))


__all__ = [
    "Prepared",
    "RunConfig",
    "UserError",
    "execute",
    "prepare_agent",
    "prepare_slash_command",
    "run_agent",
    "run_slash_command",
]
