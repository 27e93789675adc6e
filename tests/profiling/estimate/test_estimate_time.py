"""FLOPs and time in closed form (checked by hand and against the trace's count), and `fit`."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.estimate.shape import shape_of
from profiling.fit import fit


def test_two_layer_toy_flops_by_hand() -> None:
    # tiny-gpt2: L = 2, h = 64, f = 256, V = 512, a = 4; b = 2, s = 16 → T = 32 tokens.
    # Matmul weights M = L·(4h² + 2hf) + V·h = 2·(16384 + 32768) + 32768 = 131072
    # 6·M·T = 25,165,824; attention (4 + 10)·b·s²·h·L = 14·2·256·64·2 = 917,504.
    est = estimate(TrainingConfig(model="tiny-gpt2", batch=2, seq=16))
    assert est.time is not None
    assert est.time.flops_per_step == 25_165_824 + 917_504
    assert est.time.flops_forward == 2 * 131072 * 32 + 4 * 2 * 256 * 64 * 2


@pytest.mark.parametrize(
    "kwargs",
    [
        {"model": "tiny-gpt2", "batch": 2, "seq": 16},
        {"model": "tiny-llama", "batch": 2, "seq": 64, "checkpointing": "full"},
        {"model": "tiny-gpt2", "batch": 3, "seq": 100, "precision": "amp-bf16"},
    ],
)
def test_closed_form_flops_agree_with_the_trace_count(kwargs: dict) -> None:
    pytest.importorskip("torch")
    from profiling.trace.step import trace_step

    cfg = TrainingConfig(**kwargs)
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.time is not None
    assert est.time.flops_per_step == pytest.approx(traced.flops.total, rel=0.02)
    # and the memory: the estimated peak is the traced one within 5 %
    assert est.per_gpu_bytes == pytest.approx(traced.peak_bytes, rel=0.05)


def test_step_time_on_a_gpu_every_step_shown() -> None:
    cfg = TrainingConfig(model="tiny-gpt2", batch=2, seq=16, gpu="h100-sxm", tokens=10**6)
    est = estimate(cfg)
    assert est.time is not None and est.time.time is not None
    flops = 25_165_824 + 917_504
    compute = flops / (67e12 * 0.4)  # fp32 training: H100 SXM's plain fp32 peak, 40 % MFU
    # fp32 AdamW's step reads weights, gradient, both moments and writes weights and moments:
    # 2·(4 + 8) + 4 = 28 B per parameter at the datasheet's 3.35 TB/s.
    optimizer = est.params * 28 / 3.35e12
    step_s = compute + optimizer
    assert est.time.time.compute_seconds == pytest.approx(compute)
    assert est.time.time.step_seconds == pytest.approx(step_s)
    assert est.time.time.tokens_per_second == pytest.approx(32 / step_s)
    assert est.time.time.total_seconds == pytest.approx(10**6 / (32 / step_s))
    names = [s.name for s in est.steps]
    assert "FLOPs per step" in names and "step time" in names


def test_fit_answers_the_seed_cases() -> None:
    # Seed 004: a 1B model under 16 GB — full training fits (16-bit, or with checkpointing).
    one = fit(TrainingConfig(model="llama-1b", gpu_mem=16), confirm=0)
    assert one.fitting and one.fitting[0].trains == "full"
    assert all(c.peak_bytes <= 0.9 * 16e9 for c in one.fitting)
    # A 7B model under 24 GB — full training cannot (16-bit weights + gradients alone are
    # 27 GB); LoRA and QLoRA can.
    seven = fit(TrainingConfig(model="llama-7b", gpu_mem=24, gpu="rtx-4090"), confirm=0)
    assert seven.fitting and {c.trains for c in seven.fitting} <= {"lora", "qlora"}
    assert seven.fitting[0].tokens_per_second is not None


def test_fit_confirms_with_a_trace_and_reports_the_smallest_need(run_cli, tmp_path) -> None:
    pytest.importorskip("torch")
    # 1 GB: the CUDA context (500 MiB, its upper end) and cuBLAS's workspaces leave ~370 MB.
    res = fit(TrainingConfig(model="tiny-llama", seq=64, gpu_mem=1), confirm=1)
    best = res.fitting[0]
    assert best.traced_peak_bytes is not None and best.traced_nvml_bytes is not None
    assert best.traced_peak_bytes == pytest.approx(best.peak_bytes, rel=0.05)
    # The closed form's reserve is an upper bound of the trace's allocator replay.
    assert best.traced_nvml_bytes <= best.nvml_bytes
    proc = run_cli("fit", "--model", "llama-7b", "--gpu-mem", "4", "--confirm", "0",
                   cwd=tmp_path, check=False)  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "nothing fits in 4.00 GB: the smallest need is" in proc.stderr
    assert "on nvidia-smi" in proc.stderr


def test_the_step_waits_for_the_communication_compute_does_not_hide() -> None:
    # Llama 3.1 8B over 64 H100s (8 nodes): ZeRO-3 sends 2 all-gathers + a reduce-scatter
    # (63.24 GB), ZeRO-1 one all-gather + one reduce-scatter, at the network's 50 GB/s;
    # at batch 2 compute (0.505 s) hides only part of it.
    base = {"model": "hf:llama-3.1-8b", "gpus": 64, "gpu": "h100-sxm", "precision": "mixed",
            "batch": 2}  # fmt: skip
    timed = {}
    for zero in (1, 3):
        est = estimate(TrainingConfig(**base, zero=zero))
        assert est.time is not None and est.time.time is not None
        t = est.time.time
        wait = next(s for s in t.steps if s.name.startswith("communication not hidden"))
        from profiling.estimate.comm import comm

        sent = comm(est.inputs, est.shape)
        assert wait.value == pytest.approx(sent.exposed_seconds(t.compute_seconds))
        assert wait.value > 0.3  # the network, not NVLink: most of a second
        assert t.step_seconds == pytest.approx(
            t.compute_seconds + sum(s.value for s in t.steps if s.unit == "s"
                                    and s.name not in ("compute time", "step time"))
        )  # fmt: skip
        assert t.tokens_per_second == pytest.approx(2 * 2048 * 64 / t.step_seconds)
        timed[zero] = t.tokens_per_second
    assert timed[3] < timed[1]  # ZeRO-3 gathers twice: the slower step
    # On one node (NVLink) the same transfers hide behind compute: no line, no cost.
    est = estimate(TrainingConfig(**{**base, "gpus": 8}, zero=3))
    assert est.time is not None and est.time.time is not None
    assert not any(s.name.startswith("communication") for s in est.time.time.steps)


def test_fit_ranks_by_the_step_with_its_communication_and_shows_what_each_sends() -> None:
    from profiling.fit_render import fit_json, render_fit

    base = TrainingConfig(model="hf:llama-3.1-8b", gpus=64, gpu="h100-sxm", batch=2,
                          precision="mixed")  # fmt: skip
    res = fit(base, confirm=0)
    rows = fit_json(res)["fitting"]
    assert all(r["comm_bytes_per_step"] > 0 for r in rows)
    speed = {(r["config"].get("zero", 0), r["config"].get("batch", 2),
              r["config"].get("checkpointing", "none"), r["config"].get("precision")):
             r["tokens_per_second"] for r in rows}  # fmt: skip
    one, three = speed.get((1, 2, "none", "mixed")), speed.get((3, 2, "none", "mixed"))
    assert one and three and three < one
    assert "sent/step" in render_fit(res, 10)


def test_selective_checkpointing_costs_its_recompute_and_is_searched_where_it_saves() -> None:
    """The audit: fit printed selective rows identical to the plain ones — under SDPA it keeps
    what no checkpointing keeps (no s² scores to drop), and its recompute was counted free."""
    cfg = TrainingConfig(model="tiny-llama", batch=2, seq=64, attention="eager")
    plain, sel = estimate(cfg), estimate(cfg.model_copy(update={"checkpointing": "selective"}))
    assert plain.time is not None and sel.time is not None
    shape = shape_of(cfg)
    hq, layers = shape.get("q_dim") or shape["hidden"], shape["layers"]
    # the attention core's forward again in backward: QKᵀ and the probabilities times V
    assert sel.time.flops_per_step - plain.time.flops_per_step == 4 * 2 * 64**2 * hq * layers
    assert sel.per_gpu_bytes < plain.per_gpu_bytes  # the eager scores and probabilities dropped
    sdpa = fit(TrainingConfig(model="llama-1b", gpu_mem=16, gpu="a100-40gb"), confirm=0)
    assert sdpa.fitting and all(c.config.checkpointing != "selective" for c in sdpa.fitting)
    eager = fit(
        TrainingConfig(model="llama-1b", gpu_mem=16, gpu="a100-40gb", attention="eager", seq=512),
        confirm=0,
    )
    plain_rows = {
        (c.config.precision, c.config.batch, c.config.offload_optimizer, c.trains): c
        for c in eager.fitting
        if c.config.checkpointing == "none"
    }
    selective = [c for c in eager.fitting if c.config.checkpointing == "selective"]
    assert selective
    for c in selective:
        twin = plain_rows.get((c.config.precision, c.config.batch, c.config.offload_optimizer,
                               c.trains))  # fmt: skip
        if twin is not None:  # less memory, fewer tokens/s: never the same row twice
            assert c.peak_bytes < twin.peak_bytes
            assert c.tokens_per_second is not None and twin.tokens_per_second is not None
            assert c.tokens_per_second < twin.tokens_per_second
