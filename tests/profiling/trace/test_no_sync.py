"""FSDP's gradient accumulation without sync (--accumulate-unsharded N: FSDP1's no_sync, FSDP2's
set_requires_gradient_sync(False)), traced under a fake process group and in closed form: every
rank keeps the whole model's unsharded gradients through the micro-batches; the last one
reduce-scatters them, and the optimizer steps the shards alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError
from profiling.estimate.memory import estimate
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step


def _model(tmp_path: Path, hidden: int, tied: bool) -> str:
    config = {
        "model_type": "llama", "vocab_size": 2048, "hidden_size": hidden,
        "intermediate_size": 160, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 512, "tie_word_embeddings": tied,
    }  # fmt: skip
    path = tmp_path / f"config-{hidden}-{tied}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


def _cfg(model: str, precision: str, seq: int, n: int | None, **kw: object) -> TrainingConfig:
    return TrainingConfig(model=model, seq=seq, batch=1, precision=precision, fsdp=True, gpus=2,
                          target="cpu", accumulate_unsharded=n, **kw)  # fmt: skip


@pytest.mark.parametrize(("precision", "per"), [("bf16", 2), ("fp32", 4)])
def test_every_rank_keeps_the_whole_models_unsharded_gradients(
    tmp_path: Path, precision: str, per: int
) -> None:
    model = _model(tmp_path, 256, tied=False)
    with project_blocks():
        plain = trace_step(_cfg(model, precision, 16, None))
        two, four = (trace_step(_cfg(model, precision, 16, n)) for n in (2, 4))
    psi = plain.params
    for traced in (two, four):
        # The last micro-batch's forward holds every parameter's gradient, unsharded (Ψ, not
        # Ψ/2: sharding would halve it), where a step without accumulation holds none.
        assert traced.phases["after_forward"]["gradients"] == psi * per
        assert plain.phases["after_forward"]["gradients"] == 0
        # Its forward peak is the plain one plus exactly those gradients.
        assert traced.phase_peaks["forward"] == plain.phase_peaks["forward"] + psi * per
        # The last micro-batch reduce-scattered them: the optimizer steps the shards alone.
        assert traced.after_step == plain.after_step
        assert traced.phase_peaks["optimizer_step"] == plain.phase_peaks["optimizer_step"]
    assert four.peak_bytes >= two.peak_bytes
    assert any("micro-batch" in n or "steady state" in n for n in four.notes)


CASES = [
    ("untied bf16, the root gathered at forward's start", 256, False, "bf16", 16, 3, "none"),
    ("untied bf16, the loss", 64, False, "bf16", 32, 3, "none"),
    ("tied fp32 with full checkpointing, backward's end", 64, True, "fp32", 32, 3, "full"),
    ("tied bf16, two micro-batches", 256, True, "bf16", 16, 2, "none"),
    ("untied bf16 with full checkpointing, four micro-batches", 256, False, "bf16", 16, 4, "full"),
]


@pytest.mark.parametrize(("what", "hidden", "tied", "precision", "seq", "n", "ckpt"), CASES)
def test_the_estimate_follows_the_traced_rank(
    tmp_path: Path, what: str, hidden: int, tied: bool, precision: str, seq: int, n: int, ckpt: str
) -> None:
    cfg = _cfg(_model(tmp_path, hidden, tied), precision, seq, n, checkpointing=ckpt)
    with project_blocks():  # our blocks, traced and estimated
        traced = trace_step(cfg)
        est = estimate(cfg)
    # Never under by more than 0.1 % (a user told "fits" must fit), at most 4 % over (a bound
    # at backward's first block: the head's and a block's new gradients counted together).
    assert 0.999 <= est.per_gpu_bytes / traced.peak_bytes <= 1.04, (what, est.peak_moment)
    kept = [c for c in est.components if c.name.startswith("Unsharded gradients kept")]
    assert [c.bytes for c in kept] == [traced.phases["after_forward"]["gradients"]]
    sharded = est.category_bytes("gradients") - kept[0].bytes
    assert sharded == pytest.approx(traced.after_step["gradients"], rel=0.01)
    step = next(m for m in est.moments if m.name == "optimizer step")
    assert step.bytes == pytest.approx(traced.phase_peaks["optimizer_step"], rel=0.001)


def test_what_it_cannot_go_with_is_one_sentence() -> None:
    for extra, said in (
        ({}, "needs --fsdp --gpus N"),
        ({"fsdp": True, "gpus": 2, "grads_kept": True}, "with --grads-kept"),
        ({"fsdp": True, "gpus": 2, "lora_rank": 8}, "with --lora-rank"),
        ({"fsdp": True, "gpus": 2, "tp": 2}, "with --tp"),
        ({"fsdp": True, "gpus": 2, "dp_shard": 2}, "parallel plan"),
    ):
        with pytest.raises(ConfigError, match=said):
            TrainingConfig.parse(model="tiny-llama", accumulate_unsharded=4, **extra)
    with pytest.raises(ConfigError):
        TrainingConfig.parse(model="tiny-llama", fsdp=True, gpus=2, accumulate_unsharded=1)


def test_litgpt_full_on_many_gpus_accumulates_unsharded(tmp_path: Path) -> None:
    """LitGPT's full.py runs every micro-batch but the last under fabric.no_backward_sync, which
    Lightning's FSDPStrategy makes FSDP1's no_sync(); one GPU just keeps its gradients."""
    from profiling.recipes import read_recipe

    here = Path(__file__).resolve().parents[3] / "benchmarks" / "peer" / "configs" / "litgpt"
    gemma = read_recipe([here / "gemma-2b__full.yaml"])  # global 16, micro 1, 4 devices
    assert gemma.values["accumulate_unsharded"] == 4 and "grads_kept" not in gemma.values
    one = tmp_path / "one.yaml"
    one.write_text((here / "gemma-2b__full.yaml").read_text().replace("devices: 4", "devices: 1"))
    single = read_recipe([one]).values
    assert single["grads_kept"] is True and "accumulate_unsharded" not in single
    cfg = TrainingConfig.parse(**{**gemma.values, "seq": 512})
    est, without = estimate(cfg), estimate(cfg.model_copy(update={"accumulate_unsharded": None}))
    # 3.03B parameters (LitGPT's own lm_head) · 2 B on every one of the 4 ranks
    assert est.per_gpu_bytes - without.per_gpu_bytes > 4.5e9
    assert any(c.bytes == est.params * 2 for c in est.components)
