"""Running one turn's tool calls: concurrently where independent, each failure an error result.

Results come back in the order of the tool_use blocks, ready to be the ``tool_result``
blocks of ONE user message. Calls to tools that only read (Read, Grep, Glob, Task, …) run at
the same time; any other call (Write, Edit, Bash, JournalAppend, a tool of yours) may change
what a later call of the same turn sees — Write a file then Edit it, Write a script then run
it — so it runs alone, in the order the model gave, as in Claude Code. A tool class opts in
to running concurrently with ``concurrency_safe = True``.

Unknown tools, invalid input, ToolError and unexpected exceptions all become ``is_error``
results; only a failed *model call* inside a sub-agent (ModelCallError) ends the run, because
it would fail the same way for every agent. Parallel calls run on daemon threads, so Ctrl-C
(or such a failure) ends the run at once instead of waiting at exit for a sub-agent's
request or a long tool.
"""

from __future__ import annotations

import os
import queue
import re
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from journal_agent.runtime.client import ModelCallError
from journal_agent.tools.base import Tool, ToolContext, ToolDefinition, ToolResult

if TYPE_CHECKING:
    from journal_agent.runtime.wire import Block

# Claude Code caps a tool response at about 25,000 tokens; ~4 characters per token.
MAX_RESULT_CHARS = 100_000
MAX_PARALLEL = 8
# Names the model may use for the same tool (Claude Code calls Task "Agent").
TOOL_ALIASES = {"Agent": "Task"}
# Tools whose calls may run at the same time as other such calls of the turn: they only read,
# or (Task) work in a context of their own; MemoryEstimate only adds a record with a new id.
CONCURRENCY_SAFE = frozenset({"Read", "Grep", "Glob", "Task", "JournalSearch", "MemoryEstimate"})
# Lone surrogates (bytes decoded with surrogateescape, say) cannot be encoded as UTF-8: they
# would break the request and the transcript.
_SURROGATES = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: object  # the model's JSON, validated by the tool's model before use


@dataclass(frozen=True)
class ToolOutcome:
    call: ToolCall
    result: ToolResult
    seconds: float


_DEFINITIONS: weakref.WeakKeyDictionary[type, ToolDefinition] = weakref.WeakKeyDictionary()


def valid_unicode(text: str) -> str:
    """``text`` with lone surrogates (undecodable bytes: a Latin-1 prompt, a tool's raw output)
    replaced by U+FFFD, so that it can be sent as JSON and written as UTF-8."""
    return _SURROGATES.sub("\ufffd", text)


def tool_definition(tool: Tool) -> ToolDefinition:
    """``tool.definition()``, computed once per tool class (schemas are costly to build)."""
    cls = type(tool)
    definition = _DEFINITIONS.get(cls)
    if definition is None:
        definition = _DEFINITIONS[cls] = tool.definition()
    return definition


def lookup(tools: dict[str, Tool], name: str) -> Tool | None:
    return tools.get(name) or tools.get(TOOL_ALIASES.get(name, ""))


def run_one(tools: dict[str, Tool], ctx: ToolContext, call: ToolCall) -> ToolOutcome:
    """One call as the model gets its result: a bug becomes an error result, the journal's
    note on what it touched is added, an over-long result cut."""
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
    content = valid_unicode(content)
    if not result.is_error and call.name in TOUCHING:
        note = journal_note(ctx, call, content)
        content = f"{content}\n\n{note}" if note else content
    if len(content) > MAX_RESULT_CHARS:
        content = (
            content[:MAX_RESULT_CHARS]
            + f"\n\n[output truncated at {MAX_RESULT_CHARS} characters; narrow the request]"
        )
    return ToolOutcome(call, ToolResult(content, result.is_error), time.perf_counter() - start)


# Tools whose results name the entries that explain the lines they touched, as the plugin's
# PostToolUse hook does in Claude Code (journal_agent/capture/touch.py).
TOUCHING = frozenset({"Read", "Edit", "MultiEdit", "Write", "Grep"})


