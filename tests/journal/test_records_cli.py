"""Records as a new user expects (issue #33): a run that is not worth keeping leaves none
(``--no-save``), the records can be filtered, and those nothing cites pruned — never one the
journal, the ledger, the inbox, a draft or another record names."""

from __future__ import annotations

import json

from tests.entries import render_entry


def run(cli, ws, *args: str, stdin: str | None = None):
    return cli(*args, "--root", str(ws.root), input=stdin)


def records(ws) -> set[str]:
    return {p.stem for p in (ws.root / ".journal/measurements").glob("*.json")}


def estimate(cli, ws, *extra: str) -> str:
    done = run(cli, ws, "estimate", "--model", "gpt2-small", "--json", *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["record_id"]


def test_no_save_prints_the_result_and_keeps_no_record(cli, ws):
    done = run(cli, ws, "estimate", "--model", "gpt2-small", "--no-save")
    assert done.returncode == 0, done.stderr
    assert "Total per GPU" in done.stdout
    assert "record: not saved (--no-save): there is nothing to cite" in done.stdout
    assert records(ws) == set()
    as_json = json.loads(run(cli, ws, "estimate", "--model", "gpt2-small", "--no-save",
                             "--json").stdout)  # fmt: skip
    assert as_json["saved"] is False
    traced = run(cli, ws, "trace", "--model", "tiny-gpt2", "--seq", "8", "--no-save")
    assert traced.returncode == 0 and "record: not saved" in traced.stdout
    assert records(ws) == set()


def test_records_are_filtered_by_kind_model_and_whether_anything_cites_them(cli, ws):
    gpt2 = estimate(cli, ws)
    llama = estimate(cli, ws, "--model", "llama-7b")
    traced = json.loads(run(cli, ws, "trace", "--model", "tiny-gpt2", "--seq", "8",
                            "--json").stdout)["record_id"]  # fmt: skip
    entry = render_entry(
        "GPT-2 Memory", "2026-11-20", context="Sizing gpt2-small.", question="How much?",
        intuition=f"The estimate [m:{gpt2}] is the baseline.", tags="#memory",
    )  # fmt: skip
    assert run(cli, ws, "journal", "append", "-", stdin=entry).returncode == 0

    def listed(*args: str) -> set[str]:
        done = run(cli, ws, "measurements", "--json", *args)
        assert done.returncode == 0, done.stderr
        return {r["id"] for r in json.loads(done.stdout)}

    assert listed() == {gpt2, llama, traced}
    # the headline in words, not a field's name ("per_gpu_total 27.35 GB" before)
    heads = {
        r["id"]: r["headline"] for r in json.loads(run(cli, ws, "measurements", "--json").stdout)
    }
    assert heads[llama].endswith(" GB per GPU") and heads[traced].startswith("peak ")
    assert not any("per_gpu_total" in h for h in heads.values())
    assert listed("--kind", "traced") == {traced}
    assert listed("--model", "llama") == {llama}
    assert listed("--unreferenced") == {llama, traced}
    # A fit record's headline is its best configuration, or that nothing fits (it was empty).
    fits = json.loads(run(cli, ws, "fit", "--model", "tiny-gpt2", "--gpu-mem", "1", "--confirm",
                          "0", "--json").stdout)  # fmt: skip
    none = json.loads(run(cli, ws, "fit", "--model", "llama-7b", "--gpu-mem", "1", "--confirm",
                          "0", "--json").stdout)  # fmt: skip
    said = {r["id"]: r["headline"] for r in json.loads(run(cli, ws, "measurements", "--json",
                                                            "--model", "fits").stdout)}  # fmt: skip
    best = fits["fitting"][0]
    assert said[fits["record_id"]].startswith("best ")
    assert said[fits["record_id"]].endswith(f" ({best['label']})")
    assert said[none["record_id"]].startswith("nothing fits: smallest ")
    bad = run(cli, ws, "measurements", "--kind", "guessed")
    assert bad.returncode == 1 and "--kind 'guessed' is not a kind" in bad.stderr


def test_prune_deletes_only_what_nothing_cites_and_asks_first(cli, ws):
    cited = estimate(cli, ws)
    in_ledger = estimate(cli, ws, "--seq", "64")
    in_inbox = estimate(cli, ws, "--seq", "32")
    in_draft = estimate(cli, ws, "--seq", "16")
    loose = estimate(cli, ws, "--seq", "8")
    compared = estimate(cli, ws, "--seq", "4")
    entry = render_entry(
        "Baseline", "2026-11-20", context="Sizing.", question="How much?",
        intuition=f"See [m:{cited}].", tags="#memory",
    )  # fmt: skip
    assert run(cli, ws, "journal", "append", "-", stdin=entry).returncode == 0
    ws.write("learning_ledger.md", f'# Ledger\n\n> "Fits." — [m:{in_ledger}]\n')
    from journal_agent.capture.store import append, new_moment

    append(ws.root, [new_moment("measurement", "Measured.", records=[in_inbox])])
    ws.write(".journal/drafts/d.md", f"A draft citing [m:{in_draft}].\n")
    # A measured run names the record it was compared with: that one stays too.
    from profiling.records import MeasurementRecord, RecordStore

    RecordStore(ws.root / ".journal/measurements").save(
        MeasurementRecord(
            id="meas-0000abcd", kind="measured", title="a run", notes=f"compared: [m:{compared}]"
        )
    )
    every = records(ws)
    dry = run(cli, ws, "measurements", "prune", "--dry-run")
    assert dry.returncode == 0 and loose in dry.stdout and cited not in dry.stdout
    assert records(ws) == every
    refused = run(cli, ws, "measurements", "prune")  # not a terminal, no --yes
    assert refused.returncode == 1 and "add --yes" in refused.stderr
    assert records(ws) == every
    done = run(cli, ws, "measurements", "prune", "--yes")
    assert done.returncode == 0, done.stderr
    assert records(ws) == every - {loose, "meas-0000abcd"}
    assert "deleted 2 record(s) nothing cited" in done.stdout
    # The run that named it is gone: nothing cites that one now, and the next prune takes it.
    again = run(cli, ws, "measurements", "prune", "--yes")
    assert "deleted 1 record(s)" in again.stdout and compared not in records(ws)
    last = run(cli, ws, "measurements", "prune", "--yes")
    assert "nothing to prune" in last.stdout and records(ws) == {
        cited,
        in_ledger,
        in_inbox,
        in_draft,
    }


def test_prune_refuses_when_the_journal_is_a_link_and_deletes_nothing(cli, ws, tmp_path):
    cited = estimate(cli, ws)
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text(f"An entry citing [m:{cited}].\n")
    (ws.root / "learning_journal.md").unlink(missing_ok=True)
    (ws.root / "learning_journal.md").symlink_to(elsewhere)
    done = run(cli, ws, "measurements", "prune", "--yes")
    # A journal that cannot be read is never taken for one that cites nothing.
    assert done.returncode == 1 and "learning_journal.md is a symlink" in done.stderr
    assert "Traceback" not in done.stderr
    assert records(ws) == {cited}
    listed = run(cli, ws, "measurements", "--unreferenced")
    assert listed.returncode == 1 and records(ws) == {cited}


def test_fit_no_save_keeps_no_record_in_any_of_its_searches(cli, ws):
    """``fit --no-save`` keeps nothing whichever search it runs: --max-batch and --max-seq
    (fit_cmd._largest was given no ``no_save`` and saved ``est-*.json`` anyway), --plans and
    the plain search; each --json payload says it was not saved."""
    common = ("fit", "--model", "gpt2-small", "--gpu-mem", "24", "--confirm", "0", "--no-save")
    for extra in (("--max-batch",), ("--max-seq",), ()):
        done = run(cli, ws, *common, *extra)
        assert done.returncode == 0, done.stderr
        assert "record: not saved (--no-save)" in done.stdout
        as_json = json.loads(run(cli, ws, *common, *extra, "--json").stdout)
        assert as_json["saved"] is False
    plans = ("fit", "--plans", "--model", "llama-7b", "--gpus", "8", "--gpu-mem", "80",
             "--no-save", "--json")  # fmt: skip
    done = run(cli, ws, *plans)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["saved"] is False
    assert records(ws) == set()
    assert not (ws.root / ".journal/measurements").exists() or not any(
        (ws.root / ".journal/measurements").iterdir()
    )
