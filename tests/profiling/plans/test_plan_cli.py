"""``estimate`` and ``trace`` with a plan's degrees: every distinct rank, the highest named,
the spread, each rank kept in the record; what a plan cannot take yet is refused."""

from __future__ import annotations

from profiling.records import RecordStore


def test_estimate_names_the_highest_rank_and_keeps_every_rank(tmp_path, run_cli, run_json) -> None:
    args = ("estimate", "--model", "llama-7b", "--precision", "mixed", "--seq", "2048",
            "--batch", "8", "--dp-shard", "8", "--tp", "2", "--pp", "4", "--microbatches", "8",
            "--root", str(tmp_path))  # fmt: skip
    out = run_cli(*args, cwd=tmp_path).stdout
    assert "FSDP 8 × TP 2+SP × PP 4 (1f1b, 8 microbatches)" in out and "64 GPUs" in out
    assert "highest peak: pipeline rank 0 (global ranks 0-15)" in out
    assert "spread over the 64 GPUs" in out
    data = run_json(*args, cwd=tmp_path)
    assert data["world"] == 64 and len(data["ranks"]) == 4
    assert data["per_gpu_bytes"] == max(r["peak_bytes"] for r in data["ranks"])
    record = RecordStore(tmp_path / ".journal" / "measurements").load(data["record_id"])
    assert record.kind == "estimated"
    assert [r["pp_rank"] for r in record.extra["ranks"]] == [0, 1, 2, 3]
    assert record.result("pp rank 3: peak").value == data["ranks"][3]["peak_bytes"]
    assert record.result("spread").value == data["spread_bytes"] > 0


def test_trace_of_a_plan_traces_each_stage_kind_once(tmp_path, run_json) -> None:
    data = run_json("trace", "--model", "tiny-llama", "--seq", "64", "--batch", "2",
                    "--pp", "2", "--dp-shard", "50000", "--root", str(tmp_path),
                    cwd=tmp_path)  # fmt: skip
    assert data["kind"] == "traced" and data["world"] == 100_000
    assert [r["global_ranks"] for r in data["ranks"]] == ["0-49999", "50000-99999"]
    assert any("as one rank of a fake world of 100,000 ranks" in n for n in data["notes"])


def test_what_a_plan_cannot_take_yet_is_one_sentence(tmp_path, run_cli) -> None:
    root = ("--root", str(tmp_path))
    done = run_cli("estimate", "--model", "llama-7b", "--pp", "2", "--batch", "2",
                   "--plot", str(tmp_path / "p.png"), *root, cwd=tmp_path, check=False)  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "reported per rank" in done.stderr + done.stdout
    bad = run_cli("estimate", "--model", "llama-7b", "--pp", "2", "--batch", "3",
                  "--microbatches", "2", *root, cwd=tmp_path, check=False)  # fmt: skip
    assert bad.returncode != 0 and "must divide --batch 3" in bad.stderr + bad.stdout


def test_a_plan_traces_a_shape_given_by_hand(tmp_path, run_json) -> None:
    data = run_json("trace", "--layers", "4", "--hidden", "64", "--heads", "4", "--kv-heads",
                    "2", "--ffn", "172", "--vocab", "512", "--arch", "llama", "--params", "0.2M",
                    "--seq", "4096", "--batch", "2", "--pp", "2", "--root", str(tmp_path),
                    cwd=tmp_path)  # fmt: skip
    assert data["kind"] == "traced" and len(data["ranks"]) == 2  # no maximum sequence by hand


def test_a_torchtitan_toml_runs_its_plan_and_says_what_it_used(tmp_path, run_cli, run_json) -> None:
    toml = tmp_path / "llama3_7b_plan.toml"
    toml.write_text(
        "[training]\nlocal_batch_size = 8\nseq_len = 2048\n\n"
        "[parallelism]\ndata_parallel_shard_degree = 8\ntensor_parallel_degree = 2\n"
        'pipeline_parallel_degree = 4\npipeline_parallel_schedule = "1F1B"\n'
        "enable_async_tensor_parallel = true\n\n"
        '[activation_checkpoint]\nmode = "none"\n\n[model]\nname = "llama2"\nflavor = "7B"\n'
        'converters = ["float8"]\n',
        encoding="utf-8",
    )
    args = ("estimate", "--from", str(toml), "--root", str(tmp_path))
    out = run_cli(*args, cwd=tmp_path).stdout
    assert "used: parallelism.pipeline_parallel_degree = 4 → --pp 4" in out
    micro = "used: parallelism.pipeline_parallel_microbatch_size = '(unset)' → --microbatches 8"
    assert micro in out
    assert "enable_async_tensor_parallel = true → --async-tp true" in out
    assert "model.converters = ['float8'] → --float8 'tensorwise'" in out
    assert "FSDP 8 × TP 2+SP × PP 4 (1f1b, 8 microbatches)" in out and "64 GPUs" in out
    assert "Float8 tensorwise, async TP" in out and "symmetric-memory workspace" in out
    data = run_json(*args, cwd=tmp_path)
    assert data["world"] == 64 and data["recipe"]["values"]["pp"] == 4
