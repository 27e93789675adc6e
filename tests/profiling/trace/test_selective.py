"""``--checkpointing selective`` traced (#32): each block's attention core (eager's QKᵀ,
softmax, dropout and ·V, or SDPA's fused call) runs under non-reentrant checkpointing
(``profiling.trace.selective``), and the estimate's selective step (Korthikanti et al.'s: the
core recomputed, its inputs kept) agrees with it per category and at the peak. The trace
refused selective before ("selective is estimated only"), so the estimate's figures were
unchecked: beside the real step they were over by SDPA's logsumexp and seed (GPT-2 bf16 2 × 128:
+8,240 B) and under by eager's 4-D mask the checkpoints keep (−65,536 B, 0.985 of the
activations)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.trace.report import compare
from profiling.trace.step import trace_step
from profiling.trace.untraceable import untraceable

_LLAMA = {
    "model_type": "llama", "vocab_size": 512, "hidden_size": 128, "intermediate_size": 352,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512,
}  # fmt: skip
_GPT2 = {"model_type": "gpt2", "vocab_size": 512, "n_embd": 128, "n_layer": 2, "n_head": 4,
         "n_positions": 512}  # fmt: skip


def _model(tmp_path: Path, config: dict[str, object]) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


def _rows(cfg: TrainingConfig) -> tuple[dict[str, tuple[int, int]], int, int]:
    c = compare(estimate(cfg), trace_step(cfg))
    rows = {r["category"]: (r["estimated_bytes"], r["traced_bytes"]) for r in c["rows"]}
    return rows, c["estimated_total"], c["traced_peak"]


@pytest.mark.parametrize(
    ("arch", "attention", "precision", "dropout", "lora"),
    [
        ("llama", "eager", "bf16", 0.1, False),
        ("llama", "sdpa", "mixed", 0.0, False),
        ("llama", "eager", "bf16", 0.0, True),
        ("gpt2", "eager", "fp32", 0.1, False),
        ("gpt2", "sdpa", "bf16", 0.0, False),
    ],
)
def test_a_traced_selective_step_keeps_what_the_estimate_says(
    tmp_path: Path, arch: str, attention: str, precision: str, dropout: float, lora: bool
) -> None:
    model = _model(tmp_path, _LLAMA if arch == "llama" else _GPT2)
    cfg = TrainingConfig(model=model, batch=2, seq=128, precision=precision, attention=attention,
                         dropout=dropout, checkpointing="selective",
                         lora_rank=8 if lora else None)  # fmt: skip
    rows, est_peak, traced_peak = _rows(cfg)
    for category, (est, traced) in rows.items():
        assert est == traced, category
    assert est_peak >= traced_peak


def test_selective_drops_eager_attention_s_squared_tensors(tmp_path: Path) -> None:
    """The recomputation is real: the traced step keeps less than without checkpointing."""
    model = _model(tmp_path, _LLAMA)

    def kept(mode: str) -> int:
        cfg = TrainingConfig(model=model, batch=2, seq=128, precision="bf16", attention="eager",
                             checkpointing=mode)  # fmt: skip
        return trace_step(cfg).phases["after_forward"]["activations"]

    # the probabilities (fp32 softmax + its bf16 copy) of 2 layers, 4 heads, 128² × 2, less
    # the 4-D mask the checkpoints keep, the keys/values no longer repeated
    assert kept("none") - kept("selective") > 2 * 4 * 128 * 128 * 2 * 6 * 0.9


def test_selective_is_traced_not_refused() -> None:
    cfg = TrainingConfig(model="tiny-llama", checkpointing="selective")
    assert untraceable(cfg) == []


def test_an_inline_attention_is_refused_in_one_sentence() -> None:
    """BLOOM writes its attention inline (baddbmm with ALiBi): no function to checkpoint."""
    cfg = TrainingConfig(model="hf:bloom-560m", batch=1, seq=16, checkpointing="selective",
                         layers=1)  # fmt: skip
    with pytest.raises(ProfilingError, match="--checkpointing selective is traced where"):
        trace_step(cfg)
