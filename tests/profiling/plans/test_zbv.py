"""ZBV's split backward in closed form (``profiling.plans.zbv_form``): every rank at or above
its trace and within 1 %, with and without full checkpointing, PP 2 and 4, on the two toys of
``test_pipeline_checkpointing`` — where the closed form, taking the input backward for a whole
backward and the weight backward for nothing, stood at 0.19–0.99 of the trace with full
checkpointing (each weight's ``autograd.grad`` recomputes the block and keeps the copies),
0.53–1.00 with every N-th block and 0.74–1.00 without; under FSDP, where the last stage's
output upcasts the gradients, 0.946–1.089; under TP 1.068 without checkpointing, 0.993–1.033
with it. ``fit --plans`` searches ZBV where the
closed form follows it, and only there; an estimate of a plan it does not follow says to trace
it."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import TrainingConfig, parse_config
from profiling.fit_plans import fit_plans
from profiling.plans.closed_form import estimate_plan

LONG = {"layers": 8, "hidden": 512, "heads": 8, "kv_heads": 4, "ffn": 1024, "vocab": 1024,
        "arch": "llama", "precision": "mixed", "seq": 8192}  # fmt: skip
WIDE = {"layers": 8, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 704, "vocab": 4096,
        "arch": "llama", "precision": "mixed", "seq": 128}  # fmt: skip


def _agree(
    shape: dict[str, Any], pp: int, below: int = 256, above: float = 0.01,
    exact: tuple[str, ...] = (), **plan: Any,
) -> None:  # fmt: skip
    """Every pipeline rank's estimate at or above its trace, ``below`` bytes under it at most
    and ``above`` over it (a fraction, or bytes from 1 on); every stage's ``exact`` moves at
    their trace's peak, to the byte (moves that are no rank's peak here may be on a larger
    plan)."""
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**shape, pp=pp, batch=2 * pp, microbatches=2 * pp, pp_schedule="zbv",
                       **plan)  # fmt: skip
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        # at or above the trace but for SDPA's scalars: the forward's closed form keeps 8 bytes
        # a block fewer than the trace, for each microbatch in flight (up to 120 bytes here)
        over = above if above >= 1 else above * t.peak_bytes
        assert t.peak_bytes - below <= e.peak_bytes <= t.peak_bytes + over, (
            t.pp_rank, e.peak_bytes / t.peak_bytes, t.peak_at, e.peak_at,
        )  # fmt: skip
    assert not any(n.startswith("ZBV") for n in estimated.notes)
    for ts, es in zip(traced.stages, estimated.stages, strict=True):
        for name in exact:
            assert es.moves[name].peak["total"] == ts.moves[name].peak["total"], (
                ts.stage, name, es.moves[name].peak["total"] - ts.moves[name].peak["total"],
            )  # fmt: skip


@pytest.mark.parametrize("checkpointing", ["none", "full"])
@pytest.mark.parametrize("pp", [2, 4])
@pytest.mark.parametrize("shape", [LONG, WIDE], ids=["long", "wide"])
def test_every_rank_is_at_or_above_its_trace(
    shape: dict[str, Any], pp: int, checkpointing: str
) -> None:
    _agree(shape, pp, checkpointing=checkpointing)


@pytest.mark.parametrize(
    ("shape", "pp", "every"), [(LONG, 2, 2), (WIDE, 4, 2), (LONG, 2, 4)],
    ids=["long-pp2-every2", "wide-pp4-every2", "long-pp2-every4"],
)  # fmt: skip
def test_every_nth_block_checkpointed_is_at_or_above_its_trace(
    shape: dict[str, Any], pp: int, every: int
) -> None:
    # torchtitan's every N-th block: 0.53–1.00 of the trace before (the I = B fallback)
    _agree(shape, pp, checkpointing="full", checkpoint_every=every)


@pytest.mark.parametrize(
    ("shape", "pp", "plan"),
    [
        (WIDE, 2, {"dp_shard": 2}),  # rank 0 0.946 of its trace, rank 1 1.089 before
        (LONG, 2, {"dp_shard": 2, "checkpointing": "full"}),  # the recomputation's moment
        (WIDE, 4, {"dp_shard": 3, "checkpointing": "full", "checkpoint_every": 2}),
        (LONG, 4, {"dp_shard": 2, "dp_replicate": 2}),
    ],
    ids=["wide-pp2", "long-pp2-full", "wide-pp4-fsdp3-every2", "long-pp4-hsdp"],
)  # fmt: skip
def test_under_fsdp_every_rank_is_at_or_above_its_trace(
    shape: dict[str, Any], pp: int, plan: dict[str, Any]
) -> None:
    # the last stage's output upcasts every gradient made so far to FSDP's fp32 accumulator;
    # the other stages' stay 16-bit until the reduction
    _agree(shape, pp, **plan)


@pytest.mark.parametrize(
    ("shape", "pp", "plan"),
    [
        (WIDE, 2, {"tp": 2}),  # rank 1 1.068 of its trace before
        (LONG, 4, {"tp": 2}),
        (WIDE, 4, {"tp": 2, "dp_shard": 2}),
        # recomputed: ranks 1-3 1.023-1.033 of their traces before (SwiGLU's copies kept past
        # w2's group on a stage without its head), PP 2's rank 0 0.9934 (the FFN norm's
        # sequence-sharded output, held by the recomputation)
        (LONG, 4, {"tp": 2, "checkpointing": "full"}),
        (LONG, 2, {"tp": 4, "checkpointing": "full"}),
        (LONG, 2, {"tp": 2, "checkpointing": "full", "checkpoint_every": 2}),
        (WIDE, 4, {"tp": 2, "dp_shard": 2, "checkpointing": "full"}),
        # asynchronous TP: its workspace is outside the allocator, its split backward TP's
        (WIDE, 2, {"tp": 2, "async_tp": True, "checkpointing": "full"}),
    ],
    ids=["wide-pp2", "long-pp4", "wide-pp4-fsdp2", "long-pp4-full", "long-pp2-tp4-full",
         "long-pp2-every2", "wide-pp4-fsdp2-full", "wide-pp2-async-full"],
)  # fmt: skip
def test_under_tp_every_rank_is_at_or_above_its_trace(
    shape: dict[str, Any], pp: int, plan: dict[str, Any]
) -> None:
    # each node keeps its local output's gradient: 1/t of the heads or the FFN, or wo's and
    # w2's partial sums, over the whole sequence
    _agree(shape, pp, **plan)


@pytest.mark.parametrize(
    "plan",
    [
        {"cp": 2},  # rank 1 0.9965 of its trace before (the ring's backward inside I)
        {"cp": 2, "checkpointing": "full"},
        {"cp": 2, "dp_shard": 2, "checkpointing": "full"},
        {"cp": 4},
    ],
    ids=["cp2", "cp2-full", "cp2-fsdp2-full", "cp4"],
)
def test_under_cp_every_rank_is_at_or_above_its_trace(plan: dict[str, Any]) -> None:
    # a block keeps its own chunk's logsumexp (and on ring rank 0 wo's copy of the merged
    # output); I peaks in the ring's backward of the stage's first block
    _agree(WIDE, 2, **plan)


@pytest.mark.parametrize(
    ("shape", "pp", "plan"),
    [
        # 0.9955-0.9971 of the trace before (2 MiB low): the middle residual's gradient,
        # sequence-sharded, not counted in the ring's backward inside I
        (LONG, 2, {"cp": 2, "tp": 2}),
        (WIDE, 2, {"cp": 2, "tp": 2, "checkpointing": "full"}),
        (WIDE, 2, {"cp": 4, "tp": 2}),
        (WIDE, 4, {"cp": 2, "tp": 2, "dp_shard": 2, "checkpointing": "full"}),
    ],
    ids=["long-cp2-tp2", "wide-cp2-tp2-full", "wide-cp4-tp2", "wide-pp4-cp2-tp2-fsdp2-full"],
)  # fmt: skip
def test_under_cp_beside_tp_every_rank_is_its_trace(
    shape: dict[str, Any], pp: int, plan: dict[str, Any]
) -> None:
    # within 16 bytes (the loss's scalar under TP, per microbatch); under FSDP each stage's
    # gradient reduction to the byte (fsdp_moments.reduction_peak): the first stage's was
    # 524,288 B below (the embedding's copy of its vocabulary shard beside the whole
    # vocabulary's fp32 gradient), the middle stages' 512 B below (a norm's 16-bit gradient,
    # redistributed, kept beside its copy), the last stage's 1,024 B over, rank 0's peak
    _agree(shape, pp, below=16, above=512, exact=("R",), **plan)


@pytest.mark.parametrize(
    ("shape", "pp", "plan"),
    [
        # 0.983 of the trace before (I and W without the Float8 nodes' casts), refused
        (WIDE, 2, {"float8": "tensorwise"}),
        (WIDE, 2, {"float8": "rowwise"}),
        (WIDE, 2, {"float8": "rowwise_with_gw_hp"}),
        (WIDE, 2, {"float8": "tensorwise", "dp_shard": 2, "float8_all_gather": True}),
        (WIDE, 4, {"float8": "rowwise", "dp_shard": 2}),
    ],
    ids=["tensorwise", "rowwise", "rowwise-gw-hp", "fsdp2-fp8-gather", "pp4-rowwise-fsdp2"],
)  # fmt: skip
def test_under_float8_every_rank_is_its_trace(
    shape: dict[str, Any], pp: int, plan: dict[str, Any]
) -> None:
    # each Float8 node's whole backward at I (in the stage's first block) and at each weight's
    # W; within 140 B under FSDP (its Float8 parameters' base, 1F1B's too), 1,020 B over with
    # the bf16 weight gradient's recipe (a rowwise scale counted that is let go)
    pytest.importorskip("torchao")
    _agree(shape, pp, below=160, above=2048, **plan)


def test_each_stages_split_backward_is_its_trace() -> None:
    # PP 4 over 8 layers: the last stage holds the head alone, its final norm's input the
    # receive buffer — W let it go as the norm's saved input, 65,536 B below the trace before
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**WIDE, pp=4, batch=8, microbatches=8, pp_schedule="zbv", dp_shard=2)
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for t, e in zip(traced.stages, estimated.stages, strict=True):
        for key in ("I0", "I", "W0", "W"):
            got, want = e.moves[key].peak["total"], t.moves[key].peak["total"]
            assert want - 16 <= got <= 1.01 * want, (t.stage, key, got - want)


def test_under_compile_the_estimate_says_what_it_is_worth() -> None:
    # a compiled block is one autograd node: I runs its backward whole, W again per block —
    # not followed; the note's range holds against the trace, rank by rank
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**WIDE, pp=2, batch=4, microbatches=4, pp_schedule="zbv", compile=True)
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    assert any(n.startswith("ZBV under compile") and "0.966-0.9985" in n for n in estimated.notes)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert 0.966 * t.peak_bytes <= e.peak_bytes <= 0.9985 * t.peak_bytes, t.pp_rank


def _base(**values: object) -> TrainingConfig:
    return TrainingConfig.parse(seq=2048, gpu_mem=80, batch=8, pp=2, **values)


def test_fit_offers_zbv_plans_it_follows_and_no_other() -> None:
    alone = {c.config.pp_schedule for c in fit_plans(_base(model="llama-1b"), 2).fitting}
    assert alone == {"1f1b", "interleaved", "zbv"}  # 2 GPUs, PP 2: no FSDP, no TP
    # 16 GPUs: ZBV with FSDP over the rest, and beside TP recomputed too; not with torchtitan's
    # per-op checkpointing (one backward per region: it runs two)
    res = fit_plans(_base(model="llama-7b"), 16)
    zbv = [c.config for c in res.fitting if c.config.pp_schedule == "zbv"]
    assert any(c.dp_shard > 1 for c in zbv)
    assert any(c.tp > 1 and c.checkpointing == "full" for c in zbv)
    assert all(c.checkpointing != "selective-op" for c in zbv)
    assert any(c.config.checkpointing == "selective-op" for c in res.fitting)
    # asynchronous TP: ZBV beside it too (its workspace outside the allocator)
    res = fit_plans(_base(model="llama-7b"), 16, async_tp=True)
    assert any(c.config.pp_schedule == "zbv" and c.config.async_tp for c in res.fitting)


def test_fit_offers_zbv_with_context_parallelism() -> None:
    found = [c.config for c in fit_plans(_base(model="llama-1b", cp=2, pp_schedule="zbv"),
                                         8).fitting]  # fmt: skip
    assert any(c.cp > 1 and c.tp == 1 for c in found)
    assert any(c.cp > 1 and c.tp > 1 for c in found)


def test_fit_takes_a_zbv_plan_given(tmp_path, run_cli) -> None:
    done = run_cli("fit", "--plans", "--model", "llama-1b", "--batch", "8", "--gpus", "2",
                   "--gpu-mem", "80", "--pp", "2", "--pp-schedule", "zbv",
                   "--root", str(tmp_path), cwd=tmp_path, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "(zbv," in done.stdout


def test_an_estimate_of_a_zbv_plan_not_followed_says_to_trace_it() -> None:
    seq = estimate_plan(_base(model="llama-7b", microbatches=2, pp_schedule="zbv", ulysses=2))
    assert any(n.startswith("ZBV: the closed form follows") for n in seq.notes)
    for plan in ({"tp": 2}, {"checkpointing": "full"}):  # Float8 beside TP or checkpointing
        f8 = estimate_plan(_base(model="llama-7b", microbatches=2, pp_schedule="zbv",
                                 float8="tensorwise", precision="mixed", **plan))  # fmt: skip
        assert any(n.startswith("ZBV: the closed form follows") for n in f8.notes)
    for plan in ({}, {"dp_shard": 2}, {"tp": 2}, {"tp": 2, "checkpointing": "full"},
                 {"tp": 2, "async_tp": True}, {"cp": 2}, {"cp": 2, "tp": 2},
                 {"float8": "tensorwise", "precision": "mixed"}):  # fmt: skip
        alone = estimate_plan(_base(model="llama-7b", microbatches=2, pp_schedule="zbv", **plan))
        assert not any(n.startswith("ZBV") for n in alone.notes)


def test_the_last_stages_input_backward_keeps_the_losss_seed() -> None:
    # stage_backward_input's list holds ones_like(loss) until it returns: the last stage's I
    # and so rank 0 (stages 0 and 3) were 4 B below the trace
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan
    from tests.profiling.plans.short_plan import SHORT

    cfg = parse_config(**{**SHORT, "batch": 8, "pp_schedule": "zbv"})
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for key in ("I0", "I"):
        assert estimated.stages[3].moves[key].peak == traced.stages[3].moves[key].peak, key
    assert estimated.ranks[0].peak_bytes == traced.ranks[0].peak_bytes


@pytest.mark.parametrize(
    "optimizer", ["adam", "adagrad", "rmsprop", "sgd-nomomentum", "sgd"]
)  # fmt: skip
def test_the_first_stage_steps_beside_its_partial_gradients_copies(optimizer: str) -> None:
    # TP 2 without FSDP, fp32: each foreach op that reads the Partial gradients (the embedding's
    # whole table, the norms') copies them: Adam's addcmul_ twice, above its list on the
    # one-block first stage (624,640 B below the trace before); RMSprop's addcdiv_ once beside
    # avg, Adagrad's beside std and its numerator (every row of the embedding: rank 0's peak,
    # 877,784 B below before), SGD's add_ once (every stage 1,024-2,099,200 B below before)
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan
    from tests.profiling.plans.short_plan import SHORT

    cfg = parse_config(**{**SHORT, "batch": 4, "pp_schedule": "zbv", "tp": 2},
                       optimizer=optimizer)  # fmt: skip
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for t, e in zip(traced.stages, estimated.stages, strict=True):
        got, want = e.moves["step"].peak["total"], t.moves["step"].peak["total"]
        # SGD's momentum: its buffers are Replicate, the norms' gradients copied at one op and
        # the embedding's rows at the next (2,048 B over on the first stage before)
        assert got == want, (t.stage, got - want)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert t.peak_bytes <= e.peak_bytes <= t.peak_bytes + 2048, t.pp_rank


@pytest.mark.parametrize(
    "plan",
    [{"pp_schedule": "1f1b"}, {"precision": "bf16"},
     {"pp": 1, "microbatches": None, "pp_schedule": None}],
    ids=["1f1b-fp32", "zbv-bf16", "no-pipeline"],
)  # fmt: skip
def test_sgds_momentum_copies_at_two_ops_not_one(plan: dict[str, Any]) -> None:
    # SGD with momentum under TP 2 without FSDP: the step holds the larger of the norms' and
    # the embedding's copies, not their sum (1F1B's first stage 4,096 B over its trace before,
    # ZBV's in bf16 1,024 B, the whole model without a pipeline 9 norms' worth)
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan
    from tests.profiling.plans.short_plan import SHORT

    values = {**SHORT, "batch": 4, "pp_schedule": "zbv", "tp": 2, **plan}
    cfg = parse_config(**{k: v for k, v in values.items() if v is not None}, optimizer="sgd")
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for t, e in zip(traced.stages, estimated.stages, strict=True):
        got, want = e.moves["step"].peak["total"], t.moves["step"].peak["total"]
        assert got == want, (t.stage, got - want)
