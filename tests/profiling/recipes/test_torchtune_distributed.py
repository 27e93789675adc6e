"""torchtune's distributed recipes' configs (#31 D11): ``--from 1B_full.yaml --gpus 4`` was
estimated as four unsharded replicas, while ``full_finetune_distributed`` shards every layer and
the root with FSDP2 (torchtune/training/_distributed.py ``shard_model``) — there is no DDP among
torchtune's recipes. The fixtures are torchtune's own files (fixtures/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.recipes import read_recipe, with_recipe

TUNE = Path(__file__).parent / "fixtures" / "torchtune"


def _said(recipe, key: str) -> str:
    return next(s.line() for s in recipe.used + recipe.ignored if s.key == key)


def test_a_distributed_config_on_gpus_shards_with_fsdp2() -> None:
    recipe = read_recipe([TUNE / "1B_full.yaml"])
    assert "fsdp" not in recipe.values  # the file names no GPU count and no FSDP key
    sharded = TrainingConfig.parse(**with_recipe(recipe, {"gpus": 4, "seq": 512}))
    assert sharded.fsdp and sharded.zero == 3 and sharded.gpus == 4
    assert "no DDP" in _said(recipe, "(full/lora_finetune_distributed)")
    # torchtune's LinearCrossEntropyLoss is kept (estimated under FSDP2 now), not swapped
    assert sharded.loss == "linear-chunked"
    one = TrainingConfig.parse(**with_recipe(read_recipe([TUNE / "1B_full.yaml"]), {"seq": 512}))
    assert not one.fsdp
    # States a quarter of one GPU's (1.24B parameters: bf16 weights, gradients, two moments)
    est, alone = estimate(sharded), estimate(one)
    assert est.category_bytes("weights") * 4 == alone.category_bytes("weights")
    assert est.category_bytes("optimizer") * 4 <= alone.category_bytes("optimizer") + 4 * 4096
    assert est.per_gpu_bytes < alone.per_gpu_bytes - 5 * 10**9


def test_the_fsdp_keys_are_read_as_shard_model_takes_them() -> None:
    recipe = read_recipe([TUNE / "70B_full.yaml"])  # custom_sharded_layers, fsdp_cpu_offload
    v = recipe.values
    assert v["fsdp"] is True  # a key only the distributed recipes read: FSDP on any GPU count
    assert v["offload_optimizer"] is True  # CPUOffloadPolicy
    assert "an upper bound" in _said(recipe, "custom_sharded_layers")
    assert "not a setting" not in _said(recipe, "tensor_parallel_plan._component_")
    cfg = TrainingConfig.parse(
        **with_recipe(recipe, {"model": "hf:llama-3.1-70b", "gpus": 8, "seq": 2048})
    )
    assert cfg.fsdp and cfg.offload_optimizer and cfg.loss == "linear-chunked"
    assert estimate(cfg).category_bytes("optimizer") == 0  # the states step on the CPU


def test_without_resharding_the_chunked_loss_is_read_with_lora_said_not_modelled(
    tmp_path: Path,
) -> None:
    text = (TUNE / "1B_full.yaml").read_text(encoding="utf-8")
    path = tmp_path / "1B_full.yaml"
    path.write_text(text + "fsdp_reshard_after_forward: False\n", encoding="utf-8")
    kept = read_recipe([path])
    assert kept.values["fsdp"] is True and kept.values["zero"] == 2
    # estimated as traced now (the last block's all-gather output held at the loss: 0.89-0.93
    # of the trace before, when it was refused)
    assert kept.values["loss"] == "linear-chunked"
    lora = read_recipe([TUNE / "8B_lora.yaml"])
    cfg = TrainingConfig.parse(**with_recipe(lora, {"gpus": 2, "seq": 1024}))
    assert cfg.fsdp and cfg.lora_rank == 8 and cfg.loss == "cross-entropy"
    assert "with LoRA" in _said(lora, "loss._component_")
