"""torch.compile under a parallel plan (``--compile`` with FSDP, TP, PP, CP): each block
tensor-parallelized, checkpointed, then compiled, then sharded, as torchtitan does; the block's
forward split by Inductor's partitioner on fake tensors (DTensor parameters as AOTAutograd
flattens them), the checkpoint's policy reaching it as recompute tags."""

from __future__ import annotations

import pytest

from profiling.config import parse_config

pytest.importorskip("torch")

SHAPE = {"layers": 2, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 8192,
         "arch": "llama", "precision": "mixed", "seq": 1024, "batch": 2, "dp_shard": 2}  # fmt: skip


def _activations(**over: object) -> tuple[int, int]:
    from profiling.plans.trace import trace_plan

    top = trace_plan(parse_config(**{**SHAPE, **over})).highest
    return top.by_category["activations"], top.peak_bytes


@pytest.mark.parametrize("checkpointing", ["none", "selective-op"])
def test_a_compiled_block_keeps_less_than_eager(checkpointing) -> None:
    eager = _activations(checkpointing=checkpointing)
    compiled = _activations(checkpointing=checkpointing, compile=True)
    assert compiled[0] < eager[0] and compiled[1] < eager[1]


def test_the_per_op_policy_reaches_the_partitioner() -> None:
    # the policy's recompute tags make the compiled block keep less than compiled alone
    # (without them, the partitioner would fail on a checkpoint region it cannot number)
    plain = _activations(compile=True)
    policy = _activations(compile=True, checkpointing="selective-op")
    assert policy[0] < plain[0]


SMALL = {**SHAPE, "hidden": 512, "ffn": 1408, "vocab": 4096, "seq": 512, "batch": 4}
SMALL.pop("dp_shard")


def _ranks(**over: object) -> list[dict[str, int]]:
    from profiling.plans.trace import trace_plan

    res = trace_plan(parse_config(**{**SMALL, **over}))
    return [{**r.by_category, "peak": r.peak_bytes} for r in res.ranks]


@pytest.mark.parametrize(
    "plan",
    [
        {"tp": 2},  # sequence parallel: DTensor weights inside the compiled block
        {"tp": 2, "dp_shard": 2, "checkpointing": "selective-op"},
        {"pp": 2, "microbatches": 2},  # each stage's blocks compiled, torch's PipelineStage
        {
            "pp": 2,
            "tp": 2,
            "microbatches": 4,
            "pp_schedule": "interleaved",
            "virtual_stages": 2,
            "layers": 4,
        },
    ],
    ids=["tp", "fsdp-tp-sac", "pp", "pp-tp-interleaved"],
)
def test_compile_under_tp_pp_cp_keeps_less_and_changes_no_model_state(plan) -> None:
    eager, compiled = _ranks(**plan), _ranks(**plan, compile=True)
    assert len(eager) == len(compiled)
    for e, c in zip(eager, compiled, strict=True):
        # every rank's weights and optimizer state as eager's (a DTensor gradient rewrapped on
        # the wrong mesh or placement would change the step's states or fail); the gradients
        # alive at the highest moment differ as that moment moves
        for k in ("parameters", "optimizer"):
            assert c[k] == e[k], (k, e, c)
    # the partitioner recomputes the blocks' pointwise chains: the highest rank keeps less
    assert max(c["activations"] for c in compiled) < max(e["activations"] for e in eager)
    assert max(c["peak"] for c in compiled) < max(e["peak"] for e in eager)


def test_compile_around_the_ring_keeps_the_model_states_and_the_gathered_keys() -> None:
    # torch's ring attention compiled inside each block runs (DTensor's context-parallel
    # dispatch under Dynamo and AOTAutograd) and leaves the model states alone; its blocks keep
    # more than eager's here (6.8 MB on this toy: the gathered keys and values and their
    # contiguous copies, in closed form: tests/profiling/plans/test_compiled_ring.py)
    eager, compiled = _ranks(cp=2, dp_shard=2), _ranks(cp=2, dp_shard=2, compile=True)
    for e, c in zip(eager, compiled, strict=True):
        for k in ("parameters", "optimizer"):
            assert c[k] == e[k], (k, e, c)
        assert c["activations"] > e["activations"]


