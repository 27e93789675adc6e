"""Entries that disagree (issue #33): ``journal check`` names two entries stating different values
for the same configuration or the same code lines, and near-duplicates that slipped in, each with
its pair — and stays quiet for entries that agree."""

from __future__ import annotations

import json

from journal_agent.journal import api
from tests.entries import render_entry

from .conftest import make_entry


def entry(title: str, date: str, text: str) -> str:
    return render_entry(
        title,
        date,
        context="Studying the run.",
        question=f"What about {title.lower()}?",
        intuition=text,
        tags="#memory",
    )


def disagreements(report) -> list[tuple[str, str, str | None]]:
    return sorted(
        (p.kind, p.entry, p.other)
        for p in report.problems
        if p.kind in ("contradiction", "near_duplicate")
    )


def estimates(ws, values: dict[str, float], config: dict, kind: str = "estimated") -> None:
    from journal_agent.paths import measurements_dir
    from profiling.records import MeasurementRecord, Quantity, RecordStore

    for record_id, gib in values.items():
        RecordStore(measurements_dir(ws.root)).save(
            MeasurementRecord(
                id=record_id,
                kind=kind,
                title="llama-7b, 2 GPUs, ZeRO-2",
                config=config,
                results=[Quantity(name="per_gpu_total", value=gib * 2**30, unit="B")],
            )
        )


CONFIG = {"model": "llama-7b", "gpus": 2, "zero": 2, "precision": "mixed"}


def test_two_records_of_one_configuration_quoted_with_different_values(ws):
    # The same estimate made twice (the estimator changed in between): both entries pass every
    # other check, and say two things of one configuration.
    estimates(ws, {"est-00000001": 60.35, "est-00000002": 57.20}, CONFIG)
    first = entry(
        "ZeRO-2 Memory",
        "2026-11-20",
        "Sharding optimizer states and gradients leaves 60.35 GiB per GPU [m:est-00000001].",
    )
    second = entry(
        "Fitting Llama on Two Cards",
        "2026-11-21",
        "With the weights replicated each card still holds 57.20 GiB [m:est-00000002].",
    )
    for text in (first, second):
        assert api.append_entry(ws.workspace, text).appended
    report = api.check(ws.workspace)
    assert disagreements(report) == [
        ("contradiction", "fitting-llama-on-two-cards-2026-11-21", "zero-2-memory-2026-11-20")
    ]
    [problem] = [p for p in report.problems if p.kind == "contradiction"]
    assert "57.20 GiB for per_gpu_total [m:est-00000002] disagrees with 60.35 GiB" in problem.detail
    assert "zero-2-memory-2026-11-20 (line" in problem.detail
    out = ws.cli("check", "--json")
    assert out.returncode == 1
    found = [p for p in json.loads(out.stdout)["problems"] if p["kind"] == "contradiction"]
    assert found[0]["other"] == "zero-2-memory-2026-11-20"


def test_records_that_agree_or_differ_in_kind_or_configuration_are_no_contradiction(ws):
    estimates(ws, {"est-00000001": 60.35, "est-00000002": 60.349}, CONFIG)  # rounds the same
    estimates(ws, {"meas-00000003": 52.0}, CONFIG, kind="measured")  # a measurement differs
    estimates(ws, {"est-00000004": 30.1}, {**CONFIG, "gpus": 4})  # another configuration
    texts = [
        ("One", "Each GPU needs 60.35 GiB [m:est-00000001]."),
        ("Two", "Each GPU needs 60.35 GiB [m:est-00000002]."),
        ("Three", "Measured: 52.0 GiB per GPU [m:meas-00000003]."),
        ("Four", "On four GPUs 30.1 GiB [m:est-00000004]."),
        ("Five", "Again 60.35 GiB [m:est-00000001], the same record."),
    ]
    for n, (title, text) in enumerate(texts):
        assert api.append_entry(ws.workspace, entry(title, f"2026-11-2{n}", text)).appended
    assert disagreements(api.check(ws.workspace)) == []


OPTIM = (
    "import torch\n"
    "\n"
    "\n"
    "def build(model):\n"
    "    return torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95))\n"
)


