"""Context parallelism (``--cp N``): torch's own ring attention traced on the fake group, and the
closed form of its buffers (profiling.plans.ring_form) held to it — per attention call to the
byte, per plan and category within 1 %."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import parse_config
from profiling.errors import ConfigError, ProfilingError
from profiling.plans.closed_form import estimate_plan

# Llama-shaped (grouped-query heads), a long sequence and a small vocabulary: the ring's
# buffers, not the loss, make the highest moment
SHAPE = {"layers": 2, "hidden": 512, "heads": 8, "kv_heads": 4, "ffn": 1024, "vocab": 512,
         "arch": "llama", "precision": "mixed", "seq": 32768}  # fmt: skip


def _one_attention(cp: int, rank: int, bf16: bool) -> tuple[int, int, int]:
    """(the forward's highest above q, k, v; what it keeps; the backward's highest above its
    start, the output's gradient included) of one ring attention, as the plan's tracker counts
    them."""
    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    from profiling.plans.ring import Ring, ring_dispatch
    from profiling.trace.fake_world import fake_world, mesh_of
    from profiling.trace.target import kernels

    def total(mt: Any, kind: str | None = None) -> int:
        snap = mt.get_tracker_snapshot(kind) if kind else mt.get_tracker_snapshot()
        return sum(v.get("Total", 0) for v in snap.values())

    dtype = torch.bfloat16 if bf16 else torch.float32
    with fake_world():
        mesh = mesh_of({"cp": cp}, rank)
        assert mesh is not None
        try:
            with FakeTensorMode(), kernels("cuda"), ring_dispatch():
                q, k, v = (torch.empty(1, 1024, 8, 128, dtype=dtype, requires_grad=True)
                           for _ in range(3))  # fmt: skip
                mt = MemTracker()
                with mt:
                    qq, kk, vv = (t.transpose(1, 2) for t in (q * 1, k * 1, v * 1))
                    mt.reset_mod_stats()
                    start = total(mt)
                    out = Ring(mesh).attend(qq, kk, vv)
                    forward, kept = total(mt, "peak") - start, total(mt) - start
                    mt.reset_mod_stats()
                    start = total(mt)
                    out.backward(torch.empty_like(out))
                    backward = total(mt, "peak") - start
        finally:
            dist.destroy_process_group()
    return forward, kept, backward


@pytest.mark.parametrize("bf16", [True, False], ids=["bf16", "fp32"])
@pytest.mark.parametrize("cp", [2, 4, 8])
def test_one_ring_attention_is_its_closed_form_to_the_byte(cp: int, bf16: bool) -> None:
    pytest.importorskip("torch")
    from profiling.models.config import WorkloadConfig
    from profiling.plans.ring_form import backward_moment, forward_moment, query_bytes

    forward, kept, backward = _one_attention(cp, 1, bf16)
    w = WorkloadConfig(name="toy", layers=1, hidden=1024, heads=8, ffn=1, vocab=1, arch="llama")
    c = 2 if bf16 else 4
    q = query_bytes(w, 1024, 1, c)
    assert q == 1024 * 8 * 128 * c
    assert forward == forward_moment(w, 1024, 1, c, cp)
    # the merged output and its fp32 logsumexp, with the kernel's seed and offset (flash
    # attention's 24 B in 16 bits, the memory-efficient kernel's 16 in fp32)
    assert kept == q + 8 * 1024 * 4 + (24 if bf16 else 16)
    assert backward == backward_moment(w, 1024, 1, c, cp) + q  # + the output's gradient
    # the all-gather of every rank's keys and values is in both: 2·cp·q more per rank
    assert forward_moment(w, 1024, 1, c, cp) >= 2 * cp * q


def test_rank_0_of_the_ring_holds_less_at_attentions_highest_moment() -> None:
    pytest.importorskip("torch")
    first, _, _ = _one_attention(4, 0, True)
    second, _, _ = _one_attention(4, 1, True)
    last, _, _ = _one_attention(4, 3, True)
    assert first < second == last  # hence the trace's ring rank 1


def test_the_plan_runs_torchs_ring_attention_in_every_block(monkeypatch) -> None:
    pytest.importorskip("torch")
    import torch.distributed.tensor.experimental._context_parallel._attention as cp_attention

    from profiling.plans.trace import trace_plan

    calls: list[str] = []
    for name in ("_templated_ring_attention", "_templated_ring_attention_backward"):
        real = getattr(cp_attention, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(cp_attention, name, spy)
    cfg = parse_config(**{**SHAPE, "seq": 4096}, cp=2, dp_shard=1)
    traced = trace_plan(cfg)
    # two steps (the first makes the optimizer's state), two blocks: forward and backward each,
    # on ring ranks 0 and 1 (at cp 2 both are traced)
    assert calls.count("_templated_ring_attention") == 2 * 4
    assert calls.count("_templated_ring_attention_backward") == 2 * 4
    assert any("torch's ring attention" in n for n in traced.notes)
    assert traced.layout.world == 2


@pytest.mark.parametrize(
    "plan",
    [
        {"cp": 4, "dp_shard": 1},  # no FSDP: the ring's backward is the highest moment
        {"cp": 2, "dp_shard": 2},  # FSDP over dp_shard × cp = 4
        {"cp": 4, "dp_shard": 2, "checkpointing": "full"},  # the ring again in the recompute
        {"cp": 2, "tp": 2, "dp_shard": 1},  # 1/2 of the heads each
        {"cp": 4, "dp_shard": 1, "precision": "fp32", "seq": 16384},
    ],
    ids=["cp4", "fsdp2-cp2", "fsdp2-cp4-full", "tp2-cp2", "fp32-cp4"],
)
def test_the_closed_form_is_the_trace_category_by_category(plan: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHAPE, **plan})
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.001)
        for category, bytes_ in t.by_category.items():
            if bytes_ > t.peak_bytes // 1000:
                assert e.by_category[category] == pytest.approx(bytes_, rel=0.01), category
    for ts, es in zip(traced.stages, estimated.stages, strict=True):
        # what a microbatch keeps (wo's copy of the ring's merged output from cp 3) and the
        # forward's highest moment (the ring's, checkpointed: the loss's otherwise)
        kept_t, kept_e = ts.moves["F0"].delta["total"], es.moves["F0"].delta["total"]
        assert kept_e == pytest.approx(kept_t, rel=1e-3)
        assert es.moves["F0"].peak["total"] == pytest.approx(ts.moves["F0"].peak["total"], rel=0.01)


def test_wos_copy_is_kept_from_three_ranks_of_ring() -> None:
    from profiling.plans.closed_form import stage_profile
    from profiling.plans.layout import layout_of
    from profiling.plans.model import plan_workload

    def kept(cp: int, ring_rank: int = 1) -> int:
        cfg = parse_config(**SHAPE, cp=cp, dp_shard=1)
        w = plan_workload(cfg)
        layout = layout_of(cfg, w.layers)
        profile = stage_profile(cfg, w, layout, layout.stages[0], ring_rank)
        return profile.moves["F0"].delta["activations"]

    # per block a q (tokens × heads × head dim × 2 B) more at cp 4 than the chunk alone holds;
    # at cp 2 ring rank 1 merges whole steps only, in the kernel's layout: no copy; rank 0 does
    q = lambda cp: 32768 // cp * 512 * 2  # noqa: E731
    assert kept(2) == pytest.approx(2 * kept(4) - 2 * 2 * q(4), rel=1e-3)
    assert kept(2, ring_rank=0) == kept(2) + 2 * q(2)


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        (
            {"cp": 2, "hidden": 500, "heads": 4, "kv_heads": 4, "precision": "fp32"},
            "runs CUDA's math attention, which torch's ring attention does not take",
        ),
        (  # audit4's D44: 64 tokens over cp 2 in fp32 (torch's own ring fails: below)
            {"cp": 2, "precision": "fp32", "seq": 64},
            "cannot merge on chunks of 16 tokens (--seq / (2 · --cp)): give --seq a multiple "
            "of 128 or a 16-bit precision",
        ),
    ],
)
def test_what_the_ring_cannot_take_is_one_sentence(kw: dict[str, Any], words: str) -> None:
    with pytest.raises((ConfigError, ProfilingError)) as raised:
        estimate_plan(parse_config(**{**SHAPE, "dp_shard": 1, **kw}))
    text = str(raised.value)
    assert words in text and "\n" not in text


@pytest.mark.parametrize("bf16", [True, False], ids=["bf16", "fp32"])
def test_ring_rank_0_at_cp_2_is_its_closed_form_to_the_byte(bf16: bool) -> None:
    pytest.importorskip("torch")
    from profiling.models.config import WorkloadConfig
    from profiling.plans.ring_form import backward_moment, forward_moment, query_bytes

    forward, kept, backward = _one_attention(2, 0, bf16)
    w = WorkloadConfig(name="toy", layers=1, hidden=1024, heads=8, ffn=1, vocab=1, arch="llama")
    c = 2 if bf16 else 4
    q = query_bytes(w, 1024, 1, c)
    assert forward == forward_moment(w, 1024, 1, c, 2, rank=0)
    assert kept == q + 8 * 1024 * 4 + (24 if bf16 else 16)  # as ring rank 1 (wo's copy aside)
    assert backward == backward_moment(w, 1024, 1, c, 2, rank=0) + q
    # in fp32 rank 0's backward is the higher of the two (half a query's buffer more)
    assert (backward > _one_attention(2, 1, bf16)[2]) == (not bf16)


def test_at_cp_2_ring_rank_0_keeps_wos_copy_and_makes_the_plans_peak() -> None:
    pytest.importorskip("torch")
    from profiling.plans.closed_form import stage_profile
    from profiling.plans.layout import layout_of
    from profiling.plans.model import plan_workload
    from profiling.plans.ring_stage import compose_ranks
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHAPE, "layers": 4}, cp=2, dp_shard=1)
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    w = plan_workload(cfg)
    layout = layout_of(cfg, w.layers)
    one = compose_ranks(layout, [stage_profile(cfg, w, layout, s, 1) for s in layout.stages])
    # four blocks' copies of the merged output (16,384 tokens × 512 × 2 B each) outweigh what
    # ring rank 1 holds more at the ring: rank 0 is the plan's peak (rank 1's alone was 0.97)
    q = 16384 * 512 * 2
    assert estimated.ranks[0].peak_bytes > one[0].peak_bytes + 2 * q
    t, e = traced.ranks[0], estimated.ranks[0]
    assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.001)
    for category, bytes_ in t.by_category.items():
        if bytes_ > t.peak_bytes // 100 and category != "inputs":
            assert e.by_category[category] == pytest.approx(bytes_, rel=0.01), category
    assert any("ring ranks 0 and 1" in n for n in traced.notes)


def test_fsdp_over_the_cp_ranks_alone_is_the_trace() -> None:
    # --dp-shard 1 --cp 4 --fsdp: torchtitan's dp_shard_cp with dp_shard 1, the parameters,
    # gradients and optimizer state sharded over the 4 ring ranks
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**SHAPE, cp=4, dp_shard=1, fsdp=True)
    plain = estimate_plan(parse_config(**SHAPE, cp=4, dp_shard=1))
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    assert estimated.layout.shard_ranks == 4 and estimated.layout.world == 4
    t, e = traced.ranks[0], estimated.ranks[0]
    assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.001)
    for category in ("parameters", "gradients", "optimizer", "activations", "temporaries"):
        assert e.by_category[category] == pytest.approx(t.by_category[category], rel=0.01)
    # Adam's fp32 moments over 4 ranks, not whole
    assert e.after_step["optimizer"] < plain.ranks[0].after_step["optimizer"] / 3


def test_dp_shard_1_without_cp_still_shards_nothing() -> None:
    with pytest.raises(ConfigError, match="--cp N > 1 with --fsdp"):
        parse_config(**SHAPE, dp_shard=1, fsdp=True)


@pytest.mark.parametrize(("chunk", "runs"), [(16, False), (48, False), (32, True)])
def test_the_memory_efficient_ring_needs_chunks_of_32_tokens(chunk: int, runs: bool) -> None:
    """The refusal above is torch's: the memory-efficient kernel (fp32) pads its logsumexp to 32
    queries and torch's ring merger breaks on any other chunk (on ring rank 0, whose steps
    attend with half its queries); the plan refuses exactly those."""
    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode

    from profiling.plans.ring import Ring, ring_dispatch
    from profiling.trace.fake_world import fake_world, mesh_of
    from profiling.trace.target import kernels

    with fake_world():
        mesh = mesh_of({"cp": 2}, 0)
    assert mesh is not None
    try:
        with FakeTensorMode(), kernels("cuda"), ring_dispatch():
            q, k, v = (torch.empty(1, 2 * chunk, 8, 64, requires_grad=True) for _ in range(3))
            qq, kk, vv = (t.transpose(1, 2) for t in (q * 1, k * 1, v * 1))
            try:
                Ring(mesh).attend(qq, kk, vv)
                ran = True
            except RuntimeError as e:
                assert "broadcast" in str(e)
                ran = False
    finally:
        dist.destroy_process_group()
    assert ran is runs
    cfg = parse_config(**{**SHAPE, "dp_shard": 1, "cp": 2, "precision": "fp32", "seq": 4 * chunk})
    if runs:
        estimate_plan(cfg)
    else:
        with pytest.raises((ConfigError, ProfilingError), match="cannot merge on chunks"):
            estimate_plan(cfg)
