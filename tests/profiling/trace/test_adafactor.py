"""transformers' Adafactor as the Trainer runs it (``optim="adafactor"``): the estimate's
closed form, tensor by tensor, against a trace of transformers' own optimizer."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.estimate.shape import factored_values
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")


def _both(**kwargs):
    cfg = TrainingConfig(seq=64, batch=2, optimizer="adafactor", **kwargs)
    with project_blocks():
        return estimate(cfg), trace_step(cfg)


@pytest.mark.parametrize(
    ("model", "precision"),
    [
        ("tiny-llama", "bf16"),
        ("tiny-llama", "fp32"),
        ("tiny-gpt2", "mixed"),
        ("tiny-llama", "amp-bf16"),
    ],
)
def test_adafactor_estimate_equals_trace(model: str, precision: str) -> None:
    est, traced = _both(model=model, precision=precision)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    master = 4 * est.params if precision == "mixed" else 0
    # The factored second moment and an RMS per tensor, fp32 whatever the dtype: to the byte.
    assert est.category_bytes("optimizer") == seen["optimizer"]
    numels = est.shape["factored_numels"]
    tensors = sum(c for _, c in numels)
    assert seen["optimizer"] == master + 4 * sum(v * c for v, c in numels) + 4 * tensors
    for category in ("parameters", "gradients"):
        assert est.category_bytes(category) == seen[category]
    # The step: one tensor at a time; its scratch for the largest within 3 % of the trace's.
    step = next(m for m in est.moments if m.name == "optimizer step").bytes
    assert step == pytest.approx(traced.phase_peaks["optimizer_step"], rel=0.03)


def test_adafactor_under_lora_factors_each_adapter() -> None:
    pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    est, traced = _both(model="tiny-llama", precision="bf16", lora_rank=8)
    assert est.category_bytes("optimizer") == traced.phases["after_forward"]["optimizer"]


def test_factored_values_are_rows_plus_columns() -> None:
    assert factored_values((4096, 14336)) == 4096 + 14336
    assert factored_values((8, 14336, 4096)) == 8 * 14336 + 8 * 4096  # stacked experts
    assert factored_values((4096,)) == 4096


def test_adafactor_state_is_a_sliver_of_adams() -> None:
    """Llama 3.1 8B full bf16: AdamW's two moments are 2 · 2 B per value (32.1 GB); Adafactor's
    rows and columns 4 · (rows + cols) B per matrix and the vectors whole (12.6 MB)."""

    def states(optimizer: str) -> int:
        cfg = TrainingConfig(model="hf:llama-3.1-8b", precision="bf16", optimizer=optimizer)
        return estimate(cfg).category_bytes("optimizer")

    assert states("adafactor") < 0.001 * states("adamw")


def _wide(tmp_path, model_type: str) -> str:
    """A wide toy whose largest tensors are MLP matrices side by side (vocabulary 256, hidden
    256, MLP 1024): the step's highest is the previous update beside two of the next."""
    import json

    config = {
        "model_type": model_type, "vocab_size": 256, "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 1024, "max_position_embeddings": 512,
        "num_key_value_heads": 2, "tie_word_embeddings": True,
    }  # fmt: skip
    if model_type == "falcon":
        config.update(ffn_hidden_size=1024, new_decoder_architecture=False, multi_query=True)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


@pytest.mark.parametrize(
    ("model_type", "precision"),
    [("llama", "fp32"), ("llama", "bf16"), ("llama", "amp-bf16"), ("llama", "mixed"),
     ("falcon", "fp32")],
)  # fmt: skip
def test_the_previous_update_beside_the_next_two_is_counted(
    tmp_path, model_type: str, precision: str
) -> None:
    """transformers' Adafactor keeps the previous parameter's update while it squares the next
    gradient (3 MLP-sized tensors on a wide toy: 0.93-0.95 of the trace when 2 were counted),
    and a factored tensor's row and column factors beside its product (the embedding first)."""
    cfg = TrainingConfig(
        model=_wide(tmp_path, model_type), seq=16, batch=1, optimizer="adafactor",
        precision=precision,
    )  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    scalars = 4 * est.shape["param_tensors"] if precision == "mixed" else 0
    assert traced.peak_bytes <= est.per_gpu_bytes <= traced.peak_bytes + scalars
