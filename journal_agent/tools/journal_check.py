"""JournalCheck: check every journal entry; optionally move references to where their lines went."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.errors import UserError
from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult


class JournalCheckInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    fix: bool = Field(
        default=False,
        description="First rewrite each reference whose recorded lines were found unchanged "
        "elsewhere (moved_ref) to where they are now. References whose lines changed are never "
        "touched: read the code, update the entry, then refresh it.",
    )


class JournalCheck(Tool[JournalCheckInput]):
    name = "JournalCheck"
    description = (
        "Check every entry of learning_journal.md as `journal-agent journal check` does: code "
        "references (moved_ref: the same lines are elsewhere now, with the new place; stale_ref: "
        "the lines changed, with a diff; missing_ref: gone), measurement citations, numbers, "
        "required sections, encoding. With fix=true, moved references are first rewritten in "
        "place (atomically, under the journal's lock); the result lists what was fixed and what "
        "is left."
    )
    Input = JournalCheckInput

    def run(self, ctx: ToolContext, params: JournalCheckInput) -> ToolResult:
        from journal_agent.journal import api

        if ctx.policy is not None:
            ctx.policy.ensure(self.name)
        try:
            fixed = api.fix_refs(ctx.workspace).fixed if params.fix else []
            report = api.check(ctx.workspace)
        except UserError as exc:
            raise ToolError(exc.message) from None
        lines = [f"Fixed line {f.line}: {f.old} → {f.new} ({f.entry})." for f in fixed]
        if report.ok:
            lines.append(f"{len(report.entries)} entries, no problems.")
            return ToolResult("\n".join(lines))
        lines.append(f"{len(report.entries)} entries, {len(report.problems)} problem(s):")
        for p in report.problems:
            lines.append(f"- line {p.line}: {p.kind}: {p.detail} ({p.entry})")
            lines += [f"    {d}" for d in p.diff or []]
        return ToolResult("\n".join(lines), is_error=True)
