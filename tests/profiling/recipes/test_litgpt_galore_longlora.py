"""LitGPT's GaLore and LongLoRA configs (config_hub/finetune/*/galore.yaml, */longlora.yaml):
their ``optim`` and ``longlora`` blocks were listed as keys the reader does not know and the step
estimated as plain AdamW / plain LoRA. GaLore's AdamW is now read as AdamW (a bound, said);
its 8-bit form and LongLoRA (which also trains the embedding table) are refused in one sentence
naming the key (#31)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.errors import ProfilingError
from profiling.recipes import read_recipe, with_recipe

# The keys of config_hub/finetune/tiny-llama/galore.yaml (LitGPT ee5f10fc), data and eval left out
GALORE = """checkpoint_dir: checkpoints/TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T
precision: bf16-true
devices: 1
train:
  global_batch_size: 32
  micro_batch_size: 4
  max_seq_length: 512
optim:
  optimizer: "{optimizer}"
  learning_rate: 0.0002
  weight_decay: 0.0
  beta1: 0.9
  beta2: 0.95
  extra_kwargs: "rank=8, update_proj_gap=200, scale=0.25, proj_type=std"
"""

# The keys of config_hub/finetune/mistral-7b/longlora.yaml (LitGPT 073b0275) that move memory
LONGLORA = """checkpoint_dir: checkpoints/mistralai/Mistral-7B-v0.1
precision: bf16-true
devices: 1
lora_r: 8
lora_query: true
lora_key: true
lora_value: true
lora_projection: true
train:
  global_batch_size: 8
  micro_batch_size: 2
  max_seq_length: 512
longlora:
  use_longlora: {on}
  context_length: 8192
  n_groups: 4
  trainable_params: "wte,norm,ln"
"""


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_galore_adamw_is_read_as_adamw_a_bound(tmp_path: Path) -> None:
    recipe = read_recipe([_file(tmp_path, "galore.yaml", GALORE.format(optimizer="galore_adamw"))])
    assert recipe.values["optimizer"] == "adamw"
    lines = "\n".join(recipe.lines())
    assert "optim.optimizer = 'galore_adamw' → --optimizer 'adamw' (GaLore's" in lines
    assert "not a setting this reader knows" not in lines


def test_galore_8bit_is_refused_unless_optimizer_is_given(tmp_path: Path) -> None:
    path = _file(tmp_path, "galore.yaml", GALORE.format(optimizer="galore_adamw_8bit"))
    with pytest.raises(ProfilingError, match=r"optim.optimizer = 'galore_adamw_8bit' is not mod"):
        with_recipe(read_recipe([path]), {})
    values = with_recipe(read_recipe([path]), {"optimizer": "adamw"})
    assert values["optimizer"] == "adamw"


def test_longlora_is_refused_and_off_is_plain_lora(tmp_path: Path) -> None:
    on = _file(tmp_path, "longlora.yaml", LONGLORA.format(on="true"))
    with pytest.raises(ProfilingError, match=r"longlora.use_longlora = true is LitGPT's LongLoRA"):
        with_recipe(read_recipe([on]), {})
    off = read_recipe([_file(tmp_path, "off.yaml", LONGLORA.format(on="false"))])
    assert off.values["lora_rank"] == 8
    assert "not a setting this reader knows" not in "\n".join(off.lines())
