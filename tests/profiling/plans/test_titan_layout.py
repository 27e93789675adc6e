"""What torchtitan runs beside tensor or pipeline parallelism without FSDP (pytorch/torchtitan
torchtitan/models/llama3/parallelize.py and torchtitan/distributed/utils.py before e1847f4):
DDP's replicas only on a one-dimensional mesh ("DDP has not supported > 1D parallelism"), and
no mixed precision ("Mixed precision training is disabled": fp32). A plan of DDP's replicas
beside TP or PP was estimated with no gradient buckets: refused in one sentence now (``fit
--plans --gpus N`` lays N GPUs out and is not refused). A plan's explicit ``mixed`` there
stays 16-bit weights with an fp32 master copy (Megatron's way, which the pipeline tests hold
to the trace) and says in a note that torchtitan's step is fp32."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig, parse_config
from profiling.errors import ProfilingError
from profiling.plans.closed_form import estimate_plan

SHAPE = {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 512, "vocab": 2048,
         "arch": "llama", "seq": 128, "batch": 2}  # fmt: skip


@pytest.mark.parametrize(
    ("plan", "flag"),
    [
        ({"dp_replicate": 2, "tp": 2}, "--dp-replicate 2 beside --tp 2"),
        ({"dp_replicate": 2, "pp": 2}, "--dp-replicate 2 beside --pp 2"),
        ({"dp_replicate": 2, "tp": 2, "pp": 2}, "--dp-replicate 2 beside --tp 2 and --pp 2"),
        ({"gpus": 2, "pp": 2}, "--gpus 2 beside --pp 2"),  # a plain --gpus N: DDP's replicas
    ],
)
def test_ddp_beside_tp_or_pp_is_refused_as_torchtitan_refuses_it(plan: dict, flag: str) -> None:
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**SHAPE, precision="fp32", **plan)
    for run in (estimate_plan, trace_plan):
        with pytest.raises(ProfilingError) as err:
            run(cfg)
        text = str(err.value)
        assert text.startswith(flag) and "DDP has not supported > 1D parallelism" in text
        assert "\n" not in text and text.count(". ") == 0  # one sentence


@pytest.mark.parametrize(
    "plan",
    [
        {"dp_replicate": 2},  # DDP alone (profiling.plans.ddp_replicate)
        {"dp_replicate": 2, "dp_shard": 2, "tp": 2},  # HSDP beside TP
        {"dp_shard": 2, "pp": 2},  # FSDP beside a pipeline
        {"fsdp": True, "gpus": 2, "cp": 2, "tp": 2},  # FSDP over the cp ranks
    ],
)
def test_what_torchtitan_runs_is_still_run(plan: dict) -> None:
    estimate_plan(parse_config(**SHAPE, precision="bf16", **plan))


@pytest.mark.parametrize("plan", [{"tp": 2, "dp_shard": 1}, {"pp": 2}, {"tp": 2, "pp": 2}])
def test_mixed_beside_tp_or_pp_without_fsdp_says_it_is_not_torchtitans_step(plan: dict) -> None:
    # torchtitan's maybe_enable_amp turns mixed precision off there (its step is fp32); the
    # plan runs the 16-bit weights with an fp32 master copy asked for, and says so
    def said(cfg: TrainingConfig) -> list[str]:
        return [n for n in estimate_plan(cfg).notes if "Megatron's way" in n]

    note = said(parse_config(**SHAPE, precision="mixed", **plan))
    assert len(note) == 1 and "Mixed precision training is disabled" in note[0]
    assert "--precision fp32" in note[0]
    assert not said(parse_config(**SHAPE, precision="fp32", **plan))  # torchtitan's step
    assert not said(parse_config(**SHAPE, precision="mixed", **{**plan, "dp_shard": 2}))


def test_fit_lays_out_the_gpus_it_is_given() -> None:
    # fit --plans --gpus N: N GPUs to lay out (TP × PP × FSDP), not DDP's replicas
    from profiling.fit_plans import fit_plans

    base = TrainingConfig.parse(model="llama-1b", seq=2048, gpu_mem=80, batch=8, gpus=8, tp=2,
                                pp=2)  # fmt: skip
    res = fit_plans(base, 8)
    assert res.fitting and all(c.config.tp == 2 and c.config.pp == 2 for c in res.fitting)
