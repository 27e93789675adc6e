"""Expected failures: the one error root of journal_agent, and the one translation of profiling's.

Every failure journal_agent expects (bad input, a malformed agent file, a tool mistake the model
can fix) is a :class:`JournalAgentError` carrying a sentence that says what is wrong and what to
do. :class:`UserError` is the one to raise for the user: the CLI prints it without a traceback
and exits with ``exit_code``. :class:`ToolError` (re-exported by ``journal_agent.tools.base``,
the tool contract) becomes an ``is_error`` tool result for the model. The others keep their own
meaning where they are defined:

- ``journal_agent.definitions.DefinitionError`` — a malformed agent/command file (file:line);
- ``journal_agent.journal.verify.DraftError`` — the text is not one journal entry;
- ``journal_agent.tools._shell.ShellParseError`` — a command line that cannot be read.

``profiling`` is standalone and keeps its own root, ``profiling.errors.ProfilingError``;
:func:`as_user_error` is the one place it is translated, used at the two boundaries (the CLI's
``main`` and ``Tool.call``).
"""

from __future__ import annotations


class JournalAgentError(Exception):
    """Root of journal_agent's expected failures; ``str(exc)`` is the sentence to show."""


class UserError(JournalAgentError):
    """An expected failure the user can act on (bad input, missing key, no GPU, ...)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class ToolError(JournalAgentError):
    """Raised inside a tool for a failure the model should see as an ``is_error`` result.

    Defined here rather than in ``tools/base.py`` so that the permission rules can raise it
    without importing the tool contract, which names their class in ``ToolContext``.
    """


# torch is the `torch` extra (gigabytes, and the right build depends on the machine): what a
# profiling command or tool says where it is missing.
TORCH_MISSING = (
    "this needs PyTorch, which is not installed in this environment: install the build for "
    "this machine (`pip install torch --index-url https://download.pytorch.org/whl/cpu` without "
    "an NVIDIA GPU, or the CUDA build pytorch.org names for your driver), or in the Claude Code "
    "plugin let its profiling tools install it on first use (`journal-agent setup --torch`)."
)


def as_user_error(exc: BaseException) -> UserError | None:
    """``exc`` as the UserError to show, if it is an expected failure of ours or of profiling.

    None for anything else (a bug: let it raise with its traceback).
    """
    if isinstance(exc, UserError):
        return exc
    if isinstance(exc, JournalAgentError):
        return UserError(str(exc))
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").partition(".")[0] == "torch":
        return UserError(TORCH_MISSING)
    if isinstance(exc, OSError):
        return _disk_sentence(exc)
    if type(exc).__module__ == "sqlite3" and "disk is full" in str(exc):
        return UserError(
            "could not write a search file under .journal/: the disk is full (SQLite: "
            f"{exc}); nothing of this write was kept, so free some space and run it again."
        )
    # Imported here, not at the top: the CLI's start-up stays free of profiling.
    from profiling.errors import ProfilingError

    if isinstance(exc, ProfilingError):
        return UserError(str(exc))
    return None


def _disk_sentence(exc: OSError) -> UserError | None:
    """A refusal of :mod:`journal_agent.confined` (a link, FIFO, hard link where a file of ours
    belongs; a full disk), or a full disk met anywhere else, as its one sentence."""
    import errno

    from journal_agent.confined import NoSpace, Refused

    if isinstance(exc, Refused | NoSpace):
        return UserError(str(exc))
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        where = f" {exc.filename}" if exc.filename else ""
        return UserError(
            f"could not write{where}: the disk is full ({exc.strerror}); free some space and "
            "run it again."
        )
    return None
