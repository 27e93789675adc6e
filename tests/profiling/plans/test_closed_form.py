"""A plan's closed form: the ZeRO paper's model states, Korthikanti et al.'s pipeline
activations, per-rank results at any world size, and agreement with the plan's trace."""

from __future__ import annotations

from typing import Any

import pytest

from profiling.config import parse_config
from profiling.errors import ProfilingError
from profiling.models.workloads import find_workload
from profiling.plans.closed_form import block_activations, estimate_plan, model_states
from profiling.plans.profile import CATEGORIES


@pytest.mark.parametrize(
    ("fsdp", "gpus", "per_gpu_gb"),
    [(False, 64, 120.0), (True, 64, 1.875), (True, 1024, 0.1171875)],
)
def test_model_states_are_the_zero_papers_table(fsdp: bool, gpus: int, per_gpu_gb: float) -> None:
    # ZeRO (Rajbhandari et al. 2020), Table 1: Ψ = 7.5B, K = 12, mixed-precision Adam: the
    # baseline 120 GB per GPU, P_os+g+p 1.88 GB at N_d = 64 and 0.12 GB at N_d = 1024.
    states = model_states(7_500_000_000, gpus, "mixed", fsdp)
    assert sum(states.values()) == pytest.approx(per_gpu_gb * 1e9)


def test_a_plans_states_shard_over_dp_shard_times_cp() -> None:
    w = find_workload("llama-7b")
    assert w is not None
    one = estimate_plan(parse_config(model="llama-7b", precision="bf16", dp_replicate=8))
    many = estimate_plan(parse_config(model="llama-7b", precision="mixed", dp_shard=8))
    psi = w.param_count()
    # DDP in bf16: 2 + 4 B per parameter held all step (bf16 weights, Adam's two bf16 moments)
    base = one.stages[0].base
    assert base["parameters"] + base["optimizer"] == pytest.approx(6 * psi, rel=1e-6)
    # FSDP over 8: 4 + 8 B per parameter / 8, FSDP's padding aside
    base = many.stages[0].base
    assert base["parameters"] + base["optimizer"] == pytest.approx(12 * psi / 8, rel=1e-4)


@pytest.mark.parametrize("precision", ["mixed", "amp-bf16"])
def test_ddp_alone_under_torchtitans_mixed_precision_is_refused(precision: str) -> None:
    # torchtitan's maybe_enable_amp: under DDP alone torch.autocast over fp32 parameters, not
    # the 16-bit weights and fp32 master copy a plan's mixed ran (2 + 2 + 12 B where torchtitan
    # holds 4 + 4 + 8 B and autocast's copies): refused in one sentence, not counted below it
    with pytest.raises(ProfilingError, match="maybe_enable_amp"):
        estimate_plan(parse_config(model="llama-7b", precision=precision, dp_replicate=8))
    # beside FSDP (HSDP) torchtitan's mixed is fully_shard's policy, as a plan runs it
    estimate_plan(parse_config(model="llama-7b", precision="mixed", dp_replicate=2, dp_shard=4))


def _in_flight_layers(schedule: str, pp: int, v: int) -> float:
    cfg = parse_config(model="llama-7b", seq=512, batch=16, precision="mixed", pp=pp,
                       microbatches=16, pp_schedule=schedule, virtual_stages=v)  # fmt: skip
    result = estimate_plan(cfg)
    return result.ranks[0].in_flight * 32 / (pp * v)  # each stage holds 32 / (pp·v) blocks


@pytest.mark.parametrize("pp", [2, 4, 8])
def test_first_stage_holds_korthikantis_activations(pp: int) -> None:
    # Korthikanti et al. 2022, §4.2.3: with 1F1B the first stage keeps pp microbatches of
    # L/pp layers, L layers' worth whatever pp; interleaved over v stages per rank multiplies
    # that by 1 + (pp − 1)/(pp·v).
    assert _in_flight_layers("1f1b", pp, 1) == 32
    for v in (2, 4):
        assert _in_flight_layers("interleaved", pp, v) == pytest.approx(
            32 * (1 + (pp - 1) / (pp * v))
        )


def test_block_activations_split_with_tensor_parallelism() -> None:
    w = find_workload("llama-7b")
    assert w is not None
    whole = block_activations(w, 2048, 1, 2, 2048)
    split = block_activations(w, 2048, 8, 2, 2048)
    # DTensor saves the attention's and the MLP's gathered inputs whole (2·s·h·2 B); the rest
    # splits over the 8 ranks (sequence-parallel norms, heads, the MLP's width)
    gathered = 2 * 2048 * w.hidden * 2
    assert split - gathered == pytest.approx((whole - gathered) / 8, rel=1e-3)


