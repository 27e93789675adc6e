"""A record's page draws what the record holds, from records the real commands wrote: an
estimate's breakdown is its components (never a sum of them beside its parts), a fit's chart
is its configurations in rank order beside the usable memory."""

from __future__ import annotations

import re
from html import unescape

from journal_agent.view import records
from profiling.records import RecordStore
from tests.conftest import CLI


def _bars(svg: str) -> list[str]:
    """The labels of a bar chart's bars, in the order drawn (each bar's tooltip)."""
    return [unescape(label) for label in re.findall(r"<title>([^<]*): [^<:]*</title>", svg)]


def _page(root, record_id: str) -> dict:
    record = records.load(RecordStore(root / ".journal" / "measurements"), record_id)
    assert record is not None
    return records.page(record)


def test_an_estimates_breakdown_is_its_components_only(tmp_path):
    est = CLI().json(
        "estimate", "--model", "llama-7b", "--gpus", "8", "--zero", "2", "--root", str(tmp_path)
    )
    drawn = _bars(str(_page(tmp_path, est["record_id"])["breakdown"]))
    # The record also holds model_states (the sum of four of these) and each moment's terms:
    # drawn beside the parts, they counted the same bytes twice.
    assert sorted(drawn) == sorted(c["name"] for c in est["components"] if c["bytes"] > 0)


def test_a_fits_chart_ranks_the_configurations_against_the_usable_memory(tmp_path):
    fit = CLI().json(
        "fit", "--model", "tiny-gpt2", "--gpu-mem", "1", "--confirm", "0", "--top", "4",
        "--root", str(tmp_path),
    )  # fmt: skip
    chart = str(_page(tmp_path, fit["record_id"])["breakdown"])
    assert _bars(chart) == [f"#{c['rank']} {c['label']}" for c in fit["fitting"][:4]]
    assert "Memory by category" not in chart  # configurations are no categories
    assert re.search(r'class="limitlbl">usable 900\.0 MB<', chart)  # 90% of 1 GB


def test_a_measured_run_is_drawn_by_phase_with_its_peak_marked(tmp_path):
    """A CPU profile: memory through a step by phase (what the last step held after each
    phase, each phase's highest peak), the peak marked in the phase the profile names."""
    run = CLI().json(
        "profile", "--model", "tiny-gpt2", "--batch", "1", "--seq", "16", "--steps", "2",
        "--warmup", "0", "--device", "cpu", "--no-trace", "--root", str(tmp_path),
    )  # fmt: skip
    chart = str(_page(tmp_path, run["record_id"])["timeline"])
    by_phase = chart[: chart.index("Memory over the measured steps")]
    assert "Memory through a measured step, by phase" in by_phase
    ticks = re.findall(r'class="tick">([^<]*)</text>', by_phase)
    assert [t for t in ticks if not t[0].isdigit()] == ["start", "forward", "backward", "optimizer"]
    peak = max(run["phases"], key=lambda p: p["peak_bytes"])
    assert peak["name"] == run["peak_phase"]
    label = re.search(r'class="peaklbl">peak ([^<]*)</text>', by_phase)
    assert label is not None and label.group(1).endswith(f"({run['peak_phase']})")
