"""A recipe whose training method changes which weights train, and is not modelled, is refused in
one sentence (the reviewer's D12: LitGPT's adapter_v2 config was listed "ignored … not modelled
yet" and estimated as a full fine-tune, 19.08 GB; peft's non-LoRA adapters the same)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from profiling.errors import ProfilingError
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
