"""benchmarks/peer/rows.json: every published row names where it comes from and what it counts,
and every config file it copies is read by --from's reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profiling.recipes import read_recipe

REPO = Path(__file__).resolve().parents[3]
PEER = REPO / "benchmarks" / "peer"
ROWS = json.loads((PEER / "rows.json").read_text(encoding="utf-8"))


def test_every_row_names_its_source_and_counter() -> None:
    assert len({r["project"] for r in ROWS}) >= 4
    for row in ROWS:
        source = row["source"]
        assert source["repo"] and source["path"] and len(source["commit"]) == 40, row["id"]
        assert row["counter"] and (row["oom"] or row["measured"] is not None), row["id"]
        if not row["expressible"]:
            assert row["reason"], row["id"]


@pytest.mark.parametrize(
    "local",
    sorted({r["config_file"]["local"] for r in ROWS if (r.get("config_file") or {}).get("local")}),
)
def test_every_copied_config_is_read(local: str) -> None:
    recipe = read_recipe([PEER / local])
    assert recipe.used  # it set something, and accounted for the rest


def test_the_gemma_2b_rows_read_the_configs_of_the_commit_that_measured_them() -> None:
    """LitGPT's table got its Gemma 2B rows at 43c44323 ("Add automated benchmark table"), whose
    configs give AdamW's arguments under ``train`` (no optimizer block yet): read as the later
    configs are, no key left unknown."""
    rows = [r for r in ROWS if r["id"].startswith("litgpt/gemma-2b/")]
    assert len(rows) == 4
    for row in rows:
        assert row["source"]["commit"].startswith("43c44323"), row["id"]
        local, commit = row["config_file"]["local"], row["config_file"]["commit"]
        assert local.endswith("@43c4432.yaml") and commit.startswith("43c4432")
        then = read_recipe([PEER / local])
        later = read_recipe([PEER / local.replace("@43c4432", "")])  # the 00af8b0 copy
        assert not [s.key for s in then.ignored if "not a setting this reader knows" in s.why]
        # the same step: the later file names its optimizer (AdamW, our default) where the
        # earlier one leaves it to the script (QLoRA: bitsandbytes' PagedAdamW in both)
        assert then.values.get("optimizer", "adamw") == later.values["optimizer"] == "adamw"
        same = {k: v for k, v in later.values.items() if k != "optimizer"}
        assert {k: v for k, v in then.values.items() if k != "optimizer"} == same


@pytest.mark.parametrize("name", ["rank32", "rank64", "rank32-dora"])
def test_peft_metamathqa_rows_run_fp32_adapters_on_the_bf16_model(name: str) -> None:
    """PEFT's MetaMathQA runs (results/lora--llama-3.2-3B-*.json's train_config: dtype bfloat16,
    use_amp false, autocast_adapter_dtype true) train fp32 adapters, their gradients and AdamW
    moments fp32, beside the bf16 base with no autocast: --precision mixed. Read as pure bf16 the
    reserve was predicted below the measurement (0.957-0.987: the unsafe side)."""
    from profiling.config import TrainingConfig
    from profiling.estimate.memory import estimate

    row = next(r for r in ROWS if r["id"] == f"peft/MetaMathQA/lora--llama-3.2-3B-{name}")
    cfg = TrainingConfig.parse(**{**row["overrides"], "counter": "reserved"})
    est = estimate(cfg)
    assert est.category_bytes("gradients") == est.trainable_params * 4
    assert est.category_bytes("optimizer") >= est.trainable_params * 8
    counters = est.counters
    assert counters is not None
    # the 768-token batch bounds the data's longest: at or above the measured reserve
    assert 1.0 <= counters.reserved.bytes / row["measured"] <= 1.08


def test_the_benchmark_prints_the_summary_beside_the_targets() -> None:
    # The limit only stops a hung run: every row is estimated (some compiled), ~5 min quiet and
    # 7-8 min beside a full suite on two cores; its speed is not what this test checks.
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_peer.py")],
        capture_output=True, text=True, timeout=1500, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout)
    summary = result["summary"]
    assert summary["fully_published"]["rows"] >= 20
    assert set(summary["targets"]) == {
        "median_abs_error", "share_within_10pct", "min_ratio", "largest_context"
    }  # fmt: skip
    assert all({"id", "ratio", "measured", "predicted"} <= set(r) for r in result["rows"])
    # The same rows through profiling as it was before (--old, default 3c7ea88), side by side:
    # the summary and each row's ratio (None where that version could not express the row).
    before = summary["at_3c7ea88"]["fully_published"]
    assert before["rows"] >= 20 and before["median_abs_error"] > 0
    assert all("ratio_before" in r for r in result["rows"])
    assert any(r["ratio_before"] not in (None, r["ratio"]) for r in result["rows"])
    assert all(x["reason"] for x in result["not_expressed"])
    # Every out-of-memory row is judged, and none is called "fits".
    assert result["oom_rows"] and all(o["does_not_fit"] for o in result["oom_rows"])
    # The largest context that fits: each published GPU size searched, none left out; where
    # the published run ran out of memory, nothing fits by ours either.
    contexts = result["largest_context"]
    assert len(contexts) >= 6
    assert all("ratio" in c or c.get("does_not_fit") for c in contexts)
    # Each column as a line of the GPU's memory, ours beside the published one: Unsloth's
    # lengths lie on theirs to within a token (a table computed from a fitted line), and
    # each line's bytes per token is the inverse of its tokens per GB.
    lines = summary["largest_context"]
    published, predicted = lines["published_line"], lines["predicted_line"]
    assert published["farthest_tokens"] < 1
    for line in (published, predicted):
        assert line["mb_per_token"] == pytest.approx(1e3 / line["tokens_per_gb"], abs=1e-3)
        assert 0 < line["gb_at_no_tokens"] < min(c["gpu_mem_gb"] for c in contexts if "ratio" in c)
    # DeepSpeed's own estimators beside them (tests/profiling/recipes/test_peer_deepspeed.py)
    ds = summary["deepspeed_estimator"]
    assert ds["rows"] == len(result["deepspeed_estimator"]) >= 200 and ds["target_met"]


def test_the_benchmark_compares_with_a_commit_whose_bench_compares_too() -> None:
    """--old REF runs REF's own bench outside the repository; from 5c2a35a on that bench would
    start its own comparison there (a git archive it cannot make) unless told --no-old."""
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_peer.py"), "--old", "5c2a35a",
         "--no-deepspeed"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    before = json.loads(done.stdout)["summary"]["at_5c2a35a"]["fully_published"]
    assert before["rows"] >= 20 and before["min_ratio"] > 0
