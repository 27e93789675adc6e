"""`journal check` and append validation: one test per rule, on real files and records."""

from __future__ import annotations

import json

import pytest

from journal_agent.errors import UserError
from journal_agent.journal import api
from journal_agent.journal.verify import KINDS

from .conftest import GIB, make_entry


def kinds(problems) -> list[str]:
    return sorted(p.kind for p in problems)


def test_a_clean_entry_appends_and_checks_ok(ws):
    rid = ws.record("est-00000001", {"peak": (71.71 * GIB, "B")})
    body = f"Peak is 71.7 GiB per GPU [m:{rid}], see `src/train.py:10-12`.\n"
    outcome = api.append_entry(ws.workspace, make_entry(body=body))
    assert outcome.appended and outcome.problems == []
    report = api.check(ws.workspace)
    assert report.ok and report.problems == []
    assert report.entries[0]["id"] == "zero-stage-2-2026-11-21"


def test_missing_section(ws):
    text = make_entry().replace("**The Key Question I Had**: *Why do we need DeepSpeed?*\n", "")
    outcome = api.append_entry(ws.workspace, text)
    assert not outcome.appended
    assert kinds(outcome.problems) == ["missing_section"]
    assert "The Key Question I Had" in outcome.problems[0].detail
    assert not ws.journal.exists()  # rejected: nothing written


def test_missing_ref_for_missing_file_and_lines_past_the_end(ws):
    body = "See `src/nope.py:3` and `src/train.py:99-120` and `../outside.py:1`.\n"
    outcome = api.append_entry(ws.workspace, make_entry(body=body))
    assert kinds(outcome.problems) == ["missing_ref"] * 3
    details = " | ".join(p.detail for p in outcome.problems)
    assert "no such file" in details and "only 100 lines" in details and "outside" in details


def test_stale_ref_when_the_code_changed_after_the_entry(ws):
    api.append_entry(
        ws.workspace, make_entry(body="See `src/train.py:10-12` and src/train.py:50.\n")
    )
    assert api.check(ws.workspace).ok
    lines = (ws.root / "src/train.py").read_text().splitlines(keepends=True)
    lines[10] = "changed\n"
    (ws.root / "src/train.py").write_text("".join(lines))
    problems = api.check(ws.workspace).problems
    assert kinds(problems) == ["stale_ref"]
    assert "src/train.py lines 10-12 changed" in problems[0].detail
    assert problems[0].entry == "zero-stage-2-2026-11-21"


def test_entry_identity_survives_a_title_edit(ws):
    api.append_entry(ws.workspace, make_entry(body="See `src/train.py:10`.\n"))
    text = ws.journal.read_text().replace("## ZeRO Stage 2", "## ZeRO Stage Two, edited")
    ws.journal.write_text("# added at the top by hand\n" + text)
    (ws.root / "src/train.py").write_text("new\n" * 100)
    problems = api.check(ws.workspace).problems
    assert [(p.kind, p.entry) for p in problems] == [("stale_ref", "zero-stage-2-2026-11-21")]


def test_bad_citation_when_the_record_does_not_exist(ws):
    outcome = api.append_entry(ws.workspace, make_entry(body="Peak 3 GiB [m:est-deadbeef].\n"))
    assert kinds(outcome.problems) == ["bad_citation"]
    assert "does not resolve" in outcome.problems[0].detail


def test_numbers_beside_a_citation_must_be_in_the_record(ws):
    rid = ws.record(
        "est-00000002",
        {"peak": (71.71 * GIB, "B"), "step": (1534.0, "ms")},
        steps=[("optimizer", "12Ψ/N", "12 × 7e9 / 2", 42e9, "B")],
    )
    good = (
        f"Peak is 71.7 GiB [m:{rid}]. That is 77.0 GB in decimal units [m:{rid}].\n"
        f"| ZeRO-2 | 42 GB | 1.53 s | [m:{rid}] |\n"
        f"Optimizer: 84 GB / 2 = 42 GB per GPU [m:{rid}]\n"
        f"A step takes 1534 ms. [m:{rid}]\n"
    )
    assert api.append_entry(ws.workspace, make_entry(body=good)).problems == []
    bad = f"Peak is 72.5 GiB [m:{rid}], and the step takes 2 s.\n"
    problems = api.append_entry(ws.workspace, make_entry(body=bad)).problems
    assert kinds(problems) == ["bad_citation"]
    assert "72.5 GiB" in problems[0].detail and "closest: peak = 71.71 GiB" in problems[0].detail