def test_every_rank_at_any_world_size() -> None:
    small = estimate_plan(parse_config(model="llama-7b", precision="mixed", dp_shard=8, tp=8,
                                       pp=8, batch=8, seq=2048))  # fmt: skip
    huge = estimate_plan(parse_config(model="llama-7b", precision="mixed", dp_shard=1562, tp=8,
                                      pp=8, batch=8, seq=2048))  # fmt: skip
    assert (small.layout.world, huge.layout.world) == (512, 99_968)
    assert len(small.ranks) == len(huge.ranks) == 8  # one per pipeline rank, computed once
    assert huge.ranks[7].global_ranks == "87472-99967"
    # FSDP pads each tensor's rows to equal shards: past its rows (1,562 shards of wk's 512
    # tensor-parallel rows) each rank holds a padded row, so more ranks can cost more
    assert huge.stages[1].base["parameters"] > small.stages[1].base["parameters"] / 200
    assert small.spread_bytes > 0


def test_what_the_closed_form_has_not_is_one_sentence() -> None:
    with pytest.raises(ProfilingError, match="no Megatron-style selective checkpointing"):
        estimate_plan(parse_config(model="llama-7b", pp=2, batch=2, checkpointing="selective"))
    with pytest.raises(ProfilingError, match="autocast"):
        estimate_plan(parse_config(model="llama-7b", pp=2, batch=2, precision="amp-bf16"))


def test_full_checkpointing_keeps_each_blocks_input() -> None:
    plain = estimate_plan(parse_config(model="llama-7b", precision="mixed", pp=4, batch=8))
    full = estimate_plan(parse_config(model="llama-7b", precision="mixed", pp=4, batch=8,
                                      checkpointing="full"))  # fmt: skip
    # Korthikanti et al.: full recomputation keeps 2·s·b·h bytes per layer (its 16-bit input),
    # here per microbatch of 1 (torchtitan's microbatch size)
    stage = full.stages[1]
    assert stage.moves["F"].delta["activations"] == stage.layers * 2 * 2048 * 1 * 4096
    assert full.highest.peak_bytes < plain.highest.peak_bytes


def test_a_single_gpu_estimate_refuses_a_plan() -> None:
    from profiling.estimate.memory import estimate

    with pytest.raises(ProfilingError, match="per rank"):
        estimate(parse_config(model="llama-7b", pp=2, batch=2))


@pytest.mark.parametrize(
    "plan",
    [
        {"pp": 2, "microbatches": 2, "batch": 2, "dp_shard": 2},
        {"pp": 2, "microbatches": 4, "batch": 4, "pp_schedule": "interleaved", "precision": "bf16"},
        {"pp": 2, "microbatches": 2, "batch": 2, "dp_shard": 2, "checkpointing": "full"},
    ],
)
def test_the_closed_form_agrees_with_the_trace(plan: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(model="tiny-llama", seq=64, **plan)
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    assert traced.highest.pp_rank == estimated.highest.pp_rank
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        # the model states per rank exactly; the whole peak within 7 % on this toy (its
        # transients, which the closed form models from the trace, weigh most here)
        for c in ("parameters", "optimizer"):
            assert e.after_step[c] == t.after_step[c]
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.07)
        assert set(e.by_category) == set(CATEGORIES)


# A Llama-shaped toy whose vocabulary outweighs its blocks, as at 405B: the embedding's
# whole-vocabulary gradient, the vocabulary-parallel loss and the output's gathered input.
_WIDE_VOCAB = {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 4, "ffn": 512,
               "vocab": 32000, "arch": "llama", "precision": "mixed", "seq": 256}  # fmt: skip


@pytest.mark.parametrize(
    "plan",
    [
        # tensor parallelism's first and last stages (0.65 / 0.88 before torch's embedding
        # gradient, loss_parallel's transients and the trace's DTensor shadows were followed)
        {**_WIDE_VOCAB, "batch": 2, "microbatches": 2, "dp_shard": 2, "tp": 2, "pp": 2},
        # FSDP2 past a tensor's rows: every buffer padded to 100,000 rows (0.50 before)
        {"model": "tiny-llama", "seq": 64, "batch": 2, "dp_shard": 100_000, "precision": "mixed"},
    ],
)
def test_vocabulary_and_padded_buffers_agree_with_the_trace(plan: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**plan)
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.02)


