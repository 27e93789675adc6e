"""torchao's 8-bit AdamW as a torchtune config names it (issue #31): which tensors get 8-bit
states (torchao's ``_new_buffer``: 4,096 values or more *and* a count that divides by 256; the
others a copy in the parameter's dtype) and what its compiled step holds (both new states and
scales in fp32, measured on an H200: ``profiling.estimate.torchao_optim``) — the estimate's
closed form against the trace's stand-in, at the moment the step is the peak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError
from profiling.estimate.memory import estimate
from profiling.estimate.torchao_optim import quantized, state_bytes, step_scratch
from profiling.models.hf_module import project_blocks
from profiling.recipes import read_recipe
from profiling.trace.step import trace_step

# A small Llama with each branch of the rule: the embedding and the LM head (2048 × 64) and
# q, o (64 × 64) divide by 256; gate, up, down (162 × 64 = 10,368) are over 4,096 values but do
# not; k, v (2,048) and the norms are under 4,096.
ODD = {
    "model_type": "llama", "vocab_size": 2048, "hidden_size": 64, "intermediate_size": 162,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "tie_word_embeddings": False,
}  # fmt: skip
FIXTURES = Path(__file__).parents[1] / "recipes" / "fixtures"


def _model(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(ODD), encoding="utf-8")
    return f"hf:{path}"


@pytest.mark.parametrize(
    ("precision", "in_bwd"), [("bf16", False), ("fp32", False), ("bf16", True)]
)
def test_torchao_states_and_step_estimate_equals_trace(
    tmp_path: Path, precision: str, in_bwd: bool
) -> None:
    """A short sequence, so the step is the peak: the states to the byte, the peak within the
    few bytes the estimate leaves out, and the step's scratch the fp32 buffers of the largest
    8-bit tensor (the LM head), which the old estimate (bitsandbytes' in-place step) lacked."""
    optimizer = {"optimizer": "adam8bit", "torchao_optim": True, "optimizer_in_bwd": in_bwd}
    cfg = TrainingConfig(model=_model(tmp_path), seq=4, batch=1, precision=precision, **optimizer)
    with project_blocks():
        est, traced = estimate(cfg), trace_step(cfg)
    numels = est.shape["param_numels"]
    assert {quantized(n) for n, _ in numels} == {True, False}
    assert any(n >= 4096 and not quantized(n) for n, _ in numels)  # the plain-state branch
    e = 2 if precision == "bf16" else 4
    assert est.category_bytes("optimizer") == 2 * sum(state_bytes(n, e) * c for n, c in numels)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in ("parameters", "gradients", "optimizer"):
        assert est.category_bytes(category) == seen[category], category
    scratch = step_scratch(2048 * 64)
    assert est.category_bytes("temporaries") == scratch == 8 * 2048 * 64 + 8 * 512
    assert "stepped" in est.peak_moment if in_bwd else est.peak_moment == "optimizer step"
    assert 0 <= traced.peak_bytes - est.per_gpu_bytes <= 64
    if not in_bwd:  # the step's own peak: the states it keeps plus the head's buffers
        step = traced.phase_peaks["optimizer_step"]
        assert step - traced.phases["after_optimizer_step"]["total"] == scratch


def test_torchtune_names_torchao_optimizer(tmp_path: Path) -> None:
    """torchtune's `optimizer=torchao.prototype.low_bit_optim.AdamW8bit` (its docs' example)
    sets torchao's rule; bitsandbytes' class of the same name does not."""
    text = (FIXTURES / "torchtune" / "1B_full_single_device.yaml").read_text()
    for component, torchao in (
        ("torchao.prototype.low_bit_optim.AdamW8bit", True),
        ("torchao.optim.AdamW8bit", True),
        ("bitsandbytes.optim.AdamW8bit", False),
    ):
        path = tmp_path / "c.yaml"
        path.write_text(text.replace("bitsandbytes.optim.PagedAdamW8bit", component))
        values = read_recipe([path]).values
        assert values["optimizer"] == "adam8bit"
        assert values.get("torchao_optim", False) is torchao, component
        assert "paged_optimizer" not in values


def test_torchao_optim_describes_adam8bit_only() -> None:
    with pytest.raises(ConfigError, match="torchao_optim describes optimizer adam8bit"):
        TrainingConfig(model="tiny-llama", torchao_optim=True)
    with pytest.raises(ConfigError, match="without paged_optimizer"):
        TrainingConfig(
            model="tiny-llama", optimizer="adam8bit", paged_optimizer=True, torchao_optim=True
        )


@pytest.mark.parametrize(
    ("optim", "torchao"),
    [("adamw_torch_8bit", True), ("adamw_torch_4bit", True), ("adamw_bnb_8bit", False)],
)
def test_trainer_names_torchao_optimizer(tmp_path: Path, optim: str, torchao: bool) -> None:
    """The Trainer's `adamw_torch_8bit`/`_4bit` are torchao's classes (transformers'
    _TORCHAO_OPTIMIZERS); `adamw_bnb_8bit` is bitsandbytes'."""
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"output_dir": "out", "per_device_train_batch_size": 1,
                                "optim": optim}))  # fmt: skip
    values = read_recipe([path]).values
    assert values["optimizer"] == "adam8bit"
    assert values.get("torchao_optim", False) is torchao