def test_rounding_is_judged_by_the_digits_written(ws):
    rid = ws.record("est-00000003", {"peak": (71.71 * GIB, "B")})
    assert (
        api.append_entry(ws.workspace, make_entry(body=f"About 72 GiB [m:{rid}].\n")).problems == []
    )
    problems = api.append_entry(
        ws.workspace, make_entry(body=f"About 71.8 GiB [m:{rid}].\n")
    ).problems
    assert kinds(problems) == ["bad_citation"]


def test_unquoted_number_and_what_is_exempt(ws):
    exempt = (
        "```\nOptimizer sharding: 56 GB / 2 = 28 GB per GPU\nTotal 99 GB\n```\n"
        "AdamW stores momentum (28 GB) + variance (28 GB) = 56 GB for 7B params\n"
        "7B × 2 bytes gives 14 GB of weights\n"
        "Set `allgather_bucket_size` to `500 MB` in the config.\n"
        "Would 16 GB be enough for this model?\n"
        "It fits comfortably in 40GB GPUs and on 24 GB cards.\n"
        "A 7B model in the 1990s took 3h of shorthand.\n"
    )
    assert api.append_entry(ws.workspace, make_entry(body=exempt)).problems == []
    problems = api.append_entry(
        ws.workspace, make_entry(body="ZeRO-2 cuts the optimizer to 28 GB and a step to 1.6 s.\n")
    ).problems
    assert kinds(problems) == ["unquoted_number"]
    assert "'28 GB', '1.6 s'" in problems[0].detail


def test_tables_and_paragraphs_covered_by_a_citation(ws):
    rid = ws.record("est-00000004", {"peak": (64.6e9, "B")})
    body = (
        f"Peak memory per configuration [m:{rid}]:\n"
        "\n"
        "| config | memory |\n|---|---|\n| ZeRO-2 | 64.6 GB |\n"
        "\n"
        f"The peak of 64.6 GB\nholds on both GPUs [m:{rid}].\n"
        "\n"
        "| config | memory |\n|---|---|\n| DDP | 99 GB |\n"
    )
    problems = api.append_entry(ws.workspace, make_entry(body=body)).problems
    # Only the table without a caption citation is a defect.
    assert kinds(problems) == ["unquoted_number"] and "'99 GB'" in problems[0].detail


def test_force_appends_and_records_the_problems(ws):
    outcome = api.append_entry(ws.workspace, make_entry(body="Takes 40 GB.\n"), force=True)
    assert outcome.appended and outcome.forced
    log = [json.loads(x) for x in (ws.root / ".journal/appends.jsonl").read_text().splitlines()]
    assert log[-1]["forced"] and log[-1]["problems"][0]["kind"] == "unquoted_number"
    assert kinds(api.check(ws.workspace).problems) == ["unquoted_number"]


