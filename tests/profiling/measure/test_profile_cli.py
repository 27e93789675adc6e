"""`journal-agent profile` as a user runs it: real CPU steps in a subprocess, real files.

On CPU the live-tensor count and the trace of the same step count the same tensors: the
ratio measured ÷ traced per phase is the trace's self-check, asserted here for two reference
workloads.
"""

from __future__ import annotations

import csv
import json
import textwrap

import pytest

from profiling.records import RecordStore

FACTORIES = textwrap.dedent(
    """
    import time
    import torch
    from torch import nn


    class MLP(nn.Module):
        def __init__(self, width=32):
            super().__init__()
            self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(2))

        def forward(self, x):
            for block in self.blocks:
                x = torch.relu(block(x))
            return x.square().mean()


    def good(batch=4):
        return MLP(), torch.randn(batch, 32)


    def raises():
        raise RuntimeError("no checkpoint at /data/ckpt.pt")


    def wrong_shape():
        return "a model"


    def hangs():
        time.sleep(600)


    class Greedy(MLP):
        def forward(self, x):
            if self.training and getattr(self, "armed", False):
                torch.empty(2**62, dtype=torch.uint8)  # no machine has this: the allocator says so
            self.armed = True
            return super().forward(x)


    def greedy():
        return Greedy(), torch.randn(4, 32)
    """
)


