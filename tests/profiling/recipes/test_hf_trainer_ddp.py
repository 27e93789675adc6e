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
