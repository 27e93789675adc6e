"""The faster peak bookkeeping: used only on torch versions it was checked against, identical
results to torch's MemTracker, and a clean fallback to it everywhere else."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.distributed._tools.mem_tracker import MemTracker  # noqa: E402

from profiling.trace import tracker as _tracker  # noqa: E402
from profiling.trace.step import TraceConfig, trace_step  # noqa: E402


@pytest.fixture
def fresh_support_check():
    _tracker.fast_tracker_supported.cache_clear()
    yield
    _tracker.fast_tracker_supported.cache_clear()


def test_this_torch_uses_the_fast_tracker(fresh_support_check) -> None:
    # Otherwise the fast-vs-upstream comparisons would compare upstream with itself.
    assert _tracker.fast_tracker_supported(), torch.__version__
    r = trace_step(TraceConfig(model="tiny-gpt2", batch=1, seq=8))
    assert not any("used unchanged" in n for n in r.notes)


def test_fsdp_fast_tracker_matches_upstream() -> None:
    cfg = TraceConfig(model="tiny-llama", batch=2, seq=16, fsdp=True, world_size=2, dtype="bf16")
    fast, upstream = trace_step(cfg), trace_step(cfg, upstream_tracker=True)
    assert fast.peak_bytes == upstream.peak_bytes
    assert fast.by_category == upstream.by_category
    assert fast.phases == upstream.phases
    assert fast.by_module == upstream.by_module


def test_changed_upstream_method_falls_back_to_torchs_tracker(
    fresh_support_check, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = TraceConfig(model="tiny-gpt2", batch=2, seq=16)
    expected = trace_step(cfg, upstream_tracker=True)
    original = MemTracker._update_peak_stats

    def changed_upstream(self, peak_state):  # a torch release that rewrote the method
        original(self, peak_state)

    monkeypatch.setattr(MemTracker, "_update_peak_stats", changed_upstream)
    assert not _tracker.fast_tracker_supported()
    r = trace_step(cfg)
    assert any("memory tracker used unchanged" in n for n in r.notes)
    assert (r.peak_bytes, r.by_category, r.by_module) == (
        expected.peak_bytes,
        expected.by_category,
        expected.by_module,
    )


def test_older_torch_is_not_trusted(fresh_support_check, monkeypatch) -> None:
    monkeypatch.setattr(torch, "__version__", "2.4.1+cpu")
    assert not _tracker.fast_tracker_supported()


def test_first_fsdp_trace_in_a_process_is_the_steady_state() -> None:
    # DTensor's first-time metadata propagation once inflated the first FSDP trace of a
    # process (every CLI run is one): the same step must give the same bytes every time.
    import json
    import subprocess
    import sys

    code = (
        "import json\n"
        "from profiling.trace.step import TraceConfig, trace_step\n"
        "cfg = TraceConfig(model='tiny-llama', batch=2, seq=16, fsdp=True, world_size=2)\n"
        "a, b = trace_step(cfg), trace_step(cfg)\n"
        "print(json.dumps([[a.peak_bytes, a.by_category], [b.peak_bytes, b.by_category]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, second = json.loads(out.stdout.strip().splitlines()[-1])
    assert first == second


class _Scaled(torch.Tensor):
    """A wrapper subclass of two storages whose ops make new data and share the scale, as
    torchao's all-gather of a Float8TrainingTensor does (new fp8 data, the input's scale)."""

    @staticmethod
    def __new__(cls, data, scale):
        return torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=data.dtype)

    def __init__(self, data, scale) -> None:
        self._data, self._scale = data, scale

    def __tensor_flatten__(self):
        return ["_data", "_scale"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, *_shape):
        return _Scaled(inner["_data"], inner["_scale"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        x = args[0]
        return _Scaled(func(x._data, *args[1:], **(kwargs or {})), x._scale)


def test_a_new_storage_beside_a_known_one_is_counted_every_time() -> None:
    # torch's MemTracker._track stops at the first storage of a tensor it already knows: the
    # new data went uncounted whenever the set of storages (ordered by address) gave the
    # shared scale first — a plan's fp8 all-gathers counted in some runs and not in others
    model = torch.nn.Linear(2, 2)
    tracker = _tracker.make_tracker(model, torch.optim.SGD(model.parameters()), (), None)
    x = _Scaled(torch.zeros(1024), torch.ones(1))
    with tracker:
        start = sum(d["Total"] for d in tracker.get_tracker_snapshot().values())
        kept = [x.clone() for _ in range(40)]
        held = sum(d["Total"] for d in tracker.get_tracker_snapshot().values()) - start
    assert held == 40 * 1024 * 4 + 4  # every clone's data, the scale once
    assert len(kept) == 40