@pytest.fixture
def factories(tmp_path):
    (tmp_path / "facts.py").write_text(FACTORIES, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-llama"])
def test_profile_json_files_record_and_trace_self_check(tmp_path, run_cli, model) -> None:
    out = run_cli(
        "profile", "--model", model, "--batch", "2", "--seq", "32", "--steps", "3",
        "--warmup", "1", "--csv", str(tmp_path / "p.csv"), "--plot", str(tmp_path / "p.png"),
        "--json", "--root", str(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    data = json.loads(out.stdout)
    assert set(data) >= {
        "record_id", "device", "peak_bytes", "phases", "steps", "spikes", "time_per_step_s",
        "tokens_per_s",
    }  # fmt: skip
    assert data["device"]["kind"] == "cpu"
    assert [p["name"] for p in data["phases"]] == ["forward", "backward", "optimizer"]
    for p in data["phases"]:
        assert set(p) >= {"name", "peak_bytes", "mean_bytes", "min_bytes", "max_bytes"}
        assert p["median_time_s"] > 0
    assert len(data["steps"]) == 4 and [s["warmup"] for s in data["steps"]] == [1, 0, 0, 0]
    assert data["time_per_step"]["n"] == 3
    assert data["tokens_per_s"] == pytest.approx(64 / data["time_per_step_s"])
    assert data["flops_per_step"] > 0 and data["flops_per_s"] > 0
    # The self-check: the same tensors, counted for real and under fake tensors.
    rows = {r["what"]: r for r in data["measured_over_traced"]}
    assert set(rows) >= {"forward peak", "backward peak", "optimizer peak", "step peak"}
    for r in rows.values():
        assert r["ratio"] == pytest.approx(1.0, abs=0.01), r
    store = RecordStore(tmp_path / ".journal" / "measurements")
    record = store.load(data["record_id"])
    assert record.kind == "measured" and record.result("peak").value == data["peak_bytes"]
    assert record.device["kind"] == "cpu" and record.software["torch"]
    assert store.load(data["trace"]["record_id"]).kind == "traced"
    rows_csv = list(csv.DictReader((tmp_path / "p.csv").open(encoding="utf-8")))
    assert len(rows_csv) == 4 * 4
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_profile_text_report_of_a_user_factory(factories, run_cli) -> None:
    out = run_cli(
        "profile", "--model", "facts:good", "--steps", "3", "--warmup", "1",
        "--root", str(factories), cwd=factories,
    ).stdout  # fmt: skip
    for text in (
        "Measured on cpu",
        "live CPU torch tensor bytes",
        "the first 1 warm-up (excluded from the times; 3 timed)",
        "backward ÷ forward",
        "Measured ÷ traced",
        "record: meas-",
    ):
        assert text in out, text


@pytest.mark.parametrize(
    ("factory", "words"),
    [
        ("facts:raises", "model factory 'facts:raises' failed: RuntimeError: no checkpoint"),
        ("facts:wrong_shape", "model factory 'facts:wrong_shape' returned str"),
        ("facts:hangs", "model factory 'facts:hangs' did not finish 2 steps within --timeout 3 s"),
    ],
)
def test_a_bad_factory_is_one_sentence_naming_it(factories, run_cli, factory, words) -> None:
    proc = run_cli(
        "profile", "--model", factory, "--steps", "1", "--warmup", "1", "--timeout", "3",
        "--root", str(factories), cwd=factories, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_out_of_memory_is_a_result_saved_with_exit_1(factories, run_cli) -> None:
    proc = run_cli(
        "profile", "--model", "facts:greedy", "--steps", "3", "--warmup", "1", "--json",
        "--root", str(factories), cwd=factories, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["oom"]["step"] == 1 and data["oom"]["phase"] == "forward"
    assert data["oom"]["snapshot"]["current"] > 0
    assert "out of memory at step 1, forward" in proc.stderr and "Traceback" not in proc.stderr
    record = RecordStore(factories / ".journal" / "measurements").load(data["record_id"])
    assert record.result("oom_current").value == data["oom"]["snapshot"]["current"]


def test_two_gloo_ranks_report_side_by_side(tmp_path, run_cli) -> None:
    """Two processes started by torchrun (gloo), DDP, each measuring itself; rank 0 reports."""
    proc = run_cli(
        "profile", "--model", "tiny-gpt2", "--batch", "2", "--seq", "32", "--steps", "2",
        "--warmup", "1", "--nproc", "2", "--json", "--root", str(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    data = json.loads(proc.stdout)
    assert data["world_size"] == 2 and data["backend"] == "gloo" and data["strategy"] == "DDP"
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    for r in data["ranks"]:
        assert r["peak_bytes"] > 0 and r["time_per_step_s"] > 0
        assert set(r["phases"]) == {"forward", "backward", "optimizer"}
    # Same model, DDP: each rank holds the same tensors (and DDP's gradient buckets).
    assert data["ranks"][0]["peak_bytes"] == data["ranks"][1]["peak_bytes"]
    # ... which the trace of --gpus 2 counts (trace.ddp; it refused DDP, issue #32): the
    # one-GPU step and Ψ·4 B of buckets; a rank measured 4 B more (a scalar of gloo's DDP)
    from profiling.config import TrainingConfig
    from profiling.trace.step import trace_step

    cfg = TrainingConfig(model="tiny-gpt2", batch=2, seq=32, gpus=2, target="cpu")
    traced = trace_step(cfg).peak_bytes
    assert 0 <= data["ranks"][0]["peak_bytes"] - traced <= 64
    slowest = max(data["ranks"], key=lambda r: r["time_per_step_s"])
    assert data["slowest_rank"] == slowest["rank"]
    record = RecordStore(tmp_path / ".journal" / "measurements").load(data["record_id"])
    assert record.result("rank1_peak").value == data["ranks"][1]["peak_bytes"]
    text = run_cli(
        "profile", "--model", "tiny-gpt2", "--batch", "2", "--seq", "32", "--steps", "2",
        "--warmup", "1", "--nproc", "2", "--no-trace", "--root", str(tmp_path), cwd=tmp_path,
    ).stdout  # fmt: skip
    assert "Measured on 2 ranks (DDP, gloo)" in text and "Slowest: rank" in text


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"model_type": "bloom", "n_layer": 2, "n_head": 4}, "ALiBi attention"),
        ({"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 4}, "an encoder"),
    ],
)
def test_a_model_profile_cannot_build_is_one_sentence_saying_so(
    tmp_path, run_cli, config, words
) -> None:
    """``profile`` measures the project's own blocks, which build no ALiBi, encoder or T5: it
    said "needs transformers (pip install …)" with transformers installed (audit6 D67)."""
    path = tmp_path / "config.json"
    shape = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 160}
    path.write_text(json.dumps({**shape, **config}), encoding="utf-8")
    proc = run_cli(
        "profile", "--model", f"hf:{path}", "--batch", "1", "--seq", "16", "--device", "cpu",
        "--no-save", cwd=tmp_path, check=False,
    )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert f"own blocks do not build {words}" in proc.stderr
    assert "pip install" not in proc.stderr and "`profile` measures only those" in proc.stderr