def test_the_trace_counts_no_global_shape_shadows_of_dtensor() -> None:
    """DTensor's shape propagation runs ops on global-shape tensors in a fake mode: on a GPU a
    fresh one, costing nothing; the trace must not count them (the last stage's loss over the
    whole vocabulary, twice, was counted)."""
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**_WIDE_VOCAB, batch=2, microbatches=2, dp_shard=2, tp=2, pp=2)
    last = trace_plan(cfg).stages[-1].moves["F"]
    local_logits = 256 * 32000 // 2
    # loss_parallel's forward holds its fp32 input, shifted and exp(shifted): 12 bytes per
    # local logit with the 4 it keeps; a whole-vocabulary fp32 shadow alone is 16
    assert last.peak["total"] - last.delta["total"] == pytest.approx(8 * local_logits, rel=1e-3)


@pytest.mark.parametrize("precision", ["fp32", "mixed"])
def test_fsdp_without_a_pipeline_agrees_with_the_trace(precision: str) -> None:
    # A plain step under torchtitan's FSDP2: the loss keeps no logits, the final norm and the
    # output stay gathered from the head's forward to its backward (their group is never
    # resharded after forward), and by the blocks' backward the head's tensors are gone; the
    # closed form was 1.162 (fp32) and 1.042 (mixed) of the trace before it followed these.
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(model="tiny-llama", dp_shard=4, precision=precision)
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    t, e = traced.ranks[0], estimated.ranks[0]
    assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.02)
    # what the forward leaves (every saved tensor and the head's gathered group) within a few
    # scalars' bytes (the head's gathered group alone is 128 KiB in fp32)
    forward = [r.stages[0].moves["F0"].delta["total"] for r in (traced, estimated)]
    assert abs(forward[0] - forward[1]) <= 64


@pytest.mark.parametrize(
    ("optimizer", "foreach"),
    [("adamw", True), ("adamw", False), ("adagrad", True), ("rmsprop", False)],
)
def test_the_first_stages_step_under_tp_is_its_trace(optimizer: str, foreach: bool) -> None:
    # fp32 master weights, one parameter at a time: the embedding's gradient is Partial with
    # every row of the vocabulary, so its fp32 copy is the whole table and each op that reads it
    # reduce-scatters it again (PP 2 × TP 2's first rank peaked there, 4 % above the estimate)
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    shape = {"layers": 2, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 8192,
             "arch": "llama", "precision": "mixed", "seq": 512}  # fmt: skip
    cfg = parse_config(**shape, pp=2, tp=2, batch=2, microbatches=2, optimizer=optimizer,
                       foreach=foreach)  # fmt: skip
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    step = [r.stages[0].moves["step"].peak["total"] for r in (traced, estimated)]
    assert step[0] == step[1] > 8192 * 1024 * 4  # more than the whole table's fp32 copy
    t, e = traced.ranks[0], estimated.ranks[0]
    assert abs(e.peak_bytes - t.peak_bytes) <= 64  # a few step counters' bytes aside


@pytest.mark.parametrize(("precision", "plan"), [("mixed", {"pp": 2, "microbatches": 2}),
                                                 ("bf16", {"dp_shard": 1})])  # fmt: skip
def test_sgds_momentum_of_the_tp_embedding_is_the_whole_table(
    precision: str, plan: dict[str, Any]
) -> None:
    # SGD's first step clones the embedding's Partial gradient (every row of the vocabulary):
    # its momentum buffer is the whole table on each TP rank, where Adam's zeros_like state
    # has the rank's rows only; the closed form counted V/t rows (16.8 MB under the trace)
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    shape = {"layers": 2, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 8192,
             "arch": "llama", "precision": precision, "seq": 512}  # fmt: skip
    cfg = parse_config(**shape, **plan, tp=2, batch=2, optimizer="sgd")
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    first = [r.stages[0].base["optimizer"] for r in (traced, estimated)]
    assert first[0] == first[1]
    adamw = estimate_plan(cfg.model_copy(update={"optimizer": "adamw"})).stages[0]
    per = 4 if precision == "mixed" else 2  # the momentum's bytes: the fp32 master's or bf16
    rest = 8192 // 2 * 1024 * per  # the rows beyond the rank's V/t
    if precision == "bf16":  # Adam's two states of the rank's rows, SGD's one of every row
        assert abs(first[1] - rest - adamw.base["optimizer"] / 2) <= 2 * 32  # Adam's counters
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.001)
