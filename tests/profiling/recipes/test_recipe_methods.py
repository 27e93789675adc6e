"""A recipe whose training method changes which weights train, and is not modelled, is refused in
one sentence (the reviewer's D12: LitGPT's adapter_v2 config was listed "ignored … not modelled
yet" and estimated as a full fine-tune, 19.08 GB; peft's non-LoRA adapters the same)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from profiling.config import ConfigError, TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.recipes import read_recipe, with_recipe

LITGPT = Path(__file__).parent / "fixtures" / "litgpt"


def _adapter_v2(tmp_path: Path) -> Path:
    # LitGPT names the script by the config's file (config_hub/finetune/*/adapter_v2.yaml); the
    # reviewer's copy of llama-3.2-1B's full.yaml renamed so
    path = tmp_path / "llama-3.2-1B__adapter_v2.yaml"
    shutil.copy(LITGPT / "llama-3.2-1B-full.yaml", path)
    return path


def test_litgpt_llama_adapter_is_refused_not_estimated_as_full_training(tmp_path: Path) -> None:
    recipe = read_recipe([_adapter_v2(tmp_path)])
    with pytest.raises(ProfilingError, match=r"LLaMA-Adapter .* not estimated"):
        with_recipe(recipe, {})


def test_peft_adapter_other_than_lora_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "adapter_config.json"
    config = {"peft_type": "IA3", "target_modules": ["k_proj", "v_proj", "down_proj"],
              "base_model_name_or_path": "meta-llama/Llama-3.2-1B"}  # fmt: skip
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ProfilingError, match=r"peft's IA3 adapter .* not estimated"):
        with_recipe(read_recipe([path]), {})


def test_cli_refuses_in_one_sentence_with_a_nonzero_exit(cli, tmp_path: Path) -> None:
    done = cli("estimate", "--from", str(_adapter_v2(tmp_path)), "--no-save", cwd=tmp_path)
    assert done.returncode != 0
    assert "LLaMA-Adapter" in done.stderr and "Traceback" not in done.stderr
    assert "Total per GPU" not in done.stdout


def test_litgpt_qlora_with_an_adapted_head_under_autocast_says_the_real_reason(
    tmp_path: Path,
) -> None:
    """D4: LitGPT's qlora.yaml with ``lora_head: true`` under bf16-mixed told the user to add
    --loss litgpt (the recipe's loss had been set aside as not modelled there), and adding it
    gave the real refusal; that refusal now comes at once."""
    text = (LITGPT / "llama-3.1-8b-qlora.yaml").read_text(encoding="utf-8")
    text = text.replace("precision: bf16-true", "precision: bf16-mixed")
    path = tmp_path / "qlora.yaml"
    path.write_text(text.replace("lora_head: false", "lora_head: true"), encoding="utf-8")
    recipe = read_recipe([path])
    with pytest.raises(ProfilingError) as info:
        TrainingConfig.parse(**with_recipe(recipe, {}))
    said = str(info.value)
    assert "cannot model --loss litgpt with an adapted LM head under --precision amp-bf16" in said
    assert "add it" not in said
    # Where the loss is modelled, the hint stands
    with pytest.raises(ConfigError, match="as --loss litgpt: add it"):
        TrainingConfig.parse(model="llama-7b", lora_rank=8, qlora=True, fabric_bnb=True)


def test_the_trainer_s_fused_adamw_is_read_once_as_no_foreach_lists(tmp_path: Path) -> None:
    """optim = adamw_torch_fused: AdamW in one kernel (no foreach lists), counted as the
    for-loop step's scratch; not both 'used' and 'ignored' as it was."""
    args = {"output_dir": "o", "per_device_train_batch_size": 1, "bf16": True,
            "optim": "adamw_torch_fused"}  # fmt: skip
    (tmp_path / "args.json").write_text(json.dumps(args), encoding="utf-8")
    recipe = read_recipe([tmp_path / "args.json"])
    assert recipe.values["optimizer"] == "adamw" and recipe.values["foreach"] is False
    assert not [s for s in recipe.ignored if s.key == "optim"]
    foreach = TrainingConfig(model="llama-1b", optimizer="adamw", precision="bf16")
    loop = foreach.model_copy(update={"foreach": False})
    assert estimate(loop).category_bytes("temporaries") < estimate(foreach).category_bytes(
        "temporaries"
    )
