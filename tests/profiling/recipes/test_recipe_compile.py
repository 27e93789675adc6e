"""--from reads each framework's torch.compile switch into --compile (and says when it cannot)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.recipes import read_recipe

FIXTURES = Path(__file__).parent / "fixtures"


def _used(recipe, key: str) -> str:
    return next(s.why for s in recipe.used if s.key == key)


def test_litgpt_compile(tmp_path: Path) -> None:
    text = (FIXTURES / "litgpt" / "llama-3.2-1B-lora.yaml").read_text(encoding="utf-8")
    (tmp_path / "on.yaml").write_text(text + "\ncompile: true\n", encoding="utf-8")
    (tmp_path / "off.yaml").write_text(text + "\ncompile: false\n", encoding="utf-8")
    on = read_recipe([tmp_path / "on.yaml"])
    assert on.values["compile"] is True and "partitioner" in _used(on, "compile")
    off = read_recipe([tmp_path / "off.yaml"])
    assert "compile" not in off.values
    assert any(s.key == "compile" for s in off.ignored)


def test_torchtune_compile(tmp_path: Path) -> None:
    text = (FIXTURES / "torchtune" / "1B_full_single_device.yaml").read_text(encoding="utf-8")
    assert "compile: False" in text
    (tmp_path / "on.yaml").write_text(
        text.replace("compile: False", "compile: True"), encoding="utf-8"
    )
    recipe = read_recipe([tmp_path / "on.yaml"])
    assert recipe.values["compile"] is True
    assert "compile_model" in _used(recipe, "compile")
    assert (
        "compile" not in read_recipe([FIXTURES / "torchtune" / "1B_full_single_device.yaml"]).values
    )


def test_hf_trainer_torch_compile(tmp_path: Path) -> None:
    args = {"output_dir": "out", "per_device_train_batch_size": 2, "bf16": True,
            "torch_compile": True, "torch_compile_backend": "inductor"}  # fmt: skip
    (tmp_path / "training_args.json").write_text(json.dumps(args), encoding="utf-8")
    recipe = read_recipe([tmp_path / "training_args.json"])
    assert recipe.values["compile"] is True


@pytest.mark.parametrize("key", ["torch_compile_mode", "torch_compile_backend"])
def test_hf_trainer_compile_mode_alone_turns_compile_on(tmp_path: Path, key: str) -> None:
    """TrainingArguments.__post_init__ sets torch_compile when a mode or backend is given
    (transformers/training_args.py): the step is compiled, not eager."""
    value = "reduce-overhead" if key.endswith("mode") else "inductor"
    args = {"output_dir": "out", "per_device_train_batch_size": 2, "bf16": True,
            "torch_compile": False, key: value}  # fmt: skip
    (tmp_path / "training_args.json").write_text(json.dumps(args), encoding="utf-8")
    recipe = read_recipe([tmp_path / "training_args.json"])
    assert recipe.values["compile"] is True
    assert "turns torch.compile on" in next(
        s.why for s in recipe.ignored if s.key == "torch_compile"
    )
    cuda_graphs = any("CUDA graphs" in n for n in recipe.notes)
    assert cuda_graphs == (value == "reduce-overhead")
    # a run's saved arguments carry every key, None when unset: read as off, not unknown
    args.update(torch_compile_mode=None, torch_compile_backend=None)
    (tmp_path / "training_args.json").write_text(json.dumps(args), encoding="utf-8")
    off = read_recipe([tmp_path / "training_args.json"])
    assert "compile" not in off.values
    assert {"torch_compile_mode", "torch_compile_backend"} <= {s.key for s in off.ignored}
    assert all("not a setting this reader knows" not in s.why for s in off.ignored)


@pytest.mark.parametrize(
    ("old", "new"),
    [("[compile]\nenable=false", "[compile]\nenable=true"), ("[compile]\nenable=false", "")],
)
def test_torchtitan_compile(tmp_path: Path, old: str, new: str) -> None:
    text = (FIXTURES / "torchtitan" / "llama3_8b.toml").read_text(encoding="utf-8")
    assert old in text
    text = text.replace(old, new)
    if not new:  # the older spelling: [training] compile = true
        text = text.replace("[training]\n", "[training]\ncompile = true\n", 1)
    (tmp_path / "t.toml").write_text(text, encoding="utf-8")
    recipe = read_recipe([tmp_path / "t.toml"])
    assert recipe.values["compile"] is True


def test_torchtitan_compile_under_a_plan_is_read() -> None:
    # the 405B TOML: FSDP x TP 8, each block compiled (traced under TP, PP and CP too)
    recipe = read_recipe([FIXTURES / "torchtitan" / "llama3_405b.toml"])
    assert recipe.values["compile"] is True
    assert recipe.values["tp"] == 8
    assert all(s.key != "training.compile" for s in recipe.ignored)
