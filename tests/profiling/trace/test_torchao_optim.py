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
from profiling.estimate.torchao_optim import (
    first_step_autotune,
    quantized,
    state_bytes,
    step_scratch,
)
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
    scratch, first = step_scratch(2048 * 64), first_step_autotune(2048 * 64, e)
    assert est.category_bytes("temporaries") == scratch + first
    assert scratch == 8 * 2048 * 64 + 8 * 512 and first == 2048 * 64 * (e + 2) + 256 * 10**6
    assert "stepped" in est.peak_moment if in_bwd else est.peak_moment == "optimizer step"
    # The steady step (the trace's peak) without the first step's autotuning, to 64 B; the
    # first step's own peak under the estimate, by at most the states (those of tensors
    # stepped after the head are not made yet when its step compiles; the estimate counts all).
    assert 0 <= traced.peak_bytes - (est.per_gpu_bytes - first) <= 64
    assert 0 <= est.per_gpu_bytes - traced.first_step_peak_bytes <= est.category_bytes("optimizer")
    if not in_bwd:  # the step's own peak: the states it keeps plus the head's buffers
        step = traced.phase_peaks["optimizer_step"]
        assert step - traced.phases["after_optimizer_step"]["total"] == scratch


def test_first_step_autotuning_of_a_tied_embedding_stepped_last(tmp_path: Path) -> None:
    """torchtune's Llama 3.2 3B row (tied embedding, optimizer in backward): the embedding is
    stepped last, every other state made, and its shape's first compiled step autotunes — the
    clones of the parameter and both codes beside the benchmark's 256 MB L2 flush buffer on
    top of the fp32 buffers. The estimate's peak is that first step's, to the few bytes; the
    old one counted only the steady step's buffers (256.5 MB under it here)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**ODD, "tie_word_embeddings": True}), encoding="utf-8")
    optimizer = {"optimizer": "adam8bit", "torchao_optim": True, "optimizer_in_bwd": True}
    cfg = TrainingConfig(model=f"hf:{path}", seq=4, batch=1, precision="bf16", **optimizer)
    with project_blocks():
        est, traced = estimate(cfg), trace_step(cfg)
    first = first_step_autotune(2048 * 64, 2)
    assert est.peak_moment == "backward, the largest parameter stepped"
    assert 0 <= traced.first_step_peak_bytes - est.per_gpu_bytes <= 64
    assert 0 <= traced.peak_bytes - (est.per_gpu_bytes - first) <= 64
    assert traced.first_step_peak_bytes - traced.peak_bytes >= first - 64


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
