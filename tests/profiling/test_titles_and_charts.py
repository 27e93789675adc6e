"""Charts say the peak, keep their legend inside the picture, and every title says batch, length
and precision; a model factory's own default length is used unless --seq is given (issue #24)."""

from __future__ import annotations

import re
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from profiling import estimate_memory
from profiling.plot import plot_estimate

SVG = "{http://www.w3.org/2000/svg}"


def svg_texts(path: Path) -> tuple[list[tuple[str, float, float]], float, float]:
    """The SVG's words with where they start, and the picture's size (points)."""
    root = ET.parse(path).getroot()
    width = float(root.get("width", "0").removesuffix("pt"))
    height = float(root.get("height", "0").removesuffix("pt"))
    texts = []
    for node in root.iter(f"{SVG}text"):
        words = "".join(node.itertext()).strip()
        if words:
            texts.append((words, float(node.get("x", "0")), float(node.get("y", "0"))))
    return texts, width, height


def inside(texts, width: float, height: float, words: str) -> bool:
    (x, y) = next((x, y) for t, x, y in texts if t == words)
    # 8-point legend text: about 5 points per character.
    return x >= 0 and x + 5 * len(words) <= width and 0 <= y <= height


def test_the_estimate_chart_headline_is_the_peak_and_its_legend_is_inside(tmp_path):
    est = estimate_memory(model="llama-7b", precision="mixed", gpus=2, zero=2, gpu_mem=40)
    rows = sum(c.bytes for c in est.components)
    assert rows > est.per_gpu_bytes  # the rows never all coexist: their sum is not the peak
    texts, width, height = svg_texts(plot_estimate(est, tmp_path / "estimate.svg"))
    words = [t for t, _, _ in texts]
    assert f"Estimated peak per GPU: {est.per_gpu_bytes / 1e9:.2f} GB (does not fit)" in words
    assert not any(f"{rows / 1e9:.2f}" in w for w in words)
    title = next(w for w in words if w.startswith("llama-7b"))
    assert "seq 2048 × batch 1" in title and "mixed" in title
    for legend in (f"peak: {est.peak_moment}", "GPU memory 40 GB"):
        assert legend in words and inside(texts, width, height, legend), legend


FACTORY = textwrap.dedent(
    """
    import torch
    from torch import nn


    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(100, 16)
            self.out = nn.Linear(16, 100)

        def forward(self, ids):
            return self.out(self.emb(ids)).float().logsumexp(-1).mean()


    def tiny_lm(batch=2, seq=48):
        return TinyLM(), (torch.randint(0, 100, (batch, seq)),)


    def no_length(batch=2):
        return TinyLM(), (torch.randint(0, 100, (batch, 7)),)
    """
)


@pytest.fixture
def factory_dir(tmp_path, monkeypatch):
    (tmp_path / "my_factories.py").write_text(FACTORY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_factories", None)
    return tmp_path


def test_a_factory_is_traced_at_its_own_default_length_unless_seq_is_given(factory_dir, cli):
    out = cli(
        "trace", "--model", "my_factories:tiny_lm", "--plot", "trace.svg", "--root",
        str(factory_dir), cwd=factory_dir, check=True,
    ).stdout  # fmt: skip
    assert "Traced training step: my_factories:tiny_lm, seq 48 × batch 1, fp32," in out
    texts, width, height = svg_texts(factory_dir / "trace.svg")
    words = [t for t, _, _ in texts]
    assert any(re.fullmatch(r"Traced memory: peak \d+\.\d\d GB", w) for w in words), words
    assert "my_factories:tiny_lm, seq 48 × batch 1, fp32, adamw, target cuda" in words
    assert inside(texts, width, height, "parameters")
    given = cli(
        "trace", "--model", "my_factories:tiny_lm", "--seq", "16", "--root", str(factory_dir),
        cwd=factory_dir, check=True,
    ).stdout  # fmt: skip
    assert "my_factories:tiny_lm, seq 16 × batch 1, fp32," in given
    own = cli(
        "trace", "--model", "my_factories:no_length", "--root", str(factory_dir),
        cwd=factory_dir, check=True,
    ).stdout  # fmt: skip
    assert "my_factories:no_length, seq (the factory's own) × batch 1, fp32," in own


def test_a_traced_lora_step_is_titled_lora_and_an_unsaved_compare_cites_nothing(cli, tmp_path):
    # D56: the trace's title named model, shape, precision and optimizer only, so a QLoRA step
    # read as full training; D58: --no-save printed citations of records never kept.
    out = cli(
        "estimate", "--model", "tiny-llama", "--seq", "32", "--lora-rank", "4", "--qlora",
        "--precision", "bf16", "--attention", "eager", "--compare-trace", "--no-save",
        "--root", str(tmp_path), cwd=tmp_path, check=True,
    ).stdout  # fmt: skip
    head = next(line for line in out.splitlines() if line.startswith("Traced training step:"))
    assert "QLoRA r=4" in head and "eager attention" in head, head
    assert "Estimate beside trace (per GPU / per rank; not saved: nothing to cite):" in out
    assert "[m:" not in out
