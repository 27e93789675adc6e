"""peft settings the estimate has no setting for, whose step holds more than it counts
(``modules_to_save``, ``lora_bias``, ``layer_replication``, ``trainable_token_indices``,
``target_parameters``, a ``rank_pattern`` above ``r``): each was listed ignored and the step
estimated low — a user told "fits" could run out of memory. Each is refused in one sentence in
the file's keys; a rank_pattern above r is estimated with --lora-rank as a bound (#31)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from profiling.errors import ProfilingError
from profiling.recipes import read_recipe, with_recipe

ADAPTER = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 16, "lora_alpha": 32,
           "target_modules": ["q_proj", "v_proj"], "base_model_name_or_path": None}  # fmt: skip


def _values(tmp_path: Path, extra: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "adapter_config.json"
    path.write_text(json.dumps({**ADAPTER, **extra}), encoding="utf-8")
    return with_recipe(read_recipe([path]), {"model": "tiny-llama", **given})


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"lora_bias": True}, "lora_bias = true gives each adapter's B a trainable bias"),
        ({"layer_replication": [[0, 2], [1, 2]]}, "layer_replication = [[0, 2], [1, 2]] builds"),
        ({"trainable_token_indices": [0, 1]}, "trainable_token_indices = [0, 1] trains rows"),
    ],
)
def test_a_setting_that_holds_more_is_one_sentence(
    tmp_path: Path, extra: dict[str, Any], said: str
) -> None:
    with pytest.raises(ProfilingError, match="not modelled \\(our count would be low\\)") as exc:
        _values(tmp_path, extra, {})
    assert said in str(exc.value)


def test_a_rank_pattern_above_r_is_refused_unless_lora_rank_is_given(tmp_path: Path) -> None:
    above = {"rank_pattern": {"q_proj": 64}}
    with pytest.raises(ProfilingError, match=r"rank_pattern\.q_proj = 64 is above r = 16"):
        _values(tmp_path, above, {})
    assert _values(tmp_path, above, {"lora_rank": 64})["lora_rank"] == 64
    assert _values(tmp_path, {"rank_pattern": {"q_proj": 8}}, {})["lora_rank"] == 16


def test_modules_to_save_is_refused_but_an_encoders_classifier(tmp_path: Path) -> None:
    with pytest.raises(ProfilingError, match='modules_to_save = \\["lm_head"\\] trains those'):
        _values(tmp_path, {"modules_to_save": ["lm_head"]}, {})
    # an encoder's classifier trained in full is modelled (estimate/lora_encoder.py)
    assert _values(tmp_path, {"modules_to_save": ["classifier"]}, {})["lora_rank"] == 16
