"""torchtune configs of recipes other than supervised fine-tuning, DPO (DPOLoss: --dpo, #31)
and knowledge distillation (ForwardKLWithChunkedOutputLoss: --kd-teacher, #31) are refused in
one sentence (audit2 D14-D17): read as a fine-tune, DPO lost its reference
model and its doubled batch (llama3_1/8B_full_dpo.yaml: 71.75 GB; now read as --dpo), knowledge
distillation its teacher (8B_to_1B_KD: 22.91 GB for the 1B student alone), QAT its
fake-quantized copies, and generation, evaluation and quantization configs were estimated as a
training step (eleuther_evaluation.yaml: 145.04 GB)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from profiling.errors import ProfilingError
from profiling.recipes import read_recipe, with_recipe

FULL = Path(__file__).parent / "fixtures" / "torchtune" / "1B_full_single_device.yaml"
LOSS = "torchtune.modules.loss.LinearCrossEntropyLoss"
CHECKPOINTER = {"_component_": "torchtune.training.FullModelHFCheckpointer"}


def _config(tmp_path: Path, name: str, change: dict[str, Any], drop: tuple[str, ...] = ()) -> Path:
    data = yaml.safe_load(FULL.read_text(encoding="utf-8"))
    for key in drop:
        data.pop(key)
    data.update(change)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


# (file, what the config changes of a full fine-tune, what it drops, the sentence's words)
KINDS = [
    ("simpo.yaml",
     {"loss": {"_component_": "torchtune.rlhf.loss.SimPOLoss"}},
     (), r"DPO recipe with loss._component_ = SimPOLoss \(only DPOLoss is modelled: --dpo\)"),
    ("rso.yaml",
     {"model": {"_component_": "torchtune.models.llama3_2.lora_llama3_2_1b"},
      "loss": {"_component_": "torchtune.rlhf.loss.RSOLoss"}},
     (), r"DPO recipe with loss._component_ = RSOLoss .* which is not modelled"),
    ("3B_full_grpo.yaml",
     {"loss": {"_component_": "torchtune.dev.grpo.loss.GRPOSimpleLoss"}, "grpo_samples": 16,
      "ref_checkpointer": CHECKPOINTER},
     (), r"GRPO recipe \(loss._component_ = GRPOSimpleLoss\) .* reference model"),
    ("8B_to_1B_KD_lora_single_device.yaml",
     {"teacher_model": {"_component_": "torchtune.models.llama3_1.llama3_1_8b"},
      "kd_loss": {"_component_": "torchtune.modules.loss.ReverseKLWithChunkedOutputLoss"},
      "kd_ratio": 0.5},
     (), r"knowledge distillation recipe with kd_loss._component_ = "
     r"ReverseKLWithChunkedOutputLoss \(only ForwardKLWithChunkedOutputLoss is modelled"),
    ("1B_qat_full.yaml",
     {"quantizer": {"_component_":
                    "torchtune.training.quantization.Int8DynActInt4WeightQATQuantizer",
                    "groupsize": 256}},
     (), r"QAT recipe .*Int8DynActInt4WeightQATQuantizer.* QAT's fake-quantized copies are not "
     "modelled"),
    ("generation.yaml", {"max_new_tokens": 300, "quantizer": None},
     ("optimizer", "loss"), r"generation recipe \(no optimizer, no loss\) runs no training step"),
    ("eleuther_evaluation.yaml", {"tasks": ["truthfulqa_mc2"], "quantizer": None},
     ("optimizer", "loss"), r"evaluation recipe .* runs no training step"),
    ("quantization.yaml",
     {"quantizer": {"_component_":
                    "torchtune.training.quantization.Int8DynActInt4WeightQuantizer"}},
     ("optimizer", "loss"), r"quantization recipe .* runs no training step"),
    ("1B_full_ppo_low_memory_single_device.yaml",
     {"policy_model": {"_component_": "torchtune.models.llama2.llama2"},
      "reward_and_value_model": {"_component_": "torchtune.models.llama2.llama2_classifier"},
      "loss": {"_component_": "torchtune.rlhf.loss.PPOLoss"}},
     ("model",), r"PPO recipe .* frozen reference policy"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "change", "drop", "said"), KINDS, ids=[k[0] for k in KINDS])
def test_a_recipe_other_than_fine_tuning_is_one_sentence(
    tmp_path: Path, name: str, change: dict[str, Any], drop: tuple[str, ...], said: str
) -> None:
    path = _config(tmp_path, name, change, drop)
    with pytest.raises(ProfilingError) as info:
        read_recipe([path])
    sentence = str(info.value)
    assert sentence.startswith(f"{name}: torchtune's ") and sentence.endswith(": not estimated")
    assert "\n" not in sentence and sentence.count(". ") == 0
    assert re.search(said, sentence), sentence


def test_a_fine_tune_for_grpo_is_still_a_fine_tune(tmp_path: Path) -> None:
    """dev/3B_sft_for_grpo.yaml: torchtune.dev.grpo's dataset, a plain loss — read, not refused."""
    dataset = {"_component_": "torchtune.dev.grpo.gsm8k.gsm8k_sft"}
    recipe = read_recipe([_config(tmp_path, "3B_sft_for_grpo.yaml", {"dataset": dataset})])
    assert recipe.values["loss"] == "linear-chunked"


