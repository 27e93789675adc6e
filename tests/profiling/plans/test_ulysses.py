"""DeepSpeed-Ulysses on a plan (``--ulysses N``, DeepSpeed's ``sequence_parallel_size``): the
sequence split over N ranks outside attention, all-to-alls to the whole sequence for 1/N of the
heads around it — the re-sharding checked on a real gloo group of 2 processes, the plan traced
on the fake group and in closed form per rank, agreeing per category."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from profiling.config import parse_config
from profiling.errors import ConfigError, ProfilingError
from profiling.plans.closed_form import estimate_plan

# A Llama-shaped toy (grouped-query attention), 2,048 tokens per rank under Ulysses 4
SHAPE = {"layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 8192,
         "arch": "llama", "precision": "mixed", "seq": 8192}  # fmt: skip


def _exchange(rank: int, world: int, store_path: str, out_path: str) -> None:
    import torch
    import torch.distributed as dist

    from profiling.plans.ulysses import Ulysses

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    try:
        b, s, h, d = 2, 8, 4, 3  # two sequences: the copies of the batch-first layout
        torch.manual_seed(0)
        full = torch.randn(b, s, h, d)  # every rank makes the same tensor
        mine = full[:, rank * s // world : (rank + 1) * s // world].clone().requires_grad_()
        sp = Ulysses(dist.group.WORLD, world)
        heads = sp.to_heads(mine)
        want = full[:, :, rank * h // world : (rank + 1) * h // world]
        back = sp.to_sequence(heads)
        weight = torch.arange(back.numel(), dtype=back.dtype).view(back.shape)
        (back * weight).sum().backward()  # through both all-to-alls and back
        result = {
            "heads_shape": list(heads.shape),
            "heads_equal": bool(torch.equal(heads, want)),
            "round_trip": bool(torch.equal(back, mine)),
            "grad_is_weight": bool(torch.equal(mine.grad, weight)),  # pyright: ignore[reportArgumentType]
        }
        Path(out_path.format(rank)).write_text(json.dumps(result), encoding="utf-8")
        dist.barrier()  # both ranks have written theirs
    except BaseException:
        dist.destroy_process_group()
        raise
    # Out without gloo's teardown: once in CI (two workers on two cores) a rank aborted in it,
    # after its result was written ("terminate called without an active exception").
    os._exit(0)


def test_the_all_to_all_gives_each_rank_the_whole_sequence_of_its_heads(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch.multiprocessing as mp

    world = 2
    out = str(tmp_path / "rank{}.json")
    mp.spawn(_exchange, args=(world, str(tmp_path / "store"), out), nprocs=world)  # pyright: ignore[reportPrivateImportUsage]
    for rank in range(world):
        got = json.loads(Path(out.format(rank)).read_text(encoding="utf-8"))
        assert got == {"heads_shape": [2, 8, 2, 3], "heads_equal": True, "round_trip": True,
                       "grad_is_weight": True}, rank  # fmt: skip


@pytest.mark.parametrize(
    "plan",
    [
        {"dp_shard": 2},  # ZeRO-3's sharding over data × sequence ranks (FSDP2 over 8)
        {"dp_shard": 2, "checkpointing": "full"},
        {"pp": 2, "batch": 2, "microbatches": 2},  # every sequence rank holds the model
    ],
)
def test_the_closed_form_is_the_trace_category_by_category(plan: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**SHAPE, **plan, ulysses=4)
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    assert traced.layout.world == 4 * cfg.gpus * cfg.pp
    assert any("Ulysses 4 (DeepSpeed's DistributedAttention)" in n for n in traced.notes)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.001)
        for category, bytes_ in t.by_category.items():
            if bytes_ > t.peak_bytes // 1000:
                assert e.by_category[category] == pytest.approx(bytes_, rel=0.01), category


def test_activations_are_divided_by_n_and_the_states_sharded_over_the_sequence_ranks() -> None:
    def stage(**kw: Any) -> Any:
        cfg = parse_config(model="hf:llama-3.1-8b", precision="bf16", seq=32768, **kw)
        return estimate_plan(cfg).stages[0]

    alone, four = stage(dp_shard=8), stage(dp_shard=2, ulysses=4)
    kept = [s.moves["F0"].delta["activations"] for s in (alone, four)]
    # each rank keeps a quarter of the tokens' activations (but each attention's 16 B of
    # seed and offset): attention's inputs and outputs are the whole sequence's for a quarter
    # of the heads, the same bytes
    assert kept[1] == pytest.approx(kept[0] / 4, rel=1e-6)
    # FSDP over dp_shard × ulysses = 8 ranks: the same shards as FSDP 8
    assert four.base["parameters"] == alone.base["parameters"]
    assert four.base["optimizer"] == alone.base["optimizer"]


def test_the_all_to_alls_are_sent_and_the_group_has_its_communicator() -> None:
    from profiling.estimate.comm import comm
    from profiling.estimate.shape import shape_of

    cfg = parse_config(model="hf:llama-3.1-8b", precision="bf16", seq=32768, dp_shard=2,
                       ulysses=4, checkpointing="full")  # fmt: skip
    sent = comm(cfg, shape_of(cfg))
    assert [g.name for g in sent.groups] == ["Ulysses", "FSDP"]
    assert [g.ranks for g in sent.groups] == [4, 8]
    a2a = next(t for t in sent.transfers if t.group == "Ulysses")
    # forward, backward and recomputed: q and the output (4,096 wide), k and v (1,024 wide),
    # each rank sending 3/4 of its 8,192 tokens' share, in all 32 blocks
    assert a2a.bytes == 3 * 8192 * (2 * 4096 + 2 * 1024) * 2 * 3 // 4 * 32


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"ulysses": 16, "seq": 4096}, "--ulysses 16 must divide hf:llama-3.1-8b's 32 attention"),
        (
            {
                "ulysses": 16,
                "heads": 32,
                "kv_heads": 8,
                "hidden": 4096,
                "layers": 2,
                "ffn": 11008,
                "vocab": 32000,
                "arch": "llama",
                "params": "1B",
                "model": None,
            },
            "and 8 key/value heads (the all-to-all gives each rank whole heads)",
        ),
        ({"ulysses": 4, "cp": 2}, "--ulysses 4 cannot run with --cp 2"),
        ({"ulysses": 4, "tp": 2}, "--ulysses 4 cannot run with --tp 2"),
        ({"ulysses": 3, "seq": 4096}, "--seq 4096 must divide by --ulysses 3"),
        ({"ulysses": 2, "compile": True}, "not yet with --ulysses"),
    ],
)
def test_what_ulysses_cannot_take_is_one_sentence(kw: dict[str, Any], words: str) -> None:
    values = {"model": "hf:llama-3.1-8b", "precision": "bf16", "dp_shard": 2, **kw}
    with pytest.raises((ConfigError, ProfilingError)) as raised:
        estimate_plan(parse_config(**{k: v for k, v in values.items() if v is not None}))
    text = str(raised.value)
    assert words in text and "\n" not in text


def test_fit_plans_says_it_does_not_search_ulysses() -> None:
    from profiling.fit_plans import fit_plans

    cfg = parse_config(model="hf:llama-3.1-8b", precision="bf16", ulysses=2, gpu="h100-sxm")
    with pytest.raises(ProfilingError, match="not Ulysses yet"):
        fit_plans(cfg, 8)


def test_a_deepspeed_configs_sequence_parallel_size_is_the_ulysses_degree(
    tmp_path: Path, run_cli
) -> None:
    from profiling.recipes import read_recipe

    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
              "sequence_parallel_size": 4, "zero_optimization": {"stage": 3}}  # fmt: skip
    path = tmp_path / "ds_sp.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    recipe = read_recipe([path])
    assert recipe.values["ulysses"] == 4
    line = next(s.line() for s in recipe.used if s.key == "sequence_parallel_size")
    assert "DeepSpeed-Ulysses" in line
    # DeepSpeed's own ZeRO engine beside Ulysses is not modelled: one sentence, no traceback
    args = ("--model", "hf:llama-3.1-8b", "--gpus", "2", "--seq", "32768", "--root", str(tmp_path))
    done = run_cli("estimate", "--from", str(path), *args, cwd=tmp_path, check=False)
    said = done.stderr + done.stdout
    assert done.returncode != 0 and "Traceback" not in said
    assert "no DeepSpeed-style ZeRO (give --dp-shard for FSDP2)" in said and "--ulysses" in said
    config["sequence_parallel_size"] = 1
    path.write_text(json.dumps(config), encoding="utf-8")
    recipe = read_recipe([path])
    assert "ulysses" not in recipe.values
    assert "no sequence parallelism" in next(
        s.line() for s in recipe.ignored if s.key == "sequence_parallel_size"
    )


def test_the_cli_runs_a_ulysses_plan(tmp_path: Path, run_json) -> None:
    data = run_json("estimate", "--model", "hf:llama-3.1-8b", "--precision", "bf16", "--seq",
                    "32768", "--dp-shard", "2", "--ulysses", "4", "--checkpointing", "full",
                    "--root", str(tmp_path), cwd=tmp_path)  # fmt: skip
    assert data["world"] == 8 and len(data["ranks"]) == 1
    assert "FSDP 2 × Ulysses 4" in data["plan"]
