"""``run``, ``command``, ``learn``: running agents from the command line (``runs`` and ``wait``,
for background runs, are in ``runs_cmd``).

Module level stays light (typer only): the runtime, rich and the Anthropic SDK are imported
inside the commands.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar, Unpack

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import (
    JsonOption,
    RootOption,
    echo,
    open_workspace,
    print_json,
    sandbox_notice,
)

if TYPE_CHECKING:
    from anthropic.types import ThinkingConfigParam
    from rich.console import Console

    from journal_agent.runtime.background import RunFields
    from journal_agent.runtime.render import Renderer
    from journal_agent.runtime.result import RunResult
    from journal_agent.runtime.runner import Prepared, RunConfig

_P = ParamSpec("_P")
_R = TypeVar("_R")

ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="haiku, sonnet, opus or a full model id (wins over the definition's model).",
    ),
]
MaxTurnsOpt = Annotated[
    int | None, typer.Option("--max-turns", min=1, help="Stop after this many model requests.")
]
BudgetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--budget",
        help="Stop when the run (sub-agents included) has spent this much: "
        "USD (0.50, $0.50) and/or tokens (200k, 150000tok); repeat or comma-separate.",
    ),
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print the exact first request and its estimated "
        "token count; call nothing (no API key needed).",
    ),
]
YesOpt = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Non-interactive: never stop to ask (model questions "
        "end the run; permission asks are denied).",
    ),
]
ModeOpt = Annotated[
    str | None,
    typer.Option(
        "--mode", help="Permission mode: default, acceptEdits, plan, dontAsk, bypassPermissions."
    ),
]
AllowOpt = Annotated[
    list[str] | None, typer.Option("--allow", help="An allow rule, e.g. 'Bash(git diff:*)'.")
]
DenyOpt = Annotated[list[str] | None, typer.Option("--deny", help="A deny rule, e.g. 'Bash'.")]
RetriesOpt = Annotated[
    int, typer.Option("--max-retries", min=0, help="SDK retries on 429/5xx/529/connection errors.")
]
MaxTokensOpt = Annotated[
    int,
    typer.Option(
        "--max-tokens",
        min=1,
        help="Output tokens per response (doubled, up to 64000, when a tool call is cut off).",
    ),
]
BackgroundOpt = Annotated[
    bool,
    typer.Option(
        "--background",
        "-b",
        help="Detach: run in a background process; see "
        "`journal-agent runs` and `journal-agent wait ID`.",
    ),
]
ThinkingOpt = Annotated[
    str | None,
    typer.Option(
        "--thinking",
        help="Extended thinking: 'adaptive', 'off', or a token budget (e.g. 8000). Default: "
        "the model's own (Opus 5.5 always thinks).",
    ),
]
RunIdOpt = Annotated[str | None, typer.Option("--run-id", hidden=True)]


@dataclass
class _Opts:
    root: Path | None
    model: str | None
    max_turns: int | None
    budget: list[str] | None
    dry_run: bool
    yes: bool
    mode: str | None
    allow: list[str] | None
    deny: list[str] | None
    max_retries: int
    max_tokens: int
    background: bool
    as_json: bool
    run_id: str | None
    thinking: str | None = None

    def child_flags(self) -> list[str]:
        """The flags a background process re-receives."""
        out: list[str] = []
        for flag, value in (
            ("--model", self.model),
            ("--max-turns", self.max_turns),
            ("--mode", self.mode),
            ("--thinking", self.thinking),
        ):
            if value is not None:
                out += [flag, str(value)]
        for flag, values in (
            ("--budget", self.budget),
            ("--allow", self.allow),
            ("--deny", self.deny),
        ):
            for v in values or []:
                out += [flag, v]
        out += ["--max-retries", str(self.max_retries), "--max-tokens", str(self.max_tokens)]
        return out


def _ask_on_terminal(console: Console) -> Callable[[str], str | None]:
    from rich.markdown import Markdown

    from journal_agent.terminal_text import visible

    def ask(question: str) -> str | None:
        if "\n" in question.strip():  # its first line is already on screen
            console.print(Markdown(visible(question)))
        try:
            return console.input("[bold cyan]you ›[/] ")
        except EOFError:
            return None

    return ask


def _thinking(value: str | None, max_tokens: int) -> ThinkingConfigParam | None:
    from journal_agent.errors import UserError

    if value is None:
        return None
    if value in ("adaptive", "off", "disabled"):
        return {"type": "adaptive"} if value == "adaptive" else {"type": "disabled"}
    if value.isdigit() and 1024 <= int(value) < max_tokens:
        return {"type": "enabled", "budget_tokens": int(value)}
    raise UserError(
        f"--thinking '{value}' is not valid; use 'adaptive', 'off', or a budget of at least "
        f"1024 tokens below --max-tokens ({max_tokens})."
    )


def _paused(renderer: Renderer, fn: Callable[_P, _R] | None) -> Callable[_P, _R] | None:
    """``fn`` with the live progress region paused while it talks to the user."""
    if fn is None:
        return None

    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with renderer.paused():
            return fn(*args, **kwargs)

    return call


def _go(opts: _Opts, kind: str, target: str, text: str, argv: list[str]) -> None:
    """The body of run / command / learn: parse the flags, run (or detach, or dry-run), render."""
    from rich.console import Console

    from journal_agent.runtime.render import Renderer
    from journal_agent.runtime.runner import prepare_agent, prepare_slash_command
    from journal_agent.runtime.transcript import new_run_id

    ws = open_workspace(opts.root)
    root = ws.root
    if opts.background and not opts.dry_run:
        _detach(opts, kind, target, text, argv, root)
        return
    console = Console(stderr=True, highlight=False)
    renderer = Renderer(console)
    if not opts.dry_run:
        sandbox_notice(ws)
    config = _run_config(opts, root, renderer, console)
    prepare = prepare_agent if kind == "agent" else prepare_slash_command
    prepared = prepare(target, text, config)
    if opts.dry_run:
        _print_dry_run(prepared)
        return
    if config.run_id is None:  # known up front, so an interrupted run can name its transcript
        config.run_id = new_run_id()
    result = _execute(prepared, opts, root, config.run_id, renderer)
    _render_result(result, opts, root, console)


def _detach(opts: _Opts, kind: str, target: str, text: str, argv: list[str], root: Path) -> None:
    from journal_agent.runtime import background

    _check_before_detaching(kind, target, root)
    status = background.start(
        root, argv, kind=kind, target=target, prompt=text, flags=opts.child_flags()
    )
    if opts.as_json:
        print_json(status)
    else:
        echo(f"started background run {status['id']} (pid {status.get('pid')})")
        echo(f"  wait for it:  journal-agent wait {status['id']}")


def _run_config(opts: _Opts, root: Path, renderer: Renderer, console: Console) -> RunConfig:
    """The flags as the runtime's RunConfig; on a terminal, questions and asks go to the user."""
    from journal_agent.runtime.limits import parse_budget
    from journal_agent.runtime.loop import RunOptions
    from journal_agent.runtime.runner import RunConfig

    usd, tokens = parse_budget(opts.budget or [])
    interactive = not opts.yes and opts.run_id is None and sys.stdin.isatty()
    permission_prompt = None
    if interactive:
        from journal_agent.tools.permissions import tty_prompt

        permission_prompt = _paused(renderer, tty_prompt())
    return RunConfig(
        root=root,
        model=opts.model,
        options=RunOptions(
            max_turns=opts.max_turns,
            budget_usd=usd,
            budget_tokens=tokens,
            max_tokens=opts.max_tokens,
            max_tokens_ceiling=max(64_000, opts.max_tokens),
            thinking=_thinking(opts.thinking, opts.max_tokens),
        ),
        mode=opts.mode,
        allow=tuple(opts.allow or ()),
        deny=tuple(opts.deny or ()),
        ask=_paused(renderer, _ask_on_terminal(console)) if interactive else None,
        permission_prompt=permission_prompt,
        emit=renderer,
        max_retries=opts.max_retries,
        run_id=opts.run_id,
    )


