"""Bash: run a command in the workspace root, inside the OS sandbox, with a timeout.

The command runs as ``bash -c`` inside bubblewrap (see :mod:`journal_agent.tools.sandbox`):
its own PID namespace, so every process it starts dies with it (timeout, interrupt, or our own
exit); what it may write follows the permission mode and the decision of the permission
policy; a protected path it creates (``.mcp.json``, a git hook …) is moved into quarantine
once it has ended. Without a sandbox it runs in a new session, whose process group is killed
at the end.
Output (stdout and stderr interleaved, as a terminal shows them) is read by a thread into
bounded buffers, so a command printing gigabytes costs at most a few hundred kilobytes.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from journal_agent.processes import group_alive, stop_groups
from journal_agent.tools._budget import DEFAULT_MAX_TOKENS, fit_to_budget
from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from journal_agent.tools.confined_paths import workspace_root
from journal_agent.tools.own_commands import host_argv, measuring_argv
from journal_agent.tools.sandbox import SandboxSettings
from journal_agent.tools.sandbox import available_confinement as available_confinement
from journal_agent.tools.sandbox.call import Sandboxed, sandboxed
from journal_agent.tools.sandbox.environment import command_env

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
MAX_OUTPUT_CHARS = 30_000
# Of the characters kept from a long output, this many come from the end (errors, summaries).
TAIL_CHARS = 10_000
_HEAD_BYTES = (MAX_OUTPUT_CHARS - TAIL_CHARS) * 4
_TAIL_BYTES = TAIL_CHARS * 4
# After the shell exits, how long background children may keep the output open.
DRAIN_GRACE_S = 0.5
KILL_GRACE_S = 2.0
NOTES_RESERVE = 200  # tokens kept for the exit code / timeout notes after the output
NARROW_HINT = "Narrow the command's output (e.g. pipe through head, tail or grep)."


class BashInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    command: str = Field(description="The command to execute.")
    timeout: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TIMEOUT_MS,
        description=f"Optional timeout in milliseconds (max {MAX_TIMEOUT_MS}; default "
        f"{DEFAULT_TIMEOUT_MS}).",
    )
    description: str | None = Field(
        default=None,
        description="Clear, concise description of what this command does in 5-10 words, "
        "e.g. 'List files in current directory' or 'Run the unit tests'.",
    )
    # Claude Code's field, which a model may send out of habit; not in our schema.
    run_in_background: SkipJsonSchema[bool | None] = None


class Bash(Tool[BashInput]):
    name = "Bash"
    description = (
        "Executes a bash command in the workspace root and returns its output (stdout and "
        "stderr together) and exit code.\n"
        f"- Timeout: {DEFAULT_TIMEOUT_MS // 1000} s by default, at most "
        f"{MAX_TIMEOUT_MS // 1000} s (timeout is in milliseconds). On timeout the command and "
        "everything it started are killed.\n"
        f"- Output longer than {MAX_OUTPUT_CHARS} characters is cut in the middle.\n"
        "- Every call starts in the workspace root (a `cd` does not carry over); quote paths "
        'with spaces ("my dir/file").\n'
        "- Commands run in a sandbox: the filesystem is read-only except the workspace (and only "
        "when the permission mode or the user allows writing), /tmp is private, secrets "
        "(.env, keys, ~/.ssh) are hidden, and there is no network unless settings allow it. "
        "`sudo` is refused; commands that change files may need the user's permission.\n"
        "- Prefer the Read, Grep, Glob, Edit and Write tools over cat, grep, find, sed and echo "
        "redirection. Chain dependent commands with &&.\n"
        "- Processes still running in the background when the command finishes are stopped."
    )
    Input = BashInput

    def run(self, ctx: ToolContext, params: BashInput) -> ToolResult:
        if not params.command.strip():
            raise ToolError("The command is empty.")
        if "\x00" in params.command:
            raise ToolError(
                "The command contains a NUL byte, which bash cannot receive; remove it."
            )
        if params.run_in_background:
            raise ToolError(
                "Background commands are not supported here; run the command in the foreground "
                "with a timeout (up to 600000 ms)."
            )
        root = Path(workspace_root(ctx.root))
        settings = ctx.policy.sandbox if ctx.policy is not None else SandboxSettings()
        conf = available_confinement(settings, root)
        writes, read_deny, home = True, (), None  # no policy: all allowed
        if ctx.policy is not None:
            decision = ctx.policy.ensure("Bash", command=params.command, confined=conf.active)
            writes = decision.writes
            read_deny, home = ctx.policy.read_deny_paths(), ctx.policy.home
        timeout_s = (params.timeout or DEFAULT_TIMEOUT_MS) / 1000
        # One of our own journal/ledger commands alone on its line: the host runs it, through
        # its own locked code paths (see own_commands); never by widening the sandbox.
        host = host_argv(params.command, ctx.policy, root) if ctx.policy is not None else None
        if host is not None:
            return run_shell(params.command, root, timeout_s, settings=settings, argv=host).result()
        # A measurement alone on its line: our argv instead of the line, with an outbox for
        # its records (a command line never gets one: it could forge them).
        measure = measuring_argv(params.command, ctx.policy, root) if ctx.policy else None
        with sandboxed(root, settings, writes=writes, read_deny=read_deny, home=home,
                       outbox=measure is not None) as box:  # fmt: skip
            argv = box.argv(measure) if measure is not None and box.active else None
            outcome = run_shell(params.command, root, timeout_s, box=box, argv=argv)
        return outcome.result(box.notes)


class _Output:
    """Keeps the first and last bytes of a stream; counts the rest."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = _HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * _TAIL_BYTES:
                del self.tail[: len(self.tail) - _TAIL_BYTES]

    def text(self) -> str:
        keep_head = MAX_OUTPUT_CHARS - TAIL_CHARS
        if self.total == len(self.head) + len(self.tail):  # nothing dropped yet
            full = (self.head + self.tail).decode("utf-8", "replace")
            if len(full) <= MAX_OUTPUT_CHARS:
                return full
            head, tail = full[:keep_head], full[-TAIL_CHARS:]
            omitted = f"{len(full) - len(head) - len(tail):,} characters"
        else:
            head = self.head.decode("utf-8", "replace")[:keep_head]
            tail = self.tail.decode("utf-8", "replace")[-TAIL_CHARS:]
            omitted = f"about {self.total - len(self.head) - len(self.tail):,} bytes"
        return (
            f"{head}\n\n[... output truncated: {omitted} in the middle omitted (the limit is "
            f"{MAX_OUTPUT_CHARS:,} characters). {NARROW_HINT}]\n\n{tail}"
        )


