"""The Trainer's DDP as transformers 5.24 builds it (``Trainer._build_accelerator_args``):
find_unused_parameters=True for a transformers model without gradient checkpointing, unless
``ddp_find_unused_parameters`` says otherwise; True for peft's model (no ``PreTrainedModel``)
whatever the checkpointing; a static graph's steady step is the default's. The files' ddp_*
keys were all ignored as "graph checks"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.recipes import read_recipe, with_recipe

PEFT = Path(__file__).parent / "fixtures" / "peft" / "adapter_config.json"
BASE = {"output_dir": "out", "per_device_train_batch_size": 2, "learning_rate": 1e-4}


def _read(tmp_path: Path, args: dict[str, Any], *more: Path) -> dict[str, Any]:
    path = tmp_path / "args.json"
    path.write_text(json.dumps({**BASE, **args}), encoding="utf-8")
    return read_recipe([path, *more]).values


@pytest.mark.parametrize(
    ("args", "find_unused"),
    [
        ({}, True),  # a PreTrainedModel without checkpointing
        ({"gradient_checkpointing": True}, None),  # find_unused_parameters=False
        ({"activation_checkpointing": True}, None),
        ({"ddp_find_unused_parameters": False}, False),
        ({"gradient_checkpointing": True, "ddp_find_unused_parameters": True}, True),
        ({"ddp_static_graph": True}, False),  # the sink in the first step alone, rebuilt
    ],
)
def test_the_trainers_find_unused_parameters(
    tmp_path: Path, args: dict[str, Any], find_unused: bool | None
) -> None:
    assert _read(tmp_path, args).get("ddp_find_unused") == find_unused


def test_peft_is_no_pretrained_model_so_find_unused_whatever_the_checkpointing(
    tmp_path: Path,
) -> None:
    values = _read(tmp_path, {"gradient_checkpointing": True}, PEFT)
    assert values["ddp_find_unused"] is True and values["lora_rank"] == 32


def test_the_trainers_ddp_holds_the_used_map_on_many_gpus(tmp_path: Path) -> None:
    path = tmp_path / "args.json"
    path.write_text(json.dumps(BASE), encoding="utf-8")
    recipe = read_recipe([path])
    lines = "\n".join(recipe.lines())
    assert "ddp_find_unused_parameters" in lines and "find_unused_parameters=True" in lines
    values = with_recipe(recipe, {"model": "tiny-llama", "seq": 32})
    many = estimate(TrainingConfig.parse(**values, gpus=2))
    one = estimate(TrainingConfig.parse(**values))
    assert any("map of the parameters used" in c.name for c in many.components)
    assert not any("map of the parameters used" in c.name for c in one.components)


@pytest.mark.parametrize("flags", [(), ("--gpus", "2", "--fsdp")])
def test_the_trainers_implied_find_unused_off_ddp_is_listed_not_noted(
    cli, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    # D76: the Trainer's files imply find_unused for every run; off DDP (one GPU, or sharded)
    # the recipe lists it ignored, and the note that it changes nothing is for the flag alone
    path = tmp_path / "args.json"
    path.write_text(json.dumps(BASE), encoding="utf-8")
    args = ("estimate", "--from", str(path), "--model", "tiny-llama", "--seq", "32", *flags)
    implied = cli.json(*args, "--no-save")
    said = "--ddp-find-unused is for torch's DistributedDataParallel"
    assert not any(n.startswith(said) for n in implied["notes"])
    (line,) = [s for s in implied["recipe"]["ignored"] if s["key"] == "ddp_find_unused_parameters"]
    assert "find_unused_parameters is DistributedDataParallel's, which this step" in line["why"]
    assert not any(s["field"] == "ddp_find_unused" for s in implied["recipe"]["used"])
    given = cli.json(*args, "--ddp-find-unused", "--no-save")
    assert any(n.startswith(said) for n in given["notes"])
    assert given["per_gpu_bytes"] == implied["per_gpu_bytes"]


def test_the_estimate_tool_lists_the_implied_find_unused_off_ddp(tmp_path: Path) -> None:
    # the tool offers no ddp_find_unused field: a recipe is what sets it there
    from journal_agent.tools.base import ToolContext
    from journal_agent.tools.memory_estimate import MemoryEstimate

    (tmp_path / "args.json").write_text(json.dumps(BASE), encoding="utf-8")
    ctx = ToolContext(root=tmp_path)
    fields = {"from_file": ["args.json"], "model": "tiny-llama", "seq": 32}
    implied = MemoryEstimate().call(ctx, fields)
    assert not implied.is_error, implied.content
    said = "--ddp-find-unused is for torch's DistributedDataParallel"
    assert said not in implied.content
    assert "find_unused_parameters is DistributedDataParallel's" in implied.content
