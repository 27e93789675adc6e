"""DeepSpeed ZeRO-1/2 under bf16 (DeepSpeed 0.19.6, edaa7221): the step's flattened gradient
partition, ZeRO-1's BF16_Optimizer with fp32 accumulation (engine.py:1993,
runtime/bf16_optimizer.py), and the Hugging Face Trainer's two parameter groups, which
DeepSpeed flattens, all-reduces and sub-groups apart. The groups are split here by the
Trainer's own rule (get_decay_parameter_names: a bias, a norm's name, a LayerNorm module)
over the model itself, built on the meta device — not by the estimate's list of tensors."""

from __future__ import annotations

import re

import pytest
import torch

from profiling.config import TrainingConfig
from profiling.errors import ConfigError
from profiling.estimate.memory import estimate
from profiling.models.workloads import build_model

STEP = "DeepSpeed fp32 gradient partition (at the step, with its flattened copy)"
ACCUM = "DeepSpeed BF16_Optimizer fp32 gradient accumulators (every trained parameter's)"
END = (
    "DeepSpeed BF16_Optimizer end of backward (the all-reduce's copies of the fp32 "
    "accumulators, or a gradient's fp32 copy)"
)
BUCKET = "DeepSpeed gradient bucket (reduce_bucket_size)"
REDUCTION = "DeepSpeed gradient reduction: the bucket's slices flattened (in backward)"
KEPT = "DeepSpeed offload_optimizer.ratio: the sub-groups kept on the GPU"
# transformers 5.x Trainer.get_decay_parameter_names' forbidden name patterns
NO_DECAY = [r"bias", r"layernorm", r"rmsnorm", r"(?:^|\.)norm(?:$|\.)", r"_norm(?:$|\.)"]


def _trainer_groups(model: str) -> tuple[list[int], list[int]]:
    """(decay, no-decay) tensors' elements, in the model's order, by the Trainer's rule."""
    m = build_model(model, torch.device("meta"))
    norms = [(name, mod) for name, mod in m.named_modules() if isinstance(mod, torch.nn.LayerNorm)]
    layernorm = {f"{name}.{p}" for name, mod in norms for p, _ in mod.named_parameters()}
    decay, none = [], []
    for name, p in m.named_parameters():
        off = name in layernorm or any(re.search(r, name.lower()) for r in NO_DECAY)
        (none if off else decay).append(p.numel())
    return decay, none


def _est(model: str, **kw):
    base = {"model": model, "precision": "mixed", "deepspeed": True, "gpus": 8}
    return estimate(TrainingConfig(**{**base, **kw}))


def _lines(est) -> dict[str, float]:
    return {c.name: c.bytes for c in est.components}


def _step(est) -> int:
    return next(m.bytes for m in est.moments if m.name == "optimizer step")


@pytest.mark.parametrize("zero", [1, 2])
def test_the_step_flattens_the_partition_then_converts_it(zero: int) -> None:
    """stage_1_and_2.py step: flatten (a 16-bit copy), .to(fp32) while the copy is alive, one
    group at a time: (2 + 4) B per element of the largest group's partition; an fp32 engine's
    flat copy is its fp32 gradient (4 B)."""
    decay, none = _trainer_groups("llama-7b")
    psi = sum(decay) + sum(none)
    assert _lines(_est("llama-7b", zero=zero))[STEP] == 6 * psi / 8
    assert _lines(_est("llama-7b", zero=zero, precision="fp32"))[STEP] == 4 * psi / 8
    # the Trainer's groups are stepped in turn: the no-decay group's fp32 copy comes later
    two = _lines(_est("llama-7b", zero=zero, hf_param_groups=True))[STEP]
    assert two == 6 * sum(decay) / 8


