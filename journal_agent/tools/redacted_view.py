"""A file as the model sees it, secrets redacted, and the way back when it edits what it saw.

Every tool result is redacted before it reaches the model or a transcript
(:meth:`journal_agent.tools.base.Tool.call`): a token in ``.git/config``'s remote URL, a
``.netrc`` line printed by ``cat``, a password in a config file all read ``[REDACTED]``. The
model then edits what it saw, so Edit and Write map its text back onto the file:

- Edit: an ``old_string`` holding ``[REDACTED]`` is looked for in the file as the model saw it;
  each ``[REDACTED]`` that ``new_string`` keeps (as many, in the same order) puts the original
  value back, and a ``new_string`` with none removes them (a key replaced by
  ``os.environ[...]``);
- Write: content holding the file's ``[REDACTED]`` values, as many as the file has, gets them
  back in order; fewer or more would write the marker over a secret, and is refused.

So a secret neither reaches the model nor is lost by an edit made around it.
"""

from __future__ import annotations

from journal_agent.secret_text import REDACTED, find_secrets
from journal_agent.tools.base import ToolError


class View:
    """``text`` with every secret replaced by the marker, and what each marker of the view
    stands for (a secret's value, or a marker already in the file)."""

    def __init__(self, text: str) -> None:
        parts: list[str] = []
        # (start in the view, start in the text, end in the text) of each marker in the view
        self.markers: list[tuple[int, int, int]] = []
        at = shift = 0
        for f in find_secrets(text):
            parts += [text[at : f.start], REDACTED]
            self.markers.append((f.start + shift, f.start, f.end))
            shift += len(REDACTED) - (f.end - f.start)
            at = f.end
        parts.append(text[at:])
        self.text = text
        self.shown = "".join(parts)
        self.secrets = len(self.markers)

    def raw_offset(self, pos: int) -> int | None:
        """The offset in the text of offset ``pos`` of the view; None inside a marker."""
        shift = 0
        for start, _, raw_end in self.markers:
            if pos < start + len(REDACTED):
                if pos <= start:
                    break
                return None
            shift = raw_end - (start + len(REDACTED))
        return pos + shift

    def stands_for(self, start: int, end: int) -> list[str]:
        """What each marker in ``shown[start:end]`` stands for, in order."""
        out: list[str] = []
        secrets = {at: (raw_start, raw_end) for at, raw_start, raw_end in self.markers}
        at = self.shown.find(REDACTED, start)
        while at != -1 and at + len(REDACTED) <= end:
            raw = secrets.get(at)
            out.append(self.text[raw[0] : raw[1]] if raw else REDACTED)
            at = self.shown.find(REDACTED, at + len(REDACTED))
        return out


def restore(new: str, values: list[str], what: str) -> str:
    """``new`` with its markers put back to ``values`` (as many, in order), or with none."""
    count = new.count(REDACTED)
    if count == 0:
        return new
    if count != len(values):
        raise ToolError(
            f"{what} has {count} {REDACTED} where the text it replaces has {len(values)}: the "
            f"secrets in this file are shown to you as {REDACTED}, and Edit and Write put each "
            f"back where it was. Keep every {REDACTED} of the text you replace, in the same "
            "order, or leave them all out to remove those values."
        )
    parts = new.split(REDACTED)
    out = [parts[0]]
    for value, part in zip(values, parts[1:], strict=True):
        out += [value, part]
    return "".join(out)


def replace_in_view(
    text: str, old: str, new: str, *, replace_all: bool
) -> tuple[str, int, int] | None:
    """Edit ``old`` → ``new`` where ``old`` matches the file as the model saw it (secrets
    redacted) but not the file: (new text, occurrences, line of the first), or None when it
    does not match the view either."""
    view = View(text)
    if not view.secrets:
        return None
    count = view.shown.count(old)
    if count == 0:
        return None
    if count > 1 and not replace_all:
        raise ToolError(
            f"Found {count} matches of old_string, but replace_all is false. To replace only one, "
            "add surrounding lines to old_string so it matches exactly once; to replace every "
            "occurrence, set replace_all to true."
        )
    out: list[str] = []
    raw_at = view_at = 0
    first_line = 0
    while (hit := view.shown.find(old, view_at)) != -1 and (replace_all or not out):
        start, end = view.raw_offset(hit), view.raw_offset(hit + len(old))
        if start is None or end is None:
            raise ToolError(
                f"old_string begins or ends inside a {REDACTED} value (a secret shown to you "
                f"redacted); include the whole {REDACTED} in old_string, or none of it."
            )
        if not out:
            first_line = text.count("\n", 0, start) + 1
        values = view.stands_for(hit, hit + len(old))
        out += [text[raw_at:start], restore(new, values, "new_string")]
        raw_at, view_at = end, hit + len(old)
    out.append(text[raw_at:])
    return "".join(out), count, first_line


def restore_in_content(previous: str, content: str) -> str:
    """Write's content with the file's redacted values put back (see the module's text)."""
    if REDACTED not in content:
        return content
    view = View(previous)
    if not view.secrets:
        return content  # the file holds no secret: a marker in the content is just text
    values = view.stands_for(0, len(view.shown))
    return restore(content, values, "The content")