@pytest.mark.parametrize("plan", [{"dp_shard": 2}, {"dp_shard": 2, "tp": 2}], ids=["fsdp", "tp"])
def test_full_checkpointing_compiled_keeps_the_blocks_inputs_alone(plan) -> None:
    # a plain checkpoint under torch.compile: every op of the block recomputed (Dynamo's
    # tag_activation_checkpoint), so it keeps no more than eager full checkpointing
    eager = _ranks(**plan, checkpointing="full")
    compiled = _ranks(**plan, checkpointing="full", compile=True)
    for e, c in zip(eager, compiled, strict=True):
        assert c["activations"] <= e["activations"] and c["peak"] <= e["peak"], (e, c)


def test_tensor_parallel_gradients_keep_eagers_placements() -> None:
    # a replicated norm weight's gradient under sequence parallelism is Partial, as in eager
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.tensor import DTensor

    from profiling.plans.layout import layout_of
    from profiling.plans.model import plan_workload
    from profiling.plans.probe import _inputs, _loss_context, _partitioned, build_stage
    from profiling.plans.titan import cross_entropy
    from profiling.plans.trace import _destroy
    from profiling.trace.fake_world import fake_world, mesh_of
    from profiling.trace.target import kernels

    placements = []
    for compiled in (False, True):
        cfg = parse_config(**SMALL, tp=2, compile=compiled)
        w = plan_workload(cfg)
        layout = layout_of(cfg, w.layers)
        with fake_world():
            try:  # the process group is process-global: gone whatever happens
                mesh = mesh_of(layout.mesh, 0)  # made of real tensors, before the fake mode
                with FakeTensorMode(allow_non_fake_inputs=False), kernels(cfg.target):
                    model = build_stage(cfg, w, layout, layout.stages[0], 2, mesh)
                    x, _, labels = _inputs(cfg, w, layout, layout.stages[0])
                    _partitioned(cfg, model, x)
                    with _loss_context(layout):
                        cross_entropy(model(x), labels).backward()
                    grads = {n: p.grad for n, p in model.named_parameters()}
            finally:
                _destroy()
        assert all(isinstance(g, DTensor) for g in grads.values())
        placements.append({n: tuple(g.placements) for n, g in grads.items()
                           if isinstance(g, DTensor)})  # fmt: skip
    assert placements[0] == placements[1]


@pytest.mark.parametrize(
    "plan",
    [{"dp_shard": 2, "target": "cuda"}, {"tp": 2, "target": "cuda"},
     {"pp": 2, "microbatches": 2, "target": "cuda"}],
    ids=["fsdp", "tp", "pp"],
)  # fmt: skip
def test_the_closed_form_of_a_compiled_plan_counts_the_partitioners_blocks(plan) -> None:
    # each block as the partitioner keeps it (profiling/plans/compiled_form.py; per category in
    # tests/profiling/plans/test_compiled_form.py): below eager's count, and within 1 % of the
    # trace on every rank (the eager count was up to 1.05 of it)
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**SMALL, **plan, compile=True)
    est = estimate_plan(cfg)
    eager = estimate_plan(parse_config(**SMALL, **plan))
    assert all(c.peak_bytes < e.peak_bytes for c, e in zip(est.ranks, eager.ranks, strict=True))
    assert any("each block keeps what Inductor's partitioner saves" in n for n in est.notes)
    assert not any(n.startswith("torch.compile of each block,") for n in est.notes)
    traced = trace_plan(cfg)
    for e, t in zip(est.ranks, traced.ranks, strict=True):
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.01), (e.pp_rank, t.peak_bytes)
