"""A confirmation the user types on their own terminal: how anything that grants or widens
permissions is approved (``journal-agent trust``, ``commands --approve``, ``agents --approve``).

What a tool call cannot give (docs/security.md, "Approval cannot come from a tool call"):

- **the store**: what is approved is written outside the workspace
  (:mod:`journal_agent.trust_store`), which is read-only in every sandbox we start;
- **the terminal**: the answer is read from the controlling terminal (``/dev/tty``), never from
  stdin, after dropping whatever was typed ahead. Every command of ours (Bash, ``!`cmd```, the
  MCP server's children, own commands the host runs) starts in a new session, without one;
- **the ancestry** (defence in depth): refused when journal-agent's runtime or MCP server, or
  Claude Code, is among the process's ancestors, however the command was spelled — a pty of
  its own (``script``), ``setsid``, ``env -u``, ``python -m journal_agent``.
"""

from __future__ import annotations

import itertools
import os

from journal_agent.errors import UserError

# An ancestor whose command line says it is one of these runs tool calls.
_CLAUDE_NAMES = ("claude", "claude.exe")
_MAX_DEPTH = 64
_MAX_ANSWER = 64


def tool_call_ancestor() -> str | None:
    """What makes this process a descendant of something that runs a model's tool calls
    (journal-agent itself, Claude Code), or None."""
    pid = os.getppid()
    for _ in range(_MAX_DEPTH):
        if pid <= 1:
            return None
        argv = _cmdline(pid)
        if _is_journal_agent(argv):
            return f"it was started by journal-agent (process {pid}: {_shown(argv)})"
        if _is_claude(argv, _comm(pid)):
            return f"it was started by Claude Code (process {pid})"
        pid = _parent(pid)
    return None


def confirm(what: str, details: list[str], command: str) -> None:
    """Show ``details`` on the terminal and require "yes" typed there; raise
    :class:`UserError` otherwise. ``what`` names the approval ("approving 2 files of
    /home/me/proj"), ``command`` is how the user runs it themselves."""
    import termios

    ancestor = tool_call_ancestor()
    if ancestor is not None:
        raise UserError(
            f"{what} needs you at your own terminal, and {ancestor}: no tool call may approve "
            f"what widens its own permissions; run `{command}` yourself in a terminal."
        )
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        raise UserError(
            f"{what} needs a confirmation typed at your terminal, and this process has none "
            f"(it runs without a controlling terminal, as every tool call does); run "
            f"`{command}` yourself in a terminal."
        ) from None
    try:
        if os.tcgetpgrp(fd) != os.getpgrp():
            raise UserError(
                f"{what} needs a confirmation typed at your terminal, and this process is not "
                f"in its foreground; run `{command}` yourself in the foreground of a terminal."
            )
        termios.tcflush(fd, termios.TCIFLUSH)  # nothing typed (or queued) ahead answers
        text = "\n".join(details) + '\nType "yes" to approve, anything else to cancel: '
        os.write(fd, text.encode("utf-8", "replace"))
        answer = _read_line(fd)
    finally:
        os.close(fd)
    if answer.strip().lower() != "yes":
        raise UserError(f"not approved ({what}); nothing was recorded.")


def _read_line(fd: int) -> str:
    data = b""
    while not data.endswith(b"\n") and len(data) < _MAX_ANSWER:
        chunk = os.read(fd, _MAX_ANSWER)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 16)
    except OSError:
        return b""


def _cmdline(pid: int) -> list[str]:
    raw = _read(f"/proc/{pid}/cmdline")
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def _comm(pid: int) -> str:
    return _read(f"/proc/{pid}/comm").decode("utf-8", "replace").strip()


def _parent(pid: int) -> int:
    """The parent's pid from /proc/PID/stat (the name in parentheses may hold anything)."""
    raw = _read(f"/proc/{pid}/stat").decode("utf-8", "replace")
    fields = raw.rpartition(")")[2].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return 0


def _is_journal_agent(argv: list[str]) -> bool:
    """``journal-agent …``, or a Python running ``-m journal_agent…`` or the console script."""
    if not argv:
        return False
    first = os.path.basename(argv[0])
    if first == "journal-agent":
        return True
    if not first.startswith("python"):
        return False
    if any(a == "-m" and b.startswith("journal_agent") for a, b in itertools.pairwise(argv)):
        return True
    script = next((a for a in argv[1:] if not a.startswith("-")), "")
    return os.path.basename(script) == "journal-agent"


def _is_claude(argv: list[str], comm: str) -> bool:
    if comm in _CLAUDE_NAMES:
        return True
    head = [os.path.basename(a) for a in argv[:3]]
    return any(h in _CLAUDE_NAMES for h in head) or any("claude-code" in a for a in argv[:3])


def _shown(argv: list[str]) -> str:
    return " ".join(argv)[:80]
