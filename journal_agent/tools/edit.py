"""Edit: replace an exact string in a file this run has Read, under the same rules as Write.

The check that the file is unchanged since this run read it, the replacement and the atomic
write all happen under the file's writer lock, so parallel agents appending to one journal
each either land their change or get "modified since read" and retry; nothing is lost.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.secret_text import REDACTED
from journal_agent.tools._file_versions import keep_previous
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from journal_agent.tools.confined_paths import permitted_path
from journal_agent.tools.read_tracking import tracker_for
from journal_agent.tools.redacted_view import replace_in_view
from journal_agent.tools.write import (
    atomic_write,
    check_foreign,
    encode_text,
    ensure_unchanged,
    make_parents,
    refuse_secrets_in_user_docs,
    remember_written,
    writer_lock,
)

SNIPPET_CONTEXT = 4
_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+\t", re.MULTILINE)


class EditInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file_path: str = Field(
        description="The absolute path to the file to modify (a relative path is taken from "
        "the workspace root)."
    )
    old_string: str = Field(description="The text to replace (exactly as in the file).")
    new_string: str = Field(
        description="The text to replace it with (must be different from old_string)."
    )
    replace_all: bool = Field(
        default=False, description="Replace all occurrences of old_string (default false)."
    )


class Edit(Tool[EditInput]):
    name: ClassVar[str] = "Edit"
    description: ClassVar[str] = (
        "Performs exact string replacements in files (inside the workspace).\n\n"
        "Usage:\n"
        "- You must Read the file in this conversation before editing it, or the call fails.\n"
        "- old_string must match the file exactly, including whitespace and indentation. Copy it "
        "from the Read output without the line-number prefix (number + tab).\n"
        "- The edit fails if old_string is not found, or is found more than once (the error says "
        "how many times): then add surrounding lines to make it unique, or set replace_all to "
        "replace every occurrence (useful for renaming).\n"
        "- new_string must differ from old_string.\n"
        "- If the file changed on disk since you read it (another agent or the user edited it), "
        "the call fails with 'modified since read': Read it again and redo the edit.\n"
        "- With an empty old_string, Edit creates a file that does not exist yet (or fills an "
        "empty one) with new_string.\n"
        "- A secret Read showed as [REDACTED] may stay [REDACTED] in old_string and new_string: "
        "the value goes back where new_string keeps the marker."
    )
    Input = EditInput

    def run(self, ctx: ToolContext, params: EditInput) -> ToolResult:
        path = permitted_path(ctx, self.name, params.file_path)
        if params.old_string == params.new_string:
            raise ToolError(
                "No changes to make: old_string and new_string are exactly the same; give the "
                "new text in new_string."
            )
        tracker = tracker_for(ctx)
        refuse_secrets_in_user_docs(ctx.root, path, params.new_string, params.old_string)
        check_foreign(ctx.root, path)

        with writer_lock(ctx.root, path):
            current = ensure_unchanged(ctx.root, tracker, path, action="editing")
            if current is None:
                if params.old_string:
                    raise ToolError(
                        f"File does not exist: {path}. To create it, use Write (or Edit with "
                        "an empty old_string)."
                    )
                data = encode_text(params.new_string, path)
                make_parents(ctx.root, path)
                written = atomic_write(ctx.root, path, data)
                remember_written(tracker, path, data, written)
                return ToolResult(f"File created successfully at: {path}.")

            text = current.decode("utf-8", "surrogateescape")
            new_text, count, first_line = _replace(text, params)
            data = encode_text(new_text, path)
            keep_previous(ctx.root, path, current)
            written = atomic_write(ctx.root, path, data)
            remember_written(tracker, path, data, written)

        if params.replace_all and count > 1:
            return ToolResult(
                f"The file {path} has been updated. All {count} occurrences of old_string were "
                "replaced by new_string."
            )
        snippet = _snippet(new_text, first_line, params.new_string)
        return ToolResult(
            f"The file {path} has been updated. Here is the result of running `cat -n` on a "
            f"snippet of the edited file:\n{snippet}"
        )


def _replace(text: str, params: EditInput) -> tuple[str, int, int]:
    """(new text, occurrences replaced, line number where the first replacement starts)."""
    old, new = params.old_string, params.new_string
    if not old:
        if text:
            raise ToolError(
                "old_string is empty but the file is not: give the exact text to replace, or use "
                "Write to replace the whole file."
            )
        return new, 1, 1

    # A CRLF file shows in Read without the \r, so the model's strings have bare \n: match on
    # the LF form and write CRLF back.
    crlf = "\r\n" in text and text.count("\n") == text.count("\r\n") and "\r\n" not in old
    if crlf:
        text = text.replace("\r\n", "\n")
        new = new.replace("\r\n", "\n")

    count = text.count(old)
    if count == 0 and REDACTED in old:
        # The model saw the file redacted (tool results are): match what it saw, and put the
        # secrets back where new_string keeps their markers.
        done = replace_in_view(text, old, new, replace_all=params.replace_all)
        if done is not None:
            result, count, first_line = done
            return (result.replace("\n", "\r\n") if crlf else result), count, first_line
    if count == 0:
        raise ToolError(_not_found_message(old))
    if count > 1 and not params.replace_all:
        raise ToolError(
            f"Found {count} matches of old_string, but replace_all is false. To replace only one, "
            "add surrounding lines to old_string so it matches exactly once; to replace every "
            "occurrence, set replace_all to true."
        )
    first_line = text.count("\n", 0, text.index(old)) + 1
    result = text.replace(old, new) if params.replace_all else text.replace(old, new, 1)
    if crlf:
        result = result.replace("\n", "\r\n")
    return result, count, first_line


def _not_found_message(old: str) -> str:
    message = (
        "String to replace not found in the file (0 matches). old_string must match the file "
        "exactly, including whitespace and indentation."
    )
    if _LINE_NUMBER_PREFIX.search(old):
        message += (
            " It looks like it includes Read's line-number prefixes (number + tab); leave them out."
        )
    return message + " Read the file again to copy the exact text."


def _snippet(text: str, start_line: int, new: str) -> str:
    # Numbered like Read, a few lines around the first replacement.
    lines = text.replace("\r\n", "\n").split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start another
    first = max(start_line - SNIPPET_CONTEXT, 1)
    last = min(start_line + new.count("\n") + SNIPPET_CONTEXT, len(lines))
    return "\n".join(f"{n}\t{lines[n - 1]}" for n in range(first, last + 1))
