"""MemoryProfiler on a real CPU training loop: exact live-tensor bytes, phases, spikes, files."""

from __future__ import annotations

import csv

import pytest
import torch
from torch import nn

from profiling import MemoryProfiler, MemorySnapshot
from profiling.errors import ProfilingError
from profiling.records import RecordStore

WIDTH = 64


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(3))
        self.head = nn.Linear(WIDTH, 10)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = torch.relu(block(x))
        return nn.functional.cross_entropy(self.head(x), y)


def _bytes(tensors) -> int:
    return sum(t.untyped_storage().nbytes() for t in tensors)


def _train(prof: MemoryProfiler, steps: int, inject: dict[int, int] | None = None):
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, WIDTH), torch.randint(0, 10, (32,))
    base = prof.start()
    # Tensors the process held before this loop (e.g. a DeviceMesh's left by an earlier test):
    # real, counted, and not the loop's.
    prof.test_elsewhere = base.current - _bytes(model.parameters()) - _bytes((x, y))
    for step in range(steps):
        with prof.phase("forward"):
            loss = model(x, y)
            if inject and step in inject:
                extra = torch.empty(inject[step], dtype=torch.uint8)  # a transient spike
                del extra
        with prof.phase("backward"):
            loss.backward()
        with prof.phase("optimizer"):
            opt.step()
            opt.zero_grad()
        prof.record_step(step)
    return model, opt, (x, y, loss)


def test_tensors_left_by_an_fsdp_trace_are_not_counted_as_live_memory() -> None:
    # An in-process FSDP trace leaves fake DTensor parameters in DTensor's caches. They hold
    # no memory: a wrapper's own storage is a placeholder of the global size (it made a later
    # CPU profile in the same process count half a megabyte too much).
    import gc

    from profiling import trace_memory
    from profiling.measure.live_tensors import LiveTensors

    trace_memory("tiny-gpt2", batch=1, seq=32, fsdp=True, gpus=2)
    gc.collect()
    before = LiveTensors()
    before.start()
    before.stop()
    real = [
        t
        for t in gc.get_objects()
        if type(t) in (torch.Tensor, nn.Parameter) and t.device.type == "cpu" and not t.is_meta
    ]
    assert before.current <= sum(t.untyped_storage().nbytes() for t in real)


def test_cpu_loop_counts_live_tensor_bytes_exactly() -> None:
    prof = MemoryProfiler(device="cpu", warmup=2)
    model, opt, inputs = _train(prof, steps=6)
    s = prof.summary()
    assert s.device["kind"] == "cpu" and "live CPU torch tensor bytes" in s.memory_kind
    assert [p.name for p in s.phases] == ["forward", "backward", "optimizer"]
    # After the optimizer phase what is alive is exactly: parameters, AdamW's state (exp_avg,
    # exp_avg_sq, step), the batch and the last loss (grads were set to None).
    state = [t for st in opt.state.values() for t in st.values() if isinstance(t, torch.Tensor)]
    held = _bytes(model.parameters()) + _bytes(state) + _bytes(inputs) + prof.test_elsewhere
    optimizer = next(p for p in s.phases if p.name == "optimizer")
    assert optimizer.end_bytes == held
    assert all(st.end_bytes == held for st in s.steps)  # the state exists from step 0's end
    # Backward's peak holds the gradients on top of the parameters and state.
    backward = next(p for p in s.phases if p.name == "backward")
    assert backward.peak_bytes >= held + _bytes(model.parameters())
    assert s.peak_bytes == max(st.peak_bytes for st in s.steps)
    for p in s.phases:
        assert p.min_bytes <= p.mean_bytes <= p.max_bytes == p.peak_bytes
        assert p.time is not None and p.time.n == 4  # 6 steps, 2 warm-up excluded
        assert p.time.min <= p.time.median and p.time.iqr >= 0
    assert s.step_time is not None and s.step_time.n == 4
    assert [st.warmup for st in s.steps] == [True, True, False, False, False, False]
    assert s.backward_forward_ratio == pytest.approx(
        s.phases[1].time.median / s.phases[0].time.median
    )
    assert s.rss_end and s.rss_end > held and s.rss_high_water >= s.rss_end
    report = prof.report()
    assert "the first 2 warm-up (excluded from the times; 4 timed)" in report
    assert "backward ÷ forward" in report and "Spikes: none" in report