def _execute(
    prepared: Prepared, opts: _Opts, root: Path, run_id: str, renderer: Renderer
) -> RunResult:
    """Run it; a background run (``--run-id``) records running / interrupted / failed."""
    from journal_agent.errors import UserError
    from journal_agent.paths import transcripts_dir
    from journal_agent.runtime import background
    from journal_agent.runtime.result import INTERRUPTED
    from journal_agent.runtime.runner import execute

    def record(**fields: Unpack[RunFields]) -> None:
        if opts.run_id:
            background.write_status(root, opts.run_id, **fields)

    pid = os.getpid()
    record(status=background.RUNNING, pid=pid, pid_started=background.process_started(pid))
    try:
        result = execute(prepared)
        renderer.close()
    except KeyboardInterrupt:
        # typer would turn this into a silent exit 130: say what happened and what is kept.
        renderer.close()
        transcript = transcripts_dir(root) / f"{run_id}.jsonl"
        message = "the run was interrupted (Ctrl-C); what it did so far is in " + str(transcript)
        record(status=INTERRUPTED, exit_code=130, message=message + ".")
        echo(f"interrupted: {message}.", err=True)
        raise typer.Exit(130) from None
    except UserError as exc:
        renderer.close()
        record(status=background.FAILED, exit_code=exc.exit_code, message=exc.message)
        raise
    except BaseException as exc:
        renderer.close()
        record(status=background.FAILED, exit_code=1, message=f"{type(exc).__name__}: {exc}")
        raise
    return result