def test_check_json_and_exit_code_through_the_cli(ws):
    api.append_entry(ws.workspace, make_entry(body="See `src/nope.py:1`.\n"), force=True)
    proc = ws.cli("check", "--json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is False
    assert report["entries"][0]["id"] == "zero-stage-2-2026-11-21"
    assert [p["kind"] for p in report["problems"]] == ["missing_ref"]
    assert set(report["problems"][0]) >= {"entry", "kind", "detail"}
    assert all(p["kind"] in KINDS for p in report["problems"])


def test_cli_append_rejects_with_reasons_and_exit_1(ws):
    entry = ws.write("entry.md", make_entry(body="Takes 40 GB.\n"))
    proc = ws.cli("append", "--file", str(entry))
    assert proc.returncode == 1
    assert "unquoted_number" in proc.stderr and "entry.md:9" in proc.stderr
    proc = ws.cli("append", "-", "--force", stdin=make_entry(body="Takes 40 GB.\n"))
    assert proc.returncode == 0, proc.stderr
    assert "appended zero-stage-2-2026-11-21" in proc.stdout
    proc = ws.cli("append", "--file", str(ws.write("bad.md", "no heading here\n")))
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: the entry was not appended: the entry has no heading")


def test_a_crlf_journal_edited_by_hand_checks_like_any_other(ws):
    rid = ws.record("est-00000005", {"step": (1534.0, "ms")})
    entry = make_entry(body=f"A step takes 1.53 s [m:{rid}] (`src/train.py:3`).\n")
    ws.journal.write_bytes(entry.replace("\n", "\r\n").encode("utf-8"))
    report = api.check(ws.workspace)
    assert report.ok, report.problems
    assert report.entries[0]["tags"] == ["zero", "deepspeed"]


def test_a_draft_must_be_exactly_one_dated_entry(ws):
    with pytest.raises(UserError, match="holds 2 entries"):
        api.append_entry(ws.workspace, make_entry() + "\n" + make_entry(title="Other"))
    with pytest.raises(UserError, match="text before its heading"):
        api.append_entry(ws.workspace, "Intro line\n\n" + make_entry())
    assert not ws.journal.exists()


def test_a_hand_written_twin_never_takes_the_id_of_an_appended_entry(ws):
    first = api.append_entry(ws.workspace, make_entry(body="See `src/train.py:10`.\n"))
    text = ws.journal.read_text(encoding="utf-8").replace("## ZeRO Stage 2", "## Renamed")
    twin = "## ZeRO Stage 2 (2026-11-21)\n**Context**: by hand\n\n"
    ws.journal.write_text(text.replace("## Renamed", twin + "## Renamed"), encoding="utf-8")
    ids = [e.id for e in api.load(ws.workspace).entries]
    assert ids == ["zero-stage-2-2026-11-21-2", first.entry_id]
    third = api.append_entry(ws.workspace, make_entry())
    assert [e.id for e in api.load(ws.workspace).entries][-1] == third.entry_id
    assert third.entry_id == "zero-stage-2-2026-11-21-3"
    (ws.root / "src/train.py").write_text("changed\n" * 100)
    stale = [p for p in api.check(ws.workspace).problems if p.kind == "stale_ref"]
    assert [p.entry for p in stale] == [first.entry_id]


def test_an_unsourced_number_is_caught_even_beside_a_ratio_or_an_arrow(ws):
    # The user's own example, outside a code block: "4×" and "→" are not calculations.
    body = (
        "- Optimizer: 56 GB (4× larger than model!)\n"
        "\n"
        "Problem: 99 GB needed → IMPOSSIBLE! 💥\n"
        "\n"
        "Optimizer = 56 GB\n"
    )
    problems = api.append_entry(ws.workspace, make_entry(body=body)).problems
    assert kinds(problems) == ["unquoted_number"] * 3
    assert [p.detail.split()[0] for p in problems] == ["'56", "'99", "'56"]
    shown = "- Optimizer: 7B × 8 bytes = 56 GB\n- Momentum (28 GB) + variance (28 GB) = 56 GB\n"
    assert api.append_entry(ws.workspace, make_entry(body=shown)).problems == []


def test_a_realistic_entry_needs_no_fighting_false_positives(ws):
    rid = ws.record(
        "est-00000010",
        {
            "per_gpu_total": (91.64e9, "B"),
            "weights": (13.48e9, "B"),
            "activations": (30.60e9, "B"),
            "gpu_mem": (40e9, "B"),
        },
    )
    body = (
        "Planning a Llama-2-7B fine-tune with torch 2.13 and DeepSpeed 0.16 on 2 A100-40GB\n"
        "cards, in 2-3 sentences, as of 2026-11-21; hidden states are `(B, T, 768)`.\n"
        "On an A100 with 80 GB it would fit; an RTX 4090 has 24 GB.\n"
        "\n"
        f"The estimate [m:{rid}]:\n"
        "\n"
        "| Component | Per GPU | Calculation |\n| --- | --- | --- |\n"
        "| Weights | 13.48 GB | 6.74B · 2 B |\n"
        "| Optimizer states | 3 × 13.48 GB | sharded |\n"
        "| Activations | 30.60 GB | seq 2048 × batch 1 |\n"
        "| **Total** | **91.64 GB** | ❌ vs 40 GB available (100%) |\n"
        "\n"
        f"The optimizer states are 3 × 13.48 GB = 40.44 GB per GPU [m:{rid}].\n"
        f"Activations take 30.6 GB of the 91.6 GB [m:{rid}], about 33%; that is\n"
        "roughly 85 GiB per GPU in binary units.\n"
        "\n"
        "```\nOptimizer sharding: 56 GB / 2 = 28 GB per GPU\nt=40ms backward\n```\n"
    )
    assert api.append_entry(ws.workspace, make_entry(body=body)).problems == []


def test_every_number_of_a_cited_table_or_paragraph_is_checked(ws):
    rid = ws.record("est-00000011", {"per_gpu_total": (91.64e9, "B"), "weights": (13.48e9, "B")})
    table = (
        f"The estimate [m:{rid}]:\n\n| Component | Per GPU |\n| --- | --- |\n"
        "| Weights | 13.48 GB |\n| **Total** | **93.1 GB** |\n"
    )
    problems = api.append_entry(ws.workspace, make_entry(body=table)).problems
    assert kinds(problems) == ["bad_citation"]
    assert "'93.1 GB' in a table citing" in problems[0].detail
    assert "closest: per_gpu_total = 91.64 GB" in problems[0].detail
    paragraph = (
        f"The peak is 91.64 GB [m:{rid}] per GPU.\nThe step took 350 ms on average.\n"
        "Each GPU stores 28 GB instead of 56 GB. Weights stay 13.48 GB.\n"
    )
    problems = api.append_entry(ws.workspace, make_entry(body=paragraph)).problems
    assert kinds(problems) == ["unquoted_number", "unquoted_number"]
    assert "'350 ms'" in problems[0].detail and "'28 GB', '56 GB'" in problems[1].detail
    # A hand edit of a number in an appended, cited table is caught by `journal check`.
    api.append_entry(ws.workspace, make_entry(body=table.replace("93.1", "91.64")))
    ws.journal.write_text(ws.journal.read_text().replace("**91.64 GB**", "**93.1 GB**"))
    assert kinds(api.check(ws.workspace).problems) == ["bad_citation"]


def test_a_derived_result_must_follow_from_its_calculation(ws):
    rid = ws.record("est-00000012", {"weights": (13.48e9, "B")})
    ok = f"Optimizer states: 3 × 13.48 GB = 40.44 GB [m:{rid}].\n"
    assert api.append_entry(ws.workspace, make_entry(body=ok)).problems == []
    wrong = f"Optimizer states: 3 × 13.48 GB = 45 GB [m:{rid}].\n"
    problems = api.append_entry(ws.workspace, make_entry(body=wrong)).problems
    assert kinds(problems) == ["bad_citation"] and "45 GB" in problems[0].detail


def test_refresh_makes_the_current_code_the_baseline_after_a_stale_ref(ws):
    api.append_entry(ws.workspace, make_entry(body="See `src/train.py:10-12`.\n"))
    (ws.root / "src/train.py").write_text("moved\n" * 100)
    proc = ws.cli("check")
    assert proc.returncode == 1 and "journal-agent journal refresh zero-stage-2-2026-11-21" in (
        proc.stdout
    )
    # Changed lines are blessed only when accepted by name (issue #24).
    proc = ws.cli("refresh", "1")
    assert proc.returncode == 1 and "--accept src/train.py:10-12" in proc.stderr
    proc = ws.cli("refresh", "1", "--accept", "src/train.py:10-12")
    assert proc.returncode == 0 and "src/train.py:10-12" in proc.stdout, proc.stderr
    assert api.check(ws.workspace).ok
    (ws.root / "src/train.py").write_text("moved again\n" * 100)
    assert kinds(api.check(ws.workspace).problems) == ["stale_ref"]
    assert ws.cli("refresh", "no-such-entry").returncode == 1


def test_settings_data_type_sizes_and_questions_need_no_citation(ws):
    body = (
        "1. **fp16 uses 2 bytes per parameter**, fp32 uses 4 bytes.\n"
        "2. Toy: 4 params of Adam state hold 48 bytes.\n"
        "3. NCCL timeout defaults to 30 minutes; set it to 10 min when debugging.\n"
        "4. Checkpoint every 500 steps (about every 20 minutes), with a 64 KB bucket.\n"
        '5. *"Where do the 56 GB come from?"*\n'
        "6. Plain DDP shards nothing: 0 GB saved.\n"
    )
    entry = make_entry(body=body).replace(
        "*Why do we need DeepSpeed?*", '*"Why does 7B need 112 GB to train?"* (my question)'
    )
    assert api.append_entry(ws.workspace, entry).problems == []
    # ... while a result is still caught, also after "every" or "each".
    body = (
        "Every GPU stores 28 GB.\n\nEach step takes 350 ms.\n\nA 2 KiB header costs 2048 bytes.\n"
    )
    problems = api.append_entry(ws.workspace, make_entry(body=body)).problems
    assert [p.detail.split(" has")[0] for p in problems] == [
        "'28 GB'",
        "'350 ms'",
        "'2 KiB', '2048 bytes'",
    ]


def test_a_total_row_that_sums_its_column_is_derived(ws):
    a = ws.record("est-00000013", {"weights": (13.48e9, "B"), "grads": (6.74e9, "B")})
    b = ws.record("est-00000014", {"activations": (30.6e9, "B")})
    table = (
        "| Component | Per GPU | Source |\n| --- | --- | --- |\n"
        f"| Weights | 13.48 GB | [m:{a}] |\n| Gradients | 6.74 GB | [m:{a}] |\n"
        f"| Activations | 30.6 GB | [m:{b}] |\n| **Total** | **{{total}}** | |\n"
    )
    ok = make_entry(body=table.format(total="50.82 GB"))
    assert api.append_entry(ws.workspace, ok).problems == []
    problems = api.append_entry(ws.workspace, make_entry(body=table.format(total="52 GB"))).problems
    assert kinds(problems) == ["bad_citation"] and "'52 GB' in a table" in problems[0].detail


def test_a_calculation_column_in_a_cited_row_quotes_nothing(ws):
    rid = ws.record("est-00000015", {"weights": (13.48e9, "B"), "momentum": (13.48e9, "B")})
    rows = (
        "| Component | Per GPU | Calculation | Source |\n| --- | --- | --- | --- |\n"
        f"| Weights | 13.48 GB | 6.74B × 2 bytes | [m:{rid}] |\n"
        f"| Momentum | 13.48 GB | 32 layers × 0.42 GB | [m:{rid}] |\n"
    )
    assert api.append_entry(ws.workspace, make_entry(body=rows)).problems == []
    wrong = rows.replace("| Momentum | 13.48 GB", "| Momentum | 14.2 GB")
    problems = api.append_entry(ws.workspace, make_entry(body=wrong)).problems
    assert kinds(problems) == ["bad_citation"] and "14.2 GB" in problems[0].detail


def test_the_core_problem_under_the_key_question_is_still_checked(ws):
    # "### ⚠️ The Core Problem" names no section, so it belongs to The Key Question I Had.
    body = "### ⚠️ The Core Problem: Memory Bottleneck\n\nTraining Llama-2-7B requires:\n"
    entry = make_entry(body="").replace(
        "### 🎯 Intuition", body + "- Optimizer: 56 GB\n\n### 🎯 Intuition"
    )
    problems = api.append_entry(ws.workspace, entry).problems
    assert kinds(problems) == ["unquoted_number"] and "'56 GB'" in problems[0].detail


def test_an_approximate_round_number_is_rounded_to_its_significant_digits(ws):
    rid = ws.record("est-00000016", {"per_gpu_total": (91.64e9, "B")})
    ok = f"It needs ~90 GB per GPU [m:{rid}], roughly 100 GB.\n"
    assert api.append_entry(ws.workspace, make_entry(body=ok)).problems == []
    problems = api.append_entry(
        ws.workspace, make_entry(body=f"It needs 90 GB [m:{rid}].\n")
    ).problems
    assert kinds(problems) == ["bad_citation"]


def test_a_bare_file_name_gets_a_did_you_mean(ws):
    problems = api.append_entry(ws.workspace, make_entry(body="See `train.py:7-9`.\n")).problems
    assert kinds(problems) == ["missing_ref"]
    assert "did you mean src/train.py:7-9?" in problems[0].detail


def test_a_far_miss_names_no_closest_value(ws):
    rid = ws.record("est-00000017", {"peak": (2.49e9, "B"), "inputs": (2048.0, "B")})
    problems = api.append_entry(
        ws.workspace, make_entry(body=f"A block is 28.4 MB [m:{rid}].\n")
    ).problems
    assert kinds(problems) == ["bad_citation"]
    assert "closest" not in problems[0].detail and "within 25%" in problems[0].detail