def test_an_injected_allocation_is_a_spike_where_it_happened() -> None:
    # On the CPU every live tensor of the process counts, tensors earlier tests in this worker
    # left alive too: the spike is made large beside whatever the process already holds.
    probe = MemoryProfiler(device="cpu")
    held = probe.start().current
    probe.stop()
    injected = 4_000_000 + 2 * held
    prof = MemoryProfiler(device="cpu", spike_threshold=0.5)
    model, opt, (x, y, _) = _train(prof, steps=8, inject={5: injected})
    s = prof.summary()
    spikes = {(sp.step, sp.phase) for sp in s.spikes}
    assert spikes == {(5, "forward"), (5, "(step)")}
    forward = next(sp for sp in s.spikes if sp.phase == "forward")
    state = [t for st in opt.state.values() for t in st.values() if isinstance(t, torch.Tensor)]
    # At that moment at least the model, its optimizer state and the batch were held too.
    assert forward.peak_bytes >= injected + _bytes([*model.parameters(), *state, x, y])
    # The usual forward peak is the spike's less the injection: the other steps held the same.
    assert 0.97 * injected <= forward.peak_bytes - forward.median_bytes < injected + 500_000
    assert s.peak_step == 5 and s.peak_phase == "forward"
    assert "step 5, forward" in prof.report()


def test_seed_style_record_step_with_phase() -> None:
    prof = MemoryProfiler(device="cpu", warmup=0)
    prof.start()
    kept = []
    for step in range(3):
        kept.append(torch.zeros(1000))  # 4000 B more each step
        prof.record_step(step, "load")
    s = prof.summary()
    assert [p.name for p in s.phases] == ["load"]
    assert [st.end_bytes - s.steps[0].end_bytes for st in s.steps] == [0, 4000, 8000]


def test_csv_png_and_record(tmp_path) -> None:
    prof = MemoryProfiler(device="cpu", tokens_per_step=32, flops_per_step=1e6)
    _train(prof, steps=4)
    path = prof.to_csv(tmp_path / "profile.csv")
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert list(rows[0])[:8] == [
        "step", "phase", "row", "warmup", "t_s", "duration_s", "current_bytes", "peak_bytes",
    ]  # fmt: skip
    assert len(rows) == 4 * 4  # three phases and the step, per step
    assert [r["phase"] for r in rows[:4]] == ["forward", "backward", "optimizer", "(step)"]
    assert all(float(r["duration_s"]) > 0 for r in rows)
    png = prof.plot(tmp_path / "profile.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    rid = prof.save_record(tmp_path / "m")
    record = RecordStore(tmp_path / "m").load(rid)
    s = prof.summary()
    assert record.kind == "measured" and rid.startswith("meas-")
    assert record.result("peak").value == s.peak_bytes
    assert record.result("time_per_step").value == s.step_time.median
    assert record.result("tokens_per_s").value == pytest.approx(32 / s.step_time.median)
    assert record.device["kind"] == "cpu" and record.software["torch"] == torch.__version__


def test_out_of_memory_is_recorded_with_step_and_phase() -> None:
    prof = MemoryProfiler(device="cpu")
    prof.start()
    held = torch.ones(1000)
    prof.record_step(0)
    with pytest.raises(RuntimeError, match="DefaultCPUAllocator"), prof.phase("forward"):
        torch.empty(2**62, dtype=torch.uint8)  # more than any machine: the allocator refuses
    assert prof.oom is not None
    assert (prof.oom.step, prof.oom.phase) == (1, "forward")
    assert prof.oom.snapshot.current >= held.nbytes
    assert "OUT OF MEMORY at step 1, phase forward" in prof.report()


def test_misuse_is_one_sentence() -> None:
    prof = MemoryProfiler(device="cpu")
    with pytest.raises(ProfilingError, match="start"):
        prof.record_step(0)
    prof.start()
    with pytest.raises(ProfilingError, match="do not nest"), prof.phase("a"), prof.phase("b"):
        pass
    with pytest.raises(ProfilingError, match="spike_threshold"):
        MemoryProfiler(device="cpu", spike_threshold=0)
    prof.stop()


def test_snapshot_units_and_capture() -> None:
    snap = MemorySnapshot(kind="cpu", current=1_500_000_000, peak=2 * 2**30, total=3_000_000_000)
    assert snap.current_mb == 1500 and snap.current_gb == 1.5
    assert snap.peak_gib == 2 and snap.to("MiB", "peak") == 2048
    assert snap.utilization_pct == 50
    held = torch.ones(250_000)  # 1 MB reachable from Python
    now = MemorySnapshot.capture("cpu")
    assert now.kind == "cpu" and now.current >= held.nbytes and now.rss and now.total
