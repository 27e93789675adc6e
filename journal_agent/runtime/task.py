"""The Task tool: one agent starts another agent definition and gets its final message.

Claude Code sends this tool as ``Agent`` in recent versions and ``Task`` in older ones, with
``description``, ``prompt`` and ``subagent_type``. We expose it as ``Task`` and accept calls
named ``Agent`` (see dispatch.TOOL_ALIASES), so agent files written for either work. Several
Task calls in one turn run in parallel, like every tool call of a turn. Sub-agents do not get
the Task tool themselves (as in Claude Code) and never ask the user questions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.tools.base import Tool, ToolContext, ToolResult

if TYPE_CHECKING:
    from journal_agent.runtime.result import RunResult

GENERAL_PURPOSE = "general-purpose"


class TaskInput(BaseModel):
    # Claude Code's Agent tool also has run_in_background / isolation: ignore them rather
    # than reject an agent that sends them.
    model_config = ConfigDict(extra="ignore")

    description: str = Field(description="A short (3-5 word) description of the task.")
    prompt: str = Field(description="The task for the agent to perform, with all context.")
    subagent_type: str = Field(
        default=GENERAL_PURPOSE, description="The type of specialized agent to use."
    )
    model: str | None = Field(
        default=None,
        description="Optional model for this agent (haiku, sonnet, opus); default: its own.",
    )


Launcher = Callable[[str, str, str, str | None], "RunResult"]


class TaskTool(Tool[TaskInput]):
    name = "Task"
    description = "Launch a sub-agent."  # replaced per run by task_tool(): it lists the agents
    Input = TaskInput

    def __init__(self, launch: Launcher) -> None:
        self.launch = launch

    def run(self, ctx: ToolContext, params: TaskInput) -> ToolResult:
        result = self.launch(params.subagent_type, params.prompt, params.description, params.model)
        text = result.final_text or "(the agent returned no text)"
        if result.ok:
            return ToolResult(text)
        return ToolResult(f"{text}\n\n[the agent stopped early: {result.message}]", is_error=True)


def task_tool(launch: Launcher, agents: dict[str, str]) -> TaskTool:
    """A Task tool whose description lists the agents it can start (name → description)."""
    lines = [f"- {GENERAL_PURPOSE}: a general agent with every tool, for any multi-step task."]
    lines += [f"- {name}: {desc.strip()}" for name, desc in sorted(agents.items())]
    description = (
        "Launch a sub-agent to handle a task on its own. It works with its own tools and "
        "context and returns only its final message, so give it everything it needs in "
        "`prompt`. Launch several in ONE message to run them in parallel.\n\n"
        "Available subagent_type values:\n" + "\n".join(lines)
    )
    cls = type("Task", (TaskTool,), {"description": description})
    return cls(launch)
