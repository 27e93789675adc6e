"""torchtitan's block-count selective checkpointing (``selective_ac_option = "N"``;
``--checkpointing full --checkpoint-every N``): every N-th block a process builds wrapped whole,
the others keeping what they save — traced with exactly those blocks wrapped, and in closed
form per rank, agreeing per category."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from profiling.config import parse_config
from profiling.errors import ConfigError
from profiling.plans.closed_form import estimate_plan
from profiling.plans.layout import layout_of

# A Llama-shaped toy of 14 blocks: stages long enough that the trace samples whole periods
SHAPE = {"layers": 14, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 8192,
         "arch": "llama", "precision": "mixed", "seq": 1024}  # fmt: skip


def _torchtitans_wrapping(layout: Any, every: int) -> dict[int, list[bool]]:
    """torchtitan 9dec370's _apply_ac_to_transformer_block, as each pipeline rank's process runs
    it: ptd_checkpoint_wrapper._count counts every block it is given, over the stages the rank
    builds in order, and the N-th, 2N-th… are wrapped."""
    out = {}
    for held in layout.rank_stages:
        count = 0
        for i in held:
            wrapped = []
            for _ in range(layout.stages[i].layers):
                count += 1
                wrapped.append(count % every == 0)
            out[i] = wrapped
    return out


@pytest.mark.parametrize("every", [2, 3, 5])
@pytest.mark.parametrize(
    "plan",
    [
        {"dp_shard": 8},
        {"pp": 4, "batch": 4, "microbatches": 4},
        {"pp": 2, "batch": 4, "microbatches": 4, "pp_schedule": "interleaved", "virtual_stages": 3},
        {"pp": 2, "batch": 2, "microbatches": 2, "pp_schedule": "zbv"},
    ],
)
def test_the_blocks_wrapped_are_torchtitans(plan: dict[str, Any], every: int) -> None:
    cfg = parse_config(model="llama-7b", checkpointing="full", checkpoint_every=every, **plan)
    layout = layout_of(cfg, 32)
    want = _torchtitans_wrapping(layout, every)
    for stage in layout.stages:
        assert stage.checkpointed(every) == want[stage.index]
        # a probe of fewer blocks (whole periods dropped from the front) ends as the stage does
        for n in range(stage.layers % every, stage.layers, every):
            assert stage.checkpointed(every, n) == want[stage.index][stage.layers - n :]


@pytest.mark.parametrize(
    "plan",
    [
        {"pp": 2, "batch": 2, "microbatches": 2},  # each stage's last block not wrapped
        {"dp_shard": 2},  # FSDP2 without a pipeline: the peak inside some block's backward
        {"dp_replicate": 2, "precision": "bf16"},  # DDP: torchtitan's mixed is autocast there
        {"pp": 2, "batch": 4, "microbatches": 4, "pp_schedule": "interleaved"},
    ],
)
@pytest.mark.parametrize("every", [2, 3])
def test_the_closed_form_is_the_trace_category_by_category(
    plan: dict[str, Any], every: int
) -> None:
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHAPE, **plan}, checkpointing="full", checkpoint_every=every)
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    # whole periods sampled and scaled exactly: no stage traced whole
    assert not any("traced whole" in n for n in traced.notes)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.001)
        for category, bytes_ in t.by_category.items():
            if bytes_ > t.peak_bytes // 1000:
                assert e.by_category[category] == pytest.approx(bytes_, rel=0.01), category


def test_pipelined_fsdp_with_tensor_parallelism_agrees_in_total() -> None:
    # as for every checkpointing: FSDP2's unsharded gradients under a pipeline are torch's
    # tracker's temporaries until the reduction, the closed form's gradients
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**SHAPE, pp=2, batch=2, microbatches=2, dp_shard=2, tp=2,
                       checkpointing="full", checkpoint_every=2)  # fmt: skip
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.005)


def test_fewer_blocks_checkpointed_keep_more() -> None:
    def peak(**kw: Any) -> int:
        cfg = parse_config(model="llama-7b", precision="mixed", dp_shard=8, batch=4, **kw)
        return estimate_plan(cfg).highest.peak_bytes

    full, none = peak(checkpointing="full"), peak()
    halves = [peak(checkpointing="full", checkpoint_every=n) for n in (2, 4, 8)]
    assert full < halves[0] < halves[1] < halves[2] < none
    assert peak(checkpointing="full", checkpoint_every=1) == full
    # half the blocks keep their activations, half only their input: about half of none's
    plain = none - full
    assert halves[0] - full == pytest.approx(plain / 2, rel=0.05)


def test_the_recomputation_counts_the_wrapped_blocks_only() -> None:
    from profiling.estimate.shape import shape_of
    from profiling.estimate.time import step_flops

    def again(**kw: Any) -> float:
        cfg = parse_config(model="llama-7b", precision="mixed", dp_shard=8, batch=4,
                           checkpointing="full", **kw)  # fmt: skip
        counted = step_flops(cfg, shape_of(cfg))
        assert counted is not None
        return next(s.value for s in counted[2] if "again" in s.name)

    assert again(checkpoint_every=4) == pytest.approx(again() * (32 // 4) / 32, rel=1e-9)


def test_what_it_cannot_run_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="give --checkpointing full with it"):
        parse_config(model="llama-7b", dp_shard=8, checkpoint_every=2)
    with pytest.raises(ConfigError, match="run on a parallel plan"):
        parse_config(model="llama-7b", checkpointing="full", checkpoint_every=2)
    # FSDP over N GPUs is the plan FSDP 8 (torchtitan's step)
    cfg = parse_config(model="llama-7b", fsdp=True, gpus=8, checkpointing="full",
                       checkpoint_every=2)  # fmt: skip
    assert cfg.is_plan and cfg.dp_shard == 8


@pytest.mark.parametrize(("option", "every"), [("2", 2), ("3", 3), ("1", None), ("0", None)])
def test_torchtitans_block_count_reads_as_every_n(
    tmp_path: Path, option: str, every: int | None
) -> None:
    from profiling.recipes import read_recipe

    path = tmp_path / "every.toml"
    path.write_text('[model]\nname = "llama3"\nflavor = "8B"\n\n[activation_checkpoint]\n'
                    f'mode = "selective"\nselective_ac_option = "{option}"\n'
                    '\n[parallelism]\ndata_parallel_shard_degree = 8\n',
                    encoding="utf-8")  # fmt: skip
    values = read_recipe([path]).values
    assert values["checkpointing"] == "full"
    assert values.get("checkpoint_every") == every
    cfg = parse_config(**values)
    assert cfg.is_plan and cfg.checkpoint_every == every
