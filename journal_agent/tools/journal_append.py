"""JournalAppend: validate a learning-journal entry and append it, or say exactly what to fix."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.errors import UserError
from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult


class JournalAppendInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    entry: str = Field(
        description="The whole entry as markdown, starting with its heading "
        "'## <Concept title> (YYYY-MM-DD)' and using the journal's sections "
        "(**Context**, **The Key Question I Had**, ### 🎯 Intuition, … ### 🏷️ Tags)."
    )
    force: bool = Field(
        default=False,
        description="Append even if problems remain (they are recorded). Only when the user "
        "asks for it; otherwise fix the problems.",
    )


class JournalAppend(Tool[JournalAppendInput]):
    name = "JournalAppend"
    description = (
        "Append one entry to learning_journal.md after checking it. Use this instead of Write or "
        "Edit for journal entries: it appends atomically (parallel writers never lose an entry) "
        "and verifies the entry first:\n"
        "- the required sections are present (header with date, Context, The Key Question I Had);\n"
        "- every code reference `path:line` or `path:start-end` resolves to existing lines "
        "(read the file first to get the numbers right);\n"
        "- every citation [m:<id>] names an existing measurement record, and the numbers in its "
        "sentence, paragraph or table are values of that record, in any unit (GiB/GB/MiB/ms/s), "
        "or results of a calculation shown ('3 × 13.48 GB = 40.44 GB');\n"
        "- it does not repeat an entry already in the journal (same concept, near-identical "
        "content): a duplicate is refused with the existing entry's id — update that entry "
        "with Edit instead, unless the user wants both;\n"
        "- every other number with a memory or time unit either cites a record, or sits on a line "
        "that shows its calculation (numbers with an operator between them: '7B × 2 bytes = "
        "14 GB'; '4× larger' is not one), or inside a code block.\n"
        "If anything fails, nothing is written and the result lists each problem with its line; "
        "fix them and call again."
    )
    Input = JournalAppendInput

    def run(self, ctx: ToolContext, params: JournalAppendInput) -> ToolResult:
        from journal_agent.journal import api

        if ctx.policy is not None:
            ctx.policy.ensure(self.name)
        try:
            outcome = api.append_entry(ctx.workspace, params.entry, force=params.force)
        except UserError as exc:
            raise ToolError(exc.message) from None
        if not outcome.appended:
            lines = [
                f"The entry was NOT appended: {len(outcome.problems)} problem(s). Fix each one "
                "and call JournalAppend again (line numbers are lines of your entry):"
            ]
            lines += [
                f"- line {p.line}: {p.kind}: {p.detail}" if p.line else f"- {p.kind}: {p.detail}"
                for p in outcome.problems
            ]
            if any(p.kind == "duplicate" for p in outcome.problems):
                lines.append(
                    "A duplicate is not fixed by rewording: add what is new to the existing "
                    "entry with Edit (read learning_journal.md first), or set force only if the "
                    "user asked to keep both."
                )
            return ToolResult("\n".join(lines), is_error=True)
        text = f"Appended entry {outcome.entry_id} at learning_journal.md line {outcome.line}."
        if outcome.forced:
            text += (
                f" It was forced with {len(outcome.problems)} problem(s) recorded:\n"
                + "\n".join(f"- {p.kind}: {p.detail}" for p in outcome.problems)
            )
        for warning in outcome.warnings:
            text += f"\nWarning: {warning}. Read that entry: if it says the same, tell the user."
        return ToolResult(text)
