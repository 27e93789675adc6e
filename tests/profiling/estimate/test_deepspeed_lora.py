"""LoRA under DeepSpeed's ZeRO engine (--deepspeed --lora-rank), as DeepSpeed 0.19.6's source keeps
it (profiling/estimate/deepspeed_lora.py): every parameter partitioned (the frozen base too, in
host memory with --offload-param), the norms and LoRA's small A and B kept gathered, and the
optimizer's side — fp32 master, states, gradient partitions — of the adapters alone."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError
from profiling.estimate.memory import estimate
from profiling.estimate.shape import shape_of

MODEL = "hf:llama-3.2-1b"  # 16 blocks, hidden 2048, 8 kv heads of 64
R = 8
# q: A 8 × 2048, B 2048 × 8; v: A 8 × 2048, B 512 × 8 (kv width 512), in each of 16 blocks
ADAPTERS = 16 * (2 * R * 2048 + R * 2048 + R * 512)


def _cfg(**extra: Any) -> TrainingConfig:
    values: dict[str, Any] = {
        "model": MODEL, "precision": "fp32", "zero": 3, "deepspeed": True, "gpus": 1,
        "lora_rank": R, "lora_targets": ["q", "v"], "seq": 512,
    }  # fmt: skip
    return TrainingConfig.parse(style="field", **{**values, **extra})


def _lines(cfg: TrainingConfig) -> dict[str, float]:
    return {c.name: c.bytes for c in estimate(cfg).components}


def _host(cfg: TrainingConfig) -> dict[str, float]:
    ds = estimate(cfg).deepspeed
    assert ds is not None and ds.get("host")
    return {x["name"]: x["bytes"] for x in ds["host"]["lines"]}


def test_zero3_with_both_offloads_keeps_on_the_gpu_what_deepspeed_keeps_gathered() -> None:
    cfg = _cfg(offload_optimizer=True, offload_param=True)
    psi = int(shape_of(cfg)["params"])
    lines = _lines(cfg)
    # the frozen base and the adapters live in host memory, partitioned
    assert lines["Base weights (fp32, frozen) (CPU)"] == 0
    assert lines["LoRA adapter weights (CPU)"] == 0
    # stage3_param_persistence_threshold (1e5): the 33 norm weights of 2048 and every A and B
    # (16,384 and 4,096 elements) stay gathered — the adapters whole, in the engine's fp32
    persistent = lines["DeepSpeed persistent parameters (gathered on every rank)"]
    assert persistent == ((2 * 16 + 1) * 2048 + ADAPTERS) * 4
    # the gathered module (the embedding, 128,256 × 2048) and the prefetch bucket (5e7), the
    # gradient bucket (5e8 elements): the engine's whatever trains
    gathered = lines["DeepSpeed ZeRO-3 gathered parameters (a module + the prefetch bucket)"]
    assert gathered == (128_256 * 2048 + 50_000_000) * 4
    assert lines["DeepSpeed gradient bucket (reduce_bucket_size)"] == 500_000_000 * 4
    host = _host(cfg)
    # the optimizer's side is the adapters' alone (_get_trainable_parameter_groups) ...
    assert host["fp32 master weights"] == 4 * ADAPTERS
    assert host["optimizer states (4 B + 4 B)"] == 8 * ADAPTERS
    assert host["fp32 gradient partition"] == 4 * ADAPTERS
    assert host["32-bit gradient partitions"] == 4 * ADAPTERS
    # ... while every parameter, frozen or not, has its partition in host memory
    assert host["32-bit parameter partitions"] == 4 * (psi + ADAPTERS)


def test_zero3_without_offload_partitions_the_frozen_base_and_trains_only_the_adapters() -> None:
    cfg = _cfg(gpus=4)
    psi = int(shape_of(cfg)["params"])
    lines = _lines(cfg)
    assert lines["Base weights (fp32, frozen)"] == pytest.approx(4 * psi / 4)
    states = sum(v for k, v in lines.items() if k.startswith("Optimizer: ") and "step" not in k)
    assert states == pytest.approx(8 * ADAPTERS / 4)
    # no model-sized fp32 gradient or master anywhere: the full finetune's states are 4 B
    # weights + 4 B gradients + 8 B states a parameter, LoRA's base 4 B alone
    full = _lines(TrainingConfig.parse(style="field", model=MODEL, precision="fp32", zero=3,
                                       deepspeed=True, gpus=4, seq=512))  # fmt: skip
    assert sum(full.values()) - sum(lines.values()) > 12 * psi / 4 * 0.9


def test_mixed_precision_casts_the_adapters_to_16_bits_with_an_fp32_master() -> None:
    # The engine halves the whole module; its optimizer keeps the adapters' fp32 master:
    # where peft under autocast keeps fp32 adapters (4 B, no master), DeepSpeed's are 2 B
    # weights and gradients + a 4 B master + 8 B of states.
    cfg = _cfg(precision="mixed", gpus=4)
    lines = _lines(cfg)
    tag = " (16-bit: DeepSpeed's engine casts the module)"
    assert lines["LoRA adapter weights" + tag] == pytest.approx(2 * ADAPTERS / 4)
    assert lines["Optimizer: the adapters' fp32 master weights"] == pytest.approx(4 * ADAPTERS / 4)
    grads = [v for k, v in lines.items() if k.startswith("LoRA adapter gradients" + tag)]
    assert grads == [pytest.approx(2 * ADAPTERS / 4)]
    # no input cast to fp32 adapters: each adapter reads the base layer's own input
    eager = _lines(cfg.model_copy(update={"deepspeed": False}))
    assert not any("fp32 casts" in k for k in lines)
    assert any("fp32 casts" in k for k in eager)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"qlora": True, "precision": "bf16"}, "qlora with DeepSpeed"),
        ({"dora": True}, "dora with DeepSpeed"),
        ({"precision": "amp-bf16"}, "give mixed"),
    ],
)
def test_what_the_engine_does_not_model_is_refused_in_one_sentence(
    extra: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        _cfg(**extra)
