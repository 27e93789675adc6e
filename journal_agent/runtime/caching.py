"""Prompt-cache breakpoints: the last tool, the system prompt, and rolling ones on messages.

The prefix order is tools → system → messages. A breakpoint on the newest message makes the
whole request cacheable; a second one where the previous request ended guarantees a cache
*read* of everything that request wrote, however many blocks the turn added (reads look back
at most 20 blocks from a breakpoint). That is 4 breakpoints, the API's maximum.

The conversation history is never mutated: marked messages are shallow copies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from journal_agent.runtime.wire import Block, ChatMessage, RequestBody
    from journal_agent.tools.base import ToolDefinition

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4
# Thinking blocks cannot carry cache_control; they are cached as part of the prefix anyway.
_UNMARKABLE = {"thinking", "redacted_thinking"}


def cached_tools(definitions: list[ToolDefinition]) -> list[ToolDefinition]:
    if not definitions:
        return []
    out = list(definitions)
    out[-1] = {**out[-1], "cache_control": EPHEMERAL}
    return out


def cached_system(text: str) -> list[Block]:
    return [{"type": "text", "text": text, "cache_control": EPHEMERAL}]


def _mark(message: ChatMessage) -> ChatMessage | None:
    content = message["content"]
    if isinstance(content, str):
        blocks: list[Block] = [{"type": "text", "text": content}]
    else:
        blocks = list(content)
    for i in range(len(blocks) - 1, -1, -1):
        if blocks[i].get("type") not in _UNMARKABLE:
            blocks[i] = {**blocks[i], "cache_control": EPHEMERAL}
            return {**message, "content": blocks}
    return None


def with_message_breakpoints(messages: list[ChatMessage], marks: list[int]) -> list[ChatMessage]:
    """A copy of ``messages`` with a breakpoint on the last markable block of each index."""
    out = list(messages)
    for index in sorted(set(marks)):
        if 0 <= index < len(out):
            marked = _mark(out[index])
            if marked is not None:
                out[index] = marked
    return out


def count_breakpoints(request: RequestBody) -> int:
    count = sum(1 for t in request.get("tools", []) if "cache_control" in t)
    system = request.get("system")
    if isinstance(system, list):
        count += sum(1 for b in system if "cache_control" in b)
    for message in request.get("messages", []):
        if isinstance(message["content"], list):
            count += sum(1 for b in message["content"] if "cache_control" in b)
    return count
