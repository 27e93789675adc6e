"""DeepSpeed 0.19.6's (edaa7221) partitions as it pads and cuts them, over the model itself
(built on the meta device, its parameters in registration order, as DeepSpeed flattens them):
ZeRO-1/2 pad each group's flat buffer to a multiple of 2·N elements (stage_1_and_2.py:392),
ZeRO-2 keeps the WHOLE of each tensor that starts in or straddles a rank's partition
(``get_partition_info``, ``copy_grads_in_partition``), ZeRO-3 pads each tensor to a multiple
of N (partition_parameters.py ``_aligned_size``); and ZeRO-2's backward, where the first
reduction comes once the bucket cannot take the next gradient (stage_1_and_2.py:1201)."""

from __future__ import annotations

import re

import pytest
import torch

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.models.workloads import build_model
from tests.profiling.estimate.deepspeed_ranks import kept_whole

MASTER = "Optimizer: fp32 master weights"
STEP = "DeepSpeed fp32 gradient partition (at the step, with its flattened copy)"
FIRST = "backward, DeepSpeed's first reduction (bound)"
LOGP = "Logits: the fp32 log-probabilities the loss keeps"


def _params(model: str) -> list[tuple[str, int]]:
    return [(n, p.numel()) for n, p in build_model(model, torch.device("meta")).named_parameters()]


def _est(model: str, **kw):
    base = {"model": model, "precision": "mixed", "deepspeed": True}
    return estimate(TrainingConfig(**{**base, **kw}))


def _lines(est) -> dict[str, float]:
    return {c.name: c.bytes for c in est.components}


def _line(est, start: str) -> float:
    return next(c.bytes for c in est.components if c.name.startswith(start))


@pytest.mark.parametrize("zero", [1, 2])
def test_zero12_pads_each_group_to_a_multiple_of_2n(zero: int) -> None:
    """GPT-2 small's 124,439,808 elements over 7 ranks: the 16-bit flat buffer padded to a
    multiple of 14, each rank's fp32 master (and states, and the step's fp32 gradient) a
    fourteenth of it times 2 — not Ψ/7, which is below it (the unsafe side)."""
    psi = sum(x for _, x in _params("gpt2-small"))
    part = -(-psi // 14) * 2
    assert part * 7 > psi  # padded: 124,439,808 is no multiple of 14
    est = _est("gpt2-small", zero=zero, gpus=7, reduce_bucket_size=10_000_000)
    assert _line(est, "Weights (") == 2 * part * 7
    assert _lines(est)[MASTER] == 4 * part
    assert _line(est, "Optimizer: momentum") == _line(est, "Optimizer: variance") == 4 * part
    assert _lines(est)[STEP] == 6 * part
    host = _est("gpt2-small", zero=zero, gpus=7, offload_optimizer=True).deepspeed["host"]
    got = {x["name"]: x["bytes"] for x in host["lines"]}
    assert got["fp32 master weights"] == got["fp32 gradient partition"] == 4 * part


@pytest.mark.parametrize(("model", "gpus"), [("gpt2-small", 8), ("llama-7b", 64)])
def test_zero2_keeps_the_whole_tensors_of_its_partition(model: str, gpus: int) -> None:
    """A rank keeps the reduced gradients of every tensor starting in (or straddling the start
    of) its partition, whole: GPT-2 small's 38.6M-element embedding on each of the first three
    ranks of 8; Llama 7B's 45M-element MLP matrices straddling 105M-element partitions."""
    numels = [x for _, x in _params(model)]
    kept = kept_whole(numels, gpus)
    assert kept > 1.1 * sum(numels) / gpus
    est = _est(model, zero=2, gpus=gpus)
    assert _line(est, "Gradients (") == pytest.approx(2 * kept)
    # ZeRO-1 keeps every gradient whole: no partition to cut
    assert _line(_est(model, zero=1, gpus=gpus), "Gradients (") == 2 * sum(numels)


def test_zero3_pads_each_tensor_to_a_multiple_of_n() -> None:
    """tiny-gpt2 over 3 ranks: ceil(numel / 3) of each tensor, of the 16-bit partitions and the
    fp32 master alike."""
    numels = [x for _, x in _params("tiny-gpt2")]
    mine = sum(-(-x // 3) for x in numels)
    assert mine * 3 > sum(numels)
    est = _est("tiny-gpt2", zero=3, gpus=3)
    assert _line(est, "Weights (") == pytest.approx(2 * mine)
    assert _lines(est)[MASTER] == pytest.approx(4 * mine)


@pytest.mark.parametrize("model", ["llama-7b", "gpt2-small"])
def test_zero2s_first_reduction_frees_the_blocks_behind_it(model: str) -> None:
    """Backward's hooks (an untied head's, the final norm's, the blocks' from the last; a tied
    head's at the end) fill the 5e8-element bucket; the first reduction comes at the first
    gradient that does not fit: the blocks whose every gradient came before it have freed
    their activations, and the loss its log-probabilities. Llama 7B on 8 ranks: one block."""
    params = _params(model)
    tied = model.startswith("gpt2")
    order = [(n, x) for n, x in reversed(params) if not (tied and n == "wte.weight")]
    held, trigger = 0, len(order)
    for i, (_, x) in enumerate(order):
        if held + x > 500_000_000:
            trigger = i
            break
        held += x
    block = re.compile(r"^(?:layers|h)\.(\d+)\.")
    seen: dict[int, int] = {}
    for i, (name, _) in enumerate(order):
        if m := block.match(name):
            seen[int(m[1])] = i  # the block's last hook
    L = len(seen)
    done = sum(1 for last in seen.values() if last < trigger)
    est = _est(model, zero=2, gpus=8)
    moments = {m.name: m.bytes for m in est.moments}
    act = sum(c.bytes for c in est.components if c.group == "activations")
    logp = _lines(est)[LOGP]
    kept = kept_whole([x for _, x in params], 8)
    tokens = _line(est, "Inputs: the token ids")
    fwd = moments["end of forward"] - tokens
    freed = logp + done * (act - logp) / L
    copy = 2 * min(500_000_000, sum(x for _, x in params))  # the bucket's slices flattened
    bucket = 2 * 500_000_000  # one: no overlap_comm at ZeRO-2 by default
    assert moments[FIRST] == pytest.approx(fwd - freed + bucket + copy + 2 * kept, abs=2)
    if model == "llama-7b":
        assert done == 1 and moments[FIRST] == max(moments.values())
