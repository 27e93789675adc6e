"""The tool contract shared by every host: our runtime, the CLI's ``tool`` command, MCP.

A tool is a name, a description written for the model, a pydantic input model whose JSON
schema *is* the ``input_schema`` the model sees, and ``run(ctx, params)`` returning text and
an error flag. Mistakes the model can fix come back as error results; they never raise.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NotRequired, TypedDict, TypeVar

from pydantic import BaseModel, ValidationError

from journal_agent.errors import JournalAgentError, ToolError, as_user_error

if TYPE_CHECKING:
    from journal_agent.tools.permissions import PermissionPolicy
    from journal_agent.tools.read_tracking import ReadTracker
    from journal_agent.workspace import Workspace

__all__ = ["InputT", "Tool", "ToolContext", "ToolDefinition", "ToolError", "ToolResult"]

# No tool input is this large in honest use (a Write of 4 MB of text is a lot); a larger one is
# refused before validation, whose work grows with the input.
MAX_INPUT_CHARS = 4_000_000
_SHOWN_PROBLEMS = 3


class ToolDefinition(TypedDict):
    """A tool as the Messages API expects it (``cache_control`` on the last one of a request)."""

    name: str
    description: str
    input_schema: dict[str, object]  # a JSON Schema, as pydantic writes it
    cache_control: NotRequired[dict[str, str]]


# A long tool's progress, for a host that shows it: (done, total or None, what it is doing).
Progress = Callable[[float, float | None, str], None]


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False


@dataclass
class ToolContext:
    """Everything a tool may touch, passed in rather than global.

    ``policy`` decides what each call may do (None: no rules, as in tests and trusted hosts);
    ``reads`` is the read-tracking state (which files this run read, at which content hash) that
    Write and Edit consult for optimistic concurrency (None: attached on first use by
    :func:`journal_agent.tools.read_tracking.tracker_for`). ``progress`` hears how a long tool
    (MemoryProfile) is getting on: (done, total, what); None: nobody listens. ``workspace``
    hands out the stores under ``root`` (the journal, the ledger, the records …); a host that
    has one already passes it to :meth:`of`.
    """

    root: Path
    policy: PermissionPolicy | None = None
    reads: ReadTracker | None = None
    progress: Progress | None = None

    @classmethod
    def of(
        cls,
        workspace: Workspace,
        policy: PermissionPolicy | None = None,
        reads: ReadTracker | None = None,
        progress: Progress | None = None,
    ) -> ToolContext:
        """The context of a host that built its workspace already (its stores are shared)."""
        ctx = cls(workspace.root, policy, reads, progress)
        ctx.__dict__["workspace"] = workspace  # what the cached_property below would build
        return ctx

    @cached_property
    def workspace(self) -> Workspace:
        from journal_agent.workspace import Workspace

        return Workspace(self.root)


InputT = TypeVar("InputT", bound=BaseModel)


class Tool(ABC, Generic[InputT]):
    """``Tool[XInput]``: ``run`` receives an ``XInput``, validated by ``call`` from the model's
    JSON. ``Input`` is a plain class attribute, not a ``ClassVar``: a ClassVar cannot hold a
    type variable."""

    name: ClassVar[str]
    description: ClassVar[str]
    Input: type[InputT]

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        schema = cls.Input.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema

    @classmethod
    def definition(cls) -> ToolDefinition:
        """The tool as the Messages API expects it."""
        return {
            "name": cls.name,
            "description": cls.description,
            "input_schema": cls.input_schema(),
        }

    @abstractmethod
    def run(self, ctx: ToolContext, params: InputT) -> ToolResult: ...

    def call(self, ctx: ToolContext, raw: dict[str, Any]) -> ToolResult:
        """Validate raw model input and run; every failure becomes an error result, and no
        result carries a secret (each is redacted by the one detector)."""
        size = _size(raw)
        if size > MAX_INPUT_CHARS:
            return ToolResult(
                f"The input for {self.name} is {size:,} characters, over the limit of "
                f"{MAX_INPUT_CHARS:,}; split the work into smaller calls.",
                is_error=True,
            )
        try:
            params = self.Input.model_validate(raw)
        except ValidationError as exc:
            errors = exc.errors()
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
                for e in errors[:_SHOWN_PROBLEMS]
            )
            if len(errors) > _SHOWN_PROBLEMS:
                problems += f" (and {len(errors) - _SHOWN_PROBLEMS} more)"
            return ToolResult(f"Invalid input for {self.name}: {problems}", is_error=True)
        return _redacted(self._run(ctx, params))

    def _run(self, ctx: ToolContext, params: InputT) -> ToolResult:
        try:
            return _with_foreign_changes(self.run(ctx, params))
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        except OSError as exc:
            said = as_user_error(exc)  # a link planted where a file of ours goes; a full disk
            if said is not None:
                return ToolResult(said.message, is_error=True)
            # A path checked a moment ago is gone or is something else now (a directory
            # swapped for a symlink while Grep or Glob ran): the model can simply try again.
            where = f" ({exc.filename})" if exc.filename else ""
            return ToolResult(
                f"{self.name} could not finish: {exc.strerror or exc}{where}; the files changed "
                "while it ran — try again.",
                is_error=True,
            )
        except Exception as exc:
            # profiling's expected failures (a model that will not trace, bad sizes) are the
            # model's to fix too; anything else is a bug and propagates.
            error = None if isinstance(exc, JournalAgentError) else as_user_error(exc)
            if error is None:
                raise
            return ToolResult(error.message, is_error=True)


def _redacted(result: ToolResult) -> ToolResult:
    """``result`` with every secret the one detector finds redacted: what a tool read or ran
    (``cat .git/config`` with a token in the remote's URL, a ``.netrc`` line Grep found) reaches
    neither the model nor a transcript. Edit and Write put the values back when the model edits
    around them (:mod:`journal_agent.tools.redacted_view`)."""
    from journal_agent.secret_text import redact_secrets

    shown = redact_secrets(result.content)
    return result if shown == result.content else ToolResult(shown, result.is_error)


def _size(raw: Any) -> int:
    """About how many characters ``raw`` holds (strings and keys), stopping once over the
    limit: the check costs no more than the input itself."""
    total, stack = 0, [raw]
    while stack and total <= MAX_INPUT_CHARS:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            total += len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            total += len(item)
            stack.extend(item)
        else:
            total += 1
    return total


def _with_foreign_changes(result: ToolResult) -> ToolResult:
    """``result`` with a sentence for each change another hand made to the journal or the
    ledger, found while the call read them (journal_agent/foreign_changes.py)."""
    import sys

    if "journal_agent.foreign_changes" not in sys.modules:
        return result
    from journal_agent.foreign_changes import take_notes

    notes = take_notes()
    if not notes:
        return result
    return ToolResult("\n\n".join([result.content, *notes]), is_error=result.is_error)
