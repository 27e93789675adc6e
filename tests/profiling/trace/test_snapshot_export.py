"""`trace --snapshot FILE`: the traced allocations as the pickle torch.cuda.memory._dump_snapshot
writes, read back and rendered by torch's own offline memory viewer (torch.cuda._memory_viz)."""

from __future__ import annotations

import base64
import json
import pickle
import re

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    from tests.conftest import CLI

    root = tmp_path_factory.mktemp("snapshot")
    path = root / "step.pickle"
    args = ["trace", "--model", "tiny-gpt2", "--batch", "2", "--seq", "32"]
    payload = CLI().json(*args, "--snapshot", str(path), "--root", str(root))
    record = json.loads(
        (root / ".journal" / "measurements" / f"{payload['record_id']}.json").read_text()
    )
    with open(path, "rb") as handle:
        return pickle.load(handle), payload, record


def _timeline_peak(events) -> int:
    now = peak = 0
    for e in events:
        if e["action"] == "alloc":
            now += e["size"]
            peak = max(peak, now)
        elif e["action"] == "free_completed":
            now -= e["size"]
    return peak


def test_the_snapshot_peaks_where_the_trace_does(traced):
    data, payload, record = traced
    events = data["device_traces"][0]
    assert {e["action"] for e in events} >= {"alloc", "free_requested", "free_completed"}
    peak = next(q["value"] for q in record["results"] if q["name"] == "peak")
    assert _timeline_peak(events) == peak == payload["peak_bytes"]
    assert len({e["addr"] for e in events if e["action"] == "alloc"}) == sum(
        e["action"] == "alloc" for e in events
    )  # each allocation an address of its own
    # The allocator state at the end: what stays allocated after the step.
    live = sum(
        b["size"] for s in data["segments"] for b in s["blocks"] if b["state"] == "active_allocated"
    )
    assert live == sum(payload["after_step"].values())


def test_torch_memory_viz_reads_and_renders_it(traced):
    from torch.cuda import _memory_viz

    data, _, _ = traced
    summary = _memory_viz.segsum(data)  # asserts the segments add up
    assert "total_allocated" in summary and "segments: 1" in summary
    text = _memory_viz.trace(data)  # names every alloc and free of the timeline
    allocs = sum(e["action"] == "alloc" for e in data["device_traces"][0])
    assert len(re.findall(r"^\w+ = (?:seg_0|MEM)\[", text, re.M)) == allocs
    assert text.count("# free completed for") == sum(
        e["action"] == "free_completed" for e in data["device_traces"][0]
    )
    for html in (_memory_viz.trace_plot(data), _memory_viz.segment_plot(data)):
        encoded = json.loads(re.search(r"const local_files = (\[.*\])", html).group(1))
        raw = base64.b64decode(encoded[0]["base64"]).rstrip(b"\x00")
        assert pickle.loads(raw) == data  # the viewer page carries this very snapshot
    frames = [f["filename"] for e in data["device_traces"][0] for f in e["frames"]]
    assert any(f.startswith("phase ") for f in frames)  # where in the step it was made


def test_snapshot_refuses_to_overwrite(cli, tmp_path):
    existing = tmp_path / "mine.pickle"
    existing.write_bytes(b"keep")
    done = cli(
        "trace", "--model", "tiny-gpt2", "--snapshot", str(existing), "--root", str(tmp_path)
    )
    assert done.returncode == 1 and "already exists" in done.stderr
    assert existing.read_bytes() == b"keep"


def test_profile_without_cuda_writes_the_traced_step(cli, tmp_path):
    from torch.cuda import _memory_viz

    path = tmp_path / "profile.pickle"
    args = ["profile", "--model", "tiny-gpt2", "--batch", "2", "--seq", "32", "--steps", "2"]
    payload = cli.json(*args, "--warmup", "1", "--snapshot", str(path), "--root", str(tmp_path))
    assert payload["snapshot"] == str(path) and "no CUDA" in payload["snapshot_of"]
    with open(path, "rb") as handle:
        data = pickle.load(handle)
    assert "total_allocated" in _memory_viz.segsum(data)
    traced = json.loads(
        (
            tmp_path / ".journal" / "measurements" / f"{payload['trace']['record_id']}.json"
        ).read_text()
    )
    peak = next(q["value"] for q in traced["results"] if q["name"] == "peak")
    assert _timeline_peak(data["device_traces"][0]) == peak


def test_profile_snapshot_is_one_process(cli, tmp_path):
    done = cli("profile", "--model", "tiny-gpt2", "--nproc", "2", "--snapshot", str(tmp_path / "s"))
    assert done.returncode == 1 and "one process" in done.stderr


def test_cuda_history_records_dumps_and_always_stops(monkeypatch, tmp_path):
    # torch.cuda's answers faked at the device edge: the three calls the real run makes.
    import torch

    from profiling.trace.snapshot_export import cuda_history

    calls = []
    memory = torch.cuda.memory
    monkeypatch.setattr(memory, "_record_memory_history", lambda **kw: calls.append(("rec", kw)))
    monkeypatch.setattr(memory, "_dump_snapshot", lambda p: calls.append(("dump", p)))
    with cuda_history(tmp_path / "real.pickle"):
        calls.append(("run", None))
    assert [c[0] for c in calls] == ["rec", "run", "dump", "rec"]
    assert calls[-1][1] == {"enabled": None} and calls[2][1] == str(tmp_path / "real.pickle")
    calls.clear()
    with pytest.raises(RuntimeError), cuda_history(tmp_path / "x.pickle"):
        raise RuntimeError("out of memory")
    assert [c[0] for c in calls] == ["rec", "rec"]  # recording stopped, nothing dumped
