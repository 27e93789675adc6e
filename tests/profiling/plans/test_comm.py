"""Communication in a plan's output: NCCL's buffers per communicator in nvidia-smi's count, the
bytes a GPU sends per step (held to the ZeRO paper's and Korthikanti et al.'s volumes), the
links they cross, and ``fit --plans`` ranking by a step time that waits for what compute does
not hide."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.comm import PER_COMMUNICATOR, comm, groups, nccl_bytes
from profiling.estimate.counters import CONTEXT
from profiling.estimate.shape import shape_of
from profiling.fit_plans import compute_time, fit_plans
from profiling.plans.closed_form import estimate_plan
from profiling.plans.report import plan_json, plan_record, rank_counters, rank_nvml, render_plan
from profiling.plans.step_compute import plan_time

MiB = 2**20
TP = "TP all-gathers and reduce-scatters of each block's activations"


def _cfg(**values: object) -> TrainingConfig:
    return TrainingConfig.parse(style="field", **{"model": "llama-7b", **values})


def _sent(cfg: TrainingConfig) -> dict[str, int]:
    return {t.name.split(" (")[0]: t.bytes for t in comm(cfg, shape_of(cfg)).transfers}


def test_each_process_group_of_the_mesh_is_one_communicator_of_256_mib() -> None:
    plan = _cfg(dp_shard=4, dp_replicate=2, tp=2, cp=2, pp=2, batch=4, precision="mixed")
    assert [g.name for g in groups(plan)] == ["TP", "CP", "FSDP", "DP-replicate", "PP"]
    assert nccl_bytes(plan) == 5 * PER_COMMUNICATOR
    # a pipeline adds its communicator, nothing else
    flat = _cfg(dp_shard=8, tp=2, batch=4, precision="mixed")
    piped = _cfg(dp_shard=4, tp=2, pp=2, batch=4, precision="mixed")
    assert nccl_bytes(piped) - nccl_bytes(flat) == PER_COMMUNICATOR
    # without a plan: the data-parallel group and tensor parallelism's; one GPU has none
    assert nccl_bytes(_cfg(gpus=8, zero=3)) == PER_COMMUNICATOR
    assert nccl_bytes(_cfg(gpus=4, tp=2)) == 2 * PER_COMMUNICATOR
    assert nccl_bytes(_cfg()) == 0


@pytest.mark.parametrize(
    ("given", "same"),
    [
        ({"fsdp": True, "gpus": 4}, {"dp_shard": 4}),  # --fsdp --gpus N is --dp-shard N
        ({"fsdp": True, "gpus": 2, "cp": 2}, {"dp_shard": 2, "cp": 2}),
    ],
)
def test_a_plan_given_by_gpus_communicates_as_the_same_plan_given_by_its_degrees(
    given: dict, same: dict
) -> None:
    # The layout read --fsdp --gpus 4 --pp 2 as FSDP 4, the communicators and the reserve read
    # only --dp-shard: FSDP's communicator (256 MiB of nvidia-smi), its gathers and
    # reduce-scatters (1.24 GB of llama-1b's 1.43 GB a step) and its gradients' sharding went
    # missing from the same plan's nvidia-smi.
    kw = {"model": "llama-1b", "tp": 2, "pp": 2, "batch": 2, "seq": 512, "precision": "mixed"}
    a, b = _cfg(**kw, **given), _cfg(**kw, **same)
    assert [g.name for g in groups(a)] == [g.name for g in groups(b)]
    assert len(groups(b)) == 3 + ("cp" in same)  # TP, (CP,) FSDP or DP-replicate, PP
    assert nccl_bytes(a) == nccl_bytes(b) == len(groups(b)) * PER_COMMUNICATOR
    assert _sent(a) == _sent(b)
    ra, rb = estimate_plan(a), estimate_plan(b)
    assert [rank_nvml(ra, r) for r in ra.ranks] == [rank_nvml(rb, r) for r in rb.ranks]


def test_a_plan_ranks_nvidia_smi_counts_the_buffers_of_its_communicators() -> None:
    cfg = _cfg(dp_shard=4, tp=2, pp=2, batch=4, precision="mixed")
    res = estimate_plan(cfg)
    for r in res.ranks:
        nvml = rank_nvml(res, r)
        layers = sum(res.layout.stages[i].layers for i in r.stages)
        # the rank's reserve as its counters make it (a microbatch's logits on the last stage)
        reserved = rank_counters(res, r).reserved.bytes
        # above the reserve by the context and exactly three communicators (FSDP, TP, PP)
        assert nvml - CONTEXT - 3 * PER_COMMUNICATOR >= reserved
        assert nvml - CONTEXT - 3 * PER_COMMUNICATOR < reserved + 2 * MiB + 300 * layers * 12
    text = render_plan(res)
    assert "nvidia-smi" in text.splitlines()[2]
    assert "NCCL buffers: 768 MiB in nvidia-smi's count = 3 communicator(s)" in text
    names = {q.name: q.value for q in plan_record(res).results}
    assert names["NCCL buffers"] == 768 * MiB
    assert names["sent per GPU per step"] == comm(cfg, shape_of(cfg), res.params).bytes
    assert names[f"pp rank {res.highest.pp_rank}: nvidia-smi"] == rank_nvml(res, res.highest)
    payload = plan_json(res, "r")
    assert payload["comm"]["nccl_bytes"] == 768 * MiB


@pytest.mark.parametrize("n", [8, 64])
def test_data_parallel_volumes_are_the_zero_papers(n: int) -> None:
    """ZeRO (Rajbhandari et al. 2020, §7): DDP's all-reduce and ZeRO-1/2 move 2Ψ per step,
    ZeRO-3 3Ψ (1.5×), each ring-wise (n − 1)/n, in the 16-bit parameters' dtype."""
    psi = int(shape_of(_cfg())["params"])
    ring = (n - 1) / n
    ddp = sum(_sent(_cfg(gpus=n, precision="bf16")).values())
    z2 = sum(_sent(_cfg(gpus=n, zero=2, precision="bf16", deepspeed=True)).values())
    z3 = sum(_sent(_cfg(gpus=n, zero=3, precision="bf16", deepspeed=True)).values())
    assert ddp == pytest.approx(2 * psi * 2 * ring, abs=2)
    assert z2 == pytest.approx(2 * psi * 2 * ring, abs=2)
    assert z3 == pytest.approx(3 * psi * 2 * ring, abs=3)


