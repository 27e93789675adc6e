"""DeepSpeed ZeRO-3's sub_group_size, stage3_max_reuse_distance, offload_optimizer.ratio,
data_types.grad_accum_dtype and communication_data_type (DeepSpeed 0.19.6, edaa7221,
deepspeed/runtime/zero/stage3.py): the bytes each moves on the GPU and in host memory. The
sub-groups are DeepSpeed's rule (_create_fp16_sub_groups) applied here to the parameters of the
model itself (built on the meta device), not to the estimate's own list of them."""

from __future__ import annotations

import pytest
import torch

from profiling.config import TrainingConfig
from profiling.errors import ConfigError
from profiling.estimate.memory import estimate
from profiling.models.workloads import build_model

STEP = "DeepSpeed fp32 gradient sub-group (at the step)"
BUCKET = "DeepSpeed gradient bucket (reduce_bucket_size)"
KEPT = "DeepSpeed ZeRO-3 parameters kept across forward's end (stage3_max_reuse_distance)"
ON_GPU = "DeepSpeed offload_optimizer.ratio"


def _deepspeeds_sub_groups(model: str, gpus: int, size: int) -> list[int]:
    """stage3.py _create_fp16_sub_groups over the model's parameters' partitions
    (partition_numel: ceil(numel / N)): a sub-group closes once it holds ``size`` or more."""
    parts = [-(-p.numel() // gpus) for p in build_model(model, torch.device("meta")).parameters()]
    if size >= sum(parts):
        return [sum(parts)]
    groups, held = [], 0
    for i, p in enumerate(parts):
        held += p
        if held >= size or i == len(parts) - 1:
            groups.append(held)
            held = 0
    return groups


def _est(**kw):
    base = {"model": "llama-7b", "precision": "mixed", "deepspeed": True, "zero": 3}
    return estimate(TrainingConfig(**{**base, **kw}))


def _lines(est) -> dict[str, float]:
    return {c.name: c.bytes for c in est.components}


def _step(est) -> int:
    return next(m.bytes for m in est.moments if m.name == "optimizer step")


def test_the_step_flattens_a_sub_group_then_converts_it_to_fp32() -> None:
    """_prepare_fp32_grad_for_sub_group: the flattened 16-bit copy and its fp32 conversion are
    alive together (6 B per element of the largest sub-group, not 4)."""
    for gpus, size in ((8, None), (8, 100_000_000), (2, None)):
        kw = {"sub_group_size": size} if size else {}
        est = _est(gpus=gpus, **kw)
        groups = _deepspeeds_sub_groups("llama-7b", gpus, size or 1_000_000_000)
        assert _lines(est)[STEP] == (2 + 4) * max(groups), (gpus, size)
    # a smaller sub_group_size lowers the step by the difference of the largest sub-groups
    one, small = _est(gpus=8), _est(gpus=8, sub_group_size=100_000_000)
    drop = 6 * (max(_deepspeeds_sub_groups("llama-7b", 8, 10**9)) -
                max(_deepspeeds_sub_groups("llama-7b", 8, 10**8)))  # fmt: skip
    assert _step(one) - _step(small) == pytest.approx(drop, abs=2)
    # fp32 gradients (grad_accum_dtype fp32): the flattened copy is the fp32 gradient itself
    fp32 = _est(gpus=8, grad_accum_dtype="fp32")
    assert _lines(fp32)[STEP] == 4 * max(_deepspeeds_sub_groups("llama-7b", 8, 10**9))


def test_grad_accum_dtype_sizes_the_gradient_partitions() -> None:
    """grad_partitions_flat_buffer is made in gradient_accumulation_dtype (stage3.py:742)."""

    def grads(est) -> float:
        return next(c.bytes for c in est.components if c.name.startswith("Gradients"))

    bf16, fp32 = _est(gpus=8), _est(gpus=8, grad_accum_dtype="fp32")
    assert grads(fp32) == 2 * grads(bf16)
    # offloaded, they are pinned host memory: 4 B per element of the partition
    host = _est(gpus=8, offload_optimizer=True, grad_accum_dtype="fp32").deepspeed["host"]
    line = next(x for x in host["lines"] if x["name"].endswith("gradient partitions"))
    assert line["name"] == "32-bit gradient partitions"
    assert line["bytes"] == round(4 * _est(gpus=8).params / 8)


def test_communication_data_type_sizes_the_zero3_bucket() -> None:
    """ipg_buckets: reduce_bucket_size elements of communication_data_type (stage3.py:733)."""
    assert _lines(_est(gpus=8))[BUCKET] == 500_000_000 * 2
    assert _lines(_est(gpus=8, comm_dtype="fp32"))[BUCKET] == 500_000_000 * 4
    end = {d: next(m.bytes for m in _est(gpus=8, comm_dtype=d).moments
                   if m.name == "end of forward") for d in ("bf16", "fp32")}  # fmt: skip
    assert end["fp32"] - end["bf16"] == 500_000_000 * 2


def test_a_shorter_reuse_distance_keeps_less_gathered_across_forwards_end() -> None:
    """partitioned_param_coordinator.py __params_to_release: what comes back within the
    distance stays gathered — half of it across the turn, none once the head alone (32,000 ×
    4,096, 1.3e8 elements, back after 2.6e8) is beyond it."""
    default = _lines(_est(gpus=8))[KEPT]
    assert default == 500_000_000 * 2
    assert _lines(_est(gpus=8, max_reuse_distance=400_000_000))[KEPT] == 200_000_000 * 2
    for distance in (200_000_000, 0):
        assert KEPT not in _lines(_est(gpus=8, max_reuse_distance=distance))


def test_a_partial_offload_keeps_the_first_sub_groups_on_the_gpu() -> None:
    """_create_fp32_partitions: the first int((1 − ratio) · sub-groups) keep their fp32
    master, Adam's two states and an fp32 gradient buffer on the GPU (16 B per element)."""
    groups = _deepspeeds_sub_groups("llama-7b", 1, 10**9)
    assert len(groups) > 4
    full = _est(gpus=1, offload_optimizer=True)
    for ratio in (0.3, 0.5, 1.0):
        est = _est(gpus=1, offload_optimizer=True, offload_ratio=ratio)
        kept = groups[: int((1 - ratio) * len(groups))]
        lines = _lines(est)
        gpu = next((b for n, b in lines.items() if n.startswith(ON_GPU + ": the sub")), 0)
        # ± a norm vector per sub-group: where a block's norms sit among its tensors is the
        # implementation's (ours, Hugging Face's), and moves where a sub-group closes
        assert gpu == pytest.approx(16 * sum(kept), rel=1e-5), ratio
        host = {x["name"]: x["bytes"] for x in est.deepspeed["host"]["lines"]}
        full_host = {x["name"]: x["bytes"] for x in full.deepspeed["host"]["lines"]}
        moved = full_host["fp32 master weights"] - host["fp32 master weights"]
        assert moved == pytest.approx(4 * sum(kept), rel=1e-5), ratio
        if kept:  # torch's AdamW steps them: one fp32 temporary of the largest
            step = lines[ON_GPU + ": torch AdamW's step on a GPU sub-group"]
            assert step == pytest.approx(4 * max(kept), rel=1e-5)
            assert _step(est) > _step(full)
    # one sub-group (8 ranks: 0.84e9 elements each): any ratio above 0 offloads all of it
    one = _est(gpus=8, offload_optimizer=True, offload_ratio=0.3)
    assert not any(n.startswith(ON_GPU) for n in _lines(one))
    assert any("leaves no sub-group on the GPU" in n for n in one.notes)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"zero": 2, "sub_group_size": 10**8}, "--sub-group-size needs --zero 3"),
        ({"zero": 2, "max_reuse_distance": 0}, "--max-reuse-distance needs --zero 3"),
        ({"zero": 3, "offload_ratio": 0.5}, "--offload-ratio is the share"),
    ],
)
def test_settings_deepspeed_does_not_read_there_are_one_sentence(kw, message) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainingConfig.parse(model="llama-7b", gpus=8, precision="mixed", deepspeed=True, **kw)


