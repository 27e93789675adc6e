"""From what a learner types to FTS5 queries: stems, synonyms, compounds, typos, Chinese.

A query in plain words becomes a list of :class:`Term`s, one per thing the user asked for,
each a set of alternative FTS5 phrases: ``optimizer states`` → ``("optimizer state" OR "adam
state" OR "优化器状态" …)``; ``warmup`` → ``("warmup" OR "warm up" …)``; ``optimzer`` →
``("optimzer" OR "optim")``. The index ranks entries matching every term first, then entries
matching some of them (see ``index.py``). A query that uses FTS5 syntax itself (quotes,
parentheses, ``AND``/``OR``/``NOT``, ``col:``, ``*``) is passed through as written.

Words are compared as FTS5's ``porter unicode61 remove_diacritics 2`` tokenizer sees them: the
same tokenizer, run on an in-memory table, stems query words and synonym lists.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from journal_agent.paths import state_dir

TOKENIZE = "porter unicode61 remove_diacritics 2"
OPERATORS = re.compile(r'["()*:^+]|\b(?:AND|OR|NOT|NEAR)\b')
CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W_]+")

# Words that carry no topic in a learner's question ("how does zero split the adam state").
STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with from into onto as is are was were
    be been being am do does did doing done have has had having i me my we our you your
    it its they them their this that these those there here what which who whom whose
    when where why how can could should would will shall may might must not no so than
    then too very just also about over under again more most some any each both all such
    only own same other vs versus explain explained tell show give get got make makes
    made use used using work works working mean means meaning way ways thing things really
    actually please need needs want know""".split(),  # noqa: SIM905
)
# Question words and particles in Chinese queries (为什么 ZeRO 要切分优化器状态?).
CJK_STOPWORDS = sorted(
    """为什么 怎么样 怎么办 怎么 什么 如何 怎样 哪些 哪个 是否 可以 能否 一下 多少 为何
    的 了 吗 呢 是 在 和 与 把 被 要 会 有 吧 啊 我 你 他 它 这 那
    个 时 对 到 用 做 么 就 都 也 还 很""".split(),  # noqa: SIM905
    key=len,
    reverse=True,
)


@dataclass
class Term:
    """One thing the user asked for; an entry matches it when it matches any alternative."""

    label: str  # as the user wrote it, to show which words matched
    alternatives: list[str] = field(default_factory=list)  # FTS5 phrase expressions

    def fts(self) -> str:
        unique = list(dict.fromkeys(self.alternatives))
        return unique[0] if len(unique) == 1 else "(" + " OR ".join(unique) + ")"


@dataclass
class QueryPlan:
    terms: list[Term]
    raw: str | None = None  # FTS5 syntax written by the user, passed through

    def all_of(self) -> str:
        return self.raw if self.raw is not None else " AND ".join(t.fts() for t in self.terms)

    def any_of(self) -> str:
        return self.raw if self.raw is not None else " OR ".join(t.fts() for t in self.terms)


# -- the FTS5 tokenizer, outside the index ----------------------------------------------------
class _Stemmer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize = '{TOKENIZE}')")
        self._conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")

    def tokens(self, text: str) -> list[str]:
        """The terms FTS5 indexes for ``text``, in order (stemmed, folded)."""
        with self._lock:
            self._conn.execute("DELETE FROM t")
            self._conn.execute("INSERT INTO t (rowid, x) VALUES (1, ?)", (text,))
            return [r[0] for r in self._conn.execute("SELECT term FROM v ORDER BY offset")]


_STEMMER: _Stemmer | None = None


def stems(text: str) -> list[str]:
    global _STEMMER
    if _STEMMER is None:
        _STEMMER = _Stemmer()
    return _STEMMER.tokens(text)


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    out = stems(word)
    return out[0] if len(out) == 1 else word.lower()


# -- synonyms -------------------------------------------------------------------------------
@dataclass
class Synonyms:
    groups: list[list[str]]
    by_stems: dict[tuple[str, ...], int]  # a spelling's stems → its group
    by_cjk: dict[str, int]  # a Chinese spelling → its group
    longest: int

    def alternatives(self, group: int) -> list[str]:
        return [phrase(s) for s in self.groups[group]]


def _parse_synonyms(text: str) -> list[list[str]]:
    groups = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        spellings = [s.strip() for s in line.split("|") if s.strip()]
        if len(spellings) >= 2:
            groups.append(spellings)
    return groups


