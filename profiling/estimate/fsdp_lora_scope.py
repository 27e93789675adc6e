"""Which sharded LoRA steps FSDP2 runs as the trace does, and what of a 4-bit base it leaves
whole on every rank. Only the configuration here: ``fsdp_lora`` (the moments) and ``states``
(the model states) both ask, and neither may import the other (tests/foundation/test_layers)."""

from __future__ import annotations

from profiling.config import TrainingConfig


def lora_fsdp2(cfg: TrainingConfig) -> bool:
    """Whether the step is LoRA on FSDP2 with the layers resharded after forward, as the trace
    runs it (not FSDP1's flat parameters, DeepSpeed's engine, QLoRA's or DoRA's adapters): peft's
    adapters applied before ``fully_shard`` (trace.build._build), which makes every parameter a
    DTensor, trainable or not — torchtune's ``lora_finetune_distributed`` sets its adapters
    trainable, then shards every layer and the root (trace.lora.lora_problem, Llama's kind)."""
    return _peft_under_fsdp2(cfg) and cfg.zero == 3


def lora_fsdp2_traced(cfg: TrainingConfig) -> bool:
    """Whether the trace runs this sharded LoRA step: FSDP2's ``fully_shard`` over peft's layers,
    resharding after forward (``lora_fsdp2``) or not (``--zero 2``: ``fsdp_no_reshard``)."""
    return _peft_under_fsdp2(cfg) and cfg.zero in (2, 3)


def _peft_under_fsdp2(cfg: TrainingConfig) -> bool:
    """LoRA on more than one GPU under FSDP2's ``fully_shard`` (not FSDP1's flat parameters,
    DeepSpeed's engine, DoRA's magnitudes or torchao's NF4), whatever the resharding."""
    return (
        cfg.lora_rank is not None
        and cfg.fsdp
        and cfg.gpus > 1
        and not (cfg.fsdp_flat or cfg.deepspeed or cfg.dora)
        and not (cfg.qlora and cfg.torchao_nf4)
    )


def nf4_whole(cfg: TrainingConfig, nf4: float, linears: list[int], layers: int) -> int:
    """Of bitsandbytes' 4-bit base (``nf4`` bytes: the packed weights of ``linears`` in each of
    ``layers`` blocks and their QuantStates), what FSDP2 leaves whole on every rank: it shards
    the packed uint8 storage alone, the QuantState being ``Params4bit``'s attribute, not a
    parameter (``trace.nf4.stats_as_buffers``); 0 where nothing is left whole."""
    if not (lora_fsdp2_traced(cfg) and cfg.qlora and not cfg.torchao_nf4):
        return 0
    return int(nf4) - layers * sum((n + 1) // 2 for n in linears)


__all__ = ["lora_fsdp2", "lora_fsdp2_traced", "nf4_whole"]
