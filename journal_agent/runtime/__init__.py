"""The agent runtime: drives the Anthropic Messages API with our tools.

Public API (imported lazily, so ``import journal_agent.runtime`` stays cheap)::

    from journal_agent.runtime import run_agent, run_slash_command, RunConfig, RunOptions

See docs/runtime.md. The Anthropic SDK is imported only when a model is called.
"""

from __future__ import annotations

from profiling._lazy import lazy_exports

_EXPORTS = {
    "run_agent": "journal_agent.runtime.runner",
    "run_slash_command": "journal_agent.runtime.runner",
    "prepare_agent": "journal_agent.runtime.runner",
    "prepare_slash_command": "journal_agent.runtime.runner",
    "execute": "journal_agent.runtime.runner",
    "RunConfig": "journal_agent.runtime.runner",
    "RunOptions": "journal_agent.runtime.loop",
    "AgentLoop": "journal_agent.runtime.loop",
    "AgentSpec": "journal_agent.runtime.loop",
    "Session": "journal_agent.runtime.loop",
    "RunResult": "journal_agent.runtime.result",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