@lru_cache(maxsize=8)
def _build_synonyms(texts: tuple[str, ...]) -> Synonyms:
    groups = [g for text in texts for g in _parse_synonyms(text)]
    by_stems: dict[tuple[str, ...], int] = {}
    by_cjk: dict[str, int] = {}
    for n, group in enumerate(groups):
        for spelling in group:
            if CJK_RUN.fullmatch(spelling.replace(" ", "")):
                by_cjk.setdefault(spelling.replace(" ", ""), n)
                continue
            words = stems(spelling)
            if not words:
                continue
            by_stems.setdefault(tuple(words), n)
            if len(words) > 1:  # "kv cache" also as "kvcache", "kv-cache" is two tokens anyway
                by_stems.setdefault((stem("".join(_WORD.findall(spelling.lower()))),), n)
    longest = max((len(k) for k in by_stems), default=1)
    return Synonyms(groups, by_stems, by_cjk, longest)


def load_synonyms(root: Path | None = None) -> Synonyms:
    """The packaged list, plus ``.journal/synonyms.txt`` of the project when there is one."""
    texts = [_packaged_synonyms()]
    if root is not None:
        from journal_agent import confined

        extra = state_dir(Path(root)) / "synonyms.txt"
        st = confined.lstat(root, extra)  # (a link or FIFO there is no list: never followed)
        if st is not None and stat.S_ISREG(st.st_mode):
            with contextlib.suppress(OSError, UnicodeDecodeError):
                texts.append(_read_synonyms(str(root), str(extra), st.st_size, st.st_mtime_ns))
    return _build_synonyms(tuple(texts))


@lru_cache(maxsize=1)
def _packaged_synonyms() -> str:
    return resources.files("journal_agent.journal").joinpath("synonyms.txt").read_text("utf-8")


@lru_cache(maxsize=8)
def _read_synonyms(root: str, path: str, size: int, mtime_ns: int) -> str:
    """A project's list, read again only when the file changes (every search analyses)."""
    from journal_agent import confined

    return (confined.read(root, path) or b"").decode("utf-8")


# -- analysis -------------------------------------------------------------------------------
def phrase(text: str) -> str:
    """An FTS5 phrase for ``text``; CJK characters spelled one per token (the ``cjk`` column)."""
    text = CJK_RUN.sub(lambda m: " " + " ".join(m.group(0)) + " ", text)
    return '"' + " ".join(text.replace('"', " ").split()) + '"'


def cjk_query(query: str) -> str:
    """CJK runs of a raw FTS5 query become phrases of single characters."""
    if not CJK_RUN.search(query):
        return query
    out, quoted = [], False
    for part in re.split(r'(")', query):
        if part == '"':
            quoted = not quoted
            out.append(part)
        elif quoted:
            out.append(CJK_RUN.sub(lambda m: " " + " ".join(m.group(0)) + " ", part))
        else:
            out.append(CJK_RUN.sub(lambda m: ' "' + " ".join(m.group(0)) + '" ', part))
    return "".join(out)


def is_fts_syntax(query: str) -> bool:
    """Whether the user wrote FTS5 syntax (quotes, operators, ``col:``), passed through as is."""
    return OPERATORS.search(query) is not None


def analyse(
    query: str,
    synonyms: Synonyms,
    df: Callable[[str], int] = lambda _: 1,
    near: Callable[[str], list[str]] = lambda _: [],
) -> QueryPlan:
    """Plain words → terms. ``df(stem)`` says how many entries contain a stem (for compounds
    and typos); ``near(stem)`` lists indexed stems one or two edits away."""
    if is_fts_syntax(query):
        return QueryPlan([], raw=cjk_query(query))
    terms: list[Term] = []
    for run in CJK_RUN.findall(query):
        terms += _cjk_terms(run, synonyms)
    latin = CJK_RUN.sub(" ", query)
    words = [w.lower() for w in _WORD.findall(latin)]
    word_stems = [stem(w) for w in words]
    i = 0
    while i < len(words):
        matched = _synonym_at(word_stems, i, synonyms)
        if matched is not None:
            length, group = matched
            label = " ".join(words[i : i + length])
            terms.append(Term(label, [phrase(label), *synonyms.alternatives(group)]))
            i += length
            continue
        word = words[i]
        if word in STOPWORDS:
            i += 1
            continue
        # "warm up" / "warm-up" as one word when the journal writes it so ("warmup").
        if i + 1 < len(words) and words[i + 1] not in STOPWORDS:
            joined = word + words[i + 1]
            if df(stem(joined)) > 0:
                label = f"{word} {words[i + 1]}"
                terms.append(Term(label, [phrase(label), phrase(joined)]))
                i += 2
                continue
        alternatives = [phrase(word)]
        s = word_stems[i]
        if len(word) >= 6 and word.isalpha():
            alternatives += [phrase(f"{a} {b}") for a, b in _splits(word, df)]
        if df(s) == 0 and len(word) >= 4 and word.isalpha():
            alternatives += [phrase(n) for n in near(s)]
        terms.append(Term(word, alternatives))
        i += 1
    return QueryPlan(_dedupe(terms))


