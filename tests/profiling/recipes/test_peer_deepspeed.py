"""DeepSpeed's own ZeRO estimators as rows of benchmarks/peer (issue #32): what DeepSpeed 0.19.6
printed for transformers' own models, per GPU and host memory per node, over models × GPUs per
node × nodes × offloads; the numbers ``estimate --deepspeed`` gives as DeepSpeed's equal them to
the byte, and our engine's own stand beside them by the conventions the README states."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from profiling.models.workloads import build_model
from tests.profiling.estimate.deepspeed_ranks import kept_whole

REPO = Path(__file__).resolve().parents[3]
DATA = json.loads((REPO / "benchmarks" / "peer" / "deepspeed_estimator.json").read_text("utf-8"))
ROWS = DATA["rows"]


@pytest.fixture(scope="module")
def bench():
    path = REPO / "benchmarks" / "peer_deepspeed.py"
    spec = importlib.util.spec_from_file_location("peer_deepspeed", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop("peer_deepspeed", None)
    spec.loader.exec_module(module)
    return module


def test_the_rows_are_deepspeeds_whole_tables_with_their_source() -> None:
    assert DATA["source"]["version"] == "0.19.6" and DATA["source"]["commit"] == "edaa72212"
    # every (model, GPUs per node, nodes) carries both tables whole: ZeRO-2's two lines and
    # ZeRO-3's six (offload_param / offload_optimizer / zero_init as DeepSpeed loops them)
    tables = Counter((r["model"], r["gpus_per_node"], r["nodes"]) for r in ROWS)
    assert len(tables) >= 20 and set(tables.values()) == {8}
    assert {(r["gpus_per_node"], r["nodes"]) for r in ROWS} >= {(1, 1), (8, 1), (8, 4)}
    for r in ROWS:  # each printed number is its bytes as DeepSpeed formats them
        assert r["printed_gpu"] == f"{r['gpu_bytes'] / 2**30:.2f}GB"
        assert r["printed_cpu_per_node"] == f"{r['cpu_bytes_per_node'] / 2**30:.2f}GB"
    # DeepSpeed counted transformers' modules itself, a tied embedding once: Llama 3.2 1B's
    # published 1,235,814,400, not 1.5B
    one_b = next(r for r in ROWS if r["model"] == "hf:llama-3.2-1b")
    assert one_b["total_params"] == 1_235_814_400


def test_estimate_gives_deepspeeds_numbers_to_the_byte(bench) -> None:
    result = bench.run(ROWS)
    summary = result["summary"]
    assert summary["estimator_exact"] == f"{len(ROWS)} of {len(ROWS)}"
    assert summary["estimator_as_printed"] == f"{len(ROWS)} of {len(ROWS)}"
    assert summary["counts_differ"] == [] and summary["target_met"]


def test_a_row_we_would_get_wrong_is_not_called_exact(bench) -> None:
    rows = copy.deepcopy(ROWS[:16])
    rows[3]["gpu_bytes"] += 2**30  # a GiB more than ours, printed so
    rows[3]["printed_gpu"] = f"{rows[3]['gpu_bytes'] / 2**30:.2f}GB"
    rows[5]["total_params"] += 1  # a count ours does not reproduce
    result = bench.run(rows)
    assert [r["exact"] for r in result["rows"]].count(False) == 1
    assert not result["rows"][3]["exact"] and not result["rows"][3]["as_printed"]
    assert result["summary"]["counts_differ"] == [rows[5]["id"]]
    assert not result["summary"]["target_met"]


def test_our_engine_beside_the_estimator_differs_by_the_stated_conventions(bench) -> None:
    rows = [r for r in ROWS if r["model"] == "hf:llama-2-7b"]
    done = {r["id"]: r for r in bench.run(rows)["rows"]}
    model = build_model("hf:llama-2-7b", torch.device("meta"))
    numels = [p.numel() for p in model.parameters()]  # DeepSpeed's flat order
    psi = sum(numels)
    for r in rows:
        if not r.get("zero_init", True):
            continue  # the fp32 model every process loads: no step of ours to set beside it
        got = done[r["id"]]
        if r["stage"] == 2 and not r["offload_optimizer"]:
            # 2Ψ + 18Ψ/N both — the engine's fp32 gradients at the step are DeepSpeed's 18 — and
            # ours the flattened 16-bit partition .to(fp32) converts, alive with it (2Ψ/N), and
            # the 16-bit gradients the rank keeps: whole tensors, not Ψ/N (2·(kept − Ψ/N))
            n = r["gpus_per_node"] * r["nodes"]
            extra = 2 * (kept_whole(numels, n) - psi / n) / psi
            want = (2 + 20 / n + extra) / (2 + 18 / n)
            assert got["engine_gpu_ratio"] == pytest.approx(want, abs=1e-4)
        if r["stage"] == 3 and r["offload_param"]:
            # the largest module gathered in 16 bits where the estimator counts 4 B, its host
            # partition copied to the GPU beside it while it is gathered (1/N of it), and what
            # stage3_max_reuse_distance keeps gathered across forward's end (5e8 elements: the
            # head, 32,000 × 4,096, is under half the distance): none of it in the estimator's
            m, n = r["largest_layer_params"], r["gpus_per_node"] * r["nodes"]
            ours = 2 * m + 2 * m / n + 2 * 500_000_000
            assert got["engine_gpu_ratio"] == pytest.approx(ours / (4 * m), abs=1e-4)
            # host: 20 B per parameter over the nodes (16-bit gradients too) against its 18
            assert got["engine_host_ratio"] == pytest.approx(20 / 18, abs=1e-4)
        if r["stage"] == 3 and r["offload_optimizer"] and not r["offload_param"]:
            assert got["engine_host_ratio"] == pytest.approx(18 / 16, abs=1e-4)