def test_tensor_parallel_volume_is_korthikantis_with_or_without_sequence_parallelism() -> None:
    """Korthikanti et al. 2022 §4.2.2: sequence parallelism replaces each all-reduce by an
    all-gather and a reduce-scatter of the same total: 4 all-reduces per block per step (two
    forward, two backward), each 2·(t − 1)/t of s·b·h; full recomputation adds the forward's."""
    s, b, h, layers, t = 2048, 2, 4096, 32, 4
    base = 8 * s * b * h * 2 * (t - 1) / t * layers
    sp = _sent(_cfg(gpus=2, tp=t, batch=b, precision="bf16"))
    assert sp[TP] == pytest.approx(base, abs=1)
    plain = _sent(_cfg(gpus=2, tp=t, batch=b, precision="bf16", sequence_parallel=False))
    assert plain[TP] == sp[TP]
    full = _sent(_cfg(gpus=2, tp=t, batch=b, precision="bf16", checkpointing="full"))
    assert full[TP] == pytest.approx(base * 12 / 8, abs=1)


def test_a_group_that_leaves_the_node_is_timed_on_the_network() -> None:
    """cp 2 × tp 4 fits in 8 GPUs (NVLink); cp 4 × tp 4 spans 16: the ring crosses nodes."""
    inside = _cfg(dp_shard=2, cp=2, tp=4, batch=2, precision="mixed", gpu="h100-sxm")
    across = _cfg(dp_shard=2, cp=4, tp=4, batch=4, seq=2048, precision="mixed", gpu="h100-sxm")
    for cfg, gbs in ((inside, 450e9), (across, 50e9)):
        ring = next(t for t in comm(cfg, shape_of(cfg)).transfers if t.group == "CP")
        assert ring.seconds == pytest.approx(ring.bytes / gbs)
    # tensor parallelism stays within the node either way
    tp = next(t for t in comm(across, shape_of(across)).transfers if t.group == "TP")
    assert tp.seconds == pytest.approx(tp.bytes / 450e9)


def test_fit_ranks_by_a_step_that_waits_for_the_communication_compute_does_not_hide() -> None:
    base = TrainingConfig.parse(model="llama-7b", seq=2048, batch=8, gpu="h100-sxm")
    res = fit_plans(base, 16)
    assert res.fitting
    waited = [c for c in res.fitting if c.exposed_seconds]
    assert waited, "tensor parallelism's collectives wait in some plan"
    for c in res.fitting:
        shape = shape_of(c.config)
        _, compute = compute_time(c.config, shape)
        tokens = c.config.batch * c.config.seq_or_default() / (c.config.tp * c.config.pp)
        sent = comm(c.config, shape)
        assert compute is not None and c.exposed_seconds is not None
        assert c.exposed_seconds == pytest.approx(sent.exposed_seconds(compute) or 0.0, rel=1e-3)
        # the one throughput model (estimate.throughput): compute, the optimizer step on the
        # rank's shard and the wait; tokens/s the job's, /GPU that ÷ its 16 GPUs
        timed = plan_time(c.config, shape)
        assert timed is not None
        optimizer = sum(s.value for s in timed.steps if s.name.startswith("optimizer step"))
        assert 0 < optimizer < 0.05 * compute  # memory-bound: a few ms
        step = compute + c.exposed_seconds + optimizer
        assert c.tokens_per_gpu == pytest.approx(tokens / step, rel=1e-3)
        assert c.tokens_per_second == pytest.approx(16 * tokens / step, rel=1e-3)
    speeds = [c.tokens_per_second or 0.0 for c in res.fitting]
    assert speeds == sorted(speeds, reverse=True)


def test_fit_prints_the_volume_that_decides_and_the_links(tmp_path, run_cli, run_json) -> None:
    args = ("fit", "--plans", "--model", "llama-7b", "--seq", "2048", "--batch", "8",
            "--gpus", "16", "--gpu", "h100-sxm", "--root", str(tmp_path))  # fmt: skip
    out = run_cli(*args, cwd=tmp_path).stdout
    assert "comm wait" in out and "communication: #1 sends " in out
    assert "links: NVLink 450 GB/s within a node of 8 GPUs, 50 GB/s between nodes" in out
    data = run_json(*args, cwd=tmp_path)
    assert all(r["comm_exposed_seconds"] is not None for r in data["fitting"])


def test_estimate_of_several_gpus_shows_what_each_sends(tmp_path, run_cli) -> None:
    out = run_cli("estimate", "--model", "llama-7b", "--gpus", "8", "--zero", "3", "--deepspeed",
                  "--precision", "bf16", "--gpu", "a100-80gb", "--counter", "nvml",
                  "--root", str(tmp_path), cwd=tmp_path).stdout  # fmt: skip
    assert "NCCL 256 MiB (1 communicator(s): data parallel (8)" in out
    assert "data parallel all-gather of the parameters (forward and backward): 2 × Ψ × 2 B" in out
    assert "not hidden by compute: 0.0 ms (data parallel overlap" in out