def concepts(text: str, synonyms: Synonyms) -> set[str]:
    """The concepts a title names: its telling stems, with synonyms folded to one name."""
    words = [w.lower() for w in _WORD.findall(CJK_RUN.sub(" ", text))]
    word_stems = [stem(w) for w in words]
    out: set[str] = set()
    i = 0
    while i < len(words):
        matched = _synonym_at(word_stems, i, synonyms)
        if matched is not None:
            out.add(f"={matched[1]}")
            i += matched[0]
            continue
        if words[i] not in STOPWORDS and not words[i].isdigit() and len(words[i]) > 1:
            out.add(word_stems[i])
        i += 1
    for run in CJK_RUN.findall(text):
        out.update(t.label for t in _cjk_terms(run, synonyms))
    return out


def _synonym_at(word_stems: list[str], i: int, synonyms: Synonyms) -> tuple[int, int] | None:
    for length in range(min(synonyms.longest, len(word_stems) - i), 0, -1):
        group = synonyms.by_stems.get(tuple(word_stems[i : i + length]))
        if group is not None:
            return length, group
    return None


def _splits(word: str, df: Callable[[str], int]) -> list[tuple[str, str]]:
    """``checkpointing`` → ``check pointing`` when the journal has both words (at most two)."""
    out = []
    for cut in range(3, len(word) - 1):
        a, b = word[:cut], word[cut:]
        if len(b) >= 2 and df(stem(a)) > 0 and df(stem(b)) > 0:
            out.append((a, b))
            if len(out) == 2:
                break
    return out


def _cjk_terms(run: str, synonyms: Synonyms) -> list[Term]:
    """A run of Chinese: glossary words (longest first), the rest split at question words."""
    terms: list[Term] = []
    rest: list[str] = []
    i = 0
    longest = max((len(k) for k in synonyms.by_cjk), default=1)
    while i < len(run):
        for length in range(min(longest, len(run) - i), 1, -1):
            group = synonyms.by_cjk.get(run[i : i + length])
            if group is not None:
                terms.append(
                    Term(
                        run[i : i + length],
                        [phrase(run[i : i + length]), *synonyms.alternatives(group)],
                    )
                )
                rest.append(" ")
                i += length
                break
        else:
            rest.append(run[i])
            i += 1
    leftover = "".join(rest)
    for word in CJK_STOPWORDS:
        leftover = leftover.replace(word, " ")
    for piece in leftover.split():
        if len(piece) <= 3:
            if len(piece) >= 2 or len(run) == 1:
                terms.append(Term(piece, [phrase(piece)]))
        else:  # an unknown long run: its overlapping character pairs, each a term
            terms += [
                Term(piece[k : k + 2], [phrase(piece[k : k + 2])]) for k in range(len(piece) - 1)
            ]
    return terms


def _dedupe(terms: list[Term]) -> list[Term]:
    seen: set[str] = set()
    out = []
    for term in terms:
        key = term.fts()
        if key not in seen:
            seen.add(key)
            out.append(term)
    return out


def edit_distance(a: str, b: str, limit: int) -> int:
    """Damerau–Levenshtein (adjacent transpositions), giving up past ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


# Document frequencies of the stems queries asked about, for the index built from one state of
# the journal (its size and mtime): a long-lived process (the MCP server, the runtime) analyses
# the same words again and again, and each fts5vocab lookup costs about 0.2 ms.
_VOCABULARY: dict[Path, tuple[tuple[str, str], dict[str, int]]] = {}
_VOCABULARY_MAX = 50_000


def vocabulary_cache(path: Path, size: str, mtime_ns: str) -> dict[str, int]:
    state, known = _VOCABULARY.get(path, (None, {}))
    if state != (size, mtime_ns) or len(known) > _VOCABULARY_MAX:
        known = {}
        _VOCABULARY[path] = ((size, mtime_ns), known)
    return known
