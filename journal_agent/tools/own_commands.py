"""journal-agent's own journal, ledger and estimate commands, run through Bash: by the host,
through their own locked code paths, never by widening the sandbox.

They write ``learning_journal.md`` / ``learning_ledger.md`` (atomically, in the workspace
root) and their state under ``.journal/`` (the lock, the index, records). None of that can be
made writable inside the sandbox without making far more writable: a file replaced atomically
needs its directory writable, and a ``.journal/`` writable by a command lets it plant a
symlink that redirects the host's later appends. So:

- a Bash command line that is **one of these commands and nothing else** — no other command,
  no variable, redirection, expansion or wrapper, spelled ``journal-agent …`` or
  ``python -m journal_agent …`` — is run by the host as ``<our python> -I -m journal_agent
  …`` in the workspace (isolated: no ``PYTHON*`` variables, nothing of the workspace on
  ``sys.path``), with the command environment of :mod:`.sandbox.environment`. The files it
  names are checked as Read would check them; options that write elsewhere (``--plot``,
  ``--csv``, ``--root``, ``--eject``, ``--revert``) and user model factories (``--model
  pkg.mod:fn``) are not run this way;
- anything else (``journal-agent journal list; <anything>``) runs in the sandbox with the view
  its mode gives the whole line: the own command there gains nothing, and one that must write
  says so in one sentence.

Nothing that grants or widens permissions is among them: ``trust``, ``commands --approve`` and
``agents --approve`` (like ``agents`` and ``commands`` altogether, which only read) run in the
sandbox, where the trust store is read-only and there is no terminal to confirm on
(:mod:`journal_agent.terminal_confirm`).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from journal_agent.tools._shell import ShellParseError, split_commands

if TYPE_CHECKING:
    from journal_agent.tools.permissions import PermissionPolicy

# (group, subcommand) or (command,) run by the host.
HOST_RUN = {
    ("journal", "append"), ("journal", "check"), ("journal", "list"), ("journal", "show"),
    ("journal", "search"), ("journal", "related"), ("journal", "refresh"), ("estimate",),
    ("measurements",), ("ledger",), ("ledger", "check"),
    ("ledger", "session"), ("ledger", "insight"), ("ledger", "add-item"), ("ledger", "move"),
    ("ledger", "add-action"), ("ledger", "tick"), ("ledger", "add-goal"),
    ("ledger", "tick-goal"), ("ledger", "updated"), ("ledger", "apply"), ("feedback",),
}  # fmt: skip
# Measurements: run by the Bash tool as a child of ours in the line's sandbox, with an outbox.
MEASURING = {("trace",), ("profile",), ("fit",), ("estimate",)}
# Options that would write a file the command names, move the state elsewhere, or undo an
# edit: such a command runs in the sandbox instead, with what its mode allows.
_WRITES_ELSEWHERE = ("--plot", "--csv", "--root", "--eject", "--revert", "--output", "--init")
_PYTHON = re.compile(r"python(3(\.\d+)?)?")
# Outside quotes, these make bash do more than run one command with the words as written.
_SHELL_ACTIVE = set("$`*?[]{}~!()<>|;&\\\n#")
_IN_DOUBLE_QUOTES = set("$`\\!")


def host_argv(command: str, policy: PermissionPolicy | None, root: Path) -> list[str] | None:
    """The argv the host runs for ``command``, or None when it is not one own command alone.

    Never in ``plan`` mode, which writes nothing: there the command runs in the read-only
    sandbox like any other."""
    if policy is not None and policy.mode == "plan":
        return None
    args = _own_args(command)
    if args is None:
        return None
    if tuple(args[:2]) not in HOST_RUN and tuple(args[:1]) not in HOST_RUN:
        return None
    ledger_sub = args[:1] == ["ledger"] and len(args) > 1 and not args[1].startswith("-")
    if ledger_sub and tuple(args[:2]) not in HOST_RUN:
        return None  # ledger init and anything new
    for i, arg in enumerate(args):
        if any(arg == o or arg.startswith(o + "=") for o in _WRITES_ELSEWHERE):
            return None
        model = arg.split("=", 1)[1] if arg.startswith("--model=") else None
        if i > 0 and args[i - 1] == "--model":
            model = arg
        if model is not None and ":" in model:
            return None  # a user's factory runs their code: in the sandbox
        if not _readable(arg, policy, root):
            return None
    return [sys.executable, "-I", "-m", "journal_agent", *args]


def measuring_argv(command: str, policy: PermissionPolicy | None, root: Path) -> list[str] | None:
    """The argv of a measuring child for ``command`` — ``journal-agent trace|profile|fit|
    estimate …`` alone on its line, not run by the host — or None.

    The Bash tool runs it instead of the line, in the sandbox the line would get, with an
    outbox of its own for the records (:mod:`journal_agent.tools.sandbox.call`): only our argv
    runs in there (and the user's model factory it imports), so a record it hands back was made
    by the measurement, never by another command of the line. Not in ``plan`` mode (it writes
    nothing), nor with ``--root`` (the records belong to this workspace)."""
    if policy is not None and policy.mode == "plan":
        return None
    args = _own_args(command)
    if args is None or tuple(args[:1]) not in MEASURING:
        return None
    if any(a == "--root" or a.startswith("--root=") for a in args):
        return None
    if not all(_readable(arg, policy, root) for arg in args):
        return None
    return [sys.executable, "-I", "-m", "journal_agent", *args]


def _own_args(command: str) -> list[str] | None:
    """The words after ``journal-agent`` (or ``python -m journal_agent``) when ``command`` is
    that alone, as bash would take it word for word; else None."""
    if not _literal(command):
        return None
    try:
        parts = split_commands(command)
    except ShellParseError:
        return None
    if len(parts) != 1:
        return None
    part = parts[0]
    words = part.words
    if part.assignments or part.redirects or not words or part.text.split()[0] != words[0]:
        return None  # a variable, a redirection, or a wrapper (env, nohup, timeout …)
    if words[0] == "journal-agent":
        return words[1:]
    if len(words) >= 3 and _PYTHON.fullmatch(words[0]) and words[1:3] == ["-m", "journal_agent"]:
        return words[3:]
    return None  # a path (./journal-agent, tools/python) is whatever the workspace holds


def _literal(command: str) -> bool:
    """Whether bash would take every word of ``command`` as written: nothing outside quotes
    that expands, redirects or separates, nothing inside double quotes that expands."""
    quote = ""
    for ch in command:
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif quote == '"':
            if ch in _IN_DOUBLE_QUOTES:
                return False
            quote = "" if ch == '"' else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _SHELL_ACTIVE:
            return False
    return quote == ""


def _readable(word: str, policy: PermissionPolicy | None, root: Path) -> bool:
    """A word that names an existing path must be one Read may read (inside the workspace,
    not a secret, not under a Read deny rule); other words are data."""
    if word.startswith("-") and "=" in word:
        word = word.split("=", 1)[1]
    if not word or word.startswith("-"):
        return True
    path = root / word
    if not os.path.lexists(path):
        return True
    real = Path(os.path.realpath(path))
    if not (real == root or root in real.parents):
        return False
    if policy is None:
        return True
    return policy.evaluate("Read", path=real).behavior == "allow"
