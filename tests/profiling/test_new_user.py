"""What a new user met (issue #31): each case fails on the code before its fix."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate, render_text
from profiling.fit import _candidate
from profiling.units import fmt_bytes, fmt_count

_EXPONENT = re.compile(r"\d[eE][+-]?\d")


def test_a_scaled_trace_describes_the_model_not_its_sample() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from profiling.trace.step import trace_step

    # transformers' Llama-3.2-1B (16 layers) is traced with 1, 2 and 3 of them.
    result = trace_step(
        TrainingConfig(model="hf:llama-3.2-1b", seq=32, precision="amp-bf16", checkpointing="full")
    )
    notes = "\n".join(result.notes)
    assert "layer-scaled" in notes, notes
    assert "activation checkpointing on 16 blocks" in notes, notes


def test_a_scaled_lora_trace_counts_the_models_adapters() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    from profiling.trace.step import trace_step

    result = trace_step(
        TrainingConfig(model="hf:llama-3.2-1b", seq=32, precision="amp-bf16", lora_rank=8)
    )
    notes = "\n".join(result.notes)
    assert "layer-scaled" in notes, notes
    assert "(64 layers)" in notes, notes  # q, k, v, o in each of the 16 layers
    lora = result.model_info["lora"]
    assert lora["adapted_layers"] == 64
    # Llama-3.2-1B: hidden 2048, 8 key/value heads of 64: r·(in + out) per adapted matrix.
    h, kv, r = 2048, 512, 8
    assert lora["adapter_params"] == 16 * r * ((h + h) * 2 + (h + kv) * 2)


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_without_zero_is_one_gpu_whatever_the_gpu_count(zero: int) -> None:
    alone = estimate(TrainingConfig(model="hf:llama-3.1-8b", precision="mixed")).per_gpu_bytes
    for gpus in (2, 4, 8):
        est = estimate(
            TrainingConfig(model="hf:llama-3.1-8b", precision="mixed", gpus=gpus, zero=zero)
        )
        assert est.unsharded_bytes == alone, (gpus, zero)
    fsdp = estimate(TrainingConfig(model="hf:llama-3.1-8b", precision="mixed", gpus=8, fsdp=True))
    assert fsdp.unsharded_bytes == alone


def test_fit_tells_batch_sizes_and_offload_apart_in_tokens_per_second() -> None:
    base = TrainingConfig(model="llama-1b", precision="mixed", gpu="h100-sxm", seq=2048)
    one = _candidate(base.model_copy(update={"batch": 1}))
    four = _candidate(base.model_copy(update={"batch": 4}))
    offloaded = _candidate(base.model_copy(update={"batch": 4, "offload_optimizer": True}))
    assert one.tokens_per_second and four.tokens_per_second and offloaded.tokens_per_second
    # The optimizer step costs the same whatever the micro-batch: spread over 4× the tokens.
    assert four.tokens_per_second > one.tokens_per_second * 1.01
    # An offloaded step moves gradients and weights over PCIe and steps on the host.
    assert offloaded.tokens_per_second < four.tokens_per_second * 0.99


def test_params_that_disagree_with_the_shape_are_said() -> None:
    shape = {"layers": 40, "hidden": 5120, "heads": 40, "vocab": 32000, "arch": "llama"}
    est = estimate(TrainingConfig(params=1e9, precision="mixed", **shape))
    said = [n for n in est.notes if "--params 1B disagrees" in n]
    assert said and "13B" in said[0], est.notes
    # The shape alone is enough: its own parameter count (Llama-2-13B's, ffn 13824).
    own = estimate(TrainingConfig(precision="mixed", ffn=13824, **shape))
    assert own.params == 13_015_864_320
    assert not [n for n in own.notes if "disagrees" in n]
    # A count within 10 % of the shape's is not a disagreement.
    near = estimate(TrainingConfig(params=13e9, precision="mixed", ffn=13824, **shape))
    assert not [n for n in near.notes if "disagrees" in n]


def test_counts_and_rates_print_without_exponents() -> None:
    assert fmt_count(1.86e15) == "1.86P"
    assert fmt_count(999_700) == "1M"
    est = estimate(
        TrainingConfig(
            model="hf:llama-3.1-70b", seq=8192, batch=8, gpus=64, zero=3,
            precision="mixed", gpu="h100-sxm", tokens=10**12,
        )
    )  # fmt: skip
    text = render_text(est)
    assert not _EXPONENT.search(text), _EXPONENT.findall(text)
    assert "P + " in text  # FLOPs per step beyond 1000T
    assert re.search(r"→ \d{1,3}(,\d{3})* tokens/s", text), text


def test_tokens_per_second_under_tensor_parallelism_names_every_gpu() -> None:
    est = estimate(
        TrainingConfig(model="llama-7b", precision="mixed", gpus=4, tp=2, gpu="h100-sxm")
    )
    assert est.time is not None and est.time.time is not None
    line = next(s for s in est.time.time.steps if s.unit == "tokens/s")
    assert "8 GPUs" in line.name and "4 replicas × TP 2" in line.name, line.name
    assert "4 GPUs" not in line.name


def test_a_toys_binary_figure_is_not_zero_gib() -> None:
    # audit7: a toy's estimate printed "(0.00 GiB per GPU; …)" beside its 3.4 MB
    assert fmt_bytes(3_500_000, "GiB") == "3.3 MiB"
    assert fmt_bytes(2_000, "GiB") == "2.0 KiB"
    assert fmt_bytes(0, "GiB") == "0.00 GiB" and fmt_bytes(30 * 2**30, "GiB") == "30.00 GiB"
    done = subprocess.run(
        [sys.executable, "-m", "journal_agent", "estimate", "--model", "tiny-gpt2", "--no-save"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and "0.00 GiB" not in done.stdout
    assert re.search(r"\(\d+\.\d (MiB|KiB) per GPU", done.stdout), done.stdout
