"""torchtune's activation offloading (--activation-offload, enable_activation_offloading): under
full checkpointing the blocks' inputs go to pinned host memory, two stay on the GPU while a block
is recomputed; the host block says their bytes and judges them against --cpu-mem."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError
from profiling.estimate import recomputed_llama
from profiling.estimate.memory import estimate, render_text
from profiling.recipes import read_recipe, with_recipe

FIXTURES = Path(__file__).parents[1] / "recipes" / "fixtures" / "torchtune"
BASE = {"model": "llama-1b", "seq": 2048, "batch": 4, "precision": "bf16", "checkpointing": "full"}


def _line(est, prefix: str) -> int:
    (c,) = [c for c in est.components if c.name.startswith(f"Activations: {prefix}")]
    return c.bytes


def test_offload_moves_all_but_two_block_inputs_to_the_host() -> None:
    kept = estimate(TrainingConfig.parse(**BASE))
    off = estimate(TrainingConfig.parse(**BASE, activation_offload=True, cpu_mem=64))
    L, h = int(off.shape["layers"]), int(off.shape["hidden"])
    block = 2048 * 4 * h * 2  # s·b·h, bf16 residual stream
    assert _line(kept, "block inputs (checkpoints)") == L * block
    assert _line(off, "block inputs (checkpoints) brought back") == 2 * block
    # Every moment of forward and backward carries the block inputs: each drops by exactly the
    # L − 2 offloaded; the optimizer step (the peak of this full bf16 AdamW step) holds none.
    before = {m.name: m.bytes for m in kept.moments}
    after = {m.name: m.bytes for m in off.moments}
    assert before.keys() == after.keys()
    drops = {name: before[name] - after[name] for name in before}
    assert drops.pop("optimizer step") == 0
    # a recomputed block's MLP going back (its first block's, here) holds the two inputs
    # brought back, one more than the first block's own checkpoint kept on the GPU
    assert drops.pop(recomputed_llama.NAME) == -block
    # the embedding going back (cb1863f): every block has gone back, no block input is held
    # with or without offloading
    assert drops.pop("backward, the embedding") == 0
    assert set(drops.values()) == {(L - 2) * block}
    assert "backward, a block recomputed" in drops
    host = off.deepspeed["host"]
    assert [(x["bytes"], x["pinned"]) for x in host["lines"]] == [(L * block, True)]
    assert host["per_node_bytes"] == L * block and host["fits"] is True
    text = render_text(off)
    assert "offloaded by torchtune's activation offloading" in text
    assert f"{L}·2048·4·{h}·2 B, pinned" in text
    assert kept.deepspeed is None or "host" not in kept.deepspeed


def test_host_memory_too_small_is_a_step_that_does_not_fit() -> None:
    est = estimate(TrainingConfig.parse(**BASE, activation_offload=True, cpu_mem=0.1))
    assert est.fits is False
    assert "❌ host memory does not fit" in render_text(est)


def test_offload_without_full_checkpointing_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="--activation-offload is torchtune's"):
        TrainingConfig.parse(**{**BASE, "checkpointing": "none"}, activation_offload=True)
    # --cpu-mem still needs something that uses the host.
    with pytest.raises(ConfigError, match="--cpu-mem is a setting of DeepSpeed"):
        TrainingConfig.parse(**BASE, cpu_mem=64)


def test_the_trace_refuses_it_in_one_clause() -> None:
    from profiling.trace.untraceable import untraceable

    problems = untraceable(TrainingConfig.parse(**BASE, activation_offload=True))
    assert any("--activation-offload" in p for p in problems)


def test_torchtune_recipe_with_offloading_reads_into_the_estimate(tmp_path: Path) -> None:
    text = (FIXTURES / "1B_full_single_device.yaml").read_text(encoding="utf-8")
    text = text.replace(
        "enable_activation_checkpointing: False", "enable_activation_checkpointing: True"
    )
    text = text.replace("enable_activation_offloading: False", "enable_activation_offloading: True")
    path = tmp_path / "1B_full_offload.yaml"
    path.write_text(text, encoding="utf-8")
    recipe = read_recipe([path])
    assert recipe.values["activation_offload"] is True
    assert recipe.values["checkpointing"] == "full"
    est = estimate(TrainingConfig.parse(**with_recipe(recipe, {"seq": 2048})))
    L, h = int(est.shape["layers"]), int(est.shape["hidden"])
    assert est.deepspeed["host"]["lines"][0]["bytes"] == L * 2048 * 4 * h * 2
