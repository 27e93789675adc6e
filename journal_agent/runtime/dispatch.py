"""Running one turn's tool calls: concurrently, each failure an error result the model sees.

Results come back in the order of the tool_use blocks, ready to be the ``tool_result``
blocks of ONE user message. Unknown tools, invalid input, ToolError and unexpected
exceptions all become ``is_error`` results; only a failed *model call* inside a sub-agent
(ModelCallError) ends the run, because it would fail the same way for every agent.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from journal_agent.runtime.client import ModelCallError
from journal_agent.tools.base import Tool, ToolContext, ToolResult

# Claude Code caps a tool response at about 25,000 tokens; ~4 characters per token.
MAX_RESULT_CHARS = 100_000
MAX_PARALLEL = 8
# Names the model may use for the same tool (Claude Code calls Task "Agent").
TOOL_ALIASES = {"Agent": "Task"}


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: Any


@dataclass(frozen=True)
class ToolOutcome:
    call: ToolCall
    result: ToolResult
    seconds: float


_DEFINITIONS: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()


def tool_definition(tool: Tool) -> dict[str, Any]:
    """``tool.definition()``, computed once per tool class (schemas are costly to build)."""
    cls = type(tool)
    definition = _DEFINITIONS.get(cls)
    if definition is None:
        definition = _DEFINITIONS[cls] = tool.definition()
    return definition


def lookup(tools: dict[str, Tool], name: str) -> Tool | None:
    return tools.get(name) or tools.get(TOOL_ALIASES.get(name, ""))


def _run_one(tools: dict[str, Tool], ctx: ToolContext, call: ToolCall) -> ToolOutcome:
    start = time.perf_counter()
    tool = lookup(tools, call.name)
    if tool is None:
        result = ToolResult(
            f"Unknown tool '{call.name}'. Available tools: {', '.join(sorted(tools)) or 'none'}.",
            is_error=True,
        )
    elif not isinstance(call.input, dict):
        result = ToolResult(
            f"Invalid input for {call.name}: expected a JSON object.", is_error=True
        )
    else:
        try:
            result = tool.call(ctx, call.input)
        except ModelCallError:
            raise
        except Exception as exc:  # a bug in a tool must not kill the run
            result = ToolResult(f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
    content = result.content if result.content else "(no output)"
    if len(content) > MAX_RESULT_CHARS:
        content = (
            content[:MAX_RESULT_CHARS]
            + f"\n\n[output truncated at {MAX_RESULT_CHARS} characters; narrow the request]"
        )
    return ToolOutcome(call, ToolResult(content, result.is_error), time.perf_counter() - start)


def run_tool_calls(
    calls: list[ToolCall],
    tools: dict[str, Tool],
    ctx: ToolContext,
    *,
    on_start: Callable[[ToolCall], None] | None = None,
    on_finish: Callable[[ToolOutcome], None] | None = None,
    pool: ThreadPoolExecutor | None = None,
) -> list[ToolOutcome]:
    """Run every call (in parallel when there are several); outcomes in call order.

    ``pool``: an executor to reuse across turns (starting threads each turn costs time)."""

    def job(call: ToolCall) -> ToolOutcome:
        if on_start:
            on_start(call)
        outcome = _run_one(tools, ctx, call)
        if on_finish:
            on_finish(outcome)
        return outcome

    if len(calls) <= 1:
        return [job(c) for c in calls]
    if pool is not None:
        return list(pool.map(job, calls))
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(calls))) as pool:
        return list(pool.map(job, calls))


def tool_result_blocks(outcomes: list[ToolOutcome]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for o in outcomes:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": o.call.id,
            "content": o.result.content,
        }
        if o.result.is_error:
            block["is_error"] = True
        blocks.append(block)
    return blocks
