"""`from profiling import …` as a training script uses it: light import, one call each."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from profiling.errors import ProfilingError


def test_import_is_light_and_standalone() -> None:
    # No torch, no journal_agent (blocked outright), no matplotlib — and every name resolves.
    code = (
        "import sys, json\n"
        "sys.modules['journal_agent'] = None\n"
        "import profiling\n"
        "from profiling import estimate_memory, render_estimate, RecordStore, WORKLOADS\n"
        "light = {m: m in sys.modules for m in ('torch', 'matplotlib')}\n"
        "est = estimate_memory(params=1_000_000_000, gpus=4, zero=3)\n"
        "light_after = {m: m in sys.modules for m in ('torch', 'matplotlib')}\n"
        "print(json.dumps([light, light_after, est.per_gpu_bytes, sorted(profiling.__all__)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    light, light_after, per_gpu, names = json.loads(out.stdout.strip().splitlines()[-1])
    assert light == light_after == {"torch": False, "matplotlib": False}
    assert per_gpu == 16_000_000_000 // 4  # ZeRO-3: 16 B/param over 4 GPUs
    import profiling

    for name in names:
        assert getattr(profiling, name) is not None, name


def test_estimate_memory_and_its_errors() -> None:
    from profiling import estimate_memory, render_estimate

    est = estimate_memory(params=7e9, precision="mixed", gpus=2, zero=2, gpu_mem_gb=40)
    assert est.per_gpu_bytes == 63_000_000_000 and est.status == "❌"
    assert "Total per GPU" in render_estimate(est)
    with pytest.raises(ProfilingError, match="unknown optimizer 'adamax'"):
        estimate_memory(params=10, optimizer="adamax")


def test_trace_memory_of_a_python_factory_and_saved_records(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from torch import nn

    from profiling import RecordStore, render_trace, save_record, trace_memory

    def make(batch=4, seq=None):  # built inside the trace, under fake tensors
        model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
        return model, (torch.randn(batch, 16),)

    r = trace_memory(make, batch=4, optimizer="sgd")
    n = 16 * 16 + 16 + 16 * 4 + 4
    assert r.params == n
    # fp32: 4 B weights, 4 B gradients, 4 B momentum per parameter
    assert (r.after_step["parameters"], r.after_step["gradients"]) == (4 * n, 4 * n)
    assert r.after_step["optimizer"] == 4 * n
    assert "Traced training step" in render_trace(r)
    store = RecordStore(tmp_path)
    rid = save_record(r, tmp_path)
    assert store.load(rid).kind == "traced" and store.load(rid).result("params").value == n
    with pytest.raises(ProfilingError, match="batch"):
        trace_memory(make, batch=0)
