"""Every number that estimate, trace, fit and profile print is in their record: an entry that
quotes any of them beside the printed citation passes `journal check` (issue #24)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from journal_agent.journal import numbers
from journal_agent.journal.quoting import is_device_spec, is_setting
from journal_agent.journal.verify import validate_draft
from tests.entries import render_entry

_CITED = re.compile(r"cite as \[m:([\w.-]+)\]")


def quoted_numbers(text: str) -> list[str]:
    """Every memory or time quantity the output shows, as `journal check` reads numbers —
    except a device's size or a setting (specifications, not results) and the left side of a
    definition ("1 GB = 10^9 B")."""
    out = []
    for line in text.splitlines():
        for q in numbers.find_quantities(line):
            if is_device_spec(line, q) or is_setting(line, q):
                continue
            if re.match(r"\s*=", line[q.end :]):
                continue
            out.append(q.text)
    return out


def uncitable(root: Path, output: str) -> tuple[int, list[str]]:
    """How many numbers the output shows, and those its records do not back (an estimate
    beside a trace prints both records: the quote cites both)."""
    record_ids = _CITED.findall(output)
    assert record_ids, f"the output names no record to cite:\n{output}"
    cited = " ".join(f"[m:{rid}]" for rid in record_ids)
    shown = quoted_numbers(output)
    body = "".join(f"- The value is {text} {cited}.\n\n" for text in shown)
    entry = render_entry(
        "Printed numbers",
        "2026-11-21",
        context="c",
        question="q?",
        intuition="i",
        tags="#t",
        body=body,
    )
    _, problems = validate_draft(root, entry)
    return len(shown), [p.detail for p in problems if p.kind in ("bad_citation", "unquoted_number")]


@pytest.mark.parametrize(
    "args",
    [
        ("estimate", "--model", "llama-7b", "--precision", "mixed", "--gpus", "2", "--zero", "2",
         "--gpu-mem", "40"),
        ("estimate", "--model", "llama-7b", "--gpus", "8", "--zero", "3", "--gpu", "h100-sxm",
         "--tokens", "1e9"),
        ("estimate", "--model", "gpt2-small", "--precision", "amp-bf16", "--checkpointing",
         "full", "--lora-rank", "8", "--gpu-mem", "24"),
        ("trace", "--model", "gpt2-small", "--batch", "1", "--seq", "64", "--gpu", "h100-sxm"),
        ("trace", "--model", "tiny-llama", "--seq", "32", "--compare-estimate", "--gpu-mem", "1"),
        ("fit", "--model", "llama-7b", "--gpu-mem", "24", "--gpu", "rtx-4090"),
        ("fit", "--model", "gpt2-small", "--gpu-mem", "8", "--confirm", "1"),
        ("estimate", "--model", "llama-7b", "--gpus", "8", "--zero", "3", "--counter", "nvml",
         "--gpu-mem", "80"),
        ("trace", "--model", "tiny-llama", "--seq", "32", "--counter", "nvml", "--gpu-mem", "2"),
        ("fit", "--model", "hf:llama-3.2-1b", "--lora-rank", "8", "--gpu-mem", "16",
         "--max-seq", "--confirm", "0"),
        ("estimate", "--model", "llama-7b", "--precision", "mixed", "--dp-shard", "4",
         "--tp", "2", "--pp", "2", "--batch", "2", "--gpu", "h100-sxm"),
        ("trace", "--model", "tiny-llama", "--seq", "64", "--dp-shard", "2", "--counter",
         "nvml", "--expandable-segments"),
        ("estimate", "--model", "llama-7b", "--precision", "mixed", "--gpus", "16",
         "--gpus-per-node", "8", "--zero", "3", "--deepspeed", "--offload-optimizer",
         "--offload-param", "--cpu-mem", "64", "--gpu-mem", "24"),
    ],
    ids=lambda a: " ".join(a[:3]),
)  # fmt: skip
def test_every_printed_number_is_a_value_of_the_printed_record(cli, tmp_path, args):
    done = cli(*args, "--root", str(tmp_path), cwd=tmp_path, env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stdout + done.stderr
    count, bad = uncitable(tmp_path, done.stdout)
    assert count >= 2, done.stdout
    assert bad == [], "\n".join(bad)


def test_every_number_profile_prints_is_a_value_of_its_record(tmp_path, run_cli):
    # A real process: a profile counts the live tensors of its own process.
    done = run_cli(
        "profile", "--model", "tiny-llama", "--batch", "1", "--seq", "32", "--steps", "3",
        "--warmup", "1", "--device", "cpu", "--root", str(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    count, bad = uncitable(tmp_path, done.stdout)
    assert count >= 20, done.stdout
    assert bad == [], "\n".join(bad)
