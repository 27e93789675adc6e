"""The torch adapter (``profiling/trace/_torch_compat.py``): each branch a torch can take.

CI installs torch 2.13 only; the branches other torches take are exercised here with objects
shaped as those torches' are (torch 2.11's ``MemTracker`` records no fake mode on entry; its
``sdpa_flop_count`` asserts on grouped-query shapes — see ``test_never_lose.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from profiling.config import TrainingConfig  # noqa: E402
from profiling.trace import _torch_compat as compat  # noqa: E402
from profiling.trace.step import trace_step  # noqa: E402
from profiling.trace.tracker import make_tracker  # noqa: E402

PROFILING = Path(__file__).resolve().parents[3] / "profiling"


@pytest.mark.parametrize(
    ("version", "expected"),
    [("2.11.0+cu130", (2, 11)), ("2.13.0+cpu", (2, 13)), ("2.15.0a0+git1234", (2, 15))],
)
def test_torch_version_reads_release_and_local_builds(version: str, expected: tuple) -> None:
    assert compat.torch_version(version) == expected


class _Torch211Tracker:
    """What torch 2.11's MemTracker leaves after ``__enter__``: no ``_fake_mode_on_entry``."""


class _Torch213Tracker:
    _fake_mode_on_entry = "the mode upstream recorded"


def test_entry_fake_mode_ours_first_upstream_where_there_is_one() -> None:
    old = _Torch211Tracker()
    assert compat.entry_fake_mode(old) is None
    old.entry_fake_mode = "ours"
    assert compat.entry_fake_mode(old) == "ours"
    assert compat.entry_fake_mode(_Torch213Tracker()) == "the mode upstream recorded"


def test_the_tracker_records_the_fake_mode_itself() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        model = torch.nn.Linear(4, 4)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        tracker = make_tracker(model, optimizer, (torch.randn(2, 4),), None)
        with tracker:
            assert tracker.entry_fake_mode is mode
            assert compat.entry_fake_mode(tracker) is mode


def test_no_module_reads_upstream_private_fake_mode_attribute() -> None:
    # torch 2.11 has no _fake_mode_on_entry: reading it ended a trace on the H200.
    readers = [
        str(p.relative_to(PROFILING))
        for p in PROFILING.rglob("*.py")
        if "_fake_mode_on_entry" in p.read_text(encoding="utf-8")
    ]
    assert readers == ["trace/_torch_compat.py"]


def test_missing_memtracker_internals_names_each_one() -> None:
    from torch.distributed._tools.mem_tracker import MemTracker

    assert compat.missing_memtracker_internals(MemTracker) == []

    class Stripped:  # a MemTracker that dropped what the tracer extends
        def get_tracker_snapshot(self):
            return {}

    missing = compat.missing_memtracker_internals(Stripped)
    assert "_track" in missing and "_update_peak_stats" in missing and "_mod_tracker" in missing
    assert "get_tracker_snapshot" not in missing

    class NeedsArgs(MemTracker):
        def __init__(self, required):
            super().__init__()

    assert compat.missing_memtracker_internals(NeedsArgs) == ["MemTracker() (TypeError)"]


def test_a_torch_without_the_internals_gets_one_sentence(monkeypatch) -> None:
    from profiling.errors import ProfilingError

    monkeypatch.setattr(compat, "MEMTRACKER_INTERNALS", (*compat.MEMTRACKER_INTERNALS, "_gone"))
    with pytest.raises(ProfilingError, match=r"MemTracker without _gone, which the trace"):
        trace_step(TrainingConfig(model="tiny-gpt2", batch=1, seq=8))


def test_private_torch_attributes_are_read_only_where_listed() -> None:
    # Every private torch member the profiling package touches is one the adapter checks.
    listed = set(compat.MEMTRACKER_INTERNALS) | set(compat.MEMTRACKER_STATE)
    text = (PROFILING / "trace" / "tracker.py").read_text(encoding="utf-8")
    used = set(re.findall(r"(?:self|tracker|probe)\.(_[a-z][a-z_]+)\b", text))
    ours = {
        "_opt_depth",
        "_blocks_seen",
        "_fast_index",
        "_fast_index_len",
        "_note_segment",
        "_track_storage",
    }
    upstream = used - ours
    assert upstream <= listed, sorted(upstream - listed)
