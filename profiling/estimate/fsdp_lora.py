"""LoRA under FSDP2 (torchtune's ``lora_finetune_distributed``): what is gathered, and when.
No torch here.

FSDP2 shards the frozen base beside the adapters (``fully_shard`` makes every parameter of a
group a DTensor, trainable or not) and gathers a block's whole group — its frozen weights and
its A and B — in the gathered dtype (``MixedPrecisionPolicy.param_dtype``: bf16 under
``mixed``, whose shards stay fp32: ``TrainingConfig.param_dtype``). The trace shards every
``layers.<i>`` and then the root, each with ``reshard_after_forward=True`` given
(trace.build._shard), so the root too reshards after forward: ``FSDPState._lazy_init`` keeps
the root's parameters only where ``reshard_after_forward`` was left None (torch 2.13
``_fully_shard/_fsdp_state.py``). The moments:

- at the loss (``lora_gathered``): the root gathered and the last block's all-gather output,
  held in ``comm_ctx.all_gather_state`` until the root's ``FSDPState._post_forward`` — the
  loss runs inside the root's forward (ccafb0f: 0.866-0.909 of the trace at 256 tokens before);
- forward's copy-outs (``lora_forward``): ``wait_for_unshard`` frees the previous group's
  all-gather output only when it returns (its local ``prev_all_gather_state``), after this
  group's copy-out: block 0's holds (2·root + 2·block)·g, block i's (root + 3·block)·g beside
  blocks 0..i − 1's saved tensors (16 tokens: 0.69-0.79 of the trace before);
- backward's start: the root gathered again, its all-gather output beside its parameters
  (2·root·g), with every activation of the end of forward (a large vocabulary on few tokens).
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.fsdp_lora_scope import lora_fsdp2, lora_fsdp2_traced
from profiling.estimate.ledger import Ledger, Line
from profiling.estimate.states import gathered_bytes, lora_adapters
from profiling.units import fmt_count


def lora_gathered(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], t: int) -> None:
    """At the loss: the root gathered (with an adapted head's A and B) and the last block's
    all-gather output (its frozen weights and adapters), in the gathered dtype."""
    root, block = shape.get("root_params"), shape.get("block_params")
    if not lora_fsdp2(cfg) or not root or not block:
        return
    root_n, block_n = group_params(cfg, shape)
    head, per_block = root_n - int(root), block_n - int(block)
    g = gathered_bytes(cfg)
    n = root_n + block_n
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


def group_params(cfg: TrainingConfig, shape: dict[str, Any]) -> tuple[int, int]:
    """The parameters FSDP2 gathers for the root's group (with an adapted head's A and B) and
    for one block's (its frozen weights and its adapters)."""
    L, r = int(shape["layers"]), int(cfg.lora_rank or 0)
    adapters = lora_adapters(cfg, shape)[0]
    head = r * (int(shape["hidden"]) + int(shape.get("vocab") or 0))
    head *= "lm_head" in cfg.lora_targets
    per_block = (adapters - head) // L
    block = int(shape["block_params"]) + per_block
    linears = shape.get("block_linear_numels")
    if cfg.qlora and linears:  # bitsandbytes' packed uint8 storage, n/2 B, in gathered params
        g = gathered_bytes(cfg)
        block += -(-sum((int(n) + 1) // 2 for n in linears) // g) - sum(int(n) for n in linears)
    return int(shape["root_params"]) + head, block


def unchecked_note(cfg: TrainingConfig) -> str | None:
    """A sharded LoRA step the trace refuses (``trace.lora.lora_problem``: FSDP2's
    ``fully_shard`` over peft's layers is all it runs) is said to be the closed form alone, with
    why — never silently (#31, #32)."""
    if cfg.lora_rank is None or not (cfg.fsdp or cfg.sharded) or cfg.gpus < 2:
        return None
    if lora_fsdp2_traced(cfg):
        return None
    what = [
        w
        for on, w in (
            (cfg.qlora, "QLoRA's 4-bit base here (bitsandbytes' under FSDP2 alone is traced)"),
            (cfg.dora, "DoRA (its magnitude vector under FSDP2 is not traced)"),
            (cfg.fsdp_flat, "FSDP1's flat parameters"),
            (cfg.deepspeed, "DeepSpeed's engine"),
            (not cfg.fsdp and cfg.zero in (1, 2), f"ZeRO-{cfg.zero} without --fsdp"),
            (cfg.fsdp and cfg.zero not in (2, 3), f"--fsdp with --zero {cfg.zero}"),
        )
        if on
    ]
    if not what:
        return None
    return (
        f"unchecked: the trace does not run LoRA with {' and '.join(what)}, so this figure is "
        "the closed form alone, never compared with a trace (trace --compare-estimate refuses "
        "it); LoRA under --fsdp (ZeRO-3, or --zero 2) without these is traced"
    )


__all__ = [
    "group_params",
    "lora_gathered",
    "unchecked_note",
]