def test_keys_known_to_move_memory_are_never_left_to_a_flag(tmp_path: Path) -> None:
    """D16: quantizer.*, teacher_*, ref_*, kd_* were 'not a setting this reader knows; if it
    changes memory, say it with a flag', and no flag says them."""
    change = {"kd_ratio": 0.5, "ref_model_scale": 1, "teacher_dtype": "bf16", "quantizer": None}
    recipe = read_recipe([_config(tmp_path, "odd.yaml", change)])
    why = {s.key: s.why for s in recipe.ignored}
    assert why["kd_ratio"].startswith("knowledge distillation's loss")
    assert why["ref_model_scale"].startswith("a frozen reference model")
    assert why["teacher_dtype"].startswith("knowledge distillation's teacher model")
    assert why["quantizer"] == "does not change memory (none)"
    assert not any("say it with a flag" in w for w in why.values())


def test_cli_refuses_simpo_with_a_nonzero_exit(cli, tmp_path: Path) -> None:
    path = _config(tmp_path, "simpo.yaml", KINDS[0][1])
    done = cli("estimate", "--from", str(path), "--target", "cpu", "--no-save", cwd=tmp_path)
    assert done.returncode != 0
    assert "DPO recipe" in done.stderr and "Traceback" not in done.stderr
    assert "Total per GPU" not in done.stdout


TORCHTUNE = Path(__file__).parent / "fixtures" / "torchtune"


def test_dpo_configs_are_read_as_dpo(tmp_path: Path) -> None:
    """#31: torchtune's DPO configs were refused (50c0bb5); now --dpo on twice batch_size rows,
    the reference's checkpoint said once per key, DPOLoss's scalars ignored."""
    lora = read_recipe([TORCHTUNE / "8B_lora_dpo_single_device.yaml"])
    assert lora.values["dpo"] is True and lora.values["batch"] == 8  # batch_size 4 pairs
    assert lora.values["lora_rank"] == 8
    full = read_recipe([TORCHTUNE / "8B_full_dpo.yaml"])
    assert full.values["dpo"] is True and full.values["batch"] == 8
    assert "lora_rank" not in full.values
    why = {s.key: s.why for s in full.ignored}
    assert why["ref_checkpointer.checkpoint_dir"].startswith("the reference's checkpoint")
    assert why["loss.beta"].startswith("does not change memory")
    assert "loss._component_" not in why
    assert not any("say it with a flag" in w for w in why.values())