def test_a_reduction_flattens_the_buckets_slices_in_backward() -> None:
    """stage_1_and_2.py average_tensor → allreduce_and_scatter → allreduce_bucket: the IPG
    bucket's per-rank slices are flattened (a 16-bit copy of up to reduce_bucket_size
    elements) for the all-reduce; over 64 ranks that is more than the step's 6 B · Ψ/N, and
    with the optimizer offloaded it is there beside no fp32 partition at all."""
    psi = sum(sum(g) for g in _trainer_groups("llama-7b"))
    wide = _lines(_est("llama-7b", zero=2, gpus=64))
    assert wide[REDUCTION] == 2 * 500_000_000 > 6 * psi / 64 and STEP not in wide
    small = _lines(_est("llama-7b", zero=2, gpus=64, reduce_bucket_size=50_000_000))
    assert small[STEP] == 6 * psi / 64 and REDUCTION not in small
    off = _lines(_est("llama-7b", zero=2, gpus=8, offload_optimizer=True))
    assert off[REDUCTION] == 2 * 500_000_000 and STEP not in off


def test_the_buckets_are_alive_in_backward_with_the_activations() -> None:
    """setup_buckets at the first gradient hook, _release_ipg_buffers at backward's end: the
    buckets are there from the head's backward (the loss's moment beside them) and at the
    first reduction (tests/profiling/estimate/test_deepspeed_padding.py: which blocks it
    frees); ZeRO-1 (contiguous_gradients' hooks make its bucket too) reduces at backward's end
    unless overlap_comm (then two buckets)."""
    made = "backward, DeepSpeed's buckets made (the head's hook; bound)"
    first = "backward, DeepSpeed's first reduction (bound)"
    two = {m.name: m.bytes for m in _est("llama-7b", zero=2).moments}
    assert two[made] == two["loss backward"] + 10**9
    assert two[first] == max(two.values())
    one = {m.name: m.bytes for m in _est("llama-7b", zero=1).moments}
    assert first not in one and one[made] == one["loss backward"] + 10**9  # its hooks make it
    est = _est("llama-7b", zero=1, overlap_comm=True)
    overlap = {m.name: m.bytes for m in est.moments}
    assert overlap[made] == overlap["loss backward"] + 2 * 10**9
    act = sum(c.bytes for c in est.components if c.group == "activations")
    logp = _lines(est)["Logits: the fp32 log-probabilities the loss keeps"]
    freed = logp + (act - logp) / 32  # one block behind the first reduction (131M + 202M)
    tokens = 2 * 2048 * 8  # the token ids and labels (int64), not in the bound
    bound = overlap["end of forward"] - tokens - freed + 3 * 10**9  # two buckets, the copy
    assert overlap[first] == pytest.approx(bound, abs=2)


