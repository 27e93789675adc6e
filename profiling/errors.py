"""The expected-failure types of the profiling package.

``ProfilingError`` is a ``ValueError`` carrying a sentence that says what is wrong and what to
do. The journal-agent CLI turns it into its own ``UserError``; library users can catch it.
``ConfigError`` is the one a bad training configuration raises (``profiling.config``).
"""

from __future__ import annotations

from typing import Any


class ProfilingError(ValueError):
    """An expected, user-facing failure: bad input, a model that will not trace, a missing API."""


class ConfigError(ProfilingError):
    """A configuration the tools cannot run; ``field`` names the offending setting."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.validation: Any = None  # the pydantic ValidationError it came from, if any
