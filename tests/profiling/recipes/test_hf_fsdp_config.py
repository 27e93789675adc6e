"""The Trainer's ``fsdp_config`` as TrainingArguments reads it (the reviewer's D7):
``activation_checkpointing`` true is FSDP's own checkpointing of every wrapped layer (it was
"not a setting this reader knows" and the step estimated without checkpointing), and
``version`` (or ``fsdp_version``) 1 is FSDP1's flat parameters, 2 FSDP2 as estimated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.recipes import read_recipe

ARGS = {"per_device_train_batch_size": 4, "bf16": True, "optim": "adamw_torch",
        "gradient_checkpointing": False, "fsdp": "full_shard auto_wrap"}  # fmt: skip


def _read(tmp_path: Path, fsdp_config: dict[str, object]):
    path = tmp_path / "args.json"
    path.write_text(json.dumps({**ARGS, "fsdp_config": fsdp_config}), encoding="utf-8")
    return read_recipe([path])


@pytest.mark.parametrize("key", ["activation_checkpointing", "fsdp_activation_checkpointing"])
def test_fsdp_activation_checkpointing_is_full_checkpointing(tmp_path: Path, key: str) -> None:
    recipe = _read(tmp_path, {key: True})
    assert recipe.values["checkpointing"] == "full"
    assert not any("not a setting this reader knows" in s.why for s in recipe.ignored)


@pytest.mark.parametrize(("version", "flat"), [(1, True), (2, None)])
def test_fsdp_version_is_read(tmp_path: Path, version: int, flat: bool | None) -> None:
    for key in ("version", "fsdp_version"):
        recipe = _read(tmp_path, {key: version})
        assert recipe.values.get("fsdp_flat") is flat
        assert not any(s.key.endswith(key) for s in recipe.ignored)
