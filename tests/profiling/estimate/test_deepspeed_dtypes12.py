"""DeepSpeed 0.19.6's (edaa7221) ZeRO-1/2 optimizer under ``communication_data_type`` and
``data_types.grad_accum_dtype`` fp32 beside an offloaded optimizer (stage_1_and_2.py): a
reduction converts the bucket's flattened slices (``allreduce_bucket``, line 1850); ZeRO-1's
``use_grad_accum_attribute`` path (line 361) keeps an fp32 ``grad_accum`` of every parameter
and takes two 16-bit copies of a tensor to reduce it (``reduce_gradients``, line 861, and
``reduce_independent_p_g_buckets_and_remove_grads``, line 1198); ZeRO-2 moves nothing."""

from __future__ import annotations

import pytest
import torch

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.models.workloads import build_model
from tests.profiling.estimate.deepspeed_ranks import kept_whole

REDUCTION = "DeepSpeed gradient reduction: the bucket's slices flattened (in backward)"
ACCUMULATORS = "DeepSpeed ZeRO-1 fp32 gradient accumulators (grad_accum, every parameter's)"
COPIES = "DeepSpeed ZeRO-1 reduction of the fp32 accumulators: two 16-bit copies of a tensor"
FIRST = "backward, DeepSpeed's first reduction (bound)"


def _est(**kw):
    base = {"model": "llama-7b", "precision": "mixed", "deepspeed": True, "gpus": 64}
    return estimate(TrainingConfig(**{**base, **kw}))


def _lines(est) -> dict[str, float]:
    return {c.name: c.bytes for c in est.components}


@pytest.mark.parametrize(("comm", "extra"), [("fp32", 4), ("fp16", 2), ("bf16", 0)])
def test_a_reduction_converts_its_slices_to_the_communication_dtype(comm: str, extra: int) -> None:
    """Llama 7B ZeRO-2 on 64 ranks: the flattened slices (2 B) and, unless the dtype is the
    model's (bf16), their conversion, alive while the bucket is all-reduced and copied back;
    the first reduction's moment holds them too."""
    base, est = _est(zero=2), _est(zero=2, comm_dtype=comm)
    assert _lines(est)[REDUCTION] == (2 + extra) * 500_000_000
    moments = {m.name: m.bytes for m in est.moments}
    before = {m.name: m.bytes for m in base.moments}
    assert moments[FIRST] - before[FIRST] == extra * 500_000_000
    off = _lines(_est(zero=1, gpus=8, offload_optimizer=True, comm_dtype=comm))
    assert off[REDUCTION] == (2 + extra) * 500_000_000


def test_zero1_offloaded_accumulates_every_gradient_in_fp32() -> None:
    """ZeRO-1, bf16, fp32 accumulation, the optimizer offloaded (so not BF16_Optimizer): 4 B
    of every parameter on every rank in place of its 2-byte gradient, and two 16-bit copies of
    the largest tensor (Llama 7B's 131M-element embedding) while the bucket is reduced."""
    params = list(build_model("llama-7b", torch.device("meta")).parameters())
    psi, big = sum(p.numel() for p in params), max(p.numel() for p in params)
    kw = {"zero": 1, "gpus": 8, "offload_optimizer": True}
    plain, fp32 = _lines(_est(**kw)), _lines(_est(**kw, grad_accum_dtype="fp32"))
    assert plain["Gradients (fp16/bf16)"] == 2 * psi and ACCUMULATORS not in plain
    assert fp32[ACCUMULATORS] == 4 * psi and "Gradients (fp16/bf16)" not in fp32
    assert fp32[COPIES] == 2 * 2 * big
    assert not any(n.startswith("DeepSpeed BF16_Optimizer") for n in fp32)


@pytest.mark.parametrize("offload", [False, True])
def test_zero2_keeps_its_gradients_in_the_models_dtype(offload: bool) -> None:
    """ZeRO-2 partitions the gradients: no grad_accum attribute (line 361), the partition in
    the model's dtype — fp32 accumulation moves nothing, offloaded or not."""
    kw = {"zero": 2, "gpus": 8, "offload_optimizer": offload}
    assert _lines(_est(**kw, grad_accum_dtype="fp32")) == _lines(_est(**kw))


def test_zero1_fp16_accumulates_in_fp32_without_bf16_optimizer() -> None:
    """fp16 with fp32 accumulation at ZeRO-1 is the ZeRO optimizer (engine.py:1994 picks
    BF16_Optimizer for bf16 only): the fp32 grad_accum of every parameter, the two 16-bit
    copies and the rank's whole tensors in grads_in_partition while reducing, and at the step
    the fp32 slices flattened (4 B · the padded partition; .to(fp32) returns the copy)."""
    params = list(build_model("llama-7b", torch.device("meta")).parameters())
    numels = [p.numel() for p in params]
    psi, big, n = sum(numels), max(numels), 8
    est = _lines(_est(zero=1, gpus=n, grad_accum_dtype="fp32", ds_fp16=True))
    assert est[ACCUMULATORS] == 4 * psi
    assert est[COPIES] == 2 * 2 * big + 2 * kept_whole(numels, n)
    step = "DeepSpeed fp32 gradient partition (at the step, with its flattened copy)"
    assert est[step] == 4 * (-(-psi // (2 * n)) * 2)
    assert not any(name.startswith("DeepSpeed BF16_Optimizer") for name in est)
    # communication_data_type is against fp16 now: bf16 converts, fp16 does not
    assert _lines(_est(zero=2, ds_fp16=True, comm_dtype="bf16"))[REDUCTION] == 4 * 500_000_000
    assert _lines(_est(zero=2, ds_fp16=True, comm_dtype="fp16"))[REDUCTION] == 2 * 500_000_000
