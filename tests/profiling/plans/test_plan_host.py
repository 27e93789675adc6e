"""FSDP2's CPU offload on a plan: the host memory each GPU rank and each node needs, printed,
kept in the record and the JSON, and judged against ``--cpu-mem`` — and torchtitan's
``training.enable_cpu_offload`` read as that offload wherever torchtitan applies it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.plans.closed_form import estimate_plan
from profiling.plans.host import plan_host
from profiling.plans.report import plan_json, plan_record, render_plan
from profiling.recipes import read_recipe, with_recipe

TOML = Path(__file__).parents[1] / "recipes" / "fixtures" / "torchtitan" / "llama3_8b.toml"
LLAMA_7B_TENSORS = 32 * 9 + 3  # each block's 7 matrices and 2 norms; embedding, norm, output


def test_a_plan_pins_what_fsdp_alone_pins_for_the_same_shards() -> None:
    # FSDP 8 as a plan (--dp-shard 8) and as plain data parallelism (--fsdp --gpus 8) hold the
    # same eighth of every parameter on the host: two models of the same offload agree
    common = {"model": "llama-7b", "seq": 512, "offload_optimizer": True, "precision": "mixed"}
    plan = estimate_plan(TrainingConfig.parse(**common, dp_shard=8))
    alone = estimate(TrainingConfig.parse(**common, fsdp=True, gpus=8))
    host, theirs = plan_host(plan), (alone.deepspeed or {}).get("host")
    assert host is not None and theirs is not None
    assert host["per_rank_bytes"] == pytest.approx(theirs["per_rank_bytes"], abs=4 * 300)
    assert host["per_node_bytes"] == 8 * host["per_rank_bytes"]
    # the shard's fp32 weights and gradients pinned, Adam's two moments and step counters not
    shard = -(-plan.params // 8)
    assert host["pinned_per_rank_bytes"] == pytest.approx(2 * 4 * shard, rel=1e-4)
    assert host["per_rank_bytes"] == host["pinned_per_rank_bytes"] + (
        8 * host["pinned_per_rank_bytes"] // 8 + 4 * LLAMA_7B_TENSORS
    )


def test_each_pipeline_rank_holds_its_stages_and_the_largest_is_counted() -> None:
    cfg = TrainingConfig.parse(model="llama-7b", seq=512, dp_shard=2, pp=2, microbatches=2,
                               batch=2, offload_optimizer=True, precision="mixed")  # fmt: skip
    host = plan_host(estimate_plan(cfg))
    assert host is not None
    # the two stages split 32 blocks 16/16 beside the embedding (first) and norm + output
    # (last): the output's vocab × h and the final norm's h over the embedding's
    h, v, block = 4096, 32000, 202_383_360
    last = (16 * block + h + v * h) // 2
    assert host["lines"][0]["bytes"] == 4 * last
    assert host["gpus_per_node"] == 4  # the plan's 4 GPUs, not 8 of a node


def test_the_host_memory_is_printed_recorded_and_judged() -> None:
    cfg = TrainingConfig.parse(model="llama-7b", seq=512, dp_shard=4, tp=2, cpu_mem=100,
                               offload_optimizer=True, precision="mixed")  # fmt: skip
    plan = estimate_plan(cfg)
    text = render_plan(plan)
    assert "Host (CPU) memory per rank, offloaded by FSDP2's CPU offload (8 rank(s)" in text
    assert "❌ host memory does not fit" in text  # 8 × Ψ/8 × 16 B ≈ 108 GB of 100 GB
    out = plan_json(plan, "r1")["host"]
    assert out["fits"] is False and out["per_node_bytes"] > 100e9
    recorded = {q.name: q.value for q in plan_record(plan).results}
    assert recorded["host: per_node"] == out["per_node_bytes"]
    roomy = estimate_plan(cfg.model_copy(update={"cpu_mem": 200.0}))
    assert plan_host(roomy)["fits"] is True  # type: ignore[index]
    assert plan_host(estimate_plan(cfg.model_copy(update={"offload_optimizer": False}))) is None


def test_torchtitans_cpu_offload_is_fsdps_offload(tmp_path: Path) -> None:
    text = TOML.read_text()
    on = tmp_path / "offload.toml"
    on.write_text(text.replace("[training]\n", "[training]\nenable_cpu_offload = true\n", 1))
    cfg = TrainingConfig.parse(**with_recipe(read_recipe([on]), {"dp_shard": 8}))
    assert cfg.offload_optimizer and cfg.fsdp
    assert plan_host(estimate_plan(cfg)) is not None
    # without FSDP torchtitan hands the policy to nobody: listed as ignored, nothing offloaded
    alone = tmp_path / "tp.toml"
    alone.write_text(
        on.read_text()
        .replace("data_parallel_shard_degree = -1", "data_parallel_shard_degree = 1")
        .replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 2")
    )
    recipe = read_recipe([alone])
    assert "offload_optimizer" not in with_recipe(recipe, {})
    said = [s.why for s in recipe.ignored if s.key == "training.enable_cpu_offload"]
    assert said and "no FSDP" in said[0]


def test_the_command_line_prints_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "journal_agent", "estimate", "--model", "llama-7b", "--seq", "512",
         "--dp-shard", "8", "--offload-optimizer", "--cpu-mem", "500", "--json", "--no-save"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    host = json.loads(done.stdout)["host"]
    assert host["by"] == "FSDP2's CPU offload" and host["fits"] is True
