"""The agent loop: request → response → tools → results, until the model is done.

Every stop reason is handled:
- ``tool_use``: every tool_use block runs (concurrently), and all results go back in ONE user
  message, tool_result blocks in the order of the tool_use blocks;
- ``end_turn`` / ``stop_sequence``: done — unless the model asked a question and an ``ask``
  callback (an interactive terminal) supplies the user's reply;
- ``max_tokens``: a truncated tool_use is never executed; the turn is retried with twice the
  output budget (up to a ceiling); truncated prose is kept and the model asked to continue;
- ``pause_turn``: the paused response is sent back as is, and the model resumes;
- ``refusal``, ``model_context_window_exceeded`` and anything unknown: a clean stop with a
  sentence saying why.

Assistant content goes back verbatim (thinking blocks and signatures included).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from journal_agent.runtime import result as R
from journal_agent.runtime.caching import cached_system, cached_tools, with_message_breakpoints
from journal_agent.runtime.client import DEFAULT_TIMEOUT_S, create_message
from journal_agent.runtime.dispatch import (
    TOOL_ALIASES,
    ToolCall,
    ToolOutcome,
    run_tool_calls,
    tool_definition,
    tool_result_blocks,
    valid_unicode,
)
from journal_agent.runtime.events import (
    AssistantText,
    Done,
    EventSink,
    Notice,
    ToolCalled,
    ToolFinished,
    TurnStarted,
    UsageReported,
    ignore,
)
from journal_agent.runtime.models import ModelTable, model_table
from journal_agent.runtime.result import RunResult
from journal_agent.runtime.transcript import Transcript
from journal_agent.runtime.usage import Meter, TokenUsage
from journal_agent.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from anthropic.types import Message, ThinkingConfigParam

    from journal_agent.runtime.wire import Block, ChatMessage, RequestBody

CONTINUE_PROMPT = (
    "Your previous response was cut off by the output limit. Continue exactly where it stopped."
)
# Tools whose ``file_path`` input names a file they changed (when they succeed).
_WRITING_TOOLS = {"Write", "Edit", "NotebookEdit"}
_PREVIEW = 2_000


@dataclass
class AgentSpec:
    """One agent, ready to run: everything the API request needs."""

    name: str
    system: str
    tools: dict[str, Tool]
    model: str
    max_turns: int | None = None


@dataclass
class RunOptions:
    max_turns: int | None = None  # with an agent's own maxTurns, the smaller one wins
    budget_usd: float | None = None  # run-wide, sub-agents included
    budget_tokens: int | None = None  # input + output + cache write + cache read
    max_tokens: int = 16_000
    max_tokens_ceiling: int = 64_000
    timeout: float = DEFAULT_TIMEOUT_S
    thinking: ThinkingConfigParam | None = None


@dataclass
class Session:
    """What a run's agents share: the client, prices, totals, event sink, transcript."""

    # anthropic.Anthropic, or a wrapper of its messages.create (drafts/run.py caps tokens);
    # None for a session that only builds requests (--dry-run).
    client: Any
    options: RunOptions = field(default_factory=RunOptions)
    table: ModelTable = field(default_factory=model_table)
    meter: Meter = field(default_factory=Meter)
    emit: EventSink = ignore
    transcript: Transcript | None = None
    # Called with the model's question when it ends a turn asking one; returns the reply,
    # or None/"" to finish. None here means non-interactive.
    ask: Callable[[str], str | None] | None = None
    # Run-wide, across sub-agents: files the file tools changed, tool call counts.
    written: set[str] = field(default_factory=set)
    tools_used: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Set when the run is interrupted (Ctrl-C, an API failure in another agent): every loop,
    # sub-agents included, stops before its next request instead of carrying on unseen.
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False)

    def count_tool(self, name: str, path: str | None) -> None:
        with self._lock:
            self.tools_used[name] = self.tools_used.get(name, 0) + 1
            if path:
                self.written.add(path)

    def log(self, kind: str, agent: str, **data: object) -> None:
        if self.transcript is not None:
            self.transcript.write(kind, agent, **data)

    def budget_exceeded(self) -> str | None:
        o = self.options
        if o.budget_tokens is not None and self.meter.usage.total >= o.budget_tokens:
            return f"the token budget ({o.budget_tokens:,} tokens) is used up"
        if o.budget_usd is not None and self.meter.cost_usd >= o.budget_usd:
            return f"the cost budget (${o.budget_usd:.2f}) is used up"
        return None


