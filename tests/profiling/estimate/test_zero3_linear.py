"""DeepSpeed ZeRO-3 replaces ``F.linear`` with its own (zero.Init, never restored), which saves
every linear's input whether its weight needs a gradient or not: under LoRA the frozen layers'
inputs and the frozen LM head's stay saved (``profiling.estimate.zero3_linear``). PEFT's README
measured 18.1 GB for bloomz-7b1 LoRA under ZeRO-3 with CPU offload (benchmarks/peer/rows.json,
peft/README/bloomz-7b1/lora-deepspeed-offload), where the estimate said 15.4 GB without them."""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate

# the peer row's configuration (PEFT 73d7224: pet_lora_clm_accelerate_ds_zero3_offload.py)
BLOOMZ = {"model": "hf:bloom-7b1", "precision": "fp32", "optimizer": "adamw", "foreach": False,
          "batch": 8, "seq": 64, "lora_rank": 8, "lora_targets": ["q", "v"],
          "lora_dropout": 0.1}  # fmt: skip
ZERO3 = {"zero": 3, "deepspeed": True, "offload_optimizer": True, "offload_param": True}


def test_zero3_keeps_the_frozen_linears_inputs() -> None:
    plain = estimate(TrainingConfig(**BLOOMZ))
    freed = sum(c.bytes for c in plain.components if "not kept" in c.name and "frozen" in c.name)
    assert freed < -1.7e9  # four frozen linears' inputs a block, 30 blocks, and the head's
    zero3 = estimate(TrainingConfig(**BLOOMZ, **ZERO3))
    assert not [c.name for c in zero3.components if "frozen" in c.name and "not kept" in c.name]
    # the published 18.1 GB (the script's max_memory_allocated): now within 6 %, safe side not
    # yet reached (the engine's own ~0.9 GB is not known: no log of this run is published)
    assert 17.0e9 < zero3.per_gpu_bytes < 18.1e9


def test_zero2_and_the_zero_papers_sharding_are_unchanged() -> None:
    # ZeRO-2 builds no zero.Init, and --zero 3 without --deepspeed is FSDP-like sharding with
    # torch's own linear: the frozen layers' inputs are freed
    for over in ({"zero": 2, "deepspeed": True}, {"zero": 3}, {}):
        e = estimate(TrainingConfig(**BLOOMZ, **over))
        assert any("frozen" in c.name and "not kept" in c.name for c in e.components), over
