"""benchmarks/gpu_check.py: the GPU check's whole path, run here on the CPU with tiny models.

It ran on an H200 on 2026-11-30 (benchmarks/results/gpu-nvidia-h200-2026-11-30.md); the
``gpu`` test below runs the real thing where there is one (JOURNAL_AGENT_TEST_GPU=1).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"


def _run(*args: str, python: tuple[str, ...] = (sys.executable,), timeout: int = 900):
    # From another directory, as a plain checkout is run: the script finds its repository.
    return subprocess.run(
        [*python, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, cwd="/"
    )


def test_dry_run_measures_traces_and_estimates_and_writes_the_table(tmp_path: Path) -> None:
    out = _run("--dry-run", "--out", str(tmp_path), "--cases", "tiny-llama bf16", "eager")
    assert out.returncode == 0, out.stderr[-2000:]
    (json_file,) = tmp_path.glob("gpu-cpu-dryrun-*.json")
    report = json.loads(json_file.read_text())
    assert report["dry_run"] is True and [r["case"] for r in report["rows"]] == [
        "tiny-llama bf16",
        "eager attention",
    ]
    for row in report["rows"]:
        assert row["config"]["target"] == "cpu"
        # the CPU measures what the CPU-target trace counts, to the byte
        assert row["measured_peak_bytes"] == row["traced_peak_bytes"]
        assert row["measured_over_estimated"] == pytest.approx(1.0, abs=0.01)
        assert row["step_s"] > 0 and row["tokens_per_s"] > 0 and row["overhead_fraction"] >= 0
    table = json_file.with_suffix(".md").read_text()
    assert "| eager attention |" in table and "÷ traced" in table and "MFU" in table
    assert table in out.stdout
    # --rescore: the predictions made again, the measurements kept, the allocated counter too
    measured = [r["measured_peak_bytes"] for r in report["rows"]]
    again = _run("--rescore", str(json_file))
    assert again.returncode == 0, again.stderr[-2000:]
    report = json.loads(json_file.read_text())
    assert [r["measured_peak_bytes"] for r in report["rows"]] == measured
    for row in report["rows"]:
        assert row["traced_allocated_bytes"] >= row["traced_peak_bytes"]
        assert row["measured_over_estimated_allocated"] > 0
    assert "÷ traced allocated" in json_file.with_suffix(".md").read_text()


def test_without_its_dependencies_it_names_the_wheels_to_carry() -> None:
    # -I -S: no site-packages, as on a GPU image that lacks them
    out = _run("--dry-run", python=(sys.executable, "-I", "-S"), timeout=60)
    assert out.returncode == 2
    assert out.stdout.startswith("gpu_check needs torch, pydantic, psutil, pynvml")
    assert "pydantic-core" in out.stdout and "nvidia-ml-py" in out.stdout


@pytest.mark.gpu
def test_on_a_gpu_every_row_is_within_a_tenth_of_a_percent_of_the_trace(tmp_path: Path) -> None:
    out = _run("--out", str(tmp_path), timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    (json_file,) = tmp_path.glob("gpu-*.json")
    for row in json.loads(json_file.read_text())["rows"]:
        if row.get("measured_over_traced_allocated"):
            # max_memory_allocated against the trace's allocated counter (tensors, 512-byte
            # blocks, cuBLAS's workspaces): 0.9994-1.0008 on the H200 of 2026-11-30
            assert row["measured_over_traced_allocated"] == pytest.approx(1.0, abs=0.002)
