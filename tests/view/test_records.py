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
    assert re.search(r'class="limitlbl">usable 950\.0 MB<', chart)  # 1 GB less fit's 5 % margin


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


# -- what a new user met (issue #33) ------------------------------------------------------------


def test_an_estimate_page_opens_with_its_peak_its_verdict_and_its_moments(tmp_path):
    est = CLI().json(
        "estimate", "--model", "llama-7b", "--precision", "mixed", "--gpus", "2", "--zero", "2",
        "--gpu-mem", "40", "--root", str(tmp_path),
    )  # fmt: skip
    page = _page(tmp_path, est["record_id"])
    assert page["headline"] == {
        "value": "64.80 GB",
        "what": "per GPU, at the loss backward",
        "verdict": "❌ Exceeds 40.00 GB: 64.80 GB needed per GPU",  # the CLI's own words
        "status": "❌",
    }
    moments = str(page["moments"])
    ticks = re.findall(r'class="tick">([^<]*)</text>', moments)
    assert [t for t in ticks if not t[0].isdigit()] == [
        "end of forward",
        "loss forward",
        "loss backward",
        "optimizer step",
    ]
    assert "peak 64.80 GB (loss backward)" in moments
    assert 'class="limitlbl">GPU 40.00 GB<' in moments
    assert ("model", "llama-7b") in page["config"] and ("zero", "2") in page["config"]
    assert not [k for k, v in page["config"] if v == "None"]


def test_a_fit_page_names_the_best_configuration_and_lists_no_unset_option(tmp_path):
    fit = CLI().json(
        "fit", "--model", "tiny-gpt2", "--gpu-mem", "1", "--confirm", "0", "--top", "4",
        "--root", str(tmp_path),
    )  # fmt: skip
    page = _page(tmp_path, fit["record_id"])
    best = fit["fitting"][0]
    assert page["headline"]["what"] == f"the best: #1 {best['label']}"
    assert page["headline"]["verdict"].startswith("✅ Fits 1.00 GB: the best configuration needs")
    assert page["config"] and not [k for k, v in page["config"] if v in ("None", "")]
    # What fit searched is named as searched, not shown at the defaults it started from (the
    # page said "precision fp32, batch 1" above a best configuration in mixed at batch 2).
    config = dict(page["config"])
    assert config["searched"] == "batch, precision, checkpointing, offload_optimizer, " \
        "lora_rank, qlora"  # fmt: skip
    assert "precision" not in config and "batch" not in config
    assert config["model"] == "tiny-gpt2" and config["gpu_mem"] == "1.0"
    held = CLI().json(
        "fit", "--model", "tiny-gpt2", "--gpu-mem", "1", "--confirm", "0", "--precision", "bf16",
        "--batch", "2", "--root", str(tmp_path),
    )  # fmt: skip
    config = dict(_page(tmp_path, held["record_id"])["config"])
    assert config["precision"] == "bf16" and config["batch"] == "2"  # held: shown as given
    assert "precision" not in config["searched"] and "batch" not in config["searched"]


def test_a_measured_run_is_titled_by_where_it_ran_and_draws_no_phases_as_categories(tmp_path):
    run = CLI().json(
        "profile", "--model", "tiny-gpt2", "--batch", "1", "--seq", "16", "--steps", "2",
        "--warmup", "0", "--device", "cpu", "--no-trace", "--root", str(tmp_path),
    )  # fmt: skip
    page = _page(tmp_path, run["record_id"])
    title = page["record"].title
    assert title.startswith("Measured on cpu: tiny-gpt2") and "target" not in title
    assert str(page["breakdown"]) == ""  # phases are no categories: drawn through the step
    assert page["headline"]["what"].startswith("the measured peak on cpu, at the ")
    assert "verdict" not in page["headline"]  # no GPU memory to compare a CPU run with


def test_axis_ticks_are_round_and_the_peak_label_sits_over_its_own_marker():
    from journal_agent.view import charts

    assert [charts.tick_label(v) for v in charts.nice_ticks(2.74e9)] == [
        "0 B", "1 GB", "2 GB", "3 GB",
    ]  # fmt: skip
    assert [charts.tick_label(v) for v in charts.nice_ticks(1.1e6)] == [
        "0 B", "500 KB", "1 MB", "1.5 MB",
    ]  # fmt: skip
    points = [("start", 2.0e9, None), ("forward", 1.5e9, 1.6e9), ("backward", 2.0e9, 2.3e9),
              ("optimizer", 2.0e9, 2.49e9)]  # fmt: skip
    svg = str(charts.timeline(points, "t"))
    marker = re.search(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="6"', svg)
    label = re.search(r'<text x="([\d.]+)" y="([\d.]+)" text-anchor="(\w+)" class="peaklbl">', svg)
    assert marker and label
    assert abs(float(label.group(1)) - float(marker.group(1))) <= 6  # at its marker …
    assert 0 < float(marker.group(2)) - float(label.group(2)) <= 14  # … right above it
    assert label.group(3) == "end"  # at the right edge, read leftwards from it


def test_bar_labels_are_not_cut_when_they_fit_half_the_chart():
    from journal_agent.view import charts

    label = "Optimizer: fp32 master weights"
    svg = str(charts.bars([(label, 13.48e9), ("Weights (fp16/bf16)", 13.48e9)], "t"))
    assert f'class="lbl">{label}</text>' in svg