def _render_result(result: RunResult, opts: _Opts, root: Path, console: Console) -> None:
    """Print the answer (or the JSON summary) and the usage line; record a background result."""
    from journal_agent.runtime import background
    from journal_agent.runtime.render import print_summary
    from journal_agent.runtime.transcript import Scrubber

    # Nothing we print or record holds a secret a tool or the model came across (.env, env).
    summary = Scrubber()(result.summary())
    if opts.run_id:
        background.write_status(
            root,
            opts.run_id,
            status=result.status,
            exit_code=result.exit_code,
            message=result.message,
            result=summary,
        )
    if opts.as_json:
        print_json(summary)
    elif result.final_text:
        echo(summary["final_text"])
    print_summary(console, result)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _check_before_detaching(kind: str, target: str, root: Path) -> None:
    """Fail now, not in a detached process: the key and the definition must exist."""
    from journal_agent.definitions import load_agent, load_command
    from journal_agent.errors import UserError

    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
        raise UserError(
            "ANTHROPIC_API_KEY is not set; export your Anthropic API key before "
            "starting a background run.",
            exit_code=2,
        )
    (load_agent if kind == "agent" else load_command)(target, root)


def _print_dry_run(prepared: Prepared) -> None:
    from journal_agent.runtime.tokens import ENCODING, estimate_request

    request = prepared.first_request()
    print_json(
        {
            "request": request,
            "estimated_input_tokens": estimate_request(request),
            "note": f"token counts are estimates with tiktoken's {ENCODING} encoding (Claude's "
            "tokenizer differs; expect 10-20 % off); nothing was sent.",
        }
    )


def _opts(values: dict[str, Any]) -> _Opts:
    """The shared flags out of a command's ``locals()`` (typer needs them in each signature)."""
    return _Opts(**{f.name: values[f.name] for f in fields(_Opts)})


@app.command("run")
def run_command(
    agent: Annotated[str, typer.Argument(help="Agent name (see `journal-agent agents`).")],
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    root: RootOption = None,
    model: ModelOpt = None,
    max_turns: MaxTurnsOpt = None,
    budget: BudgetOpt = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    mode: ModeOpt = None,
    allow: AllowOpt = None,
    deny: DenyOpt = None,
    max_retries: RetriesOpt = 2,
    max_tokens: MaxTokensOpt = 16_000,
    thinking: ThinkingOpt = None,
    background: BackgroundOpt = False,
    as_json: JsonOption = False,
    run_id: RunIdOpt = None,
) -> None:
    """Run an agent definition on a prompt (its body is the system prompt)."""
    opts = _opts(locals())
    _go(opts, "agent", agent, prompt, ["run", agent, prompt])


@app.command("command")
def command_command(
    name: Annotated[str, typer.Argument(help="Slash command name, with or without '/'.")],
    args: Annotated[list[str] | None, typer.Argument(help="Its arguments ($ARGUMENTS).")] = None,
    root: RootOption = None,
    model: ModelOpt = None,
    max_turns: MaxTurnsOpt = None,
    budget: BudgetOpt = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    mode: ModeOpt = None,
    allow: AllowOpt = None,
    deny: DenyOpt = None,
    max_retries: RetriesOpt = 2,
    max_tokens: MaxTokensOpt = 16_000,
    thinking: ThinkingOpt = None,
    background: BackgroundOpt = False,
    as_json: JsonOption = False,
    run_id: RunIdOpt = None,
) -> None:
    """Run a slash command: its expanded text is the first message of a new conversation."""
    opts = _opts(locals())
    name = name.lstrip("/")
    arguments = " ".join(args or [])
    _go(opts, "command", name, arguments, ["command", name, *(args or [])])


@app.command("learn")
def learn_command(
    topic: Annotated[
        list[str] | None, typer.Argument(help="What to record (the /learn command's arguments).")
    ] = None,
    root: RootOption = None,
    model: ModelOpt = None,
    max_turns: MaxTurnsOpt = None,
    budget: BudgetOpt = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    mode: ModeOpt = None,
    allow: AllowOpt = None,
    deny: DenyOpt = None,
    max_retries: RetriesOpt = 2,
    max_tokens: MaxTokensOpt = 16_000,
    thinking: ThinkingOpt = None,
    background: BackgroundOpt = False,
    as_json: JsonOption = False,
    run_id: RunIdOpt = None,
) -> None:
    """Record a learning insight in the journal: the /learn command."""
    opts = _opts(locals())
    _go(opts, "command", "learn", " ".join(topic or []), ["learn", *(topic or [])])
