"""LoRA under FSDP2 (torchtune's ``lora_finetune_distributed``): what is gathered at the loss.
No torch here.

FSDP2 shards the frozen base beside the adapters (``fully_shard`` makes every parameter of a
group a DTensor, trainable or not) and gathers a block's whole group — its frozen weights and
its A and B — in forward, in the gathered dtype (``MixedPrecisionPolicy.param_dtype``: bf16
under ``mixed``). torchtune shards every ``layers.<i>`` and then the root with
``reshard_after_forward=False`` (torchtune/training/_distributed.py ``shard_model``), as the
trace does; so at the loss the root is gathered, and the last block's all-gather output is
still held in ``comm_ctx.all_gather_state`` until the root's ``FSDPState._post_forward`` (torch
2.13 ``_fully_shard/_fsdp_param_group.py`` ``wait_for_unshard``, ``_fsdp_state.py``) — the
loss runs inside the root's forward. The estimate counted no gathered parameter under LoRA
(ZeRO-3's gathered line left LoRA out): a tiny Llama (h 256, V 2,048, 2 blocks, q and v
adapted, 256 tokens, 2 GPUs) read 0.866-0.909 of the trace with PyTorch's loss, 0.83-0.88 with
torchtune's chunked losses — (root + block)·g below.
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.ledger import Ledger, Line
from profiling.estimate.states import gathered_bytes, lora_adapters
from profiling.units import fmt_count


def lora_fsdp2(cfg: TrainingConfig) -> bool:
    """Whether the step is LoRA on FSDP2 with the layers resharded after forward, as the trace
    runs it (not FSDP1's flat parameters, DeepSpeed's engine, QLoRA's or DoRA's adapters): peft's
    adapters applied before ``fully_shard`` (trace.build._build), which makes every parameter a
    DTensor, trainable or not — torchtune's ``lora_finetune_distributed`` sets its adapters
    trainable, then shards every layer and the root (trace.lora.lora_problem, Llama's kind)."""
    return (
        cfg.lora_rank is not None
        and cfg.fsdp
        and cfg.zero == 3
        and cfg.gpus > 1
        and not (cfg.fsdp_flat or cfg.deepspeed or cfg.qlora or cfg.dora)
    )


def lora_gathered(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], t: int) -> None:
    """At the loss: the root gathered (with an adapted head's A and B) and the last block's
    all-gather output (its frozen weights and adapters), in the gathered dtype."""
    root, block = shape.get("root_params"), shape.get("block_params")
    if not lora_fsdp2(cfg) or not root or not block:
        return
    L, r = int(shape["layers"]), int(cfg.lora_rank or 0)
    adapters = lora_adapters(cfg, shape)[0]
    head = r * (int(shape["hidden"]) + int(shape.get("vocab") or 0))
    head *= "lm_head" in cfg.lora_targets
    per_block = (adapters - head) // L
    g = gathered_bytes(cfg)
    n = int(root) + head + int(block) + per_block
    div = f" / {t}" if t > 1 else ""
    ledger.add(
        Line(
            name="FSDP2 gathered parameters under LoRA (the root and one block, at the loss)",
            bytes=n * g / t,
            unsharded=0,
            formula=f"(root + block + the block's adapters) · {g} B" + (" / t" if t > 1 else ""),
            substituted=f"({fmt_count(int(root) + head)} + {fmt_count(int(block))} + "
            f"{fmt_count(per_block)}) · {g}{div}",
            group="overhead",
            category="parameters",
        )
    )


__all__ = ["lora_fsdp2", "lora_gathered"]
