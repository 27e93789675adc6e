"""A BERT sentence encoder in plain numpy: all-MiniLM-L6-v2 without torch or transformers.

``sentence-transformers`` would import torch and transformers (≈ 5 s) in every ``journal
search`` process; this forward pass needs numpy and the ``tokenizers`` package only, and gives
the same vectors (tests compare it with sentence-transformers on the same files). It reads any
sentence-transformers model directory whose transformer is a BERT (``model_type: bert``) with
mean or CLS pooling; other architectures go through sentence-transformers itself.
"""

from __future__ import annotations

import json
import math
import mmap
import struct
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}


def _layout(mapped: mmap.mmap) -> tuple[int, dict[str, Any]]:
    """A ``.safetensors`` file's data offset and header (name → dtype, shape, data_offsets)."""
    (size,) = struct.unpack("<Q", mapped[:8])
    header = json.loads(mapped[8 : 8 + size])
    header.pop("__metadata__", None)
    return 8 + size, header


def _tensors(mapped: mmap.mmap, skip: str = "") -> dict[str, np.ndarray]:
    """The tensors of a mapped ``.safetensors`` file but ``skip``, as views of it (no copy)."""
    base, header = _layout(mapped)
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name != skip:
            start, end = info["data_offsets"]
            array = _as_array(mapped, info["dtype"], name, end - start, base + start)
            out[name] = array.reshape(info["shape"])
    return out


