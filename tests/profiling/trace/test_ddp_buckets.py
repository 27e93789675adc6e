"""DDP's gradient buckets (issue #32): ``--gpus N`` without sharding is torch's
DistributedDataParallel, whose Reducer holds a flat copy of every trainable gradient from the
wrap on (torch 2.13 ``torch/nn/parallel/distributed.py`` ``_ddp_init_helper``, ``c10d/
reducer.cpp`` ``initialize_buckets``). The estimate printed the one-GPU peak and the trace
refused; now both count Ψ_t·w more at every moment, equal to the byte, and the trace's buckets
are the ones a real (gloo, world 1, CPU) DDP makes on the same model."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.report import compare
from profiling.trace.step import trace_step

STATES = ("parameters", "gradients", "optimizer", "activations")
CASES = [
    *[("tiny-gpt2", p, {}) for p in ("fp32", "amp-bf16", "mixed", "bf16")],
    ("tiny-gpt2", "fp32", {"checkpointing": "full"}),
    ("tiny-gpt2", "fp32", {"grads_kept": True}),
    *[("tiny-llama", p, {}) for p in ("fp32", "amp-bf16", "mixed", "bf16")],
    ("tiny-llama", "amp-bf16", {"lora_rank": 8}),  # the adapters alone, fp32 (peft's cast)
    ("tiny-llama", "bf16", {"lora_rank": 8}),
    ("tiny-llama", "amp-bf16", {"lora_rank": 8, "qlora": True}),
    ("tiny-llama", "mixed", {"checkpointing": "full"}),
    ("tiny-llama", "amp-bf16", {"grads_kept": True}),
]


@pytest.mark.parametrize(("model", "precision", "extra"), CASES)
def test_ddp_buckets_estimated_as_traced(model: str, precision: str, extra: dict) -> None:
    base = {"model": model, "seq": 32, "batch": 2, "precision": precision, "target": "cpu"}
    one, two = (TrainingConfig(**base, **extra, gpus=n) for n in (1, 2))
    est1, est2 = estimate(one), estimate(two)
    tr1, tr2 = trace_step(one), trace_step(two)
    w = 2 if precision in ("mixed", "bf16") else 4  # the parameters' dtype (fp32 under autocast)
    buckets = est2.trainable_params * w  # tied weights once, LoRA's adapters alone
    assert est2.category_bytes("buckets") == buckets > 0
    assert tr2.after_step["buckets"] == tr2.by_category["buckets"] == buckets
    assert tr2.phases["after_forward"]["buckets"] == buckets  # alive through the whole step
    assert "buckets" not in tr1.after_step and not est1.category_bytes("buckets")
    for category in STATES:  # the rest of a rank's step is the one-GPU step
        assert est2.category_bytes(category) == est1.category_bytes(category)
        assert tr2.after_step[category] == tr1.after_step[category]
    assert [m.name for m in est2.moments] == [m.name for m in est1.moments]
    pairs = zip(est1.moments, est2.moments, strict=True)
    assert all(m2.bytes == m1.bytes + buckets for m1, m2 in pairs)
    assert tr2.peak_bytes == tr1.peak_bytes + buckets
    assert est2.per_gpu_bytes == tr2.peak_bytes  # was the one-GPU peak: buckets below the trace
    assert est1.per_gpu_bytes == tr1.peak_bytes
    rows = {r["category"]: r for r in compare(est2, tr2)["rows"]}  # --compare-trace's rows
    assert rows["buckets"]["ratio"] == 1.0 and "buckets" not in {
        r["category"] for r in compare(est1, tr1)["rows"]
    }


def ddp_toy(batch: int = 2, seq: int = 16) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A tied embedding and head, eight MLP blocks (8.4 MB of fp32 each, so the rebuilt
    buckets split at 1 MiB and 25 MiB) and a frozen Linear the Reducer leaves out."""

    class Toy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(2048, 512)
            self.blocks = nn.ModuleList(
                nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512))
                for _ in range(8)
            )
            self.frozen = nn.Linear(512, 512)
            self.frozen.requires_grad_(False)
            self.norm = nn.LayerNorm(512)
            self.head = nn.Linear(512, 2048, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            x = self.frozen(self.emb(ids))
            for block in self.blocks:
                x = x + block(x)
            logits = self.head(self.norm(x))
            return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())

    ids = torch.randint(0, 2048, (batch, seq))
    return Toy(), (ids, torch.randint(0, 2048, (batch, seq)))


