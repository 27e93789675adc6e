"""``estimate --compare-trace`` and ``trace --compare-estimate`` on a plan (issue #32): both
run, side by side per pipeline rank and per category, the highest rank named on each side,
both records saved (the trace's keeping the comparison), ``--json`` carrying both."""

from __future__ import annotations

from profiling.records import RecordStore

TOY = ("--layers", "4", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--ffn", "172",
       "--vocab", "512", "--arch", "llama", "--params", "0.2M", "--seq", "32", "--batch", "2",
       "--tp", "2", "--pp", "2", "--dp-shard", "2", "--precision", "fp32")  # fmt: skip


def test_estimate_compares_a_plan_with_its_trace_per_rank(tmp_path, run_cli) -> None:
    out = run_cli("estimate", *TOY, "--compare-trace", "--root", str(tmp_path),
                  cwd=tmp_path).stdout  # fmt: skip
    assert out.index("Estimate: ") < out.index("Trace: ") < out.index("beside trace")
    table = out[out.index("beside trace") :]
    assert "Est/Trace" in table and "Est − Trace" in table
    for rank in ("0", "1"):
        assert f"pipeline rank {rank} (global ranks " in table
    assert "highest peak: pipeline rank 1 traced" in table
    assert "lowest estimate ÷ trace: pipeline rank" in table
    assert "  activations " in table and "  parameters " in table
    store = RecordStore(tmp_path / ".journal" / "measurements")
    records = {r.kind: r for r in store.list()}
    assert set(records) == {"estimated", "traced"}
    traced = records["traced"]
    assert traced.extra["estimate_record"] == records["estimated"].id
    ranks = traced.extra["comparison"]["ranks"]
    assert [r["traced_bytes"] for r in ranks] == [
        r["peak_bytes"] for r in traced.extra["ranks"]
    ]  # fmt: skip
    assert [r["estimated_bytes"] for r in ranks] == [
        r["peak_bytes"] for r in records["estimated"].extra["ranks"]
    ]  # fmt: skip


def test_trace_compare_estimate_of_a_plan_carries_both_in_json(tmp_path, run_json) -> None:
    data = run_json("trace", *TOY, "--compare-estimate", "--root", str(tmp_path), cwd=tmp_path)
    assert data["kind"] == "traced" and data["estimate"]["kind"] == "estimated"
    cmp = data["comparison"]
    assert [r["pp_rank"] for r in cmp["ranks"]] == [0, 1]
    for row, t, e in zip(cmp["ranks"], data["ranks"], data["estimate"]["ranks"], strict=True):
        assert row["traced_bytes"] == t["peak_bytes"] and row["estimated_bytes"] == e["peak_bytes"]
        assert row["diff_bytes"] == e["peak_bytes"] - t["peak_bytes"]
        assert row["ratio"] == round(e["peak_bytes"] / t["peak_bytes"], 4)
        cats = {c["category"]: c for c in row["categories"]}
        assert cats["parameters"]["traced_bytes"] == t["by_category"]["parameters"]
    assert cmp["highest_traced"] == data["highest"]["pp_rank"]
    assert cmp["highest_estimated"] == data["estimate"]["highest"]["pp_rank"]
    assert cmp["below_trace"] == any(r["diff_bytes"] < 0 for r in cmp["ranks"])