def test_cli_estimates_dpo(cli, tmp_path: Path) -> None:
    path = TORCHTUNE / "8B_full_dpo.yaml"
    done = cli("estimate", "--from", str(path), "--target", "cpu", "--no-save", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Reference model: weights (frozen copy)" in done.stdout
    assert "seq 1024 × batch 8" in done.stdout


def test_torchtunes_gemma2_chunked_loss_names_its_key_and_a_way_forward(tmp_path: Path) -> None:
    """D24: "cannot model --loss linear-chunked on a model with soft-capped logits (torchtune
    caps none)", though the user gave no --loss and torchtune's Gemma2FinalNorm does cap."""
    gemma2 = {"model": {"_component_": "torchtune.models.gemma2.gemma2_2b"}}
    recipe = read_recipe([_config(tmp_path, "gemma2_2B_full.yaml", gemma2)])
    with pytest.raises(ProfilingError) as info:
        with_recipe(recipe, {"seq": 512})
    said = str(info.value)
    assert said.startswith("gemma2_2B_full.yaml: loss._component_ = LinearCrossEntropyLoss")
    assert "Gemma2FinalNorm" in said and "give --loss cross-entropy" in said
    assert with_recipe(recipe, {"seq": 512, "loss": "cross-entropy"})["loss"] == "cross-entropy"
    # Gemma 1 and Llama keep torchtune's chunked loss
    gemma = {"model": {"_component_": "torchtune.models.gemma.gemma_2b"}}
    values = with_recipe(read_recipe([_config(tmp_path, "gemma_2B.yaml", gemma)]), {"seq": 512})
    assert values["loss"] == "linear-chunked"


def test_kd_configs_are_read_as_kd(tmp_path: Path) -> None:
    """#31: torchtune's KD configs were refused (50c0bb5); now --kd-teacher with the teacher's
    builder as its model, the chunked cross-entropy, batch_size rows, the teacher's checkpoint
    and kd_ratio said once per key."""
    kd = read_recipe([TORCHTUNE / "8B_to_1B_KD_lora_single_device.yaml"])
    assert kd.values["kd_teacher"] == "hf:llama-3.1-8b" and kd.values["model"] == "hf:llama-3.2-1b"
    assert kd.values["loss"] == "chunked" and kd.values["batch"] == 4
    why = {s.key: s.why for s in kd.ignored}
    assert why["kd_ratio"].startswith("does not change memory")
    assert why["teacher_checkpointer.checkpoint_dir"].startswith("does not change memory")
    assert "teacher_model._component_" not in why and "kd_loss._component_" not in why
    assert not any("say it with a flag" in w for w in why.values())


def test_cli_estimates_kd(cli, tmp_path: Path) -> None:
    path = TORCHTUNE / "8B_to_1B_KD_lora_single_device.yaml"
    done = cli("estimate", "--from", str(path), "--seq", "256", "--target", "cpu", "--no-save",
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Teacher model: weights (frozen, knowledge distillation)" in done.stdout
    assert "seq 256 × batch 4" in done.stdout


def test_a_kd_teacher_not_shipped_is_one_sentence_never_the_student_alone(tmp_path: Path) -> None:
    """A teacher the catalogue does not ship (torchtune's Llama 4 Scout builder): estimated without
    it, the step would be the student's fine-tune."""
    text = (TORCHTUNE / "8B_to_1B_KD_lora_single_device.yaml").read_text(encoding="utf-8")
    path = tmp_path / "7B_to_1B_KD.yaml"
    path.write_text(text.replace("llama3_1.llama3_1_8b", "llama4.llama4_scout_17b_16e"), "utf-8")
    recipe = read_recipe([path])
    with pytest.raises(ProfilingError) as info:
        with_recipe(recipe, {"seq": 256})
    said = str(info.value)
    assert "llama4_scout_17b_16e" in said and "give --kd-teacher" in said
    values = with_recipe(recipe, {"seq": 256, "kd_teacher": "hf:llama-3.1-8b"})
    assert values["kd_teacher"] == "hf:llama-3.1-8b"


def test_qwen3_14b_teaches_from_the_catalogue(tmp_path: Path) -> None:
    """qwen3/14B_to_8B_KD_lora_single_device.yaml's teacher, torchtune's qwen3_14b_instruct, is
    the catalogue's Qwen3 14B (40 layers of 5,120, 40 heads, 8 key/value heads, FFN 17,408)."""
    text = (TORCHTUNE / "8B_to_1B_KD_lora_single_device.yaml").read_text(encoding="utf-8")
    path = tmp_path / "14B_to_8B_KD.yaml"
    path.write_text(text.replace("llama3_1.llama3_1_8b", "qwen3.qwen3_14b_instruct"), "utf-8")
    values = with_recipe(read_recipe([path]), {"seq": 256})
    assert values["kd_teacher"] == "hf:qwen3-14b"
