"""DeepSpeed ZeRO-3's own Linear: every ``F.linear`` keeps its input, frozen weight or not.

``deepspeed.zero.Init`` — the context transformers' ``from_pretrained`` builds a model in when
ZeRO-3 is configured (the Trainer's ``deepspeed`` argument, accelerate's ``zero3_init_flag``) —
replaces ``torch.nn.functional.linear`` with ``zero3_linear_wrap`` when ``memory_efficient_linear``
is on (the default), and nothing restores it: "This will persist unless manually reset"
(deepspeed/runtime/zero/partition_parameters.py, ``InsertPostInitMethodToModuleSubClasses``:
the restore in ``__exit__`` commented out at bf6b9802c, v0.8.0; never restored at 38327e07f,
2025). ``LinearFunctionForZeroStage3.forward`` (deepspeed/runtime/zero/linear.py, both commits)
calls ``ctx.save_for_backward(input, ...)`` whatever needs a gradient, so under LoRA the frozen
layers' inputs, which PyTorch's own linear frees, stay saved until backward — and the frozen LM
head's input too. A bitsandbytes 4-bit layer runs its own matmul, not ``F.linear``. No torch
here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Term


def keeps_linear_inputs(cfg: TrainingConfig) -> bool:
    """Whether every ``F.linear`` of the step keeps its input (DeepSpeed ZeRO-3, not QLoRA)."""
    return bool(cfg.deepspeed) and cfg.zero == 3 and not cfg.qlora


def kept(terms: list[Term], cfg: TrainingConfig) -> list[Term]:
    """``terms`` less those that free a frozen linear's input, where ZeRO-3's linear keeps it."""
    if not keeps_linear_inputs(cfg):
        return terms
    return [t for t in terms if not (t.name.startswith("frozen") and "not kept" in t.name)]


__all__ = ["keeps_linear_inputs", "kept"]
