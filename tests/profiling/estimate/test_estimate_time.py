"""FLOPs and time in closed form (checked by hand and against the trace's count), and `fit`."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
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
