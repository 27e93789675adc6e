"""LedgerShow and LedgerUpdate: read and update learning_ledger.md without rewriting it.

The /end-session command uses these (in our runtime and, over MCP, in Claude Code) instead of
Write/Edit: each update is applied to the file as it is on disk under the journal's lock, every
line the user wrote stays, and a batch of operations is applied all or none.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.errors import UserError
from journal_agent.learning.ledger_ops import MAX_OPERATIONS, MAX_SHORT, LedgerOperation
from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace ``$ref`` with the definition itself: a flat schema for every MCP host."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = dict(defs[ref.rsplit("/", 1)[-1]])
                target.pop("title", None)
                return walk(target)
            return {k: walk(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


class LedgerShowInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    check: bool = Field(
        default=False,
        description="Also run `ledger check` (unsourced numbers in insights, references to "
        "missing entries or records, structural problems).",
    )


class LedgerShow(Tool[LedgerShowInput]):
    name: ClassVar[str] = "LedgerShow"
    description: ClassVar[str] = (
        "Read learning_ledger.md as data (JSON): title, last-updated date, the knowledge graph "
        "by mastery level (mastered / developing / blind_spots), action items with their "
        "horizon and done state, session history, course goals, archived insights, what is due "
        "for spaced review, and 'suggestions': mastery moves the review history supports "
        "(each with the LedgerUpdate operation that applies it). Use it before LedgerUpdate."
    )
    Input = LedgerShowInput
    concurrency_safe: ClassVar[bool] = True  # it only reads

    def run(self, ctx: ToolContext, params: LedgerShowInput) -> ToolResult:
        from journal_agent.learning import ledger_api

        if ctx.policy is not None:
            ctx.policy.ensure(self.name)
        if not ctx.workspace.ledger.exists():
            return ToolResult(
                "There is no learning_ledger.md yet. LedgerUpdate creates it (with every "
                "section, empty) on its first operation."
            )
        try:
            data = ledger_api.overview(ctx.workspace)
            if params.check:
                data["check"] = ledger_api.check(ctx.workspace).to_dict()
        except UserError as exc:
            raise ToolError(exc.message) from None
        return ToolResult(json.dumps(data, ensure_ascii=False, indent=1))


class LedgerUpdateInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    operations: list[LedgerOperation] = Field(
        min_length=1,
        max_length=MAX_OPERATIONS,
        description="The updates, applied in order and all together (if one fails, none is "
        f"written); at most {MAX_OPERATIONS} in one call.",
    )
    title: str | None = Field(
        default=None,
        max_length=MAX_SHORT,
        description="Only when the ledger does not exist yet: the course or topic for its "
        "title, e.g. 'CS336'.",
    )


class LedgerUpdate(Tool[LedgerUpdateInput]):
    name: ClassVar[str] = "LedgerUpdate"
    description: ClassVar[str] = (
        "Update learning_ledger.md safely — use this instead of Write or Edit on the ledger. "
        "Operations: add_session (a 📚 row; the newest is bolded, the previous one un-bolded), "
        "archive_insight (a dated, quoted 💡 insight; every number with a unit needs a source: "
        "'m:<id>' of a measurement or a journal entry id), add_item / move_item (🧠 mastery "
        "levels: mastered, developing, blind), add_action / tick_action (📉 horizons such as "
        "Immediate, Short-term, Long-term), add_goal / tick_goal (🎯), set_updated. Each "
        "applies to the file as it is now, under the journal's lock; every other line is kept "
        "exactly. 'Last Updated' is set to today automatically. On a mistake (no such item, "
        "two items match, a source that does not exist) nothing is written and the result "
        "says what to fix."
    )
    Input = LedgerUpdateInput

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        return _inline_refs(super().input_schema())

    def run(self, ctx: ToolContext, params: LedgerUpdateInput) -> ToolResult:
        from journal_agent.learning import ledger_api

        if ctx.policy is not None:
            ctx.policy.ensure(self.name)
        try:
            result = ctx.workspace.ledger.update(params.operations, title=params.title)
            report = ledger_api.check(ctx.workspace)
        except UserError as exc:
            raise ToolError(f"Nothing was written: {exc.message}") from None
        lines = ["Created learning_ledger.md." if result.created else "Updated learning_ledger.md."]
        lines += [f"- {change}" for change in result.changes]
        if report.problems:
            lines.append(f"`ledger check` reports {len(report.problems)} problem(s):")
            lines += [f"- line {p.line}: {p.kind}: {p.detail}" for p in report.problems]
        else:
            lines.append("`ledger check`: no problems.")
        return ToolResult("\n".join(lines))
