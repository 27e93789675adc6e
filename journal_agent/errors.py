"""The one path for expected, user-facing failures.

Raise :class:`UserError` with a sentence that says what is wrong and what to do; the CLI
prints it without a traceback and exits with ``exit_code``.
"""

from __future__ import annotations


class UserError(Exception):
    """An expected failure the user can act on (bad input, missing key, no GPU, ...)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message
