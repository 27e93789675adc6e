"""SDPA with ``--dropout`` on the CPU target (``estimate.cpu_sdpa``): torch's CPU flash kernel
refuses dropout and its math path keeps the s² scores and probabilities, which the estimate did
not count — 0.73-0.84 of the trace (gpt2 V 512 toy fp32 0.838, amp-bf16 0.80, bf16 0.734; llama
amp-bf16 0.788; gpt_neox 0.812). Now refused in one sentence; eager attention on the CPU and
SDPA on CUDA stay estimated (eager: equal to the trace)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate

pytest.importorskip("transformers", reason="the hf extra is not installed")

GPT2 = {
    "model_type": "gpt2", "vocab_size": 512, "n_embd": 64, "n_inner": 160, "n_layer": 2,
    "n_head": 4, "n_positions": 512,
}  # fmt: skip
LLAMA = {
    "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "tie_word_embeddings": True,
}  # fmt: skip
NEOX = {**LLAMA, "model_type": "gpt_neox", "rotary_pct": 0.25}


def _config(tmp_path: Path, model: dict[str, object], **fields: object) -> TrainingConfig:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model), encoding="utf-8")
    values: dict[str, object] = {"model": f"hf:{path}", "seq": 64, "batch": 2, **fields}
    return TrainingConfig.parse(style="field", **values)


@pytest.mark.parametrize(
    ("model", "precision"),
    [(GPT2, "fp32"), (GPT2, "amp-bf16"), (GPT2, "bf16"), (LLAMA, "amp-bf16"), (NEOX, "fp32")],
)
def test_cpu_sdpa_with_dropout_is_refused_in_one_sentence(
    tmp_path: Path, model: dict[str, object], precision: str
) -> None:
    cfg = _config(tmp_path, model, precision=precision, target="cpu", dropout=0.1)
    with pytest.raises(ProfilingError, match="cannot model --dropout with SDPA on the CPU") as e:
        estimate(cfg)
    assert str(e.value).count(". ") == 0


def test_eager_on_the_cpu_and_sdpa_on_cuda_are_estimated(tmp_path: Path) -> None:
    from profiling.trace.step import trace_step

    eager = _config(tmp_path, GPT2, precision="amp-bf16", target="cpu", dropout=0.1,
                    attention="eager")  # fmt: skip
    assert estimate(eager).per_gpu_bytes == trace_step(eager).peak_bytes
    assert estimate(_config(tmp_path, GPT2, target="cuda", dropout=0.1)).per_gpu_bytes > 0
    assert estimate(_config(tmp_path, GPT2, target="cpu")).per_gpu_bytes > 0
