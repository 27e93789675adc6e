"""JournalInbox: the learning moments Claude Code's hooks captured, for the agents to turn into
entries (and to mark written once they are)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult

SHOWN = 20  # moments listed whole; a larger inbox says how many more wait


class JournalInboxInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    action: Literal["list", "written", "dismiss"] = Field(
        default="list",
        description="list: the waiting moments, each with its id, text, files:lines edited and "
        "measurement records. written: mark the moments in `ids` as written into the journal "
        "(after JournalAppend succeeded). dismiss: drop the moments in `ids` (not worth an entry).",
    )
    ids: list[str] = Field(
        default_factory=list, description="For written / dismiss: the moments' ids."
    )


class JournalInbox(Tool[JournalInboxInput]):
    name = "JournalInbox"
    description = (
        "The inbox of learning moments captured while the user worked in Claude Code: the "
        "★ Insight blocks of past turns, with the files and line ranges each turn edited and the "
        "measurement records ([m:<id>]) it created. Use it to offer the user what is waiting, "
        "then write entries from the moments they choose (cite the files:lines and records it "
        "gives), and mark those moments written."
    )
    Input = JournalInboxInput

    def run(self, ctx: ToolContext, params: JournalInboxInput) -> ToolResult:
        inbox = ctx.workspace.inbox
        if params.action == "list":
            return ToolResult(_listing(inbox.read()))
        if not params.ids:
            raise ToolError(f"{params.action} needs `ids`: the ids that action=list shows.")
        reason = "written" if params.action == "written" else "dismissed"
        done = []
        for ident in params.ids:
            try:
                done.append(inbox.dismiss(ident, reason).id)
            except KeyError as exc:
                raise ToolError(f"{exc.args[0]}; call action=list for the ids.") from None
        return ToolResult(f"marked {reason}: {', '.join(done)}")


def _listing(moments) -> str:
    if not moments:
        return "The inbox is empty: no captured moment is waiting."
    out = [f"{len(moments)} moment{'s' if len(moments) != 1 else ''} waiting (oldest first):"]
    for moment in moments[:SHOWN]:
        files = ", ".join(f.spec() for f in moment.files) or "none"
        records = ", ".join(f"[m:{r}]" for r in moment.records) or "none"
        # Accepted ones come first (read_inbox's order): the user already chose them.
        chosen = ", accepted by the user: offer it first" if moment.accepted else ""
        out.append(
            f"\n## {moment.id} ({moment.kind}, {moment.time}{chosen})\n{moment.text}\n"
            f"files edited: {files}\nrecords: {records}"
        )
    if len(moments) > SHOWN:
        out.append(f"\n… and {len(moments) - SHOWN} more (`journal-agent inbox`).")
    return "\n".join(out)
