"""Small real tools and a loop factory for the runtime tests (the real tools live elsewhere).

Imported by the tests as ``tests.runtime.runtime_helpers`` (pytest puts the repository root on
the path: ``pythonpath`` in pyproject.toml).
"""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import BaseModel

from journal_agent.runtime.loop import AgentLoop, AgentSpec, RunOptions, Session
from journal_agent.runtime.transcript import Transcript
from journal_agent.testing import ScriptedModel
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult

API_KEY = "sk-ant-api03-SECRETSECRETSECRET-0123456789"


class NoteInput(BaseModel):
    path: str
    text: str


class WriteNote(Tool):
    name = "WriteNote"
    description = "Append a line of text to a file in the workspace."
    Input = NoteInput

    def run(self, ctx: ToolContext, params: NoteInput) -> ToolResult:
        target = ctx.root / params.path
        with target.open("a", encoding="utf-8") as fh:
            fh.write(params.text + "\n")
        return ToolResult(f"wrote {len(params.text)} characters to {params.path}")


class RendezvousInput(BaseModel):
    label: str


class Rendezvous(Tool):
    """Succeeds only if ``parties`` calls are in flight at once: proof of concurrency."""

    name = "Rendezvous"
    description = "Wait for the other calls of this turn."
    Input = RendezvousInput
    concurrency_safe = True  # a tool of ours that may run beside other calls of its turn

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=10)

    def run(self, ctx: ToolContext, params: RendezvousInput) -> ToolResult:
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError as exc:
            raise ToolError(f"{params.label}: ran alone (not concurrently)") from exc
        return ToolResult(f"{params.label}: met")


class FailInput(BaseModel):
    how: str = "tool_error"


class Fail(Tool):
    name = "Fail"
    description = "Always fails."
    Input = FailInput

    def run(self, ctx: ToolContext, params: FailInput) -> ToolResult:
        if params.how == "crash":
            raise RuntimeError("disk on fire")
        raise ToolError("no such thing")


def make_loop(
    model: ScriptedModel,
    root: Path,
    tools: list[Tool] | None = None,
    *,
    options: RunOptions | None = None,
    ask=None,
    events: list | None = None,
    system: str = "You are a test agent.",
    transcript: bool = True,
) -> AgentLoop:
    session = Session(
        client=model.client(api_key=API_KEY),
        options=options or RunOptions(),
        emit=(events.append if events is not None else (lambda e: None)),
        transcript=Transcript(root / "t.jsonl", secrets=[API_KEY]) if transcript else None,
        ask=ask,
    )
    spec = AgentSpec(
        name="tester",
        system=system,
        tools={t.name: t for t in (tools or [])},
        model="claude-sonnet-5-5",
    )
    return AgentLoop(session, spec, ToolContext(root=root))


def write_agent(root: Path, name: str, body: str, **front: str) -> Path:
    """An agent file in ``<root>/.claude/agents/``."""
    lines = [f"name: {name}", f"description: {front.pop('description', name + ' agent')}"]
    lines += [f"{k}: {v}" for k, v in front.items()]
    path = root / ".claude" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\n" + "\n".join(lines) + "\n---\n\n" + body + "\n", encoding="utf-8")
    return path


def write_command(root: Path, name: str, body: str, **front: str) -> Path:
    path = root / ".claude" / "commands" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "".join(f"{k}: {v}\n" for k, v in front.items())
    path.write_text(f"---\n{head}---\n\n{body}\n" if head else body + "\n", encoding="utf-8")
    return path
