"""Bash: run a command in the workspace root, in its own process group, with a timeout.

The command runs as ``bash -c`` in a new session (so a new process group): on timeout the
whole group is killed, background children (``sleep 100 &``) included. Output (stdout and
stderr interleaved, as a terminal shows them) is read by a thread into bounded buffers, so a
command printing gigabytes costs at most a few hundred kilobytes of memory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from journal_agent.processes import group_alive, stop_groups
from journal_agent.tools._budget import DEFAULT_MAX_TOKENS, fit_to_budget
from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from journal_agent.tools.workspace import workspace_root

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


class Bash(Tool):
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
        "- Commands may only touch paths inside the workspace; `sudo` is refused. Commands that "
        "change files may need the user's permission.\n"
        "- Prefer the Read, Grep, Glob, Edit and Write tools over cat, grep, find, sed and echo "
        "redirection. Chain dependent commands with &&.\n"
        "- Processes still running in the background when the command finishes are stopped."
    )
    Input = BashInput

    def run(self, ctx: ToolContext, params: BashInput) -> ToolResult:  # type: ignore[override]
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
        if ctx.policy is not None:
            ctx.policy.ensure("Bash", command=params.command)
        root = Path(workspace_root(ctx.root))
        timeout_s = (params.timeout or DEFAULT_TIMEOUT_MS) / 1000
        outcome = run_shell(params.command, root, timeout_s)
        return outcome.result()


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

    def result(self) -> ToolResult:
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


_CREDENTIALS = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"})


def run_shell(command: str, cwd: Path, timeout_s: float) -> _Outcome:
    # The model's commands never see our API credentials: `env` or `printenv` would otherwise
    # put the key into the conversation and the transcript.
    env = {k: v for k, v in os.environ.items() if k not in _CREDENTIALS}
    # Never wait on a pager or an editor: nobody is at the keyboard.
    env.update({"PAGER": "cat", "GIT_PAGER": "cat", "GIT_EDITOR": "true", "EDITOR": "true"})
    # `journal-agent ...` resolves to this installation even when its venv is not activated.
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
    try:
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so we can kill all of it
            env=env,
        )
    except OSError as exc:
        raise ToolError(f"Could not start bash: {exc.strerror}.") from None
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
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = timeout_s
        _stop(proc)
    except BaseException:
        _stop(proc)
        raise
    # Children left in the group may hold the pipe open; give them a moment, then stop them.
    reader.join(DRAIN_GRACE_S)
    # Stopped too: children that detached their output ("cmd >/dev/null 2>&1 &").
    if timed_out is None and (reader.is_alive() or group_alive(proc.pid)):
        reaped = _stop(proc)
    reader.join(KILL_GRACE_S + 1)
    stream.close()
    return _Outcome(output, proc.returncode, timed_out, reaped)


def _stop(proc: subprocess.Popen[bytes]) -> bool:
    """Stop the command's whole group (start_new_session: its id is the leader's pid)."""
    return bool(stop_groups([proc.pid], KILL_GRACE_S, leaders=[proc]))
