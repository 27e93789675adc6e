"""What a measured step holds is the user's step, not our instruments': the FLOP counter of
warm-up step 0 (audit6: a NeoX toy's headline read 4.0 MB at step 0's optimizer, where every
uncounted step peaked at 3.5 MB) and an earlier run in the same process (a library caller, the
MCP server) leave the measured bytes as they are."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.measure.run import RunOptions, measure_step


def _peaks(model: str, checkpointing: str, count_flops: bool) -> tuple[list[int], float]:
    config = TrainingConfig(model=model, batch=2, seq=32, checkpointing=checkpointing)
    options = RunOptions(steps=1, warmup=1, device="cpu", compare_trace=False,
                         count_flops=count_flops)  # fmt: skip
    run = measure_step(config, options)
    return [s.peak_bytes for s in run.summary.steps], run.profiler.flops_per_step or 0.0


@pytest.mark.parametrize("checkpointing", ["none", "full"])
@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-llama"])
def test_counting_flops_and_earlier_runs_change_no_measured_byte(
    model: str, checkpointing: str
) -> None:
    plain, no_flops = _peaks(model, checkpointing, False)
    counted, flops = _peaks(model, checkpointing, True)
    again, _ = _peaks(model, checkpointing, False)
    assert flops > 0 and no_flops == 0  # the counter ran in one run only
    assert counted == plain == again
