"""The product's main path, end to end: `/learn` → the model studies the code, estimates memory,
and appends an entry whose references and citations `journal check` then verifies.

The model is scripted (the real SDK over a mock transport); everything else is real: the
plugin's learn.md, the tools, the estimate record on disk, the journal store, the check.
"""

from __future__ import annotations

import json
import re

from journal_agent.runtime import run_slash_command
from journal_agent.testing import ScriptedModel, reply, tool_use

TRAIN_PY = """import torch

def build_optimizer(model):
    # AdamW keeps two fp32 moments per parameter: 8 bytes each
    return torch.optim.AdamW(model.parameters(), lr=3e-4)

ZERO_STAGE = 2  # shard optimizer state and gradients across ranks
"""


def _entry(record_id: str, per_gpu_gb: str) -> str:
    return f"""## ZeRO Stage 2 Memory for a 7B Model (2026-11-22)

**Context**: Reading `train.py:3-5` while planning a 7B run on two 40 GB GPUs.

**The Key Question I Had**: *Does ZeRO-2 make a 7B model fit on two 40 GB GPUs?*

### ⚠️ The Core Problem

The estimate needs {per_gpu_gb} GB per GPU [m:{record_id}], against 40 GB available.

### 🎯 Intuition

ZeRO-2 splits optimizer state and gradients across the GPUs instead of copying them.

### 🔍 Key Insights

1. **Optimizer state dominates**: AdamW keeps master weights and two moments (`train.py:4`).
2. **Stage 2 is set in code**: `train.py:7` picks the stage.

### 🏷️ Tags

#zero #deepspeed #memory-optimization
"""


def _after_estimate(body: dict) -> dict:
    """Script step: read the record id and total from the estimate's tool result, then append."""
    results = [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    text = "\n".join(
        c["text"] if isinstance(c, dict) else str(c)
        for r in results
        for c in (r["content"] if isinstance(r["content"], list) else [{"text": r["content"]}])
    )
    record_id = re.search(r"\[m:(est-[0-9a-f]{8})\]", text).group(1)
    total = re.search(r"Total per GPU (?:\(allocated\))?\s+([\d.]+) GB", text).group(1)
    return reply(
        "Appending the entry.",
        tool_use("JournalAppend", {"entry": _entry(record_id, total)}),
    )


def test_learn_studies_code_estimates_and_appends_a_verified_entry(tmp_path, cli):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN_PY)
    model = ScriptedModel(
        [
            reply(
                "Let me look at the code and size the problem.",
                tool_use("Grep", {"pattern": "ZERO_STAGE|AdamW", "output_mode": "content"}),
                tool_use(
                    "MemoryEstimate",
                    {
                        "model": "llama-7b",
                        "precision": "mixed",
                        "optimizer": "adamw",
                        "gpus": 2,
                        "zero": 2,
                        "gpu_mem": 40,
                    },
                ),
            ),
            _after_estimate,
            reply("Recorded the entry in learning_journal.md."),
        ]
    )
    result = run_slash_command(
        "learn", "ZeRO stage 2", root=project, client=model.client(), home=tmp_path / "home"
    )

    assert result.final_text == "Recorded the entry in learning_journal.md."
    first = model.requests[0].body
    user_text = json.dumps(first["messages"][0]["content"], ensure_ascii=False)
    assert "ZeRO stage 2" in user_text and "🎓 Core Teaching Philosophy" in user_text
    assert {t["name"] for t in first["tools"]} >= {
        "Read",
        "Grep",
        "JournalAppend",
        "MemoryEstimate",
    }
    grep_result = model.requests[1].body["messages"][-1]["content"][0]
    assert "train.py:7:ZERO_STAGE = 2" in json.dumps(grep_result)

    journal = (project / "learning_journal.md").read_text(encoding="utf-8")
    assert journal.startswith("# Learning Journal")
    assert "## ZeRO Stage 2 Memory for a 7B Model (2026-11-22)" in journal

    check = cli("journal", "check", "--json", cwd=project)
    report = json.loads(check.stdout)
    assert check.returncode == 0 and report["ok"], report
    assert [e["title"] for e in report["entries"]] == ["ZeRO Stage 2 Memory for a 7B Model"]

    # The code moves on: the reference the entry made is now stale, and check says so.
    (project / "train.py").write_text(TRAIN_PY.replace("lr=3e-4", "lr=1e-4"))
    stale = cli("journal", "check", "--json", cwd=project)
    kinds = {p["kind"] for p in json.loads(stale.stdout)["problems"]}
    assert stale.returncode == 1 and kinds == {"stale_ref"}


def test_an_unsourced_number_is_sent_back_to_the_model(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    unsourced = """## Optimizer Memory (2026-11-22)

**Context**: Studying AdamW.

**The Key Question I Had**: *How big is the optimizer state?*

The optimizer needs 56 GB for a 7B model.
"""
    model = ScriptedModel(
        [
            reply(tool_use("JournalAppend", {"entry": unsourced})),
            reply("I could not append it."),
        ]
    )
    run_slash_command(
        "learn", "AdamW memory", root=project, client=model.client(), home=tmp_path / "home"
    )
    result = model.requests[1].body["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert "unquoted_number" in json.dumps(result)
    assert (
        not (project / "learning_journal.md").exists()
        or "56 GB" not in (project / "learning_journal.md").read_text()
    )
