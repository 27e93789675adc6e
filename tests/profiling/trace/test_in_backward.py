"""The optimizer in backward (torchtune's optimizer_in_bwd), traced with a hook per parameter and
estimated: no gradient is left after backward, and where the step after backward was the peak
the peak falls, by as much in the estimate as in the trace."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step


@pytest.mark.parametrize("precision", ["bf16", "fp32", "amp-bf16"])
def test_optimizer_in_bwd_frees_every_gradient(precision: str) -> None:
    # Eight tokens: the optimizer step (gradients + Adam's scratch) is the step's peak.
    base = TrainingConfig(model="tiny-llama", seq=8, batch=1, precision=precision, target="cpu")
    inside = base.model_copy(update={"optimizer_in_bwd": True})
    traced = {n: trace_step(c) for n, c in (("after", base), ("inside", inside))}
    est = {n: estimate(c) for n, c in (("after", base), ("inside", inside))}
    assert traced["after"].peak_phase == "optimizer_step"
    assert traced["inside"].after_step["gradients"] == 0
    assert est["inside"].category_bytes("gradients") == 0
    assert traced["inside"].model_info == traced["after"].model_info
    for name in ("after", "inside"):
        ratio = est[name].per_gpu_bytes / traced[name].peak_bytes
        assert ratio == pytest.approx(1.0, abs=0.01), (name, ratio)
        for category in ("parameters", "optimizer", "activations"):
            seen = traced[name].phases["after_forward"][category]
            assert est[name].category_bytes(category) == pytest.approx(seen, rel=0.001)
    fell = traced["after"].peak_bytes - traced["inside"].peak_bytes
    assert fell > 0.1 * traced["after"].peak_bytes
    assert est["after"].per_gpu_bytes - est["inside"].per_gpu_bytes == pytest.approx(fell, rel=0.02)
    assert any("optimizer in backward" in n for n in traced["inside"].notes)


def test_optimizer_in_bwd_has_no_master_copy_to_step() -> None:
    with pytest.raises(ConfigError, match="--optimizer-in-bwd"):
        TrainingConfig.parse(model="tiny-llama", precision="mixed", optimizer_in_bwd=True)
