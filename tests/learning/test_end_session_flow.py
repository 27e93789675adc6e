"""/end-session end to end in our runtime: the real command file, the real SDK against a scripted
model, the real LedgerShow/LedgerUpdate tools on real files — then `ledger check` passes."""

from __future__ import annotations

import json

from journal_agent.runtime import run_slash_command
from journal_agent.testing import ScriptedModel, reply, tool_use
from tests.learning.learning_helpers import write_journal

USER_LEDGER = """# Systems Course Learning Ledger
**Last Updated:** 2026-11-19

## 📝 My own notes (not part of the template)
- ask the TA about NCCL_DEBUG
  - and about the timeout

## 🧠 Knowledge Graph (Mastery Levels)

### 🟢 Mastered
- **DDP**: all-reduce of gradients after backward

### 🟡 Developing
- **ZeRO**: sharding optimizer state

### 🔴 Blind Spots
- **Activation checkpointing**: no idea what it costs

---

## 📉 Action Items & Review Queue

### Immediate (Next Session)
- [ ] Read the ZeRO paper, section 5
"""

OPERATIONS = [
    {
        "op": "add_session",
        "topic": "ZeRO-2 and checkpointing",
        "outcome": "Explained gradient sharding; met recomputation",
    },
    {
        "op": "move_item",
        "match": "ZeRO",
        "level": "mastered",
        "text": "**ZeRO**: shards optimizer state and gradients *(更新)*",
    },
    {"op": "move_item", "match": "Activation checkpointing", "level": "developing"},
    {"op": "tick_action", "match": "ZeRO paper", "note": "*(完成)*"},
    {
        "op": "add_action",
        "horizon": "Immediate",
        "text": "Review: what does recomputation trade for memory? *(新增)*",
    },
    {"op": "add_goal", "text": "Fit a 7B fine-tune on two GPUs"},
    {
        "op": "archive_insight",
        "title": "Sharding is about ownership",
        "text": "Each GPU keeps only the gradients of the parameters it updates.",
        "sources": ["zero-stage-2-2026-11-20"],
    },
]


def _tool_text(body: dict) -> str:
    results = [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    return "\n".join(
        c["text"] if isinstance(c, dict) else str(c)
        for r in results
        for c in (r["content"] if isinstance(r["content"], list) else [{"text": r["content"]}])
    )


def test_end_session_updates_the_ledger_through_the_tools(tmp_path, ws, cli):
    write_journal(ws)
    (ws / "learning_ledger.md").write_text(USER_LEDGER, encoding="utf-8")
    seen: dict[str, str] = {}

    def after_show(body: dict) -> dict:
        seen["show"] = _tool_text(body)
        # First try: a source that does not exist — the tool refuses, nothing is written.
        bad = [*OPERATIONS[:-1], {**OPERATIONS[-1], "sources": ["no-such-entry"]}]
        return reply(tool_use("LedgerUpdate", {"operations": bad}))

    def after_refusal(body: dict) -> dict:
        seen["refusal"] = _tool_text(body)
        seen["ledger_after_refusal"] = (ws / "learning_ledger.md").read_text(encoding="utf-8")
        return reply(tool_use("LedgerUpdate", {"operations": OPERATIONS}))

    def after_update(body: dict) -> dict:
        seen["update"] = _tool_text(body)
        return reply("Session closed: ZeRO moved to 🟢, checkpointing to 🟡; one insight archived.")

    model = ScriptedModel(
        [
            reply("Reading the ledger.", tool_use("LedgerShow", {})),
            after_show,
            after_refusal,
            after_update,
        ]
    )
    result = run_slash_command(
        "end-session", "ZeRO-2", root=ws, client=model.client(), home=tmp_path / "home"
    )
    assert result.final_text.startswith("Session closed")

    first = model.requests[0].body
    assert {"LedgerShow", "LedgerUpdate"} <= {t["name"] for t in first["tools"]}
    assert "LedgerUpdate" in json.dumps(first["messages"][0]["content"], ensure_ascii=False)
    shown = json.loads(seen["show"])
    assert shown["counts"] == {"mastered": 1, "developing": 1, "blind_spots": 1}
    assert {d["id"] for d in shown["new"]} >= {"entry:zero-stage-2-2026-11-20", "item:zero"}

    assert "Nothing was written" in seen["refusal"] and "no-such-entry" in seen["refusal"]
    assert seen["ledger_after_refusal"] == USER_LEDGER
    assert "`ledger check`: no problems." in seen["update"]

    text = (ws / "learning_ledger.md").read_text(encoding="utf-8")
    # The user's own section and sub-bullet are where they were.
    assert text.index("## 📝 My own notes") < text.index("## 🧠 Knowledge Graph")
    assert "- ask the TA about NCCL_DEBUG\n  - and about the timeout\n" in text
    assert (
        "### 🟢 Mastered\n- **DDP**: all-reduce of gradients after backward\n- **ZeRO**: "
        "shards optimizer state and gradients *(更新)*\n" in text
    )
    assert "### 🟡 Developing\n- **Activation checkpointing**: no idea what it costs\n" in text
    assert "- [x] Read the ZeRO paper, section 5 *(完成)*" in text
    assert (
        '> "Each GPU keeps only the gradients of the parameters it updates." — '
        "[entry:zero-stage-2-2026-11-20]" in text
    )

    check = cli("ledger", "check", "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    assert json.loads(check.stdout)["ok"] is True
