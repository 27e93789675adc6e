"""Test your own agent files against a scripted model — no network, no API key.

The real Anthropic SDK talks to a scripted ``/v1/messages`` endpoint through
``httpx2.MockTransport``; every request it sends is captured, parsed, for your assertions::

    from journal_agent.testing import ScriptedModel, reply, tool_use
    from journal_agent.runtime import run_agent

    model = ScriptedModel([
        reply(tool_use("Read", {"file_path": "notes.md"})),   # turn 1: the model calls Read
        reply("Done: notes.md has 3 lines."),                  # turn 2: it answers
    ])
    result = run_agent("my-agent", "summarise notes.md", root=tmp_path, client=model.client())
    assert result.final_text.startswith("Done")
    assert model.requests[1].body["messages"][-1]["content"][0]["type"] == "tool_result"

For a subprocess (``journal-agent run … --background``) use ``with model.serve() as url:`` and
set ``ANTHROPIC_BASE_URL=url``: the same script is served over HTTP on 127.0.0.1.

Responses are JSON, or server-sent events when the request asks to stream. Sub-agents run in
parallel threads, so their requests interleave: give each its own script with
``routes={"<text in its system prompt>": [...]}``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import anthropic
    import httpx2

__all__ = [
    "CapturedRequest",
    "ScriptedModel",
    "http_error",
    "reply",
    "text",
    "thinking",
    "tool_use",
]

_ids = itertools.count(1)
_ids_lock = threading.Lock()


def _next_id(prefix: str) -> str:
    with _ids_lock:
        return f"{prefix}_{next(_ids):04d}"


# -- building responses -------------------------------------------------------------------


def text(value: str) -> dict[str, object]:
    return {"type": "text", "text": value}


def thinking(value: str, signature: str = "c2lnbmF0dXJl") -> dict[str, object]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def tool_use(name: str, input: dict[str, object], *, id: str | None = None) -> dict[str, object]:
    return {"type": "tool_use", "id": id or _next_id("toolu"), "name": name, "input": input}


def reply(
    *blocks: str | dict[str, object],
    stop_reason: str | None = None,
    usage: dict[str, int] | None = None,
    model: str | None = None,
) -> dict[str, object]:
    """A ``/v1/messages`` response. Strings become text blocks. ``stop_reason`` defaults to
    ``tool_use`` when a tool_use block is present, else ``end_turn``."""
    content = [text(b) if isinstance(b, str) else b for b in blocks]
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return {
        "id": _next_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,  # None → echo the request's model
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 5},
    }


@dataclass(frozen=True)
class ScriptedError:
    status: int
    body: dict[str, object]
    headers: dict[str, str]


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def http_error(
    status: int, message: str = "scripted error", *, headers: dict[str, str] | None = None
) -> ScriptedError:
    """An API error. Retryable ones (429, 5xx, 529) wait only 1 ms before the SDK retries."""
    default = {"retry-after-ms": "1"} if status in (408, 409, 429) or status >= 500 else {}
    body = {
        "type": "error",
        "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message},
    }
    return ScriptedError(status, body, {**default, **(headers or {})})


# -- the scripted endpoint ----------------------------------------------------------------


@dataclass
class CapturedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]  # the request's parsed JSON, for tests to dig into

    @property
    def system_text(self) -> str:
        system = self.body.get("system", "")
        if isinstance(system, list):
            return "\n".join(b.get("text", "") for b in system)
        return system or ""


# A reply: a Messages API response body, or an error. A script step may also be a function of
# the request body that returns the reply.
Reply = dict[str, object] | ScriptedError
Step = Callable[[dict[str, object]], Reply]
Script = list[Reply | Step]


@dataclass
class ScriptedModel:
    """Serves scripted responses in order (per route) and records every request."""

    responses: Script = field(default_factory=list)
    routes: dict[str, Script] = field(default_factory=dict)
    requests: list[CapturedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str | None, list[Reply | Step]] = {None: list(self.responses)}
        for key, script in self.routes.items():
            self._queues[key] = list(script)

    @property
    def remaining(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def _next(self, captured: CapturedRequest) -> Reply | Step:
        with self._lock:
            self.requests.append(captured)
            key = next((k for k in self.routes if k in captured.system_text), None)
            queue = self._queues[key]
            if not queue:
                return http_error(
                    400,
                    f"scripted model: no response left for route {key!r}",
                    headers={"x-should-retry": "false"},
                )
            return queue.pop(0)

    def respond(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for one request (shared by the mock and the server)."""
        body = json.loads(raw or b"{}")
        captured = CapturedRequest(method, path, headers, body)
        item = self._next(captured)
        if callable(item):
            item = item(body)
        if isinstance(item, ScriptedError):
            return (
                item.status,
                {"content-type": "application/json", **item.headers},
                json.dumps(item.body).encode(),
            )
        message = {**item, "model": item.get("model") or body.get("model", "scripted")}
        if body.get("stream"):
            return 200, {"content-type": "text/event-stream"}, _sse(message).encode()
        return 200, {"content-type": "application/json"}, json.dumps(message).encode()

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        """An ``httpx2.MockTransport`` handler."""
        import httpx2

        status, headers, content = self.respond(
            request.method, request.url.path, dict(request.headers), request.read()
        )
        return httpx2.Response(status, headers=headers, content=content)

    def client(
        self,
        *,
        api_key: str = "sk-ant-test-0000000000000000",
        max_retries: int = 2,
        base_url: str = "http://scripted.invalid",
    ) -> anthropic.Anthropic:
        """A real ``anthropic.Anthropic`` whose HTTP goes to this script."""
        import anthropic
        import httpx2

        return anthropic.Anthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handler)),
            _strict_response_validation=True,
        )

    @contextlib.contextmanager
    def serve(self) -> Iterator[str]:
        """Serve the script over HTTP on 127.0.0.1 (for subprocesses); yields the base URL."""
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                status, headers, content = model.respond(
                    "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw
                )
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(content)))
                    self.end_headers()
                    self.wfile.write(content)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (an interrupted or killed run): nothing to report

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()


def _sse(message: dict[str, Any]) -> str:
    """The same message as the streaming event sequence the API sends."""
    events: list[tuple[str, dict[str, Any]]] = []
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**message["usage"], "output_tokens": 0},
    }
    events.append(("message_start", {"type": "message_start", "message": start}))
    for i, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            first, delta = (
                {"type": "text", "text": ""},
                {"type": "text_delta", "text": block["text"]},
            )
        elif kind == "tool_use":
            first = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        elif kind == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
        else:
            first, delta = block, None
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": first},
            )
        )
        if delta is not None:
            events.append(
                ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
            )
        if kind == "thinking":
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "signature_delta", "signature": block["signature"]},
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"].get("output_tokens", 0)},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
