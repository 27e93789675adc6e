"""``run_git`` lives in :mod:`journal_agent.gitcmd` (the journal's references use it too)."""

from journal_agent.gitcmd import run_git

__all__ = ["run_git"]
