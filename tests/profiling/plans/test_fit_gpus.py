"""``fit --gpus N``: one search of data parallelism (DDP, ZeRO-1/2/3, offload) and the
multi-axis plans (TP, CP, PP beside FSDP), one throughput model, one table in one set of units;
each row's numbers are what ``estimate`` prints for the same flags."""

from __future__ import annotations

import shlex

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.fit import usable
from profiling.fit_gpus import fit_gpus
from profiling.fit_plans import PlanCandidate, estimate_flags, fit_plans
from profiling.fit_render import fit_json, render_fit


@pytest.fixture(scope="module")
def two_nodes():
    # Llama 3.1 8B on 16 H100s (2 nodes), batch 2: data parallelism all-gathers and
    # reduce-scatters every parameter over the 50 GB/s network, which batch 2's compute does
    # not hide; a plan keeps FSDP and TP inside a node's NVLink and sends only activations
    # between the nodes
    return fit_gpus(TrainingConfig.parse(model="hf:llama-3.1-8b", gpus=16, batch=2, gpu="h100-sxm",
                                         precision="mixed"),
                    confirm=0)  # fmt: skip


def test_a_multi_axis_plan_wins_where_data_parallelism_waits_for_the_network(two_nodes) -> None:
    res = two_nodes
    best = res.fitting[0]
    assert isinstance(best, PlanCandidate) and best.config.tp * best.config.pp > 1
    dp = [c for c in res.fitting if not c.config.is_plan]
    assert dp, "data parallelism's candidates are in the same list"
    assert {c.config.zero for c in dp} >= {1, 2, 3}
    fastest_dp = max(c.tokens_per_second or 0 for c in dp)
    assert best.tokens_per_second is not None and best.tokens_per_second > 1.2 * fastest_dp
    # what decides: the data-parallel rows wait for the network, the plan does not (much)
    waits = {c.config.zero: c.exposed_seconds for c in dp if c.config.checkpointing == "none"}
    assert all(w is not None and w > 0.1 for w in waits.values())
    assert best.exposed_seconds is not None and best.exposed_seconds < 0.05
    assert res.plans > 0 and res.searched > res.plans


def test_one_table_in_one_set_of_units(two_nodes) -> None:
    res = two_nodes
    for c in res.fitting:
        assert c.world == 16  # the job's GPUs, data parallelism's and a plan's alike
        assert c.tokens_per_second == pytest.approx(16 * (c.tokens_per_gpu or 0))
        assert c.nvml_bytes <= usable(res.gpu_mem_bytes) and c.comm_bytes
    text = render_fit(res)
    head = next(line for line in text.splitlines() if line.lstrip().startswith("#"))
    for column in ("allocated", "nvidia-smi", "tokens/s", "/GPU", "sent/step", "comm wait"):
        assert column in head
    rows = fit_json(res)["fitting"]
    assert {r["plan"] for r in rows} == {True, False}
    assert all(r["gpus"] == 16 and r["tokens_per_second_per_gpu"] for r in rows)
    assert "estimate it (the same numbers): journal-agent estimate " in text
    assert "note: comm wait:" in text


def test_estimate_prints_the_numbers_fit_ranks_by(two_nodes, tmp_path, run_json) -> None:
    res = two_nodes
    plan = res.fitting[0]
    assert isinstance(plan, PlanCandidate)
    flags = [a for f in estimate_flags(plan.config) for a in shlex.split(f)]
    out = run_json("estimate", *flags, "--root", str(tmp_path), cwd=tmp_path)
    assert max(out["nvml_bytes"].values()) == plan.nvml_bytes
    assert out["per_gpu_bytes"] == plan.peak_bytes
    assert out["time"]["tokens_per_second"] == pytest.approx(plan.tokens_per_second)
    # a data-parallel row: `estimate --gpus 16 --zero k` is the same closed form
    dp = next(c for c in res.fitting if not c.config.is_plan)
    est = estimate(dp.config)
    assert est.time is not None and est.time.time is not None and est.counters is not None
    assert est.time.time.tokens_per_second == pytest.approx(dp.tokens_per_second)
    assert est.counters.must_fit() == dp.nvml_bytes


