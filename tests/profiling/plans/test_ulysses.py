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
        # one key/value head for two ranks: replicated, each rank the whole sequence of it
        kv = full[:, rank * s // world : (rank + 1) * s // world, :1]
        kv_heads = sp.kv_to_heads(kv)
        weight = torch.arange(back.numel(), dtype=back.dtype).view(back.shape)
        (back * weight).sum().backward()  # through both all-to-alls and back
        result = {
            "heads_shape": list(heads.shape),
            "heads_equal": bool(torch.equal(heads, want)),
            "round_trip": bool(torch.equal(back, mine)),
            "grad_is_weight": bool(torch.equal(mine.grad, weight)),  # pyright: ignore[reportArgumentType]
            "kv_replicated": bool(torch.equal(kv_heads, full[:, :, :1])),
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
                       "grad_is_weight": True, "kv_replicated": True}, rank  # fmt: skip


@pytest.mark.parametrize(
    "plan",
    [
        {"dp_shard": 2},  # ZeRO-3's sharding over data × sequence ranks (FSDP2 over 8)
        {"dp_shard": 2, "checkpointing": "full"},
        {"pp": 2, "batch": 2, "microbatches": 2},  # every sequence rank holds the model
        # fewer key/value heads than ranks: DeepSpeed replicates them, one to each rank
        {"dp_shard": 2, "kv_heads": 2},
        {"dp_shard": 2, "kv_heads": 1, "checkpointing": "full"},
        # two key/value heads per rank, repeated for the kernel (2.6 % low before wo's copy of
        # the inverse all-to-all's output was counted)
        {"dp_shard": 2, "ulysses": 2},
    ],
)
def test_the_closed_form_is_the_trace_category_by_category(plan: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHAPE, "ulysses": 4, **plan})
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    u = cfg.ulysses
    assert traced.layout.world == u * cfg.gpus * cfg.pp
    assert any(f"Ulysses {u} (DeepSpeed's DistributedAttention)" in n for n in traced.notes)
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
    # of the heads, the same bytes; and wo keeps the inverse all-to-all's output, a copy of the
    # attention's output for its 8,192 tokens (the kernel's own is kept too), in all 32 blocks
    copies = 32 * 8192 * 4096 * 2
    assert kept[1] - copies == pytest.approx(kept[0] / 4, rel=1e-6)
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
    # Ulysses 16 past the 8 key/value heads: each sent replicated, one per rank (128 wide)
    cfg = cfg.model_copy(update={"ulysses": 16, "dp_shard": 1})
    a2a = next(t for t in comm(cfg, shape_of(cfg)).transfers if t.group == "Ulysses")
    assert a2a.bytes == 3 * 2048 * (2 * 4096 + 2 * 16 * 128) * 2 * 15 // 16 * 32
    assert "2·u·head_dim" in a2a.formula


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"ulysses": 64, "seq": 4096}, "--ulysses 64 must divide hf:llama-3.1-8b's 32 attention"),
        (
            {
                "ulysses": 8,
                "heads": 24,
                "kv_heads": 6,
                "hidden": 3072,
                "layers": 2,
                "ffn": 11008,
                "vocab": 32000,
                "arch": "llama",
                "params": "1B",
                "model": None,
            },
            "divide or be a multiple of its 6 key/value heads",
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


def _fit(seq: int, **kw: Any) -> Any:
    from profiling.fit_plans import fit_plans

    shape = {**SHAPE, "kv_heads": 2}  # fewer key/value heads than Ulysses 4 and 8
    # a GPU nothing exceeds: every plan searched fits, and so is listed
    cfg = parse_config(**{**shape, "seq": seq}, gpu_mem=100_000, batch=1, checkpointing="full",
                       **kw)  # fmt: skip
    return fit_plans(cfg, 8)


def test_fit_plans_searches_ulysses_where_deepspeed_runs_it() -> None:
    from profiling.fit_plans import plan_flags

    res = _fit(16384)
    degrees = {c.config.ulysses for c in res.fitting}
    # 2 divides the 2 key/value heads; 4 and 8 are multiples of them (replicated)
    assert degrees == {1, 2, 4, 8}
    for cand in res.fitting:
        c = cand.config
        assert (c.dp_shard or 1) * c.tp * c.cp * c.ulysses * c.pp == 8
        if c.ulysses > 1:  # DeepSpeed-Ulysses runs without TP and CP
            assert c.tp == c.cp == 1 and f"Ulysses {c.ulysses}" in cand.label()
            assert f"--ulysses {c.ulysses}" in " ".join(plan_flags(c))
            # the closed form's own peak: what `estimate` with those flags gives
            assert cand.peak_bytes == estimate_plan(c).highest.peak_bytes
    # beside CP at the same degree: the same peak, and nvidia-smi as `estimate` gives it (fit
    # shares its reading, 08699f7), Ulysses' no higher than CP's: the reserve's logits are the
    # rank's 1/N of the tokens under either (they counted the whole sequence under Ulysses),
    # and the reserve's highest point outside the loss is CP's ring backward, which holds more
    # than Ulysses' all-to-alls (plans/outside_loss)
    from profiling.plans.report import rank_nvml

    ulysses, cp = (next(c for c in res.fitting if c.config.pp == 1 and c.config.tp == 1
                        and getattr(c.config, key) == 4) for key in ("ulysses", "cp"))  # fmt: skip
    assert ulysses.peak_bytes == cp.peak_bytes
    for cand in (ulysses, cp):
        plan = estimate_plan(cand.config)
        assert cand.nvml_bytes == max(rank_nvml(plan, r) for r in plan.ranks)
    assert ulysses.nvml_bytes <= cp.nvml_bytes
    # below CP's 16,384 tokens neither is searched; a degree given is held
    assert {c.config.ulysses for c in _fit(8192).fitting} == {1}
    held = _fit(16384, ulysses=4).fitting
    assert held and {(c.config.ulysses, c.config.tp, c.config.cp) for c in held} == {(4, 1, 1)}


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
