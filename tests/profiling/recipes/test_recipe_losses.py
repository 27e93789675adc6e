"""`--from FILE` reads the loss each framework's recipe runs (``--loss``): torchtune's loss
component, LitGPT's finetune scripts, the Trainer's ``use_liger_kernel`` — and a loss the
estimate does not model with the rest of the recipe is listed as ignored, with why."""

from __future__ import annotations

import json
from pathlib import Path

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.recipes import read_recipe, with_recipe

FIXTURES = Path(__file__).parent / "fixtures"


def test_torchtune_s_loss_component_is_its_loss() -> None:
    recipe = read_recipe([FIXTURES / "torchtune" / "1B_full_single_device.yaml"])
    assert recipe.values["loss"] == "linear-chunked"  # modules.loss.LinearCrossEntropyLoss
    lines = "\n".join(recipe.lines())
    assert "LinearCrossEntropyLoss' → --loss 'linear-chunked'" in lines
    config = TrainingConfig.parse(**with_recipe(recipe, {"seq": 512}))
    assert config.loss == "linear-chunked"
    assert "linear-chunked loss" in config.describe()
    plain = config.model_copy(update={"loss": "cross-entropy"})
    assert estimate(config).per_gpu_bytes < estimate(plain).per_gpu_bytes


def test_litgpt_s_adapter_scripts_chunk_the_head_and_the_full_script_does_not() -> None:
    lora = read_recipe([FIXTURES / "litgpt" / "llama-3.2-1B-lora.yaml"])
    assert lora.values["loss"] == "litgpt"
    full = read_recipe([FIXTURES / "litgpt" / "llama-3.2-1B-full.yaml"])
    # full.py: the whole logits, cast to fp32 by Fabric, the loss in chunks of 128 rows
    assert full.values["loss"] == "litgpt-full"
    assert not [s for s in full.ignored if "not modelled yet" in s.why]


def test_litgpt_s_full_script_on_many_gpus_keeps_its_loss(tmp_path: Path) -> None:
    """full.py on several devices (FSDP1) runs the same loss: read as --loss litgpt-full beside
    --fsdp (it fell back to PyTorch's loss, listed "not modelled yet")."""
    import yaml

    data = yaml.safe_load((FIXTURES / "litgpt" / "llama-3.2-1B-full.yaml").read_text())
    path = tmp_path / "full.yaml"
    path.write_text(yaml.safe_dump({**data, "devices": 2}), encoding="utf-8")
    full = read_recipe([path])
    assert full.values["fsdp"] is True and full.values["loss"] == "litgpt-full"
    assert not [s for s in full.ignored if "not modelled yet" in s.why]
    est = estimate(TrainingConfig.parse(**with_recipe(full, {})))
    assert any("fp32 copy (Fabric's output)" in m.calculation for m in est.moments)


def test_trainer_with_liger_and_the_same_under_fsdp(tmp_path: Path) -> None:
    args = {"per_device_train_batch_size": 2, "bf16": True, "use_liger_kernel": True,
            "output_dir": "out", "model_name_or_path": "meta-llama/Llama-3.2-1B"}  # fmt: skip
    path = tmp_path / "training_args.json"
    path.write_text(json.dumps(args), encoding="utf-8")
    recipe = read_recipe([path])
    assert recipe.values["loss"] == "liger"
    # Under FSDP the estimate does not model a fused loss yet: listed as ignored, not dropped.
    sharded = {**args, "fsdp": "full_shard auto_wrap"}
    path.write_text(json.dumps(sharded), encoding="utf-8")
    recipe = read_recipe([path])
    assert "loss" not in recipe.values
    why = [s.why for s in recipe.ignored if s.key == "use_liger_kernel"]
    assert why and "not modelled yet" in why[0] and "FSDP" in why[0], recipe.ignored
