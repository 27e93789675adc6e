"""The Messages API request as the loop builds, logs and replays it: JSON shapes, no SDK.

The SDK's param types (``anthropic.types.MessageParam`` …) spell out every block the API
accepts; the loop only carries blocks from a response to the next request (and into the
transcript), so a content block stays the JSON object it is (:data:`Block`) and the envelope
around it is typed here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Required, TypedDict

if TYPE_CHECKING:
    from anthropic.types import ThinkingConfigParam

    from journal_agent.tools.base import ToolDefinition

# One content block as JSON: text, tool_use, tool_result, thinking, image … (``type`` says which).
Block = dict[str, object]


class ChatMessage(TypedDict):
    role: Literal["user", "assistant"]
    content: str | list[Block]


class RequestBody(TypedDict, total=False):
    """The body of one ``messages.create`` call, keys in cache-prefix order (built in that
    order, so only the first two are required of a body being built)."""

    model: Required[str]
    max_tokens: Required[int]
    tools: list[ToolDefinition]
    system: list[Block]
    messages: list[ChatMessage]
    thinking: ThinkingConfigParam


__all__ = ["Block", "ChatMessage", "RequestBody"]
