"""A checkpoint folder given to --from: every configuration file in it read or named (the
reviewer's D9: benchmarks/hf_peft/qlora-ckpt's bnb_config.json was dropped unsaid, and the
folder estimated as plain LoRA on a 16-bit base, "LoRA r=16", 19.27 GB)."""

from __future__ import annotations

import shutil
from pathlib import Path

from profiling.recipes import read_recipe

QLORA_CKPT = Path(__file__).parents[3] / "benchmarks" / "hf_peft" / "qlora-ckpt"


def test_a_bitsandbytes_config_beside_the_checkpoint_is_read(tmp_path: Path) -> None:
    recipe = read_recipe([QLORA_CKPT])
    assert "bitsandbytes" in recipe.framework
    assert recipe.values["qlora"] is True and recipe.values["double_quant"] is True
    assert recipe.values["lora_rank"] == 16
    # The same file under transformers' own name reads the same
    folder = tmp_path / "ckpt"
    shutil.copytree(QLORA_CKPT, folder)
    (folder / "bnb_config.json").rename(folder / "quantization_config.json")
    assert read_recipe([folder]).values["qlora"] is True


def test_a_folders_file_no_reader_knows_is_named() -> None:
    recipe = read_recipe([QLORA_CKPT])
    assert any("run.json: not read" in n for n in recipe.notes)
    assert not any("args.json: not read" in n for n in recipe.notes)