def _as_array(buffer: Any, dtype_name: str, name: str, nbytes: int, offset: int = 0) -> np.ndarray:
    """``nbytes`` of ``buffer`` from ``offset`` as a flat array (BF16 widened to float32)."""
    dtype = _DTYPES.get(dtype_name)
    if dtype_name == "BF16":
        raw = np.frombuffer(buffer, dtype=np.uint16, count=nbytes // 2, offset=offset)
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if dtype is None:
        raise ValueError(f"unsupported tensor type {dtype_name} for {name}")
    count = nbytes // np.dtype(dtype).itemsize
    return np.frombuffer(buffer, dtype=dtype, count=count, offset=offset)


class _Vocabulary:
    """The word embeddings, read from the weights file row by row as a text needs them.

    A query reads a few of the 30,522 rows (1.5 kB each). Through a mapping of the file, each
    row read mapped the whole page-cache folio around it into the process — up to 2 MB where
    the kernel had cached the file in large folios (written or read sequentially on an
    unfragmented machine) — so the view server's memory (RSS) after bench_view's searches
    depended on the page cache: 215 MB, or 173 MB where the file was cached in small pages.
    Reading the rows costs one small read each (≈ 2 µs; a text has ≤ 256 tokens)."""

    def __init__(self, path: Path, offset: int, dtype_name: str, shape: list[int]) -> None:
        self.handle = open(path, "rb", buffering=0)  # noqa: SIM115 (held for the encoder's life)
        weakref.finalize(self, self.handle.close)  # closed with the encoder, never left to GC
        self.offset, self.dtype_name = offset, dtype_name
        self.rows, self.dim = int(shape[0]), int(shape[1])
        self.row_bytes = self.dim * (2 if dtype_name in ("F16", "BF16") else 4)
        self.lock = threading.Lock()  # seek + read on the one handle

    def __getitem__(self, ids: np.ndarray) -> np.ndarray:
        """``(len(ids), dim)`` rows, as indexing the matrix would give them."""
        chunks = []
        with self.lock:
            for i in ids.tolist():
                if not 0 <= i < self.rows:
                    raise IndexError(f"token id {i} is outside the vocabulary ({self.rows})")
                self.handle.seek(self.offset + i * self.row_bytes)
                chunks.append(self.handle.read(self.row_bytes))
        data = b"".join(chunks)
        if len(data) != len(chunks) * self.row_bytes:
            raise ValueError("the weights file is shorter than its header says")
        name = "embeddings.word_embeddings.weight"
        return _as_array(data, self.dtype_name, name, len(data)).reshape(len(chunks), self.dim)


class BertEncoder:
    """Token ids → sentence vectors, exactly as sentence-transformers computes them."""

    def __init__(self, model_dir: Path, weights: Path) -> None:
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        st_config = _json(model_dir / "sentence_bert_config.json")
        self.max_tokens = int(st_config.get("max_seq_length") or 256)
        pooling = _json(model_dir / "1_Pooling" / "config.json")
        self.cls_pooling = bool(pooling.get("pooling_mode_cls_token"))
        modules = _json(model_dir / "modules.json") or []
        self.normalize = any(str(m.get("type", "")).endswith("Normalize") for m in modules)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_tokens)
        with open(weights, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._load(weights, mapped)
        finally:
            self._unmap(mapped)

    def _load(self, weights: Path, mapped: mmap.mmap) -> None:
        """Our own copies of the weights the forward pass reads; the vocabulary's embeddings
        stay in the file (``_Vocabulary``). Nothing keeps a view of the mapping afterwards, so
        ``_unmap`` can drop it: its pages were a second copy of the layers' weights, counted
        in the process's memory (RSS) — ≈ 90 MB of a long-lived server's."""
        base, header = _layout(mapped)
        words = "embeddings.word_embeddings.weight"
        prefix = "bert." if "bert." + words in header else ""
        info = header[prefix + words]
        self.words = _Vocabulary(
            weights, base + info["data_offsets"][0], info["dtype"], info["shape"]
        )
        w = {k.removeprefix(prefix): v for k, v in _tensors(mapped, prefix + words).items()}
        self.dim = self.words.dim
        # Per layer, weights laid out for ``x @ W`` (contiguous, query/key/value fused): on
        # a short query the forward pass is bound by reading the weights, and a transposed
        # view halves the speed of the matmul.
        self.prepared = [_prepare(w, f"encoder.layer.{n}.") for n in range(self.layers)]
        kept = {k for k in w if not k.startswith("encoder.layer.")}
        kept |= {k for k in w if k.endswith(("LayerNorm.weight", "LayerNorm.bias"))}
        self.w = {k: np.array(w[k]) for k in kept}

    @staticmethod
    def _unmap(mapped: mmap.mmap) -> None:
        """Unmap the weights file; where a view of it is still alive (it cannot close), give
        its pages back to the page cache instead (Linux)."""
        try:
            mapped.close()
        except BufferError:
            if hasattr(mmap, "MADV_DONTNEED"):
                mapped.madvise(mmap.MADV_DONTNEED)

    def encode(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 vectors; unit length when the model normalizes."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # One BLAS thread: these matmuls are small, and on a busy machine several BLAS threads
        # spinning against other work made an entry take 1.3 s instead of 0.15 s.
        with one_blas_thread():
            # One text at a time: no padding, so no attention mask, and journal texts come
            # one per append anyway.
            for i, text in enumerate(texts):
                ids = self.tokenizer.encode(text).ids
                out[i] = self._forward(np.asarray(ids, dtype=np.int64))
        return out

    def _forward(self, ids: np.ndarray) -> np.ndarray:
        w = self.w
        n = ids.shape[0]
        x = (
            self.words[ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )  # (T, H)
        x = self._norm(x, "embeddings.LayerNorm")
        heads, size = self.heads, x.shape[1] // self.heads
        scale = 1.0 / math.sqrt(size)
        for layer, (qkv_w, qkv_b, o_w, o_b, i_w, i_b, d_w, d_b) in enumerate(self.prepared):
            p = f"encoder.layer.{layer}."
            qkv = (x @ qkv_w + qkv_b).reshape(n, 3, heads, size)  # (T, 3, heads, hs)
            q = qkv[:, 0].transpose(1, 0, 2)  # (heads, T, hs)
            k = qkv[:, 1].transpose(1, 2, 0)  # (heads, hs, T)
            v = qkv[:, 2].transpose(1, 0, 2)
            scores = (q @ k) * scale  # (heads, T, T)
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(n, heads * size)  # (T, H)
            x = self._norm(x + context @ o_w + o_b, p + "attention.output.LayerNorm")
            hidden = _gelu(x @ i_w + i_b)  # (T, 4H)
            x = self._norm(x + hidden @ d_w + d_b, p + "output.LayerNorm")
        vector = x[0] if self.cls_pooling else x.mean(axis=0)
        if self.normalize:
            vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
        return vector.astype(np.float32)

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[
            name + ".bias"
        ]


def _prepare(w: dict[str, np.ndarray], p: str) -> tuple[np.ndarray, ...]:
    """One layer's weights laid out for ``x @ W``, float32 copies (no view of the file)."""
    names = [p + f"attention.self.{n}" for n in ("query", "key", "value")]
    qkv_w = np.concatenate([w[n + ".weight"] for n in names], axis=0).T
    qkv_b = np.concatenate([w[n + ".bias"] for n in names])
    out = [np.ascontiguousarray(qkv_w, dtype=np.float32), qkv_b.astype(np.float32)]
    for name in ("attention.output.dense", "intermediate.dense", "output.dense"):
        out.append(np.ascontiguousarray(w[p + name + ".weight"].T, dtype=np.float32))
        out.append(np.array(w[p + name + ".bias"], dtype=np.float32))  # a copy: no view
    return tuple(out)


_CONTROLLER: Any = None


def one_blas_thread() -> Any:
    """A context limiting BLAS to one thread (the controller is found once per process:
    threadpoolctl's search of the loaded libraries costs ≈ 3 ms)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1)


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's exact GELU, x·Φ(x), with erf from the Abramowitz–Stegun 7.1.26 approximation
    # (error < 1.5e-7): numpy has no erf and scipy is a 40 MB import for one function.
    z = x / math.sqrt(2.0)
    sign = np.sign(z)
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = sign * (1.0 - poly * np.exp(-a * a))
    return 0.5 * x * (1.0 + erf)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
