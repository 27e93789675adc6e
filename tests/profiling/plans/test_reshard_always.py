"""torchtitan's ``fsdp_reshard_after_forward = "always"`` (``--reshard-always``): the final norm
and output resharded after forward too (its default keeps that group gathered until its
backward), traced (FSDP2's own resharding on a fake world) and in closed form
(``profiling.plans.head_form``), and what a GPU sends (the group gathered twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import parse_config
from profiling.errors import ConfigError
from profiling.estimate.comm import comm
from profiling.estimate.shape import shape_of
from tests.profiling.plans.first_rank import SHAPE, traced_and_estimated


@pytest.mark.parametrize(
    "plan",
    [
        {"dp_shard": 2},
        {"dp_shard": 2, "tp": 2},
        {"dp_shard": 2, "checkpointing": "full"},
        {"dp_shard": 2, "cp": 2},
    ],
    ids=["fsdp", "fsdp-tp", "fsdp-full-ckpt", "fsdp-cp"],
)
def test_always_frees_the_output_at_the_loss_as_the_trace_does(plan) -> None:
    kept_t, kept_e = traced_and_estimated(**plan)
    always_t, always_e = traced_and_estimated(**plan, reshard_always=True)
    # the loss's backward leads either way; "always" holds the output's weight less there
    t = plan.get("tp", 1)
    # the output's bf16 weight (vocabulary-sharded under TP) and the final norm's
    assert kept_t.peak_bytes - always_t.peak_bytes == (8192 * 1024 // t + 1024) * 2
    assert always_e.peak_bytes == pytest.approx(always_t.peak_bytes, rel=1e-6)
    assert always_e.peak_bytes < kept_e.peak_bytes
    for cat, b in always_t.by_category.items():
        assert always_e.by_category[cat] == pytest.approx(b, rel=0.01, abs=2**16), cat


def test_always_with_accumulation_agrees_with_the_trace() -> None:
    # a later microbatch's loss without the group, its output's backward with it gathered again
    # at or above the trace: SDPA's seed and offset counted as the flash kernel keeps them (24 B
    # a block; 16 B before, 32 B below the trace)
    traced, closed = traced_and_estimated(dp_shard=2, microbatches=2, reshard_always=True)
    assert traced.peak_bytes <= closed.peak_bytes <= traced.peak_bytes * (1 + 1e-6)


def test_the_outputs_forward_and_backward_agree_with_the_trace() -> None:
    """A 65,536-row output and 256 tokens: the output's forward (its group's all-gather result
    beside the parameters copied out, every saved tensor, the logits) is the forward's highest
    moment; the backward's is the embedding's reduction, the same as under the default."""
    pytest.importorskip("torch")
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHAPE, "vocab": 65536, "seq": 256, "batch": 1}, dp_shard=2,
                       reshard_always=True)  # fmt: skip
    traced, closed = trace_plan(cfg).stages[0].moves, estimate_plan(cfg).stages[0].moves
    for move in ("F0", "B0"):
        t, e = traced[move].peak, closed[move].peak
        assert e["total"] == pytest.approx(t["total"], rel=1e-6), move
    # the output's weight gathered at its forward's highest (its all-gather result beside it)
    assert traced["F0"].peak["parameters"] == 65536 * 1024 * 2


def _sent(cfg) -> dict[str, int]:
    return {t.name.split(" (")[0]: t.bytes for t in comm(cfg, shape_of(cfg)).transfers}


def test_always_gathers_the_output_twice() -> None:
    base = {"model": "llama-7b", "precision": "mixed", "batch": 8, "dp_shard": 4}
    psi, head = 6_738_415_616, 32_000 * 4_096 + 4_096
    gather = "FSDP all-gather of the parameters"
    always = _sent(parse_config(**base, reshard_always=True))[gather]
    assert always == int(2 * psi * 2 * 0.75)  # every group for forward and again for backward
    kept = _sent(parse_config(**base))[gather]
    assert always - kept == pytest.approx(head * 2 * 0.75, abs=2)


def test_always_is_refused_where_not_modelled() -> None:
    for over in ({"dp_shard": 2, "pp": 2, "pp_schedule": "zbv"}, {"dp_shard": 2, "zero": 2}, {}):
        with pytest.raises(ConfigError, match="--reshard-always"):
            parse_config(**SHAPE, **over, reshard_always=True)


def test_torchtitan_always_policy_is_read(tmp_path: Path) -> None:
    from profiling.recipes import read_recipe

    path = tmp_path / "plan.toml"
    path.write_text('[model]\nname = "llama3"\nflavor = "8B"\n\n[training]\nlocal_batch_size = 2\n'
                    '\n[parallelism]\ndata_parallel_shard_degree = 8\n'
                    'fsdp_reshard_after_forward = "always"\n', encoding="utf-8")  # fmt: skip
    recipe = read_recipe([path])
    assert recipe.values["reshard_always"] is True
    assert all(s.key != "parallelism.fsdp_reshard_after_forward" for s in recipe.ignored)