def ends_with_question(text: str) -> bool:
    """Does the model's last paragraph ask the user something?"""
    paragraphs = [p for p in text.strip().split("\n\n") if p.strip()]
    if not paragraphs:
        return False
    last = paragraphs[-1].strip().rstrip("*_`)\"' \n")
    return last.endswith("?")


class AgentLoop:
    """One agent's conversation with the model: the request/tool-result loop of a run.

    Takes the ``session`` shared by a run and its sub-agents (model client, options and
    budgets, event sink, transcript, the user's ``ask``), the agent's ``spec`` (system prompt,
    tools, model) and the ``ctx`` its tools run in. :meth:`run` sends the prompt and keeps
    going — model request, the tool calls it asked for (through
    :func:`journal_agent.runtime.dispatch.run_tool_calls`), their results back — until the model
    ends its turn, a limit stops it (turns, budget, max_tokens at the ceiling) or the run is
    interrupted. It emits typed events (``TurnStarted``, ``ToolCalled`` …, ``Done``) and
    returns a :class:`~journal_agent.runtime.result.RunResult`; it never prints.
    """

    def __init__(
        self,
        session: Session,
        spec: AgentSpec,
        ctx: ToolContext,
        *,
        label: str = "main",
        interactive: bool = True,
    ) -> None:
        self.session = session
        self.spec = spec
        self.ctx = ctx
        self.label = label
        self.interactive = interactive
        self.messages: list[ChatMessage] = []
        self.usage = TokenUsage()
        self.cost: float | None = 0.0
        self.turns = 0
        self.tools_used: dict[str, int] = {}
        self.written: set[str] = set()
        self._tool_defs = cached_tools([tool_definition(t) for t in spec.tools.values()])
        self._system = cached_system(spec.system)
        self._max_tokens = session.options.max_tokens
        self._prev_last: int | None = None
        self._logged_messages = 0
        self._logged_head = False

    # -- requests ---------------------------------------------------------------------------

    def _marks(self) -> list[int]:
        """Message indices that get a breakpoint: where the previous request ended, and the
        newest message."""
        last = len(self.messages) - 1
        return [last] if self._prev_last in (None, last) else [self._prev_last, last]

    def build_request(self) -> RequestBody:
        """The exact body of the next request (cache breakpoints placed)."""
        marks = self._marks()
        # Keys in cache-prefix order (tools → system → messages), for readable dumps.
        request: RequestBody = {"model": self.spec.model, "max_tokens": self._max_tokens}
        if self._tool_defs:
            request["tools"] = self._tool_defs
        request["system"] = self._system
        request["messages"] = with_message_breakpoints(self.messages, marks)
        if self.session.options.thinking:
            request["thinking"] = self.session.options.thinking
        return request

    def _log_request(self, request: RequestBody) -> None:
        """Log the request as a delta: tools/system once, then only the new messages.

        Logging whole requests would make a transcript quadratic in the conversation's
        length; :func:`journal_agent.runtime.transcript.replay_requests` rebuilds the exact
        bodies from these records."""
        if self.session.transcript is None:
            return
        record: dict[str, object] = {
            "model": request["model"],
            "max_tokens": request["max_tokens"],
            "cache_breakpoints": self._marks(),
            "messages_before": self._logged_messages,
            "new_messages": self.messages[self._logged_messages :],
        }
        if not self._logged_head:
            record.update(
                {k: v for k, v in request.items() if k in ("tools", "system", "thinking")}
            )
            self._logged_head = True
        self._logged_messages = len(self.messages)
        self.session.log("request", self.label, turn=self.turns, **record)

    def _call_model(self) -> Message:
        request = self.build_request()
        self._log_request(request)
        self._prev_last = len(self.messages) - 1
        response = create_message(self.session.client, request, self.session.options.timeout)
        self.session.log("response", self.label, turn=self.turns, body=response.to_dict())
        usage = TokenUsage.from_api(response.usage)
        cost = usage.cost(self.session.table.price(self.spec.model))
        self.usage = self.usage + usage
        self.cost = None if cost is None or self.cost is None else self.cost + cost
        run_usage, run_cost = self.session.meter.add(usage, cost, agent=self.label, turn=self.turns)
        self.session.log("usage", self.label, turn=self.turns, usage=usage.as_dict(), cost_usd=cost)
        self.session.emit(UsageReported(self.label, self.turns, usage, cost, run_usage, run_cost))
        return response

    # -- tools ------------------------------------------------------------------------------

    def _on_tool_start(self, call: ToolCall) -> None:
        self.session.log(
            "tool_call", self.label, turn=self.turns, id=call.id, name=call.name, input=call.input
        )
        self.session.emit(
            ToolCalled(
                self.label,
                self.turns,
                call.id,
                call.name,
                call.input if isinstance(call.input, dict) else {},
            )
        )

    def _on_tool_finish(self, outcome: ToolOutcome) -> None:
        r = outcome.result
        self.session.log(
            "tool_result",
            self.label,
            turn=self.turns,
            id=outcome.call.id,
            name=outcome.call.name,
            is_error=r.is_error,
            content=r.content,
            seconds=round(outcome.seconds, 4),
        )
        self.session.emit(
            ToolFinished(
                self.label,
                self.turns,
                outcome.call.id,
                outcome.call.name,
                r.is_error,
                r.content[:_PREVIEW],
                outcome.seconds,
            )
        )

    def _run_tools(self, calls: list[ToolCall]) -> list[Block]:
        outcomes = run_tool_calls(
            calls,
            self.spec.tools,
            self.ctx,
            on_start=self._on_tool_start,
            on_finish=self._on_tool_finish,
        )
        for o in outcomes:
            name = TOOL_ALIASES.get(o.call.name, o.call.name)
            self.tools_used[name] = self.tools_used.get(name, 0) + 1
            path = None
            if (
                not o.result.is_error
                and o.call.name in _WRITING_TOOLS
                and isinstance(o.call.input, dict)
                and o.call.input.get("file_path")
            ):
                path = str(o.call.input["file_path"])
                self.written.add(path)
            self.session.count_tool(name, path)
        return tool_result_blocks(outcomes)

    # -- the loop ---------------------------------------------------------------------------

    def _turn_limit(self) -> int | None:
        limits = [x for x in (self.spec.max_turns, self.session.options.max_turns) if x]
        return min(limits) if limits else None

    def run(self, prompt: str | list[Block]) -> RunResult:
        """Run the conversation from ``prompt`` (text, or content blocks) to its end.

        Returns the :class:`RunResult`: ``status`` (completed, max_turns, budget, …), the final
        text, turns, usage, cost, tools used and files changed. Raises only what must end the
        whole run: a failed model call (``ModelCallError``) or ``KeyboardInterrupt``.
        """
        if isinstance(prompt, str):
            prompt = valid_unicode(prompt)  # argv or a file in another encoding
        self.messages.append({"role": "user", "content": prompt})
        self.session.log(
            "run_start",
            self.label,
            model=self.spec.model,
            system=self.spec.system,
            tools=sorted(self.spec.tools),
            prompt=prompt,
        )
        try:
            result = self._loop()
        except BaseException as exc:
            self.session.cancelled.set()
            self.session.log("interrupted", self.label, error=f"{type(exc).__name__}: {exc}")
            raise
        self.session.log(
            "done",
            self.label,
            result={k: v for k, v in result.summary().items() if k != "transcript"},
        )
        self.session.emit(Done(self.label, result))
        return result

    def _finish(self, status: str, final_text: str, message: str = "") -> RunResult:
        return RunResult(
            agent=self.spec.name,
            model=self.spec.model,
            status=status,
            final_text=final_text,
            message=message,
            turns=self.turns,
            usage=self.usage,
            cost_usd=self.cost,
            tools_used=dict(self.tools_used),
            files_changed=sorted(self.written),
            messages=self.messages,
        )

    def _notice(self, message: str) -> None:
        self.session.log("notice", self.label, message=message)
        self.session.emit(Notice(self.label, message))

    def _loop(self) -> RunResult:
        last_text = ""
        limit = self._turn_limit()
        while True:
            if (stopped := self._stopped_before_turn(limit, last_text)) is not None:
                return stopped
            self.turns += 1
            self.session.emit(TurnStarted(self.label, self.turns, self.spec.model))
            response = self._call_model()
            content = [block.to_dict() for block in response.content]
            calls = [
                ToolCall(b.id, b.name, b.input) for b in response.content if b.type == "tool_use"
            ]
            text = "\n".join(b.text for b in response.content if b.type == "text").strip()
            if text:
                last_text = text
                self.session.emit(AssistantText(self.label, self.turns, text))
            result = self._after_response(response.stop_reason, content, calls, text, last_text)
            if result is not None:
                return result

    def _stopped_before_turn(self, limit: int | None, last_text: str) -> RunResult | None:
        """The result if the turn limit, an interrupt or the budget ends the run now."""
        if limit is not None and self.turns >= limit:
            return self._finish(
                R.MAX_TURNS, last_text, f"stopped after {self.turns} turns (the turn limit)."
            )
        if self.session.cancelled.is_set():
            return self._finish(R.INTERRUPTED, last_text, "the run was interrupted.")
        if (why := self.session.budget_exceeded()) is not None:
            return self._finish(R.BUDGET, last_text, f"stopped: {why}.")
        return None

    def _after_response(
        self,
        stop: str | None,
        content: list[Block],
        calls: list[ToolCall],
        text: str,
        last_text: str,
    ) -> RunResult | None:
        """Act on a response by its stop reason: None to take another turn, else the result.
        ``content`` is the response's blocks as JSON, ``calls`` its tool_use blocks."""
        has_tool_use = bool(calls)
        if stop == "max_tokens":
            return self._cut_off(has_tool_use, content, last_text)
        if stop == "pause_turn":
            self.messages.append({"role": "assistant", "content": content})
            return None
        # A complete response with tool calls gets their results, whatever it says it
        # stopped for: an assistant turn with unanswered tool_use blocks is a dead end.
        if has_tool_use and stop in ("tool_use", "end_turn", "stop_sequence"):
            self.messages.append({"role": "assistant", "content": content})
            self.messages.append({"role": "user", "content": self._run_tools(calls)})
            return None
        if stop in ("end_turn", "stop_sequence", "tool_use"):
            self.messages.append({"role": "assistant", "content": content})
            if self.interactive and self.session.ask and ends_with_question(text):
                reply = self.session.ask(text)
                if reply and reply.strip():
                    reply = valid_unicode(reply.strip())
                    self.messages.append({"role": "user", "content": reply})
                    return None
            return self._finish(R.COMPLETED, last_text)
        if stop == "refusal":
            return self._finish(R.REFUSAL, last_text, "the model declined to continue (refusal).")
        if stop == "model_context_window_exceeded":
            return self._finish(
                R.CONTEXT_WINDOW,
                last_text,
                "the conversation no longer fits the model's context window; start a new "
                "run with a narrower prompt.",
            )
        return self._finish(
            R.UNKNOWN_STOP, last_text, f"stopped on an unknown stop reason '{stop}'."
        )

    def _cut_off(
        self, has_tool_use: bool, content: list[Block], last_text: str
    ) -> RunResult | None:
        """A response cut off by max_tokens: retry with more room, or ask to continue."""
        if has_tool_use or not content:
            # The tool_use input may be cut mid-JSON: never run it. Ask again with room.
            if self._max_tokens >= self.session.options.max_tokens_ceiling:
                return self._finish(
                    R.MAX_TOKENS,
                    last_text,
                    f"the response was cut off at {self._max_tokens} output tokens "
                    "in the middle of a tool call, even at the ceiling.",
                )
            self._max_tokens = min(self._max_tokens * 2, self.session.options.max_tokens_ceiling)
            self._notice(
                f"response cut off mid tool call; retrying the turn with "
                f"max_tokens={self._max_tokens}"
            )
            return None
        self.messages.append({"role": "assistant", "content": content})
        self.messages.append({"role": "user", "content": CONTINUE_PROMPT})
        self._notice("response cut off by max_tokens; asking the model to continue")
        return None
