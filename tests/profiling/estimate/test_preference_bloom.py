"""torchtune's DPO step (--dpo) on BLOOM with LoRA: the reference's forward under no_grad at its
last block's MLP (profiling.estimate.preference_bloom) — BLOOM LoRA q,v mixed read 0.955 of the
trace (audit4 D50, −90,678 B), then, with the trace's fused q/k/v adapter disabled in the
reference's forward as torchtune's ``disable_adapter`` disables every adapter (it had run the
adapter's fp32 update there), 0.981 (−37,430 B); now equal to the byte. At seq 128 the last
block's attention leads (``preference_bloom.ATTENTION``, audit6 D65): q,v fp32 0.961, bf16 0.951
(−262,144 B each) -> equal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from profiling.config import TrainingConfig
from profiling.estimate import preference_bloom
from profiling.estimate.memory import estimate

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

BLOOM = {"model_type": "bloom", "vocab_size": 128, "hidden_size": 128, "n_layer": 2, "n_head": 4}
# audit5's bloom-base: h 64, V 512, 4 heads
BASE64 = {**BLOOM, "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160}
QV = {"lora_rank": 4, "lora_targets": ["q", "v"]}
# (config, fields, the moment or None: any; equal to the byte): the old ratio in the comment
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], str | None]] = {
    "q,v mixed 32x2": (BLOOM, {"precision": "mixed", **QV}, preference_bloom.NAME),  # 0.955
    "q,v bf16 64x4": (BLOOM, {"precision": "bf16", "seq": 64, "batch": 4, **QV},
                      preference_bloom.NAME),
    "all-linear mixed": (BLOOM, {"precision": "mixed", "lora_rank": 4,
                                 "lora_targets": ["all-linear"]}, None),  # 0.988
    "q,v fp32": (BLOOM, {"precision": "fp32", **QV}, None),
    "full bf16": (BLOOM, {"precision": "bf16"}, None),  # the frozen copy as the reference
    # the reference's last block's attention (three s² locals) at seq 128 (audit6 D65)
    "q,v fp32 128x2 h 64": (BASE64, {"precision": "fp32", "seq": 128, **QV},
                            preference_bloom.ATTENTION),  # 0.961
    "q,v bf16 128x2 h 64": (BASE64, {"precision": "bf16", "seq": 128, **QV},
                            preference_bloom.ATTENTION),  # 0.951
    "q,v mixed --dropout 128x2 h 64": (BASE64, {"precision": "mixed", "seq": 128,
                                                "dropout": 0.1, **QV}, None),  # 0.956
    "full bf16 128x2 h 64": (BASE64, {"precision": "bf16", "seq": 128}, None),
}  # fmt: skip
# D65's lm_head, lora_dropout, --dropout and Adafactor: the dropouts' masks a bound above
D65_LMH = {"precision": "fp32", "seq": 128, "lora_rank": 4, "lora_dropout": 0.1, "dropout": 0.1,
           "lora_targets": ["q", "v", "lm_head"], "optimizer": "adafactor"}  # fmt: skip


def test_the_references_attention_with_lm_head_and_dropout(tmp_path: Path) -> None:
    """0.917 of the trace before (−720,416 B); now above by the dropouts' bytes at most."""
    from profiling.trace.step import trace_step

    cfg = _config(tmp_path, BASE64, **D65_LMH)
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.peak_moment == preference_bloom.ATTENTION
    assert 0 <= est.per_gpu_bytes - traced.peak_bytes <= 1_024


def _config(tmp_path: Path, shape: dict[str, Any], **kw: Any) -> TrainingConfig:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(shape), encoding="utf-8")
    values = {"model": f"hf:{path}", "seq": 32, "batch": 2, "dpo": True, **kw}
    return TrainingConfig.parse(style="field", **values)


@pytest.mark.parametrize("case", list(CASES))
def test_the_references_mlp_equals_the_trace(tmp_path: Path, case: str) -> None:
    from profiling.trace.step import trace_step

    config, fields, moment = CASES[case]
    cfg = _config(tmp_path, config, **fields)
    est, traced = estimate(cfg), trace_step(cfg)
    if moment is not None:
        assert est.peak_moment == moment
    assert est.per_gpu_bytes == traced.peak_bytes, est.per_gpu_bytes - traced.peak_bytes


def test_the_reference_runs_no_fused_adapter() -> None:
    """torchtune's ``disable_adapter`` (torchtune/modules/peft/_utils.py) sets ``disabled`` on
    every adapter module: the fused q/k/v's adapter returns its base's output alone there."""
    import torch
    from torch import nn

    from profiling.trace.lora_neox import FusedQKVLoRA
    from profiling.trace.preference import adapters_off

    base = nn.Linear(8, 24)
    layer = FusedQKVLoRA(base, (8, 8, 8), (True, False, True), 2, 0.0, torch.float32)
    nn.init.normal_(layer.lora_A)
    nn.init.normal_(layer.lora_B)
    model = nn.Sequential(layer)
    x = torch.randn(2, 3, 8)  # (batch, tokens, hidden)
    with torch.no_grad():
        assert not torch.equal(model(x), base(x))
        with adapters_off(model):
            assert torch.equal(model(x), base(x))
        assert not torch.equal(model(x), base(x))  # on again after