class _Outcome:
    def __init__(
        self, output: _Output, returncode: int | None, timed_out: float | None, reaped: bool
    ) -> None:
        self.output = output
        self.returncode = returncode
        self.timed_out = timed_out
        self.reaped = reaped

    def result(self, moved: list[str] | None = None) -> ToolResult:
        """The output and the notes: exit code, timeout, stopped processes, and ``moved``
        (one sentence per protected path the command created and we moved aside)."""
        text = self.output.text().rstrip("\n")
        notes = []
        if self.timed_out is not None:
            notes.append(
                f"Command timed out after {self.timed_out:g} s; it and every process it started "
                "were killed. Give a larger timeout (ms, at most 600000) or a faster command."
            )
        elif self.returncode is not None and self.returncode < 0:
            notes.append(
                f"Exit code {128 - self.returncode} (killed by {_signal_name(self.returncode)})"
            )
        else:
            notes.append(f"Exit code {self.returncode}")
        if self.reaped:
            notes.append(
                "Background processes still running when the command finished were stopped."
            )
        notes += moved or []
        body = text if text else "(no output)"
        # Budget the output, not the notes: the exit code must survive any cut.
        body = fit_to_budget(body, DEFAULT_MAX_TOKENS - NOTES_RESERVE, narrow_hint=NARROW_HINT)
        content = f"{body}\n\n" + "\n".join(notes)
        return ToolResult(content, is_error=self.timed_out is not None or self.returncode != 0)


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


# Run inside the sandbox as the shell of the model's command (one bash, not two: each costs
# milliseconds): on exit it reports on a private pipe the command's exit status and how many
# of its processes were still running (they die with the PID namespace as soon as this shell
# exits). A command that replaces the EXIT trap or is killed by a signal gets no report; its
# status then comes from bwrap (128 + signal, as bash itself reports it).
_SANDBOX_WRAPPER = (
    "__ja_report() {{ __ja_rc=$?; __ja_n=0; for __ja_d in /proc/[0-9]*; do "
    "case ${{__ja_d#/proc/}} in 1|$$) ;; *) __ja_n=$((__ja_n + 1)) ;; esac; done; "
    'echo "$__ja_rc $__ja_n" >&{fd}; }}; '
    # On one line, so that bash's messages about the command say "line 1" as usual.
    'trap __ja_report EXIT; __ja_cmd=$1; shift; eval "$__ja_cmd"'
)


