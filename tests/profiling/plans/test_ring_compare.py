"""A plan's comparison shows each kind of a context-parallel ring's rank on its own (#32): ring
rank 0 (the first, which keeps wo's copy of its merged output at cp 2) and ring rank 1 (every
rank from 1 on holds alike), estimate beside trace, and which is higher on each side; each
pipeline rank's row is the higher of the two. It used to show that higher one only, so a ring
rank whose estimate fell below its own trace under the other's higher peak went unseen."""

from __future__ import annotations

import pytest

from profiling.plans.compare import render_plan_compare

TOY = ("--layers", "4", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--ffn", "160",
       "--vocab", "512", "--arch", "llama", "--batch", "2", "--precision", "bf16",
       "--dp-shard", "2")  # fmt: skip


@pytest.mark.parametrize(
    ("plan", "ring"),
    [(("--cp", "2", "--pp", "2", "--seq", "64"), "1"), (("--cp", "4", "--seq", "64"), "1-3")],
)
def test_each_ring_rank_is_compared_on_its_own(tmp_path, run_json, plan, ring) -> None:
    data = run_json("estimate", *TOY, *plan, "--compare-trace", "--root", str(tmp_path),
                    cwd=tmp_path)  # fmt: skip
    cmp = data["comparison"]
    for row in cmp["ranks"]:
        rings = row["ring_ranks"]
        assert [g["ring_rank"] for g in rings] == [0, 1]
        assert [g["ring_ranks"] for g in rings] == ["0", ring]
        for side in ("estimated", "traced"):
            top = max(rings, key=lambda g: (g[f"{side}_bytes"], -g["ring_rank"]))
            # the pipeline rank's row is each side's higher ring rank, named
            assert row[f"{side}_bytes"] == top[f"{side}_bytes"]
            assert row["higher_ring_rank"][side] == top["ring_rank"]
        for g in rings:  # each ring rank's own estimate at or above its own trace
            assert g["diff_bytes"] == g["estimated_bytes"] - g["traced_bytes"] >= 0, g
    low = cmp["lowest_ring"]
    assert low is not None and low["ratio"] == min(
        g["ratio"] for r in cmp["ranks"] for g in r["ring_ranks"]
    )  # fmt: skip
    text = render_plan_compare(cmp)
    assert "each kind of context-parallel ring rank:" in text
    assert "  ring rank 0 " in text and "  higher: " in text
    assert "lowest ring rank estimate ÷ trace: pipeline rank" in text
