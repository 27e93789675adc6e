"""Our blocks' eager attention (``--attention eager`` on gpt2-*, llama-*, tiny-* and Hugging Face
configs projected on our blocks) in the closed form against the trace, per category and at the
peak. The blocks' softmax keeps its output and no logsumexp (SDPA's), and each block builds a
causal mask (``torch.ones(t, t, dtype=bool).triu(1)``, or a window's negated mask) that
``masked_fill`` keeps for backward (profiling/models/blocks.py ``_attend``): s² bytes a block,
whatever the batch and dtype. The closed form counted a logsumexp and no mask: gpt2-small fp32
at batch 2, seq 512 was 2,555,904 B (12 · (512² − 4·12·2·512)) short of the trace's
activations, its peak 0.99916 of the trace's, hidden only by the allocated counter's unsplit
rests. The loss and nll_loss's total weight, two fp32 scalars (8 B), are counted too
(``estimate.step_scalars``): equal to the byte."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import step_scalars
from profiling.estimate.memory import estimate

pytest.importorskip("torch")


WINDOW = {
    "model_type": "mistral", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "sliding_window": 16,
}  # fmt: skip

CASES = {
    # the configuration the H200 rows were read at: 2,555,904 B short before
    "gpt2-small-fp32": {"model": "gpt2-small", "precision": "fp32", "batch": 2, "seq": 512},
    "tiny-llama-fp32": {"model": "tiny-llama", "batch": 2, "seq": 128},  # grouped-query
    "tiny-llama-amp-cpu": {"model": "tiny-llama", "batch": 2, "seq": 64, "precision": "amp-bf16",
                           "target": "cpu"},
    "tiny-gpt2-bf16": {"model": "tiny-gpt2", "batch": 4, "seq": 128, "precision": "bf16"},
    # a sliding window: every layer keeps its negated window mask, SDPA's mask none
    "window-cuda": {"hf": WINDOW, "batch": 2, "seq": 64},
    "window-cpu-amp": {"hf": WINDOW, "batch": 2, "seq": 64, "precision": "amp-bf16",
                       "target": "cpu"},
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_eager_blocks_are_the_trace(case: str, tmp_path: Path) -> None:
    from profiling.models.hf_module import project_blocks
    from profiling.trace.step import trace_step

    fields = {"target": "cuda", **CASES[case]}
    blocks = contextlib.nullcontext()
    if "hf" in fields:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(fields.pop("hf")), encoding="utf-8")
        fields["model"], blocks = f"hf:{path}", project_blocks()
    cfg = TrainingConfig(optimizer="adamw", attention="eager", **fields)
    with blocks:
        traced = trace_step(cfg, block_scaling=False)
        est = estimate(cfg)
    kept = traced.phases["after_forward"]["activations"]
    assert kept == est.category_bytes("activations")
    assert traced.peak_bytes == est.per_gpu_bytes


@pytest.mark.parametrize(("checkpointing", "kept"), [("none", 2 * 64 * 64), ("selective", 0)])
def test_the_mask_is_whole_on_every_tensor_parallel_rank(checkpointing: str, kept: int) -> None:
    """Each rank's attention runs over the whole sequence and builds the whole s² mask: tensor
    parallelism splits the probabilities over the heads, not the mask (selective checkpointing
    recomputes both)."""

    def acts(tp: int, attention: str) -> float:
        cfg = TrainingConfig(
            model="tiny-gpt2", batch=2, seq=64, attention=attention, tp=tp, gpus=tp,
            checkpointing=checkpointing,
        )  # fmt: skip
        est = estimate(cfg)  # the blocks' tensors: SDPA's seeds (``step_scalars``) aside
        return est.category_bytes("activations") - sum(
            c.bytes for c in est.components if c.name.startswith(step_scalars.PREFIX)
        )

    one = acts(1, "eager") - acts(1, "sdpa")
    four = acts(4, "eager") - acts(4, "sdpa")
    probs = one - kept
    assert four == pytest.approx(kept + probs / 4)
