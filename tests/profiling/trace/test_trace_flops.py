"""FLOPs of the traced step: a hand count for a two-layer toy, the closed form for the
reference models, checkpointing's recomputation, and the per-module split."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from profiling.models.workloads import WORKLOADS  # noqa: E402
from profiling.trace.step import TraceConfig, trace_step  # noqa: E402

B, D_IN, D_HID, D_OUT = 4, 32, 64, 10


def two_layer_toy(batch: int = B):
    class Toy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(D_IN, D_HID)
            self.fc2 = torch.nn.Linear(D_HID, D_OUT)

        def forward(self, x, y):
            return torch.nn.functional.cross_entropy(self.fc2(torch.relu(self.fc1(x))), y)

    return Toy(), (torch.randn(batch, D_IN), torch.randint(0, D_OUT, (batch,)))


def test_two_layer_toy_by_hand() -> None:
    r = trace_step(TraceConfig(model="tests:two_layer_toy", batch=B), factory=two_layer_toy)
    mm = lambda m, k, n: 2 * m * k * n  # noqa: E731  (a multiply and an add per term)
    forward = mm(B, D_IN, D_HID) + mm(B, D_HID, D_OUT)
    # fc2: gradient of its input and of its weight; fc1: of its weight only — the input x
    # needs no gradient, which is why "backward = 2 × forward" is not exact here.
    backward = mm(B, D_OUT, D_HID) + mm(D_OUT, B, D_HID) + mm(D_HID, B, D_IN)
    assert (r.flops.forward, r.flops.backward) == (forward, backward)
    assert r.flops.total == forward + backward == 21_504 + 26_624
    assert r.flops.by_module["Toy.fc1"] == {
        "forward": mm(B, D_IN, D_HID),
        "backward": mm(D_HID, B, D_IN),
    }
    assert r.flops.by_module["Toy.fc2"]["backward"] == 2 * mm(B, D_HID, D_OUT)


def _closed_form(
    name: str, batch: int, seq: int, recompute: bool = False, eager: bool = False
) -> int:
    """6·T·(matmul weights) + attention (4 forward + 10 backward)·b·s²·h per layer (eager
    attention's backward is 8: it keeps the probabilities instead of recomputing QKᵀ)."""
    w = WORKLOADS[name]
    tokens, h = batch * seq, w.hidden
    if w.arch == "llama":
        kv = w.n_kv_heads * w.head_dim
        block = 2 * h * h + 2 * h * kv + 3 * h * w.ffn
    else:
        block = 4 * h * h + 2 * h * w.ffn
    head = w.vocab * h
    attention = 2 * batch * seq * seq * h  # one of the s²-sized matmuls
    flops = 6 * tokens * (w.layers * block + head) + w.layers * (6 if eager else 7) * attention
    if recompute:
        # Each block's forward runs again in backward, except its last matmul (the MLP's
        # output projection, h·ffn): non-reentrant checkpointing stops recomputing once every
        # saved tensor is back, and that matmul's output is saved by nothing inside the block.
        flops += w.layers * (2 * tokens * (block - h * w.ffn) + 2 * attention)
    return flops


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("tiny-llama", {}),
        ("tiny-gpt2", {"precision": "amp-bf16"}),
        ("tiny-llama", {"checkpointing": True}),
        ("tiny-gpt2", {"checkpointing": True}),
        ("tiny-llama", {"attention": "eager"}),
    ],
    ids=["llama-gqa", "gpt2-autocast", "llama-recompute", "gpt2-recompute", "llama-eager"],
)
def test_reference_models_match_the_closed_form(name: str, kwargs: dict) -> None:
    r = trace_step(TraceConfig(model=name, batch=2, seq=32, **kwargs))
    expected = _closed_form(
        name,
        2,
        32,
        recompute=bool(kwargs.get("checkpointing")),
        eager=kwargs.get("attention") == "eager",
    )
    assert r.flops.total == expected
    blocks = [v for k, v in r.flops.by_module.items() if k.count(".") == 2]
    assert len(blocks) == WORKLOADS[name].layers and all(b == blocks[0] for b in blocks)


def test_flops_do_not_depend_on_precision_or_sharding() -> None:
    base = TraceConfig(model="tiny-llama", batch=2, seq=16)
    counts = {
        trace_step(base.model_copy(update=u)).flops.total
        for u in (
            {},
            {"precision": "mixed"},
            {"precision": "bf16"},
            {"fsdp": True, "gpus": 2, "zero": 3},
        )
    }
    assert len(counts) == 1


def test_time_on_a_gpu_from_the_counted_flops() -> None:
    from profiling.gpus import GPUS

    cfg = TraceConfig(
        model="tiny-gpt2", batch=4, seq=64, precision="amp-bf16", gpu="a100-80gb", mfu=0.5,
        tokens=10**9,
    )  # fmt: skip
    r = trace_step(cfg)
    t = r.time
    assert t is not None and t.gpu == "a100-80gb" and t.sixteen_bit
    assert t.flops_per_step == r.flops.total and t.tokens_per_step == 4 * 64
    # Compute at the datasheet peak × MFU, then the optimizer step over the memory bandwidth
    # (Adam in amp: fp32 weights, two fp32 states, an fp32 gradient — 2·(4+0+8)+4 = 28 B each).
    assert t.compute_seconds == pytest.approx(r.flops.total / (312e12 * 0.5), rel=1e-12)
    optimizer = r.params * 28 / (GPUS["a100-80gb"].bandwidth_tbs * 1e12)
    assert t.step_seconds == pytest.approx(t.compute_seconds + optimizer, rel=1e-9)
    assert t.tokens_per_second == pytest.approx(256 / t.step_seconds, rel=1e-12)
    assert t.total_seconds == pytest.approx(10**9 / t.tokens_per_second, rel=1e-12)
    assert [s.name for s in t.steps][:2] == [
        f"peak 16-bit tensor-core FLOP/s of one {GPUS['a100-80gb'].name}",
        "compute time",
    ]
    assert t.steps[-3].name == "step time"  # compute + the optimizer step, then the rates
    # fp32 matmuls run at the plain fp32 peak; FSDP ranks each run their own micro-batch.
    fp32 = trace_step(cfg.model_copy(update={"precision": "fp32"})).time
    assert fp32.compute_seconds == pytest.approx(r.flops.total / (19.5e12 * 0.5), rel=1e-12)
    sharded = trace_step(
        TraceConfig(model="tiny-gpt2", batch=4, seq=64, gpu="h100-sxm", fsdp=True, gpus=4)
    ).time
    assert sharded.tokens_per_second == pytest.approx(4 * 256 / sharded.step_seconds, rel=1e-12)
