"""One entry's line in the touch recall (capture/touch.py): the lines an entry explains, their
state and the command that opens it, in at most :data:`LINE_TOKENS` tokens (#33).

The id (the title's slug and a date) says the title, so the title is said only where the id does
not carry it. The command is never cut and its id is whole: a cut or prefix id opens nothing,
and the model copies what it is shown into entries as citations.

Stdlib only, no ``re`` (the hooks run under ``python3 -I -S``).
"""

from __future__ import annotations

from journal_agent.terminal_text import one_line

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

LINE_TOKENS = 40  # one entry's line, as cost() counts it (#33)
LINE_LIMIT = 150  # characters of a line (SubagentStart's brief: capture/handed.py)
TITLE_LIMIT = 60  # (SubagentStart's brief)
TITLE_MIN = 12  # characters of a title worth saying: shorter, the line says the id alone
# Words of the lines (and of paths) cl100k holds as one token each, for cost().
WORDS = frozenset(
    ("journal", "agent", "show", "is", "explained", "by", "your", "edit", "changed", "fresh",
     "moved", "to", "line", "lines", "src", "py", "md", "json", "tests", "test", "docs")
)  # fmt: skip
ID_LIMIT = 80  # an entry id is a slug of at most 60 characters and a date: longer is not ours


def line(entry: str, title: str, key: str, now: str, changed: bool) -> str:
    """One entry's line, at most :data:`LINE_TOKENS` as :func:`cost` counts them. The id says
    the title (it is the title's slug and a date): the title itself is said only when the id
    does not carry it (a slug cut at 60 characters, an entry retitled: ids are stable), and only
    in the room left. The command that opens the entry is never cut (a cut id opens nothing);
    what gives way, in turn: the title, the path's folders, the file's name (down to the lines
    alone), the line a moved reference is at now."""
    tail = f"journal-agent journal show {entry}"

    def said(where: str, state: str, name: str) -> str:
        who = f'"{name}"' if name else ""
        if changed:
            return f"your edit changed {where}, explained by " + (f"{who}: {tail}" if who else tail)
        return (
            f"{where}"
            + (f" ({state})" if state else "")
            + " is explained by "
            + (f"{who}: {tail}" if who else tail)
        )

    out = ""
    for state in dict.fromkeys((now, now.partition(" to ")[0])):  # "moved to line N", "moved"
        for where in _wheres(key):
            out = said(where, state, "")
            if cost(out) <= LINE_TOKENS:
                return _titled(out, title, entry, lambda name, w=where, s=state: said(w, s, name))
    return out  # an id too long for any line: said whole all the same


def _titled(line: str, title: str, entry: str, said: Callable[[str], str]) -> str:
    """``line`` with the entry's title, cut to the room left, when the id does not carry it."""
    if title == entry or entry.startswith(slug(title, ID_LIMIT) + "-"):
        return line
    words = one_line(title.replace('"', "'"), TITLE_LIMIT).split(" ")
    while words:
        name = " ".join(words)
        name = name if name == title else name.rstrip(".,;:…") + "…"
        if len(name) >= TITLE_MIN and cost(out := said(name)) <= LINE_TOKENS:
            return out
        words.pop()
    return line


def _wheres(key: str) -> Iterator[str]:
    """``path:lines``, then with its leading folders given way (``…/b/c.py:3``), then the
    file's name from its start (``…memory.py:3``), at last the lines alone (the file is the one
    the tool call named)."""
    key = one_line(key, 2 * LINE_LIMIT)
    path, _, lines = key.rpartition(":")
    parts = path.split("/")
    yield key
    for n in range(1, len(parts)):
        yield "…/" + "/".join(parts[n:]) + ":" + lines
    for cut in range(4, len(parts[-1]) - 4, 4):
        yield "…" + parts[-1][cut:] + ":" + lines
    yield ("lines " if "-" in lines else "line ") + lines


def cost(text: str) -> int:
    """The tokens of ``text`` counted high, as cl100k splits it (the hooks import no
    tokenizer): a run of ASCII letters is one token when a word of :data:`WORDS` or of at most
    4 letters, else one per 4 letters; digits one per 3; an ASCII sign one, none before a
    lowercase letter (``-keeps``, ``_states``, ``/train`` are one); any other character two;
    spaces join the word after them. Never under the real count on lines made of this
    repository's paths and ids of its file names (tests/capture/test_touch_recall.py), about
    1.2 times it."""
    n, kind, run = 0, "", ""
    for c in text + " ":
        k = "a" if c.isascii() and c.isalpha() else "d" if c.isascii() and c.isdigit() else c
        if k == kind and k in "ad":
            run += c
            continue
        if kind == "a":
            n += 1 if len(run) <= 5 or run.lower() in WORDS else -(-len(run) // 4)
        elif kind == "d":
            n += -(-len(run) // 3)
        elif kind != " " and kind:
            n += 2 if not kind.isascii() else 1
        kind, run = k, c
    return n


def slug(text: str, limit: int = 60) -> str:
    """journal_agent.journal._text.slugify without ``re``: runs of ``\\w`` joined by ``-``."""
    words = "".join(c if c.isalnum() or c == "_" else " " for c in text.lower()).split()
    joined = "-".join(words)
    return (joined[:limit].rstrip("-") if len(joined) > limit else joined) or "entry"