def _real_ddp_buckets() -> tuple[list[int], list[int]]:
    """A real DistributedDataParallel (torch's defaults) on one gloo rank: its buckets' bytes
    before and after the rebuild, as its logging data reports them."""
    import torch.distributed as dist
    from torch._C._distributed_c10d import HashStore

    dist.init_process_group("gloo", rank=0, world_size=1, store=HashStore())
    try:
        torch.manual_seed(0)
        model, inputs = ddp_toy()
        ddp = nn.parallel.DistributedDataParallel(model)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
        for _ in range(3):  # the second forward rebuilds them; the third logs them
            ddp(*inputs).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        data = ddp._get_ddp_logging_data()
    finally:
        dist.destroy_process_group()
    first, rebuilt = (
        [int(v) for v in str(data[key]).split(", ")]
        for key in ("bucket_sizes", "rebuilt_bucket_sizes")
    )
    return first, rebuilt


def test_traced_buckets_are_a_real_ddps() -> None:
    first, rebuilt = _real_ddp_buckets()
    assert len(rebuilt) > 2  # the first bucket's 1 MiB and the 25 MiB cap both split them
    cfg = TrainingConfig(model="tests:ddp_toy", gpus=2, batch=2, seq=16, target="cpu")
    result = trace_step(cfg, factory=ddp_toy)
    note = next(n for n in result.notes if n.startswith("DDP's Reducer buckets"))
    found = re.search(r"one per dtype \(([\d, ]+) B\).*25 MiB \(([\d, ]+) B\)", note)
    assert found is not None, note
    traced = [[int(v.replace(",", "")) for v in g.split(", ")] for g in found.groups()]
    assert traced == [first, rebuilt]
    assert result.after_step["buckets"] == sum(rebuilt) == sum(first)
    trainable = {id(p): p for p in ddp_toy()[0].parameters() if p.requires_grad}
    assert sum(first) == 4 * sum(p.numel() for p in trainable.values())  # tied: once


VIEW_CASES = [
    ("tiny-llama", "fp32", {}),
    ("tiny-llama", "amp-bf16", {}),
    ("tiny-llama", "mixed", {}),
    ("tiny-gpt2", "fp32", {}),  # a tied weight: one bucket view
    ("tiny-llama", "amp-bf16", {"lora_rank": 8}),  # the adapters' buckets alone
    ("tiny-llama", "fp32", {"ddp_find_unused": True}),  # buckets never rebuilt
]


@pytest.mark.parametrize(("model", "precision", "extra"), VIEW_CASES)
def test_gradient_as_bucket_view_holds_the_gradients_in_the_buckets(
    model: str, precision: str, extra: dict
) -> None:
    # gradient_as_bucket_view=True (accelerate's DistributedDataParallelKwargs, Lightning's
    # DDPStrategy): c10d/reducer.cpp mark_variable_ready_dense copies each ready gradient into
    # its bucket and sets grad = bucket_view, so the optimizer step holds the buckets and no
    # .grad beside them — the estimate counted both (Ψ_t·w above the step torch runs)
    base = {"model": model, "seq": 32, "batch": 2, "precision": precision, "target": "cpu",
            "gpus": 2, **extra}  # fmt: skip
    copy, view = TrainingConfig(**base), TrainingConfig(**base, ddp_bucket_view=True)
    est_c, est_v = estimate(copy), estimate(view)
    tr_c, tr_v = trace_step(copy), trace_step(view)
    buckets = est_v.category_bytes("buckets")
    assert buckets == est_c.category_bytes("buckets") == tr_v.after_step["buckets"] > 0
    # the traced buckets are the gradients: none held beside them at the optimizer step
    assert tr_c.after_step["buckets"] == tr_v.after_step["buckets"]

    def step(e: object) -> int:
        return next(m.bytes for m in e.moments if m.name == "optimizer step")  # type: ignore[attr-defined]

    grads = est_v.category_bytes("gradients")
    assert step(est_c) - step(est_v) == grads > 0
    assert est_v.per_gpu_bytes == tr_v.peak_bytes <= tr_c.peak_bytes  # lower where the step led
    note = next(n for n in tr_v.notes if n.startswith("DDP's Reducer"))
    assert "gradient_as_bucket_view=True" in note