def test_without_the_models_tensors_the_largest_sub_group_is_bounded_from_above() -> None:
    """A shape given by hand: no tensor list to group, so the largest sub-group is taken at
    sub_group_size + the largest tensor's partition (a sub-group closes at the first tensor
    that reaches the size), never below what DeepSpeed's rule gives the real model."""
    hand = {"params": 6_738_415_616, "layers": 32, "hidden": 4096, "heads": 32, "vocab": 32000,
            "arch": "llama"}  # fmt: skip
    est = estimate(TrainingConfig(precision="mixed", deepspeed=True, zero=3, gpus=1, **hand))
    line = next(c for c in est.components if c.name == STEP)
    assert line.bytes == 6 * (10**9 + est.shape["largest_tensor"])
    assert "≤ sub_group_size" in line.calculation
    assert line.bytes >= 6 * max(_deepspeeds_sub_groups("llama-7b", 1, 10**9))


def test_a_partial_offload_to_nvme_keeps_only_sub_groups_too_small_to_swap() -> None:
    """stage3.py _create_fp32_partitions with the optimizer on NVMe: a sub-group of 1 MiB of
    fp32 or more (262,144 elements: is_swappable_tensor) is swapped out whatever the ratio, and
    the ones the ratio marks for the GPU are stepped by the backup torch AdamW on their host
    buffers, with states of its own kept in host memory; only smaller ones stay on the GPU."""
    nvme = {"gpus": 8, "offload_optimizer": True, "offload_to": "nvme", "hf_param_groups": True}
    full, half = _est(**nvme), _est(**nvme, offload_ratio=0.5)
    assert not any(n.startswith(ON_GPU) for n in _lines(half))  # the decay group: swapped
    assert _step(half) == _step(full) and half.per_gpu_bytes == full.per_gpu_bytes
    # the first sub-group: the decay group's partitions (the no-decay tensors are Llama's 1-D
    # norms: test_deepspeed_zero12 holds that split to the Trainer's own rule)
    params = build_model("llama-7b", torch.device("meta")).parameters()
    decay = sum(-(-p.numel() // 8) for p in params if p.dim() > 1)
    host = {x["name"]: x["bytes"] for x in half.deepspeed["host"]["lines"]}
    states = next(b for n, b in host.items() if n.startswith("torch AdamW's own states"))
    assert states == 8 * decay and host["torch AdamW's step on one of them (two fp32 "
                                        "temporaries)"] == 8 * decay  # fmt: skip
    assert half.deepspeed["host"]["per_rank_bytes"] - full.deepspeed["host"][
        "per_rank_bytes"] == 16 * decay  # fmt: skip
    # a model whose sub-groups are all under 1 MiB keeps the marked ones on the GPU, as to cpu
    tiny = {"model": "tiny-llama", "gpus": 1, "offload_optimizer": True, "hf_param_groups": True,
            "offload_ratio": 0.5}  # fmt: skip
    on = {to: next(b for n, b in _lines(_est(**tiny, offload_to=to)).items()
                   if n.startswith(ON_GPU + ": the sub")) for to in ("cpu", "nvme")}  # fmt: skip
    assert on["cpu"] == on["nvme"] > 0