def test_two_entries_saying_different_values_of_the_same_code_lines(ws):
    ws.write("src/optim.py", OPTIM)
    texts = [
        ("Learning Rate", "`src/optim.py:5` builds AdamW with lr = 3e-4 and betas (0.9, 0.95)."),
        ("Betas", "In `src/optim.py:5` the betas are (0.9, 0.999): slow second moments."),
        ("Warmup", "Elsewhere: the schedule in `src/optim.py:5` keeps lr at 3e-4."),
    ]
    for n, (title, text) in enumerate(texts):
        assert api.append_entry(ws.workspace, entry(title, f"2026-11-2{n}", text)).appended
    report = api.check(ws.workspace)
    assert disagreements(report) == [
        ("contradiction", "betas-2026-11-21", "learning-rate-2026-11-20")
    ]
    [problem] = [p for p in report.problems if p.kind == "contradiction"]
    assert "`betas are (0.9, 0.999)` for src/optim.py:5 disagrees with `betas (0.9, 0.95)`" in (
        problem.detail
    )
    assert "the code says `betas=(0.9, 0.95)`, as learning-rate-2026-11-20 does" in problem.detail


def test_lines_that_do_not_overlap_say_nothing_of_each_other(ws):
    ws.write("src/a.py", "LR = 3e-4\n\nWARMUP = 100\nLR = 1e-3\n")
    one = entry("First", "2026-11-20", "`src/a.py:1` sets LR = 3e-4.")
    two = entry("Second", "2026-11-21", "`src/a.py:4` sets LR = 1e-3 for the second phase.")
    for text in (one, two):
        assert api.append_entry(ws.workspace, text).appended
    assert disagreements(api.check(ws.workspace)) == []


def test_a_near_duplicate_that_slipped_in_is_named_with_its_pair(ws):
    from tests.journal.search import duplicate_pairs, relevance

    pairs = dict(duplicate_pairs.PARAPHRASE_PAIRS)
    original = relevance.render("lora", relevance.ENTRIES["lora"], 20)
    again = relevance.render("lora", pairs["lora"], 28)
    first = api.append_entry(ws.workspace, original)
    assert first.appended
    refused = api.append_entry(ws.workspace, again)
    assert not refused.appended  # the append check refuses it …
    forced = api.append_entry(ws.workspace, again, force=True)  # … forced in anyway
    assert forced.appended
    report = api.check(ws.workspace)
    assert disagreements(report) == [("near_duplicate", forced.entry_id, first.entry_id)]
    [problem] = [p for p in report.problems if p.kind == "near_duplicate"]
    assert "this entry repeats **LoRA" in problem.detail and "merge the two" in problem.detail


def test_distinct_concepts_on_one_topic_are_not_near_duplicates(ws):
    from tests.journal.search import duplicate_pairs, relevance

    distinct = dict(duplicate_pairs.DISTINCT_PAIRS)
    for key in ("lora", "zero1"):
        assert api.append_entry(ws.workspace, relevance.render(key, relevance.ENTRIES[key], 20))
        assert api.append_entry(ws.workspace, relevance.render(key, distinct[key], 28))
    assert disagreements(api.check(ws.workspace)) == []


def test_entries_without_any_disagreement_check_clean(ws):
    ws.write("src/optim.py", OPTIM)
    assert api.append_entry(ws.workspace, make_entry(body="`src/optim.py:5`\n")).appended
    assert api.check(ws.workspace).ok


def test_each_reference_of_one_paragraph_keeps_its_own_statements(ws):
    # The statements of a paragraph are found once for all its references (journal check of a
    # 100 MB journal): each reference still compares the names of its own cited lines.
    ws.write("src/a.py", "LR = 3e-4\n")
    ws.write("src/b.py", "WARMUP = 100\n")
    one = entry("First", "2026-11-20", "`src/a.py:1` sets LR = 3e-4 and `src/b.py:1` WARMUP = 100.")
    two = entry(
        "Second", "2026-11-21", "Here `src/a.py:1` has LR = 3e-4,\n`src/b.py:1` WARMUP = 50."
    )
    three = entry("Third", "2026-11-22", "`src/b.py:1` and `src/a.py:1`: LR = 1e-3, WARMUP = 100.")
    for text in (one, two, three):
        assert api.append_entry(ws.workspace, text).appended
    report = api.check(ws.workspace)
    assert disagreements(report) == [
        ("contradiction", "second-2026-11-21", "first-2026-11-20"),
        ("contradiction", "third-2026-11-22", "first-2026-11-20"),
    ]
    details = sorted(p.detail for p in report.problems if p.kind == "contradiction")
    assert details[0].startswith("`LR = 1e-3` for src/a.py:1 disagrees with `LR = 3e-4`")
    assert details[1].startswith("`WARMUP = 50` for src/b.py:1 disagrees with `WARMUP = 100`")
