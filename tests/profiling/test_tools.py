"""The agent-facing tools: the same numbers as the CLI, a record to cite, errors as results."""

from __future__ import annotations

import re

from journal_agent.tools.base import ToolContext
from journal_agent.tools.memory_estimate import MemoryEstimate
from journal_agent.tools.memory_trace import MemoryTrace
from journal_agent.tools.registry import make_context
from profiling.records import RecordStore


def _record_id(text: str) -> str:
    match = re.search(r"record: ((?:est|trace)-[0-9a-f]{8})", text)
    assert match, text
    return match.group(1)


def test_memory_estimate_tool(tmp_path) -> None:
    result = MemoryEstimate().call(
        ToolContext(root=tmp_path),
        {"params": "7e9", "precision": "mixed", "gpus": 2, "zero": 2, "gpu_mem": 40},
    )
    assert not result.is_error, result.content
    assert "63.00 GB" in result.content and "❌" in result.content
    record = RecordStore(tmp_path / ".journal" / "measurements").load(_record_id(result.content))
    assert record.result("per_gpu_total").value == 63e9
    schema = MemoryEstimate.definition()["input_schema"]
    assert {"model", "params", "zero", "gpu_mem", "lora_rank"} <= set(schema["properties"])


def test_memory_estimate_errors_are_results(tmp_path) -> None:
    ctx = ToolContext(root=tmp_path)
    bad = MemoryEstimate().call(ctx, {"model": "gpt5"})
    assert bad.is_error and "unknown model 'gpt5'" in bad.content
    invalid = MemoryEstimate().call(ctx, {"params": "7e9", "optimizer": "adamax"})
    assert invalid.is_error and "optimizer" in invalid.content


def test_memory_trace_tool_with_comparison(tmp_path) -> None:
    result = MemoryTrace().call(
        ToolContext(root=tmp_path),
        {"model": "tiny-llama", "seq": 32, "dtype": "bf16", "compare_estimate": True},
    )
    assert not result.is_error, result.content
    assert "Traced training step: tiny-llama" in result.content
    assert "Why they differ" in result.content
    ids = re.findall(r"record: ((?:est|trace)-[0-9a-f]{8})", result.content)
    store = RecordStore(tmp_path / ".journal" / "measurements")
    assert len(ids) == 2 and all(store.exists(i) for i in ids)


def test_memory_trace_factory_needs_bash_approval(user_models) -> None:
    args = {"model": "user_models:make_mlp", "batch": 4}
    denied = MemoryTrace().call(make_context(user_models), args)
    assert denied.is_error
    allowed = MemoryTrace().call(
        make_context(user_models, allow=["Bash(journal-agent trace:*)"]), args
    )
    assert not allowed.is_error, allowed.content
    assert "MLP" in allowed.content


def test_memory_trace_failure_is_a_result(user_models) -> None:
    ctx = make_context(user_models, mode="bypassPermissions")
    result = MemoryTrace().call(ctx, {"model": "user_models:broken"})
    assert result.is_error and "RuntimeError: no checkpoint" in result.content


def test_memory_trace_tool_reports_the_cli_run(tmp_path) -> None:
    # The tool runs what `journal-agent trace` runs (profiling.trace.run): the steady-state
    # peak beside the first step's, the FLOPs, the time on a GPU, and a record holding them.
    args = {"model": "tiny-gpt2", "batch": 4, "seq": 64, "precision": "mixed", "gpu": "l4"}
    result = MemoryTrace().call(ToolContext(root=tmp_path), args)
    assert not result.is_error, result.content
    assert "Steady-state peak" in result.content and "first step" in result.content
    assert "FLOPs of the step" in result.content and "Time on l4 at 40% MFU" in result.content
    record = RecordStore(tmp_path / ".journal" / "measurements").load(_record_id(result.content))
    assert record.config["precision"] == "mixed"
    assert record.result("first_step_peak").value <= record.result("peak").value
    assert record.result("step_time").value > 0 and record.steps


def test_memory_estimate_reads_hf_configs_inside_the_workspace_only(tmp_path) -> None:
    import json

    workspace, outside = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    outside.mkdir()
    config = {
        "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
        "num_hidden_layers": 2, "num_attention_heads": 4,
    }  # fmt: skip
    (workspace / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (outside / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (workspace / "escape").symlink_to(outside)
    ctx = make_context(workspace)
    inside = MemoryEstimate().call(ctx, {"model": "hf:config.json", "seq": 64})
    assert not inside.is_error, inside.content
    shipped = MemoryEstimate().call(ctx, {"model": "hf:llama-3.1-8b", "seq": 64})
    assert not shipped.is_error and "8.03B" in shipped.content
    for attack in (
        f"hf:{outside}/config.json",
        "hf:../elsewhere/config.json",
        "hf:escape/config.json",
    ):
        result = MemoryEstimate().call(ctx, {"model": attack, "seq": 64})
        assert result.is_error and "outside" in result.content.lower(), (attack, result.content)
    # Nothing was estimated (no record) for the refused paths.
    records = list((workspace / ".journal" / "measurements").glob("*.json"))
    assert len(records) == 2


_TINY_HF = {
    "model_type": "llama", "vocab_size": 256, "hidden_size": 32, "intermediate_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
}  # fmt: skip


def test_memory_trace_runs_hf_configs_without_a_factory_approval(tmp_path) -> None:
    """A Hugging Face config is data: traced (in the sandbox) with no Bash approval, in the
    default mode; its file is read inside the workspace only; a factory still asks."""
    import json

    workspace, outside = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "config.json").write_text(json.dumps(_TINY_HF), encoding="utf-8")
    (outside / "config.json").write_text(json.dumps(_TINY_HF), encoding="utf-8")
    (workspace / "escape").symlink_to(outside)
    (workspace / "user_model.py").write_text(
        "def build():\n    raise SystemExit('a factory must not run unapproved')\n",
        encoding="utf-8",
    )
    ctx = make_context(workspace)  # default mode, no allow rules, nobody to ask
    traced = MemoryTrace().call(ctx, {"model": "hf:config.json", "seq": 16, "batch": 1})
    assert not traced.is_error, traced.content
    assert "Traced training step: hf:" in traced.content
    store = RecordStore(workspace / ".journal" / "measurements")
    assert store.exists(_record_id(traced.content))
    for attack in (f"hf:{outside}/config.json", "hf:../elsewhere/config.json", "hf:escape/x.json"):
        refused = MemoryTrace().call(ctx, {"model": attack, "seq": 16})
        assert refused.is_error and "outside" in refused.content.lower(), (attack, refused)
    factory = MemoryTrace().call(ctx, {"model": "user_model:build"})
    assert factory.is_error and "Permission denied" in factory.content
    # A rule naming the tool still decides.
    denied = MemoryTrace().call(
        make_context(workspace, deny=["MemoryTrace"]), {"model": "hf:config.json", "seq": 16}
    )
    assert denied.is_error and "MemoryTrace" in denied.content
    assert len(list((workspace / ".journal" / "measurements").glob("*.json"))) == 1
