"""A Hugging Face config is data: MemoryEstimate / MemoryTrace / MemoryProfile take ``hf:PATH``
with no factory approval, so a config must never make code run, never be read from outside the
workspace, and never cost more than one sentence (adversarial review of c250b6a)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from journal_agent.tools import make_context
from journal_agent.tools.registry import builtin_tools, product_tools

_TINY = {
    "model_type": "llama", "vocab_size": 256, "hidden_size": 32, "intermediate_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
}  # fmt: skip


def _tools() -> dict:
    return {**builtin_tools(), **product_tools()}


def _records(workspace: Path) -> list[Path]:
    return list((workspace / ".journal" / "measurements").glob("*.json"))


@pytest.mark.parametrize("tool", ["MemoryEstimate", "MemoryTrace"])
def test_a_model_folder_whose_config_json_links_out_of_the_workspace_is_refused(tmp_path, tool):
    """``hf:FOLDER`` reads FOLDER/config.json: a symlink there to a file outside is refused like
    ``hf:../x.json`` (MemoryEstimate reads it on the host, where the sandbox hides nothing)."""
    workspace, outside = tmp_path / "ws", tmp_path / "elsewhere"
    (workspace / "model").mkdir(parents=True)
    outside.mkdir()
    (outside / "config.json").write_text(json.dumps(_TINY), encoding="utf-8")
    (workspace / "model" / "config.json").symlink_to(outside / "config.json")
    done = _tools()[tool].call(make_context(workspace), {"model": "hf:model", "seq": 16})
    assert done.is_error and "outside the workspace" in done.content, done.content
    assert not _records(workspace)
    # The same folder with a real config.json is read.
    (workspace / "model" / "config.json").unlink()
    (workspace / "model" / "config.json").write_text(json.dumps(_TINY), encoding="utf-8")
    ok = _tools()["MemoryEstimate"].call(make_context(workspace), {"model": "hf:model"})
    assert not ok.is_error, ok.content


def test_every_spelling_of_a_path_outside_is_refused(tmp_path, monkeypatch):
    workspace, outside = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    outside.mkdir()
    (outside / "config.json").write_text(json.dumps(_TINY), encoding="utf-8")
    (workspace / "out").symlink_to(outside)
    monkeypatch.setenv("HOME", str(outside))
    ctx = make_context(workspace)
    for spec in (
        f"hf:{outside}/config.json",
        f"hf:{outside}",
        "hf:../elsewhere/config.json",
        "hf:../elsewhere",
        "hf:out",
        "hf:out/config.json",
        "hf:~/config.json",
        "hf:~",
        f"hf:{workspace}/../elsewhere/config.json",
    ):
        done = _tools()["MemoryEstimate"].call(ctx, {"model": spec})
        assert done.is_error and "outside" in done.content.lower(), (spec, done.content)
    assert not _records(workspace)


_HOSTILE = {
    **_TINY,
    # transformers loads these when asked to trust remote code: a config must never ask.
    "auto_map": {
        "AutoConfig": "configuration_evil.EvilConfig",
        "AutoModelForCausalLM": "modeling_evil.EvilModel",
        "AutoModel": "modeling_evil.EvilModel",
    },
    "trust_remote_code": True,
}
_EVIL = (
    "import pathlib, sys\n"
    "pathlib.Path({marker!r}).write_text('ran')\n"
    "print('EVIL CODE RAN'); sys.stderr.write('error: EVIL CODE RAN\\n')\n"
    "raise SystemExit(3)\n"
)


def _hostile_model(workspace: Path, marker: Path) -> None:
    folder = workspace / "evil"
    folder.mkdir(parents=True)
    config = {**_HOSTILE, "_name_or_path": str(folder), "name_or_path": str(folder)}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for name in ("modeling_evil.py", "configuration_evil.py", "modeling_llama.py", "__init__.py"):
        (folder / name).write_text(_EVIL.format(marker=str(marker)), encoding="utf-8")
    # Modules a loader might import by name from the working directory (transformers imports
    # most of these lazily, after our code ran: the directory must never be on sys.path).
    for name in (
        "transformers.py", "modeling_evil.py", "configuration_evil.py", "llama.py",
        "safetensors.py", "huggingface_hub.py", "tokenizers.py", "regex.py", "yaml.py",
        "sitecustomize.py", "usercustomize.py",
    ):  # fmt: skip
        (workspace / name).write_text(_EVIL.format(marker=str(marker)), encoding="utf-8")


@pytest.mark.slow
def test_a_config_with_auto_map_and_modeling_files_runs_no_code(tmp_path):
    """auto_map, trust_remote_code, modeling_*.py beside the config and a planted
    transformers.py: the trace builds transformers' own class, nothing of the folder's runs —
    through the tool (sandboxed child) and through `journal-agent trace` on the host."""
    pytest.importorskip("transformers")
    workspace = tmp_path / "ws"
    marker = tmp_path / "ran"
    _hostile_model(workspace, marker)
    traced = _tools()["MemoryTrace"].call(
        make_context(workspace), {"model": "hf:evil", "seq": 16, "batch": 1}
    )
    assert not traced.is_error, traced.content
    assert "EVIL" not in traced.content and "LlamaForCausalLM" in traced.content
    # The console script, as the user types it (``python -m`` would put the directory on
    # sys.path itself, and so import the planted transformers.py before any of our code).
    cli = subprocess.run(
        [str(Path(sys.executable).with_name("journal-agent")), "trace", "--model", "hf:evil",
         "--seq", "16", "--batch", "1"],
        cwd=workspace, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert "EVIL" not in cli.stdout + cli.stderr and "LlamaForCausalLM" in cli.stdout
    assert not marker.exists()


def _deep(path: Path) -> None:
    path.write_text('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")


def _long_number(path: Path) -> None:
    path.write_text('{"model_type": "llama", "vocab_size": ' + "9" * 100_000 + "}")


@pytest.mark.parametrize("make", [_deep, _long_number], ids=["deep", "long-number"])
def test_a_hostile_config_is_one_sentence_through_the_tool_and_the_command(tmp_path, make):
    """JSON nested 100,000 deep (the parser's RecursionError) or a 100,000-digit number
    (Python's int limit, a ValueError): one sentence of ours, no traceback, nothing recorded."""
    make(tmp_path / "config.json")
    done = _tools()["MemoryEstimate"].call(make_context(tmp_path), {"model": "hf:config.json"})
    assert done.is_error and "is not a config.json" in done.content, done.content
    assert "Traceback" not in done.content and "set_int_max_str_digits" not in done.content
    cli = subprocess.run(
        [sys.executable, "-m", "journal_agent", "estimate", "--model", "hf:config.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert cli.returncode != 0
    assert "Traceback" not in cli.stderr and "is not a config.json" in cli.stderr, cli.stderr
    assert len(cli.stderr.strip().splitlines()) == 1, cli.stderr
    assert not _records(tmp_path)


def test_a_config_that_grows_after_it_was_measured_is_read_no_further_than_the_bound(tmp_path):
    """The size is checked by stat, then read: the read itself stops at the bound (a file that
    grew meanwhile, or one whose size stat cannot tell) — one sentence, not gigabytes read."""
    from profiling.errors import ProfilingError
    from profiling.models.hf_config import MAX_BYTES, read_config_file

    big = tmp_path / "config.json"
    with big.open("wb") as f:  # sparse: 1 GiB for the price of nothing
        f.truncate(1 << 30)
    with pytest.raises(ProfilingError, match="over 1,048,576 bytes"):
        read_config_file(str(big), "hf:config.json")
    assert MAX_BYTES == 1 << 20
