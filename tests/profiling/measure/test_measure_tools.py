"""MemoryProfile and DeviceInfo as the model calls them: real child runs, real records."""

from __future__ import annotations

import re

from journal_agent.tools.base import ToolContext
from journal_agent.tools.memory_profile import DeviceInfo, MemoryProfile
from journal_agent.tools.registry import make_context
from profiling.records import RecordStore


def _record(text: str) -> str:
    match = re.search(r"record: (meas-[0-9a-f]{8})", text)
    assert match, text
    return match.group(1)


def test_memory_profile_runs_bounded_reports_progress_and_saves_a_record(tmp_path) -> None:
    seen: list[tuple[int, int, str]] = []
    ctx = ToolContext(root=tmp_path, progress=lambda d, t, w: seen.append((d, t, w)))
    result = MemoryProfile().call(
        ctx, {"model": "tiny-gpt2", "batch": 2, "seq": 32, "steps": 2, "warmup": 1}
    )
    assert not result.is_error, result.content
    text = result.content
    assert "Measured on cpu" in text and "forward: peak" in text
    assert "Measured ÷ traced step peak: 1.0000" in text
    record = RecordStore(tmp_path / ".journal" / "measurements").load(_record(text))
    assert record.kind == "measured" and f"[m:{record.id}]" in text
    assert len(text) < 2000  # compact: the model reads it, the record keeps the rest
    # Progress came through as the steps ran: 0/3 … 3/3.
    assert seen[-1][:2] == (3, 3) and [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)


def test_memory_profile_needs_bash_approval_and_fails_as_a_result(tmp_path) -> None:
    (tmp_path / "slow.py").write_text(
        "import time\n\ndef model():\n    time.sleep(600)\n", encoding="utf-8"
    )
    args = {"model": "slow:model", "steps": 1, "timeout": 2}
    denied = MemoryProfile().call(make_context(tmp_path), args)
    assert denied.is_error and "Permission denied" in denied.content
    allowed = MemoryProfile().call(ToolContext(root=tmp_path), args)
    assert allowed.is_error
    assert "model factory 'slow:model' did not finish" in allowed.content
    assert "--timeout 2 s" in allowed.content


def test_device_info_without_a_gpu_saves_a_record(tmp_path) -> None:
    result = DeviceInfo().call(ToolContext(root=tmp_path), {})
    assert not result.is_error
    assert result.content.startswith("no NVIDIA GPU here")
    record = RecordStore(tmp_path / ".journal" / "measurements").load(_record(result.content))
    assert record.kind == "measured" and record.result("ram").value > 0


def test_memory_profile_over_mcp_sends_progress(tmp_path) -> None:
    """The plugin's MCP server, driven by the real MCP client: progress notifications arrive
    while the measured run goes, then the compact result with the record id."""
    import os
    import sys
    from pathlib import Path

    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    repo = Path(__file__).resolve().parents[3]
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async def main():
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "journal_agent", "mcp"],
            cwd=str(tmp_path),
            env={
                "HOME": str(tmp_path),
                "PATH": os.environ.get("PATH", ""),
                "PYTHONPATH": str(repo),
            },
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await session.call_tool(
                "MemoryProfile",
                {"model": "tiny-gpt2", "batch": 2, "seq": 32, "steps": 2, "warmup": 1},
                progress_callback=progress,
            )

    result = anyio.run(main)
    assert not result.is_error, result.content
    text = result.content[0].text
    assert (tmp_path / ".journal" / "measurements" / f"{_record(text)}.json").is_file()
    assert seen and seen[-1][:2] == (3, 3), seen


def test_memory_profile_runs_hf_configs_without_a_factory_approval(tmp_path) -> None:
    """hf:PATH is data: measured in the default mode with no Bash approval; a path outside the
    workspace is refused before anything runs."""
    import json

    config = {
        "model_type": "llama", "vocab_size": 256, "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
    }  # fmt: skip
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    ctx = make_context(tmp_path / "ws")
    args = {"batch": 1, "seq": 16, "steps": 1, "warmup": 0}
    result = MemoryProfile().call(ctx, {"model": "hf:config.json", **args})
    assert not result.is_error, result.content
    record = RecordStore(tmp_path / "ws" / ".journal" / "measurements").load(
        _record(result.content)
    )
    assert record.kind == "measured"
    outside = MemoryProfile().call(ctx, {"model": "hf:../config.json", **args})
    assert outside.is_error and "outside" in outside.content.lower()