@pytest.mark.parametrize("gpus", [2, 8])
def test_bf16_optimizer_keeps_every_parameters_fp32_gradient(gpus: int) -> None:
    """ZeRO-1 + bf16 + grad_accum_dtype fp32 is BF16_Optimizer: an fp32 accumulator for every
    trained element on every rank (not partitioned), no reduce buckets, no fp32 gradient made
    at the step; at the end of backward the all-reduce converts the accumulator to
    communication_data_type (bf16 by default: a 2-byte copy of all of it); with fp32 there is
    no copy, and the largest bf16 gradient's fp32 copy (update_hp_grads) is the moment's."""
    decay, none = _trainer_groups("llama-7b")
    psi, big = sum(decay) + sum(none), max(decay + none)
    padded = -(-psi // (2 * gpus)) * 2 * gpus  # each group's flat buffer: a multiple of 2·N
    est = _est("llama-7b", zero=1, gpus=gpus, grad_accum_dtype="fp32", comm_dtype="fp32")
    lines = _lines(est)
    assert lines[ACCUM] == 4 * padded
    assert lines[END] == 4 * big
    assert BUCKET not in lines and STEP not in lines
    default = _lines(_est("llama-7b", zero=1, gpus=gpus, grad_accum_dtype="fp32"))
    assert default[END] == 2 * padded
    # weights + bf16 gradients + fp32 accumulators (2 + 2 + 4 B/param) + master and Adam /N
    master_and_adam = sum(v for k, v in lines.items() if k.startswith("Optimizer:"))
    assert master_and_adam == pytest.approx(12 * psi / gpus, abs=4 * 300)  # + step counters
    assert _step(est) == pytest.approx(8 * psi + 12 * psi / gpus + 4 * big, rel=1e-6)
    # against the ZeRO optimizer at the model's own dtype (the default): the accumulators and
    # the end of backward's copy in place of its bucket (5e8 · 2 B) and its step's 6 B · Ψ/N
    gone = 500_000_000 * 2 + 6 * psi / gpus
    more = _step(est) - _step(_est("llama-7b", zero=1, gpus=gpus))
    assert more == pytest.approx(4 * psi + 4 * big - gone, rel=1e-6)


def test_two_groups_under_5e8_elements_are_concatenated_for_the_all_reduce() -> None:
    """engine.py allreduce_no_retain: a 5e8-element bucket holding both groups' fp32 buffers is
    flattened into one copy (GPT-2 small's 124M), then converted to bf16 for the all-reduce
    (6 B per element; 4 with communication_data_type fp32); a group above 5e8 (Llama 7B's decay
    group) is reduced alone: its bf16 copy only."""
    decay, none = _trainer_groups("gpt2-small")
    psi = sum(decay) + sum(none)  # 124,439,808: a multiple of 16
    kw = {"zero": 1, "grad_accum_dtype": "fp32"}
    one = _lines(_est("gpt2-small", **kw, comm_dtype="fp32"))
    two = _lines(_est("gpt2-small", **kw, comm_dtype="fp32", hf_param_groups=True))
    assert one[END] == 4 * max(decay + none)
    assert two[END] == 4 * psi
    assert _lines(_est("gpt2-small", **kw, hf_param_groups=True))[END] == 6 * psi
    assert _lines(_est("gpt2-small", **kw))[END] == 2 * psi
    decay, none = _trainer_groups("llama-7b")
    big = _lines(_est("llama-7b", **kw, comm_dtype="fp32", hf_param_groups=True))
    assert big[END] == 4 * max(decay + none)
    assert _lines(_est("llama-7b", **kw, hf_param_groups=True))[END] == 2 * sum(decay)


def test_the_trainers_groups_give_zero3_a_sub_group_each() -> None:
    """stage3.py makes sub-groups group by group: with the Trainer's two groups Llama 7B on 8
    ranks has two sub-groups, and offload_optimizer.ratio 0.5 keeps the first — the decay
    group, nearly all of it — on the GPU (int((1 − 0.5) · 2) = 1), where one group offloads
    everything (int(0.5 · 1) = 0); the host memory per node falls by as much."""
    decay, _ = _trainer_groups("llama-7b")
    kw = {"zero": 3, "offload_optimizer": True, "offload_ratio": 0.5}
    one, two = _est("llama-7b", **kw), _est("llama-7b", hf_param_groups=True, **kw)
    assert not any(n.startswith(KEPT) for n in _lines(one))
    kept = next(b for n, b in _lines(two).items() if n.startswith(KEPT))
    part = sum(-(-p // 8) for p in decay)
    assert kept == 16 * part
    host = [e.deepspeed["host"]["per_node_bytes"] for e in (one, two)]
    assert host[0] - host[1] == pytest.approx(8 * 16 * part, rel=1e-6)  # 8 ranks · 16 B


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"zero": 2, "grad_accum_dtype": "fp16"}, "fp32 accumulation is modelled under"),
        ({"zero": 1, "grad_accum_dtype": "bf16", "precision": "fp32"}, "the model's own"),
        ({"zero": 1, "ds_fp16": True, "precision": "fp32"}, "--ds-fp16 is DeepSpeed's fp16"),
        ({"zero": 1, "hf_param_groups": True, "deepspeed": False}, "--hf-param-groups"),
    ],
)
def test_what_stays_unmodelled_is_one_sentence(kw, message) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainingConfig.parse(**{"model": "llama-7b", "gpus": 8, "precision": "mixed",
                                "deepspeed": True, **kw})  # fmt: skip
