"""The one expected-failure type of the profiling package.

``ProfilingError`` is a ``ValueError`` carrying a sentence that says what is wrong and what to
do. The journal-agent CLI turns it into its own ``UserError``; library users can catch it.
"""

from __future__ import annotations


class ProfilingError(ValueError):
    """An expected, user-facing failure: bad input, a model that will not trace, a missing API."""