def journal_note(ctx: ToolContext, call: ToolCall, content: str) -> str:
    """The line the journal says about what ``call`` touched ("" when nothing): the same
    switches, trust and once-per-run rule as the hook; never fails the call."""
    from journal_agent import confined
    from journal_agent.capture import touch
    from journal_agent.capture.settings import capture_settings

    root = str(ctx.root.absolute())
    try:
        if confined.lstat(root, ".journal/refs.jsonl") is None:
            return ""  # no entry cites code here
        if not capture_settings(root)["recall_touch"] or not touch.trusted(root):
            return ""
        # One run is one session: an entry is named once in it.
        session = ctx.__dict__.setdefault("touch_session", f"run-{os.getpid()}-{id(ctx):x}")
        payload = {
            "session_id": session,
            "tool_name": call.name,
            "tool_input": call.input,
            "tool_response": {"content": content} if call.name == "Grep" else {},
        }
        return touch.speak(root, payload)
    except Exception:  # the journal's note is a courtesy: the tool's result stands without it
        return ""


def concurrency_safe(tools: dict[str, Tool], call: ToolCall) -> bool:
    tool = lookup(tools, call.name)
    if tool is None:
        return True  # an unknown tool only produces an error result
    flag = getattr(tool, "concurrency_safe", None)
    return bool(flag) if flag is not None else tool.name in CONCURRENCY_SAFE


def batches(calls: list[ToolCall], tools: dict[str, Tool]) -> list[list[int]]:
    """Indices of ``calls`` in the order they run: runs of concurrency-safe calls together,
    every other call alone."""
    out: list[list[int]] = []
    previous_safe = False
    for i, call in enumerate(calls):
        safe = concurrency_safe(tools, call)
        if safe and previous_safe:
            out[-1].append(i)
        else:
            out.append([i])
        previous_safe = safe
    return out


def run_tool_calls(
    calls: list[ToolCall],
    tools: dict[str, Tool],
    ctx: ToolContext,
    *,
    on_start: Callable[[ToolCall], None] | None = None,
    on_finish: Callable[[ToolOutcome], None] | None = None,
) -> list[ToolOutcome]:
    """Run every call, independent ones in parallel (see the module doc); outcomes in call
    order. An exception that must end the run (ModelCallError, KeyboardInterrupt) is raised
    as soon as it happens."""

    def job(call: ToolCall) -> ToolOutcome:
        if on_start:
            on_start(call)
        outcome = run_one(tools, ctx, call)
        if on_finish:
            on_finish(outcome)
        return outcome

    outcomes: list[ToolOutcome | None] = [None] * len(calls)
    for batch in batches(calls, tools):
        if len(batch) == 1:
            outcomes[batch[0]] = job(calls[batch[0]])
        else:
            for i, outcome in _parallel([calls[i] for i in batch], job):
                outcomes[batch[i]] = outcome
    return [o for o in outcomes if o is not None]


def _parallel(
    calls: list[ToolCall], job: Callable[[ToolCall], ToolOutcome]
) -> list[tuple[int, ToolOutcome]]:
    """``job`` for each call on at most MAX_PARALLEL daemon threads; (index, outcome) pairs."""
    todo = iter(range(len(calls)))
    todo_lock = threading.Lock()
    done: queue.SimpleQueue[tuple[int, ToolOutcome | None, BaseException | None]] = (
        queue.SimpleQueue()
    )

    def worker() -> None:
        while True:
            with todo_lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                done.put((i, job(calls[i]), None))
            except BaseException as exc:  # handed to the caller, which re-raises it
                done.put((i, None, exc))
                return

    for n in range(min(MAX_PARALLEL, len(calls))):
        threading.Thread(target=worker, name=f"tool-{n}", daemon=True).start()
    out = []
    while len(out) < len(calls):
        i, outcome, exc = done.get()
        if exc is not None:
            raise exc
        assert outcome is not None
        out.append((i, outcome))
    return out


def tool_result_blocks(outcomes: list[ToolOutcome]) -> list[Block]:
    blocks: list[Block] = []
    for o in outcomes:
        block: Block = {
            "type": "tool_result",
            "tool_use_id": o.call.id,
            "content": o.result.content,
        }
        if o.result.is_error:
            block["is_error"] = True
        blocks.append(block)
    return blocks
