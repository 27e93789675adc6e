"""The ``journal-agent`` command line.

Each submodule registers its commands on ``app``; a submodule is imported only when one of its
commands runs (``cli/_commands.py`` is the table). Module level imports in the submodules stay
light (typer, rich, pydantic): anthropic, torch, mcp and matplotlib are imported inside the
commands that need them, so ``--help`` and the journal commands start fast.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from journal_agent.cli._app import app, load_all
from journal_agent.errors import as_user_error

__all__ = ["app", "load_all", "main"]


def _read_only_in_sandbox(exc: BaseException) -> bool:
    """A write refused by the sandbox's read-only view (we run inside it: it says so in
    ``JOURNAL_AGENT_SANDBOX``, see tools/sandbox/call.py)."""
    import errno
    import os

    sandboxed = "JOURNAL_AGENT_SANDBOX" in os.environ or "JOURNAL_AGENT_OUTBOX" in os.environ
    return sandboxed and isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES)


def _path_problem(exc: OSError) -> str:
    """One sentence for a path the file system refused: a directory where a file belongs (or
    the reverse: `.journal` as a file), no permission, a place that cannot hold files."""
    import os

    path = str(exc.filename)
    if isinstance(exc, FileExistsError | NotADirectoryError) and not os.path.isdir(path):
        what = f"{path} is a file where journal-agent needs a directory"
    elif isinstance(exc, IsADirectoryError):
        what = f"{path} is a directory where journal-agent needs a file"
    else:
        what = f"cannot use {path} ({exc.strerror or exc})"
    return f"{what}; move it aside (or fix the path) and try again."


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: expected failures become one sentence on stderr and a non-zero exit code.

    ``argv`` defaults to ``sys.argv[1:]``; tests pass it to run the CLI in-process.
    """
    from journal_agent.cli import _app, _help_render

    _app.INVOCATION[:] = sys.argv[1:] if argv is None else list(argv)
    if "journal_agent.foreign_changes" in sys.modules:  # in-process (tests, a library's caller):
        sys.modules["journal_agent.foreign_changes"].take_notes()  # say only this command's
    if not _app.INVOCATION or "--help" in _app.INVOCATION:
        _help_render.import_renderer()  # help will be rendered: without the rich it never uses
    try:
        _run(argv)
    finally:
        _say_foreign_changes()  # after the command's own output and error line


def _run(argv: Sequence[str] | None) -> None:
    from journal_agent.terminal_text import visible

    try:
        # Standalone: click reports usage errors itself and exits with their codes.
        app(args=None if argv is None else list(argv), prog_name="journal-agent")
    except Exception as exc:
        # Ours and profiling's expected failures: one sentence, no traceback. A bug re-raises.
        error = as_user_error(exc)
        if error is None and _read_only_in_sandbox(exc):
            print(
                "error: journal-agent cannot write its journal, ledger or state from inside "
                "the sandbox, where they are read-only; run this journal-agent command alone "
                "on its Bash line (nothing before or after it), and the host runs it, or use "
                "the JournalAppend / LedgerUpdate tool.",
                file=sys.stderr,
            )
            sys.exit(1)
        if error is None and isinstance(exc, OSError) and exc.filename:
            print(f"error: {visible(_path_problem(exc))}", file=sys.stderr)
            sys.exit(1)
        if error is None:
            raise
        # The sentence may quote a file (a line of the journal, a planted name): written out.
        print(f"error: {visible(error.message)}", file=sys.stderr)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        print("interrupted.", file=sys.stderr)
        sys.exit(130)


def _say_foreign_changes() -> None:
    """The journal or ledger changed by another hand, found while this command read it: one
    sentence each, on stderr (journal_agent/foreign_changes.py)."""
    if "journal_agent.foreign_changes" not in sys.modules:
        return  # nothing read them: nothing to say (and no import for it)
    from journal_agent.foreign_changes import take_notes
    from journal_agent.terminal_text import visible

    for note in take_notes():
        print(visible(note), file=sys.stderr)  # (it may quote the file: written out)
