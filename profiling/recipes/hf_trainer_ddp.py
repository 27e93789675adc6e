"""The Hugging Face Trainer's DDP (``--gpus N`` without FSDP or DeepSpeed): what it passes to
torch's DistributedDataParallel through accelerate's ``DistributedDataParallelKwargs``.

transformers 5.24 ``Trainer._build_accelerator_args`` (trainer.py): ``find_unused_parameters``
is ``ddp_find_unused_parameters`` when given, else for a ``PreTrainedModel`` ``not
(model.is_activation_checkpointing or args.activation_checkpointing)`` — True without gradient
checkpointing — and True for any other module (peft's ``PeftModel`` is a ``torch.nn.Module``,
not a ``PreTrainedModel``: peft/peft_model.py); ``bucket_cap_mb``, ``broadcast_buffers`` and
``static_graph`` only when set. What find_unused costs is ``profiling._config_ddp``'s; a static
graph runs DDP's sink in the first step alone and rebuilds the buckets (torch
``DistributedDataParallel._post_forward``, ``_pre_forward``): the steady step is the default's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling._config_ddp import runs_ddp
from profiling.recipes.recipe import NO_MEMORY, Reading

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.recipes.recipe import Recipe

FIELD = "ddp_find_unused"
KEY = "ddp_find_unused_parameters"
STATIC = "ddp_static_graph"


def read_ddp(r: Reading) -> None:
    """find_unused_parameters as the Trainer decides it for a transformers model."""
    if r.get(STATIC):
        r.use(STATIC, FIELD, False, "a static graph: DDP's sink runs in the first step alone "
              "and the buckets are rebuilt, as without find_unused_parameters")  # fmt: skip
        r.seen(KEY, main=STATIC)
        return
    r.ignore(STATIC, NO_MEMORY + " (off)")
    given = r.get(KEY)
    checkpointed = any(r.get(k) for k in ("activation_checkpointing", "gradient_checkpointing"))
    if given is not None:
        r.use(KEY, FIELD, bool(given), "DDP's find_unused_parameters as given")
    elif checkpointed:
        r.ignore(KEY, NO_MEMORY + " (unset: with gradient checkpointing the Trainer passes "
                 "find_unused_parameters=False)")  # fmt: skip
    else:
        r.imply(KEY, FIELD, True, "the Trainer's DDP of a transformers model without gradient "
                "checkpointing: find_unused_parameters=True, each output cloned at forward's "
                "end (on --gpus N without sharding)")  # fmt: skip


def ddp_over_peft(trainer: Reading, readings: list[Reading]) -> None:
    """peft's model is no ``PreTrainedModel``: the Trainer passes find_unused_parameters=True
    for it whatever the checkpointing, unless the file says otherwise."""
    lora = any(s.field == "lora_rank" for r in readings for s in r.used)
    if not lora or trainer.get(KEY) is not None or trainer.get(STATIC):
        return
    trainer.used = [s for s in trainer.used if s.field != FIELD]
    trainer.ignored = [s for s in trainer.ignored if s.key != KEY]
    trainer.imply(KEY, FIELD, True, "the Trainer's DDP of peft's model (no PreTrainedModel): "
                  "find_unused_parameters=True, checkpointed or not")  # fmt: skip


def off_ddp(recipe: Recipe, cfg: TrainingConfig, given: dict[str, Any]) -> TrainingConfig:
    """``cfg`` without the recipe's find_unused_parameters where the step runs no DDP (one GPU,
    or sharded), which is listed ignored, saying why. The Trainer's files imply it for every
    run (:func:`read_ddp`), so the estimate's note that ``--ddp-find-unused`` changes nothing
    off DDP is kept for a flag the user gave (``given``)."""
    if FIELD in given or not cfg.ddp_find_unused or runs_ddp(cfg):
        return cfg
    where = "one GPU" if cfg.gpus == 1 else "sharded, with no DDP among the ranks"
    for setting in [s for s in recipe.used if s.field == FIELD]:
        recipe.used.remove(setting)
        why = (f"{NO_MEMORY}: find_unused_parameters is DistributedDataParallel's, which this "
               f"step does not run ({where})")  # fmt: skip
        recipe.ignored.append(setting.model_copy(update={"to": None, "why": why}))
    recipe.values.pop(FIELD, None)
    return cfg.model_copy(update={FIELD: False})


__all__ = ["ddp_over_peft", "off_ddp", "read_ddp"]
