"""`journal-agent estimate / trace / measurements` as a user runs them, in subprocesses."""

from __future__ import annotations

import json

import pytest

from profiling.records import RecordStore


def test_estimate_json_shape_and_record(tmp_path, run_json) -> None:
    data = run_json(
        "estimate", "--params", "7e9", "--precision", "mixed", "--gpus", "2", "--zero", "2",
        "--gpu-mem", "40",
        "--plot", str(tmp_path / "est.png"), "--root", str(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert (tmp_path / "est.png").read_bytes()[:4] == b"\x89PNG"
    assert set(data) >= {"record_id", "per_gpu_bytes", "total_bytes", "fits", "components"}
    assert data["per_gpu_bytes"] == 63_000_000_000
    assert data["total_bytes"] == 126_000_000_000
    assert data["fits"] is False
    assert data["components"][0] == {
        "name": "Weights (fp16/bf16)",
        "bytes": 14_000_000_000,
        "calculation": "7B · 2 B",
        "group": "model states",
        "category": "parameters",
    }
    for component in data["components"]:
        assert set(component) >= {"name", "bytes", "calculation"}
    record = RecordStore(tmp_path / ".journal" / "measurements").load(data["record_id"])
    assert record.kind == "estimated" and record.id.startswith("est-")
    assert record.result("per_gpu_total").value == 63_000_000_000
    assert [s.name for s in record.steps][:2] == ["Weights (fp16/bf16)", "Gradients (fp16/bf16)"]


def test_estimate_table_for_the_seed_case(tmp_path, run_cli) -> None:
    out = run_cli(
        "estimate", "--model", "llama-7b", "--precision", "mixed", "--optimizer", "adamw",
        "--gpus", "2", "--zero", "2", "--gpu-mem", "40", "--root", str(tmp_path), cwd=tmp_path,
    ).stdout  # fmt: skip
    for text in (
        "Weights (fp16/bf16)",
        "Optimizer: momentum",
        "Activations",
        "Logits",
        "Total per GPU",
        "❌ Exceeds 40.00 GB",
        "6.74B · 4 B / 2",
    ):
        assert text in out
    record_line = next(line for line in out.splitlines() if line.startswith("record: est-"))
    record_id = record_line.split()[1]
    assert f"[m:{record_id}]" in record_line
    # The record shows again, with its table, and by its citation too.
    shown = run_cli(
        "measurements", "show", f"[m:{record_id}]", "--root", str(tmp_path), cwd=tmp_path
    )
    assert "Total per GPU" in shown.stdout and f"cite as [m:{record_id}]" in shown.stdout


def test_trace_json_shape_user_factory_and_plot(user_models, run_cli, run_json) -> None:
    root = user_models
    data = run_json(
        "trace", "--model", "user_models:make_mlp", "--batch", "4", "--plot", "trace.png",
        "--root", str(root), cwd=root,
    )  # fmt: skip
    assert data["record_id"].startswith("trace-")
    assert data["peak_bytes"] > 0
    assert set(data["by_category"]) >= {
        "parameters", "gradients", "optimizer", "activations", "temporaries",
    }  # fmt: skip
    n = 3 * (1024 + 32) + 330
    assert data["after_step"]["parameters"] == 4 * n
    assert "MLP.blocks.0" in data["by_module"]
    assert (root / "trace.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    listed = json.loads(run_cli("measurements", "--json", "--root", str(root), cwd=root).stdout)
    assert [r["id"] for r in listed] == [data["record_id"]]


def test_trace_compare_estimate(tmp_path, run_json) -> None:
    data = run_json(
        "trace", "--model", "gpt2-small", "--seq", "128", "--dtype", "bf16",
        "--compare-estimate", "--gpu-mem", "2", "--plot", "cmp.png", "--root", str(tmp_path),
        cwd=tmp_path,
    )  # fmt: skip
    # With an estimate beside the trace, the chart compares the two.
    assert (tmp_path / "cmp.png").read_bytes()[:4] == b"\x89PNG" and data["plot"] == "cmp.png"
    # The traced peak (≈ 2.5 GB: fp32 AdamW states + foreach temporaries) against 2 GB.
    assert data["fits"] is False and data["status"] == "❌"
    assert data["verdict"].startswith("❌ Exceeds 2.00 GB")
    rows = {r["category"]: r for r in data["comparison"]["rows"]}
    # --dtype bf16 is --precision amp-bf16 for both sides now: autocast keeps fp32 parameters
    # (4 B/param), in the trace and in the estimate alike.
    assert data["config"]["precision"] == "amp-bf16"
    assert rows["parameters"]["traced_bytes"] == 4 * 124_439_808
    assert rows["parameters"]["estimated_bytes"] == 4 * 124_439_808
    assert rows["parameters"]["ratio"] == 1.0
    store = RecordStore(tmp_path / ".journal" / "measurements")
    assert store.exists(data["estimate"]["record_id"]) and store.exists(data["record_id"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["estimate"], "give --model NAME, --params N"),
        (["estimate", "--params", "lots"], "cannot read 'lots' as a count"),
        (["estimate", "--model", "gpt5"], "unknown model 'gpt5'"),
        (["trace", "--model", "user_models:broken"], "model factory 'user_models:broken' failed"),
        (["trace", "--model", "user_models:make_peeks"], "cannot run under fake tensors"),
        (["trace", "--model", "user_models:make_selects"], "data-dependent shapes"),
        (["measurements", "show", "est-00000000"], "no measurement record 'est-00000000'"),
        (
            ["estimate", "--model", "gpt2-small", "--lora-rank", "8", "--compare-trace"],
            "needs a Llama-family, GPT-NeoX-kind, encoder or encoder-decoder model for --lora-rank "
            "(GPT-2's are not modelled)",
        ),
        (
            ["trace", "--model", "user_models:make_mlp", "--compare-estimate"],
            "--compare-estimate needs a reference model, not a factory",
        ),
        (["estimate", "--model", "llama-7b", "--gpus", "-2"], "--gpus must be at least 1 (got -2)"),
        (["estimate", "--model", "llama-7b", "--seq", "0"], "--seq must be at least 1 (got 0)"),
        (
            ["estimate", "--model", "llama-7b", "--gpu", "tpu-v9"],
            "--gpu 'tpu-v9' is not a GPU we know; use one of a100-40gb, a100-80gb",
        ),
        (
            ["estimate", "--model", "llama-7b", "--precision", "fp16"],
            "unknown precision 'fp16'; --precision takes fp32, amp-bf16, amp-fp16, mixed, bf16",
        ),
        (
            ["trace", "--model", "tiny-gpt2", "--optimizer", "lion"],  # (adam8bit traces: 813aeb5)
            "optimizer 'lion' cannot be traced; use one of adamw, adam, sgd",
        ),
        (["estimate", "--params", "nan"], "--params"),
        (["estimate", "--model", "llama-7b", "--gpu-mem", "inf"], "--gpu-mem must be a finite"),
    ],
)
def test_errors_are_one_sentence(user_models, run_cli, args: list[str], message: str) -> None:
    proc = run_cli(*args, "--root", str(user_models), cwd=user_models, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: ") and message in proc.stderr
    assert "Traceback" not in proc.stderr
