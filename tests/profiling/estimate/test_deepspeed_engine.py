"""DeepSpeed's ZeRO engine (--deepspeed): its estimators transcribed and held to the numbers its
own documentation prints, our per-rank GPU bytes at the step against them, the buckets,
persistent and gathered parameters, and the host memory of its offload with the verdict
against --cpu-mem."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError, ProfilingError
from profiling.estimate.deepspeed import (
    estimate_zero2_model_states_mem_needs,
    estimate_zero3_model_states_mem_needs,
)
from profiling.estimate.memory import estimate

GiB = 2**30


def _gb(value: float) -> str:
    """As DeepSpeed prints it: f"{bytes/2**30:.2f}GB"."""
    return f"{value / GiB:.2f}GB"


def test_the_zero2_estimator_prints_what_deepspeeds_docs_show() -> None:
    # docs/code-docs/source/memory.rst:38-46 (DeepSpeed 0.19.6, edaa7221):
    # estimate_zero2_model_states_mem_needs_all_cold(total_params=2851e6, num_gpus_per_node=8)
    #   127.45GB |   5.31GB | offload_optimizer=cpu
    #   127.45GB |  15.93GB | offload_optimizer=none
    # The second row's GPU column predates DeepSpeed's PR #5099 (f4cb866c, June 2024), which
    # made the formula 2Ψ + 18Ψ/N (stage_1_and_2.py:3095) from 4Ψ + 16Ψ/N; the page was not
    # regenerated. The code's number is the one transcribed.
    psi = int(2851e6)
    rows = [estimate_zero2_model_states_mem_needs(psi, 8, 1, off) for off in (True, False)]
    assert [(_gb(c), _gb(g)) for c, g in rows] == [
        ("127.45GB", "5.31GB"),
        ("127.45GB", "11.28GB"),
    ]
    assert _gb(4 * psi + 16 * psi / 8) == "15.93GB"  # what the page shows: the old formula


def test_the_zero3_estimator_prints_what_deepspeeds_docs_show() -> None:
    # docs/code-docs/source/memory.rst:85-97: total_params=2851e6, largest_layer_params=32e6,
    # num_gpus_per_node=8, num_nodes=1; (offload_optimizer, offload_param, zero_init)
    table = {
        (True, True, True): ("71.69GB", "0.12GB"),
        (True, True, False): ("127.45GB", "0.12GB"),
        (True, False, True): ("63.72GB", "0.78GB"),
        (True, False, False): ("127.45GB", "0.78GB"),
        (False, False, True): ("1.43GB", "6.09GB"),
        (False, False, False): ("127.45GB", "6.09GB"),
    }
    for (off, off_p, init), shown in table.items():
        cpu, gpu, _ = estimate_zero3_model_states_mem_needs(
            int(2851e6), int(32e6), 8, 1, off, off_p, init
        )
        assert (_gb(cpu), _gb(gpu)) == shown, (off, off_p, init)


def _step(est) -> int:
    return next(m.bytes for m in est.moments if m.name == "optimizer step")


@pytest.mark.parametrize("gpus", [2, 8, 64])
def test_zero2_at_its_step_is_the_estimators_2_plus_18_over_n_and_a_flat_copy(gpus: int) -> None:
    """Without buckets, DeepSpeed's ZeRO-2 step holds 2Ψ + 18Ψ/N: 16-bit weights, the gradient
    partition, fp32 master and Adam's two states, and the fp32 gradients made for the step —
    and, while ``.to(fp32)`` runs, the flattened 16-bit partition it converts (2Ψ/N more:
    stage_1_and_2.py:2361, deleted only after)."""
    psi = 7_000_000_000
    cfg = TrainingConfig(
        params=psi, precision="mixed", gpus=gpus, zero=2, deepspeed=True, reduce_bucket_size=0
    )
    est = estimate(cfg)
    flat = 2 * psi / gpus
    assert _step(est) == estimate_zero2_model_states_mem_needs(psi, gpus, 1, False)[1] + flat
    # Without the engine the ZeRO paper's 16 B/param: the fp32 gradient is not made.
    plain = estimate(TrainingConfig(params=psi, precision="mixed", gpus=gpus, zero=2))
    assert _step(plain) < _step(est)


def test_the_gradient_buckets_are_real_bytes() -> None:
    base = {"params": 7_000_000_000, "precision": "mixed", "gpus": 8, "deepspeed": True}
    z2 = {**base, "zero": 2}
    none = _step(estimate(TrainingConfig(**z2, reduce_bucket_size=0)))
    one = _step(estimate(TrainingConfig(**z2)))  # DeepSpeed's default: 5e8 elements
    assert one - none == 500_000_000 * 2
    two = _step(estimate(TrainingConfig(**z2, overlap_comm=True)))  # double buffered
    assert two - none == 2 * 500_000_000 * 2
    # ZeRO-3 holds one bucket, made with the optimizer: alive at the end of forward too.
    z3 = {**base, "zero": 3}
    fwd = {
        b: next(m.bytes for m in estimate(TrainingConfig(**z3, reduce_bucket_size=b)).moments
                if m.name == "end of forward")
        for b in (0, 10**8)
    }  # fmt: skip
    assert fwd[10**8] - fwd[0] == 10**8 * 2


def test_auto_buckets_are_the_hugging_face_integrations() -> None:
    """ "auto" as trainer_config_finalize fills it: reduce_bucket_size h², prefetch 0.9·h²,
    persistence 10·h."""
    h = 4096
    cfg = TrainingConfig(
        model="llama-7b", precision="mixed", gpus=8, zero=3, deepspeed=True,
        reduce_bucket_size="auto", prefetch_bucket_size="auto",
        param_persistence_threshold="auto",
    )  # fmt: skip
    est = estimate(cfg)
    by = {c.name.split(" (")[0]: c.bytes for c in est.components}
    assert by["DeepSpeed gradient bucket"] == h * h * 2
    gathered = by["DeepSpeed ZeRO-3 gathered parameters"]
    assert gathered == (est.shape["largest_module_params"] + int(0.9 * h * h)) * 2
    # 10·h = 40,960 ≥ h: every norm weight persists, (2·32 + 1)·4096 of them
    assert by["DeepSpeed persistent parameters"] == (2 * 32 + 1) * h * 2
    small = TrainingConfig(
        **{**cfg.model_dump(exclude_unset=True), "param_persistence_threshold": 4000}
    )
    assert not any("persistent" in c.name for c in estimate(small).components)
    no_shape = TrainingConfig(
        params="7e9", gpus=8, zero=3, deepspeed=True, reduce_bucket_size="auto"
    )
    with pytest.raises(ProfilingError, match="hidden size"):
        estimate(no_shape)


def test_gpt2_keeps_its_biases_and_norms_gathered() -> None:
    est = estimate(TrainingConfig(model="gpt2-small", gpus=4, zero=3, deepspeed=True))
    h, L = 768, 12
    line = next(c for c in est.components if c.name.startswith("DeepSpeed persistent"))
    # per block: ln_1 (w, b) 2h, c_attn.b 3h, attn.c_proj.b h, ln_2 (w, b) 2h, c_fc.b 4h,
    # mlp.c_proj.b h = 13h; then ln_f (w, b)
    assert line.bytes == (L * 13 * h + 2 * h) * 4  # fp32: 4 B each


def _host(**kw):
    cfg = TrainingConfig(params=7_000_000_000, layers=32, hidden=4096, heads=32, vocab=32000,
                         arch="llama", precision="mixed", deepspeed=True, **kw)  # fmt: skip
    est = estimate(cfg)
    assert est.deepspeed is not None
    return est, est.deepspeed["host"]


def test_zero3_offload_moves_the_states_to_pinned_host_memory() -> None:
    est, host = _host(gpus=16, gpus_per_node=8, zero=3, offload_optimizer=True, offload_param=True)
    psi = est.params
    part = psi / 16
    # fp32 master 4 + Adam 8 + fp32 gradients 4 + 16-bit gradients 2 + 16-bit parameters 2
    assert host["per_rank_bytes"] == round(20 * part)
    # pinned: the fp32 gradient buffers and both 16-bit partitions; master and states pageable
    assert host["pinned_per_rank_bytes"] == round(8 * part)
    assert host["per_node_bytes"] == round(8 * 20 * part)
    # On the GPU no model state is left but the persistent parameters and the bucket.
    gpu = {c.name: c.bytes for c in est.components if c.group == "model states"}
    assert sum(gpu.values()) == (2 * 32 + 1) * 4096 * 2 + 500_000_000 * 2
    assert host["fits"] is None and est.fits is None


def test_zero2_offload_keeps_the_16_bit_model_on_the_gpu() -> None:
    est, host = _host(gpus=8, zero=2, offload_optimizer=True)
    part, big = est.params / 8, est.shape["largest_tensor"]
    names = [x["name"] for x in host["lines"]]
    assert names[:3] == ["fp32 master weights", "optimizer states (4 B + 4 B)",
                         "fp32 gradient partition"]  # fmt: skip
    assert host["per_rank_bytes"] == round(18 * part + 2 * big)
    assert host["pinned_per_rank_bytes"] == round(10 * part + 2 * big)
    weights = next(c for c in est.components if c.name.startswith("Weights"))
    assert weights.bytes == 2 * est.params  # replicated: ZeRO-2 partitions no weight


def test_nvme_keeps_only_the_swap_buffers_in_host_memory() -> None:
    est, host = _host(gpus=8, zero=3, offload_optimizer=True, offload_param=True,
                      offload_to="nvme")  # fmt: skip
    part = est.params / 8
    sub = min(1e9, part)
    want = 4 * sub * 4 + 2 * part + 2 * min(part, 1e9) + 2 * 5 * 1e8
    assert host["per_rank_bytes"] == round(want)
    assert host["pinned_per_rank_bytes"] == host["per_rank_bytes"]
    assert any(c.name.endswith("(NVMe)") for c in est.components if c.category == "optimizer")


@pytest.mark.parametrize(("optimizer", "params"), [("nvme", "cpu"), ("cpu", "nvme")])
def test_each_offloaded_part_keeps_the_host_memory_of_its_own_device(optimizer, params) -> None:
    # DeepSpeed takes offload_optimizer.device and offload_param.device apart
    # (deepspeed/runtime/zero/offload_config.py). Counting both at the optimizer's device left
    # out every 16-bit partition over max_in_cpu with parameters on cpu, and the fp32 master,
    # states and gradients with the optimizer on cpu: on 4 ranks of 7B, 0.5 and 11.5 GB a rank.
    kw = {"gpus": 4, "zero": 3, "offload_optimizer": True, "offload_param": True}
    _, mixed = _host(**kw, offload_to=optimizer, offload_param_to=params)
    _, opt_side = _host(**kw, offload_to=optimizer)
    _, param_side = _host(**kw, offload_to=params)

    def part(host, parameters: bool) -> dict[str, int]:
        return {x["name"]: x["bytes"] for x in host["lines"]
                if ("parameter" in x["name"]) == parameters}  # fmt: skip

    assert part(mixed, False) == part(opt_side, False)
    assert part(mixed, True) == part(param_side, True)
    assert mixed["per_rank_bytes"] == sum(part(mixed, False).values()) + sum(
        part(mixed, True).values()
    )
    assert mixed["per_rank_bytes"] > min(opt_side["per_rank_bytes"], param_side["per_rank_bytes"])


def test_the_verdict_checks_the_host_memory_too() -> None:
    kw = {"gpus": 8, "zero": 3, "offload_optimizer": True, "offload_param": True, "gpu_mem": 80}
    est, host = _host(**kw)
    node = host["per_node_bytes"]
    fits, _ = _host(**kw, cpu_mem=node / 1e9 + 0.01)
    short, shost = _host(**kw, cpu_mem=node / 1e9 - 0.01)
    assert est.fits is True and fits.fits is True
    assert shost["fits"] is False and short.fits is False and short.status == "❌"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"offload_param": True}, "--offload-param is a setting of DeepSpeed's ZeRO engine"),
        ({"cpu_mem": 64}, "--cpu-mem is a setting of DeepSpeed's ZeRO engine"),
        ({"deepspeed": True}, "give --zero 1, 2 or 3"),
        ({"deepspeed": True, "zero": 3, "fsdp": True}, "give --zero 1, 2 or 3"),
        ({"deepspeed": True, "zero": 2, "offload_param": True}, "--offload-param needs --zero 3"),
        ({"deepspeed": True, "zero": 3, "offload_to": "nvme"}, "--offload-to nvme says where"),
        (
            {"deepspeed": True, "zero": 3, "offload_optimizer": True, "offload_param_to": "cpu"},
            "--offload-param-to says where --offload-param",
        ),
        ({"offload_param_to": "nvme"}, "--offload-param-to is a setting of DeepSpeed's ZeRO"),
        (
            {"deepspeed": True, "zero": 2, "lora_rank": 8, "qlora": True, "precision": "bf16"},
            "--qlora with DeepSpeed's engine",
        ),
    ],
)
def test_settings_that_do_not_hold_together_are_one_sentence(kw, message) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainingConfig.parse(model="llama-7b", gpus=8, **kw)


def test_the_cli_prints_the_host_block_and_its_numbers_are_in_the_record(
    cli, tmp_path: Path
) -> None:
    args = ("estimate", "--model", "llama-7b", "--precision", "mixed", "--gpus", "8",
            "--zero", "3", "--deepspeed", "--offload-optimizer", "--offload-param",
            "--cpu-mem", "100", "--root", str(tmp_path))  # fmt: skip
    out = cli(*args).stdout
    assert "DeepSpeed ZeRO-3, optimizer and parameters offloaded to cpu" in out
    assert "per rank 16.85 GB (pinned 6.74 GB); per node × 8: 134.77 GB" in out
    assert "❌ host memory does not fit: 134.77 GB of 100.00 GB per node" in out
    payload = cli(*args, "--json").stdout
    assert '"per_node_bytes": 134768312320' in payload
    refused = cli("trace", "--model", "tiny-llama", "--gpus", "2", "--zero", "2", "--deepspeed",
                  "--root", str(tmp_path), check=False)  # fmt: skip
    assert refused.returncode != 0 and "the trace runs ZeRO as FSDP2" in refused.stderr


def test_fit_judges_the_host_memory_too(cli, tmp_path: Path) -> None:
    args = ("fit", "--model", "llama-7b", "--gpus", "8", "--zero", "3", "--deepspeed",
            "--offload-optimizer", "--offload-param", "--gpu-mem", "24", "--confirm", "0",
            "--root", str(tmp_path))  # fmt: skip
    ok = cli(*args, "--cpu-mem", "256")
    assert ok.returncode == 0 and "Nothing fits" not in ok.stdout
    short = cli(*args, "--cpu-mem", "64", check=False)
    assert short.returncode == 1
    # 20 B per parameter of a rank's eighth (fp32 master, Adam, fp32 and 16-bit gradients,
    # 16-bit parameters), eight ranks on the node: 134.77 GB; the GPU itself had room.
    assert "DeepSpeed's offload needs 134.77 GB of host memory per node" in short.stdout
    assert "over --cpu-mem 64 GB" in short.stderr