def run_shell(
    command: str,
    cwd: Path,
    timeout_s: float,
    *,
    box: Sandboxed | None = None,
    settings: SandboxSettings | None = None,
    argv: list[str] | None = None,
) -> _Outcome:
    """Run ``command`` with bash in ``box`` (unconfined without one, or when it is inactive);
    or, given ``argv``, that program instead: on the host (journal-agent's own commands), or
    already wrapped by ``box`` (a measuring child, with ``box``'s environment)."""
    # Built from an allow-list: `env` or `printenv` would otherwise put the parent's keys,
    # tokens and database passwords into the conversation and the transcript.
    env = box.env() if box is not None else command_env(settings)
    status_r = status_w = -1
    if argv is None and box is not None and box.active:
        status_r, status_w = os.pipe()
        limits = box.tree.inner if box.tree is not None else ""
        wrapper = limits + _SANDBOX_WRAPPER.format(fd=status_w)
        argv = box.argv(["bash", "-c", wrapper, "bash", command], inner_limits=False)
    elif argv is None:
        argv = ["bash", "-c", command]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so we can kill all of it
            env=env,
            pass_fds=(status_w,) if status_w >= 0 else (),
        )
    except OSError as exc:
        raise ToolError(f"Could not start bash: {exc.strerror}.") from None
    finally:
        if status_w >= 0:
            os.close(status_w)
    assert proc.stdout is not None
    output = _Output()
    stream = proc.stdout

    def pump() -> None:
        fd = stream.fileno()
        while chunk := os.read(fd, 65536):
            output.add(chunk)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out: float | None = None
    reaped = False
    try:
        _wait(proc, timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = timeout_s
        _stop(proc)
    except BaseException:
        _stop(proc)
        raise
    # Children left in the group may hold the pipe open; give them a moment, then stop them.
    reader.join(DRAIN_GRACE_S)
    # Stopped too: children that detached their output ("cmd >/dev/null 2>&1 &").
    # (In the sandbox nothing is left: its PID namespace ended with it.)
    if timed_out is None and (reader.is_alive() or (status_r < 0 and group_alive(proc.pid))):
        reaped = _stop(proc)
    reader.join(KILL_GRACE_S + 1)
    stream.close()
    returncode = proc.returncode
    if status_r >= 0:
        returncode, left = _sandbox_status(status_r, returncode, output, timed_out)
        reaped = reaped or left > 0
    return _Outcome(output, returncode, timed_out, reaped)


def _sandbox_status(
    fd: int, returncode: int | None, output: _Output, timed_out: float | None
) -> tuple[int | None, int]:
    """(the command's exit status, processes it left running) from the wrapper's report."""
    with os.fdopen(fd, "rb") as f:
        report = f.read(64).split()
    left = 0
    if len(report) == 2 and all(x.isdigit() for x in report):
        returncode, left = int(report[0]), int(report[1])
    elif timed_out is None and output.head.startswith(b"bwrap:"):
        problem = output.head.decode("utf-8", "replace").strip().splitlines()[0]
        raise ToolError(
            f"The sandbox could not start ({problem}); run `journal-agent doctor` to see why."
        )
    # Death by signal N arrives as 128 + N (from bash, or from bwrap for its child), as the
    # shell the user knows reports it.
    if returncode is not None and 128 < returncode < 128 + 65:
        returncode = -(returncode - 128)
    return returncode, left


def _wait(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    """``proc.wait(timeout)`` without its polling loop, whose sleeps (up to 50 ms each) would
    add tens of milliseconds to every short command: wait on a pidfd where there is one."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout=timeout_s)
    try:
        ready, _, _ = select.select([fd], [], [], timeout_s)
    finally:
        os.close(fd)
    if not ready:
        raise subprocess.TimeoutExpired(proc.args, timeout_s)
    return proc.wait()


def _stop(proc: subprocess.Popen[bytes]) -> bool:
    """Stop the command's whole group (start_new_session: its id is the leader's pid)."""
    return bool(stop_groups([proc.pid], KILL_GRACE_S, leaders=[proc]))
