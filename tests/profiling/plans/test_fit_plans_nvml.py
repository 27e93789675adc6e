"""``fit --plans`` judges a plan by the nvidia-smi prediction ``estimate`` prints for it (the
reviewer's D3: fit's own closed form counted the whole local batch's logits on a pipeline's
last rank, where the schedule runs the loss one microbatch at a time — 68.08 GB against
estimate's 20.25 GB for FSDP 8 × TP 4 × PP 2, interleaved, 64 microbatches — so plans were
mis-ranked and wrongly rejected)."""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.fit_plans import fit_plans
from profiling.plans.closed_form import estimate_plan
from profiling.plans.report import rank_nvml


def test_a_plans_nvidia_smi_is_the_estimates() -> None:
    held = {"tp": 4, "pp": 2, "pp_schedule": "interleaved", "batch": 64}
    base = TrainingConfig.parse(model="hf:llama-3.1-8b", seq=2048, gpu="h100-sxm", gpus=64,
                                checkpointing="none", **held)  # fmt: skip
    res = fit_plans(base, 64)
    every = [*res.fitting, *([res.smallest] if res.smallest is not None else [])]
    cand = next(c for c in every if c.config.microbatches == 64 and c.config.dp_shard == 8)
    est = estimate_plan(cand.config)
    assert cand.nvml_bytes == max(rank_nvml(est, r) for r in est.ranks)
    assert cand.nvml_bytes < 30e9  # 68.08 GB before: the whole batch's logits