def test_zero2_wins_on_one_node_where_zero1_does_not_fit(tmp_path, run_cli) -> None:
    # 8B on 8 H100s of 48 GB, mixed, full checkpointing, batch 2 (held): ZeRO-1 keeps every
    # gradient (49.4 GB on nvidia-smi, over 45.6 usable); ZeRO-2 and ZeRO-3 fit and on one
    # node's NVLink compute hides their transfers (one speed), ZeRO-3 gathering once more: the
    # volume decides; a plan waits for TP's collectives or a pipeline's bubble
    args = ("fit", "--model", "hf:llama-3.1-8b", "--gpus", "8", "--gpu", "h100-sxm",
            "--gpu-mem", "48", "--precision", "mixed", "--checkpointing", "full",
            "--batch", "2", "--confirm", "0", "--root", str(tmp_path))  # fmt: skip
    base = TrainingConfig.parse(
        model="hf:llama-3.1-8b",
        gpus=8,
        gpu_mem=48,
        batch=2,
        checkpointing="full",
        gpu="h100-sxm",
        precision="mixed",
    )
    res = fit_gpus(base, confirm=0)
    best = res.fitting[0]
    assert not best.config.is_plan and best.config.zero == 2
    zero3 = next(c for c in res.fitting if not c.config.is_plan and c.config.zero == 3)
    assert zero3.tokens_per_second == pytest.approx(best.tokens_per_second)
    assert (zero3.comm_bytes or 0) > (best.comm_bytes or 0)
    full = [c for c in res.fitting if c.trains == "full" and not c.config.is_plan]
    on_gpu = {c.config.zero for c in full if not c.config.offload_optimizer}
    assert on_gpu == {2, 3}  # DDP and ZeRO-1 only with the optimizer offloaded
    plans = [c for c in res.fitting if c.config.is_plan]
    assert plans and max(c.tokens_per_second or 0 for c in plans) < (best.tokens_per_second or 0)
    out = run_cli(*args, cwd=tmp_path).stdout
    first = next(line for line in out.splitlines() if line.lstrip().startswith("1 "))
    assert first.endswith("mixed, batch 2, ZeRO-2, full checkpointing")


def test_fsdp2_cpu_offload_is_a_plan_candidate_with_its_host_memory() -> None:
    # llama-7b on 2 × 40 GB: FSDP 2 keeps 16 B a parameter / 2 on the GPU, over 40 GB; with
    # FSDP2's CPU offload (torchtitan's enable_cpu_offload) the shards, gradients and Adam's
    # state are on the host: 2 GPUs of a node × Ψ/2 × (4 + 4 + 8) B
    base = TrainingConfig.parse(model="llama-7b", seq=1024, gpu_mem=40, gpus=2)
    res = fit_plans(base, 2)
    assert res.fitting and all(c.config.offload_optimizer for c in res.fitting)
    best = res.fitting[0]
    from profiling.plans.closed_form import estimate_plan

    plan = estimate_plan(best.config)
    # and Adam's 0-d fp32 step per parameter tensor (32 blocks × 9, the embedding, norm, output)
    assert best.host_bytes == 2 * (plan.params // 2 * 16 + 4 * (32 * 9 + 3))
    assert best.nvml_bytes <= usable(res.gpu_mem_bytes)
    on_gpu = estimate_plan(best.config.model_copy(update={"offload_optimizer": False}))
    assert on_gpu.highest.peak_bytes > best.peak_bytes + plan.params * 12 // 2
    assert any("FSDP2's CPU offload" in n for n in res.notes)


def test_an_offloaded_plan_is_refused_by_the_trace_in_one_sentence() -> None:
    from profiling.errors import ProfilingError
    from profiling.plans.trace import trace_plan

    cfg = TrainingConfig.parse(model="llama-7b", seq=1024, dp_shard=2, offload_optimizer=True)
    with pytest.raises(ProfilingError, match=r"CPU offload .* is estimated, not traced"):
        trace_plan(cfg)
