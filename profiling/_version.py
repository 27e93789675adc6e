"""The version of the journal-agent distribution (both packages), in one place.

pyproject.toml reads it from here (hatch's dynamic version); ``profiling.__version__`` and
``journal_agent.__version__`` re-export it. It lives in profiling because profiling must not
import journal_agent, while journal_agent may import profiling.
"""

__version__ = "0.1.0"
