"""Entry text → safe HTML: markdown-it with raw HTML off, only http(s)/mailto/relative links,
and each code reference and ``[m:id]`` citation turned into a link to its page.

Raw HTML in an entry (``<script>``, ``<img onerror=…>``) is shown as text: the renderer never
emits it. ``javascript:``, ``data:``, ``vbscript:`` and ``file:`` links are not links (their
text stays). The links we add are built from the references' own paths, escaped by the
renderer like every other attribute.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from journal_agent.journal.refs import CodeRef, find_refs
from profiling.citations import CITATION

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

_ID_COMMENT = re.compile(r"^\s*<!--\s*entry:\s*[^\s>]+\s*-->\s*$")
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):", re.IGNORECASE)
_SAFE_SCHEMES = frozenset(["http", "https", "mailto"])
# Every code reference has ``:`` and a digit (``path:12``): text without one has none, and
# most of an entry's text is looked at only this once (an export renders 10,000 entries).
_MAYBE_REF = re.compile(r":\d")


@dataclass(frozen=True)
class Link:
    href: str
    css: str  # class of the <a>
    title: str = ""


# How a reference or a citation becomes a link (None: leave it as text).
RefLinker = Callable[[CodeRef], Link | None]
CiteLinker = Callable[[str], Link | None]


def safe_link(url: str) -> bool:
    """markdown-it's validateLink: http(s), mailto and relative links only."""
    scheme = _SCHEME.match(url.strip())
    return scheme is None or scheme.group(1).lower() in _SAFE_SCHEMES


def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.enable("strikethrough")
    md.validateLink = safe_link
    return md


_MD: MarkdownIt | None = None


def parser() -> MarkdownIt:
    global _MD
    if _MD is None:
        _MD = _parser()
    return _MD


def render(text: str, refs: RefLinker, cites: CiteLinker) -> str:
    """HTML of ``text`` (an entry, an insight) with references and citations linked."""
    text = "".join(line for line in text.splitlines(keepends=True) if not _ID_COMMENT.match(line))
    md = parser()
    tokens = md.parse(text)
    for token in tokens:
        if token.type == "inline" and token.children:
            token.children = _link_children(token.children, refs, cites)
    return md.renderer.render(tokens, md.options, {})


def inline(text: str) -> str:
    """One line of Markdown (a ledger item, a goal) as inline HTML, raw HTML off."""
    return parser().renderInline(text)


def _link_children(children: list[Token], refs: RefLinker, cites: CiteLinker) -> list[Token]:
    out: list[Token] = []
    inside_link = 0
    for child in children:
        if child.type == "link_open":
            inside_link += 1
        elif child.type == "link_close":
            inside_link -= 1
        if inside_link:
            out.append(child)
        elif child.type == "text":
            out += _split_text(child, refs, cites)
        elif child.type == "code_inline":
            out += _wrap_code(child, refs)
        else:
            out.append(child)
    return out


def _wrap_code(token: Token, refs: RefLinker) -> list[Token]:
    if not _MAYBE_REF.search(token.content):
        return [token]
    found = find_refs(f"`{token.content}`", token.map[0] if token.map else 0)
    if len(found) != 1:
        return [token]
    link = refs(found[0])
    return [token] if link is None else _wrapped(link, [token])


def _split_text(token: Token, refs: RefLinker, cites: CiteLinker) -> list[Token]:
    content = token.content
    spans: list[tuple[int, int, Link]] = []
    for match in CITATION.finditer(content):
        link = cites(match.group("id"))
        if link is not None:
            spans.append((match.start(), match.end(), link))
    pos = 0
    for ref in find_refs(content, 0) if _MAYBE_REF.search(content) else ():
        found = _locate(content, ref, pos)
        if found is None:
            continue
        pos = found[1]
        link = refs(ref)
        if link is not None and not any(a < found[1] and found[0] < b for a, b, _ in spans):
            spans.append((*found, link))
    if not spans:
        return [token]
    spans.sort(key=lambda s: s[0])
    out: list[Token] = []
    at = 0
    for start, end, link in spans:
        if start > at:
            out.append(_text(content[at:start]))
        out += _wrapped(link, [_text(content[start:end])])
        at = end
    if at < len(content):
        out.append(_text(content[at:]))
    return out


def _locate(content: str, ref: CodeRef, pos: int) -> tuple[int, int] | None:
    pattern = re.compile(
        rf"(?<![\w/.:@~-]){re.escape(ref.path)}:0*{ref.start}(?:[-–]0*{ref.end})?(?!\w)"
    )
    match = pattern.search(content, pos)
    return None if match is None else (match.start(), match.end())


def _text(content: str) -> Token:
    from markdown_it.token import Token

    token = Token("text", "", 0)
    token.content = content
    return token


def _wrapped(link: Link, inner: list[Token]) -> list[Token]:
    from markdown_it.token import Token

    opening = Token("link_open", "a", 1)
    opening.attrs = {"href": link.href, "class": link.css}
    if link.title:
        opening.attrs["title"] = link.title
    return [opening, *inner, Token("link_close", "a", -1)]
