"""Which model a recipe names, and the sentence when it names none of ours (audit2 D23, D26)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.errors import ProfilingError
from profiling.recipes import read_recipe, with_recipe
from profiling.recipes.model_names import torchtune_model

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    ("builder", "model"),
    [
        # D26: phi4_14b became "phi-4-14b", matching nothing, though hf:phi-4 is Phi-4 14B
        ("torchtune.models.phi4.lora_phi4_14b", "hf:phi-4"),
        ("torchtune.models.phi4.qlora_phi4_14b", "hf:phi-4"),
        ("torchtune.models.phi4.phi4_14b", "hf:phi-4"),
        # torchtune/models/llama3_3/_model_builders.py: llama3_3_70b = llama3_1_70b
        ("torchtune.models.llama3_3.lora_llama3_3_70b", "hf:llama-3.1-70b"),
        ("torchtune.models.phi3.phi3_mini", "hf:phi-3-mini"),  # neighbours unmoved
        ("torchtune.models.llama3_1.llama3_1_70b", "hf:llama-3.1-70b"),
        ("torchtune.models.llama4.llama4_scout_17b_16e", None),
        # torchtune's qwen2_7b has qwen2_5_7b_base's shape; llama2_70b and llama3_1_405b ship
        ("torchtune.models.qwen2.lora_qwen2_7b", "hf:qwen2.5-7b"),
        ("torchtune.models.llama2.qlora_llama2_70b", "hf:llama-2-70b"),
        ("torchtune.models.llama3_1.qlora_llama3_1_405b", "hf:llama-3.1-405b"),
        # #31 (the KD configs' students and teachers): torchtune's qwen2 0.5B/1.5B builders have
        # qwen2_5's shapes; qwen3_8b_base is Qwen3 8B; qwen3_14b_instruct is Qwen3 14B
        ("torchtune.models.qwen2.lora_qwen2_0_5b", "hf:qwen2.5-0.5b"),
        ("torchtune.models.qwen2.qwen2_1_5b", "hf:qwen2.5-1.5b"),
        ("torchtune.models.qwen3.lora_qwen3_8b_base", "hf:qwen3-8b"),
        ("torchtune.models.qwen3.qwen3_14b_instruct", "hf:qwen3-14b"),
    ],
)
def test_torchtune_builders_name_the_catalogue_model(builder: str, model: str | None) -> None:
    assert torchtune_model(builder)[0] == model


def _named(tmp_path: Path, fixture: str, old: str, new: str) -> str:
    text = (FIXTURES / fixture).read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / Path(fixture).name
    path.write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(ProfilingError) as info:
        with_recipe(read_recipe([path]), {})
    return str(info.value)


def test_torchtune_names_no_model_with_its_builder_not_anothers_reason(tmp_path: Path) -> None:
    """D23: "names no model we ship (does not change memory)", the tokenizer's reason."""
    said = _named(tmp_path, "torchtune/1B_full_single_device.yaml",
                  "llama3_2.llama3_2_1b", "llama4.llama4_scout_17b_16e")  # fmt: skip
    assert (
        "names no model we ship (model._component_ = "
        "'torchtune.models.llama4.llama4_scout_17b_16e': "
        "torchtune's llama4_scout_17b_16e matches no shipped config); give --model hf:NAME" in said
    )
    assert "does not change memory" not in said and said.count("give --model") == 1


def test_litgpt_names_no_model_and_says_give_model_once(tmp_path: Path) -> None:
    """D23: LitGPT's mistral-7b-v0.2 said "give --model hf:NAME or hf:PATH" twice."""
    said = _named(tmp_path, "litgpt/llama-3.2-1B-lora.yaml",
                  "meta-llama/Llama-3.2-1B", "unsloth/Mistral-7B-v0.2")  # fmt: skip
    assert "(checkpoint_dir = 'checkpoints/unsloth/Mistral-7B-v0.2': " in said
    assert said.count("give --model") == 1
