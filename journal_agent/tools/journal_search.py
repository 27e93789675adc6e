"""JournalSearch: find existing journal entries by words and tags, or entries related to a draft."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from journal_agent.errors import UserError
from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult


class JournalSearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    query: str | None = Field(
        default=None,
        description='Words to search for (BM25 ranked; "quoted phrases", OR, NOT allowed).',
    )
    tags: list[str] = Field(
        default_factory=list, description='Only entries with all these tags, e.g. ["#zero"].'
    )
    related_to: str | None = Field(
        default=None,
        description="A draft entry (or its topic and key terms): returns the existing entries "
        "most similar to it, for the draft's 🔗 Related Concepts section.",
    )
    limit: int = Field(default=5, ge=1, le=50, description="At most this many entries.")

    @model_validator(mode="after")
    def _something(self) -> JournalSearchInput:
        if not (self.query or self.tags or self.related_to):
            raise ValueError("give query, tags or related_to")
        return self


class JournalSearch(Tool[JournalSearchInput]):
    name = "JournalSearch"
    description = (
        "Search the learning journal (learning_journal.md) for existing entries.\n"
        "- query: words or a whole question; finds entries by their words (stems, synonyms and "
        "abbreviations such as ZeRO/FSDP/bf16, typos, Chinese) and by meaning, best first, with "
        "entry id, title, date, line, which words matched and a snippet.\n"
        "- tags: filter by tags such as #zero.\n"
        "- related_to: pass your draft before appending it to get the most similar existing "
        "entries; cross-reference them in the 🔗 Related Concepts section as "
        "'**Title** (YYYY-MM-DD)'. If one of them already covers the concept, extend that entry "
        "instead of writing a new one (JournalAppend refuses near-duplicates)."
    )
    Input = JournalSearchInput

    def run(self, ctx: ToolContext, params: JournalSearchInput) -> ToolResult:
        from journal_agent.journal import api
        from journal_agent.journal.limits import check_draft, check_query

        try:
            check_query(params.query or "")
            check_draft(params.related_to or "")
            if params.related_to:
                hits = api.related(ctx.workspace, params.related_to, params.limit)
                if not hits:
                    return ToolResult("No related entries in the journal yet.")
                return ToolResult(
                    "Related entries (most similar first):\n"
                    + "\n".join(
                        f"- **{h.title}** ({h.date}) — id {h.id}, learning_journal.md line {h.line}"
                        for h in hits
                    )
                )
            if not ctx.workspace.journal.exists():
                return ToolResult("The journal is empty: learning_journal.md does not exist yet.")
            hits = api.search(ctx.workspace, params.query or "", params.tags, params.limit)
        except UserError as exc:
            raise ToolError(exc.message) from None
        if not hits:
            return ToolResult("No matching entries.")
        out = []
        for h in hits:
            out.append(f"- {h.date} **{h.title}** — id {h.id}, learning_journal.md line {h.line}")
            why = [f"words: {', '.join(h.matched)}"] if h.matched else []
            if h.meaning is not None and not h.matched:
                why.append(f"meaning {h.meaning:.2f}")
            if why:
                out.append(f"  ({'; '.join(why)})")
            if h.snippet:
                out.append(f"  {h.snippet}")
        return ToolResult("\n".join(out))
