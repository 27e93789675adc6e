"""torchtune's distributed recipes (``full_finetune_distributed``, ``lora_finetune_distributed``)
shard the model with FSDP2 whatever the GPU count: there is no DDP among them. Their configs
(``recipes/configs/<model>/<size>_full.yaml``, ``_lora.yaml``: the names without
``_single_device``) are read as the recipe runs them (pytorch/torchtune at bd2a0fc):

- ``training.shard_model`` (torchtune/training/_distributed.py) calls ``fully_shard`` on every
  ``layers.<i>`` (``get_shard_conditions``) with ``reshard_after_forward`` =
  ``fsdp_reshard_after_forward`` (default True: ``--fsdp``, ZeRO-3; False: ``--zero 2``), then
  on the whole model with ``reshard_after_forward=False``: the root's parameters (embeddings,
  final norm, output) stay gathered from the forward through the loss — which
  ``LinearCrossEntropyLoss.compute_cross_entropy`` runs with ``model.output`` outside the model's
  forward — and backward, as the estimate's root is.
- ``custom_sharded_layers`` (``['tok_embeddings', 'output']`` in the 70B configs) gives those
  modules FSDP groups of their own, gathered only while they run: counted in the root's group,
  gathered through the step, an upper bound.
- ``fsdp_cpu_offload``: ``CPUOffloadPolicy`` — the optimizer steps on the CPU
  (``--offload-optimizer``); the sharded parameters and gradients it also keeps in host memory
  are counted on the GPU, an upper bound.
- ``data_parallel_replicate_dim`` (HSDP) and ``tensor_parallel_dim`` are plans not read here.
"""

from __future__ import annotations

from profiling.recipes.recipe import (
    FSDP_OFFLOAD,
    NO_MEMORY,
    Reading,
    Recipe,
    Setting,
    unmodelled_loss,
)

# Keys only the distributed recipes read (recipes/full_finetune_distributed.py, __init__ and
# setup): a config holding one is theirs whatever its name.
DISTRIBUTED_KEYS = (
    "fsdp_cpu_offload",
    "fsdp_reshard_after_forward",
    "custom_sharded_layers",
    "data_parallel_shard_dim",
    "data_parallel_replicate_dim",
    "tensor_parallel_dim",
    "tensor_parallel_plan._component_",
)
_SHARDED = "torchtune's distributed recipes shard every layer and the root with FSDP2"
DISTRIBUTED = "(full/lora_finetune_distributed)"


def on_gpus(recipe: Recipe, gpus: int) -> None:
    """A torchtune config run on ``gpus`` > 1 GPUs runs a distributed recipe, which shards
    (there is no DDP among them): ``--fsdp`` unless the file said so already, and a stack's
    loss not modelled under FSDP moves to the ignored (``recipe.unmodelled_loss``)."""
    if gpus <= 1 or recipe.framework != "torchtune" or recipe.values.get("fsdp"):
        return
    if any(recipe.values.get(k) for k in ("dp_shard", "dp_replicate", "tp", "pp", "cp")):
        return  # a plan's degrees: sharded as the plan says
    recipe.values["fsdp"] = True
    recipe.used.append(
        Setting(file=recipe.files[0], key=DISTRIBUTED, value="", field="fsdp", to=True,
                why=f"{_SHARDED} (training.shard_model) on --gpus {gpus}: no DDP among them")
    )  # fmt: skip
    unmodelled_loss(recipe)


def distributed(r: Reading) -> bool:
    """Whether the file is a distributed recipe's config by its keys (one only those recipes
    read). A config without one (``1B_full.yaml`` sets none) is theirs once it runs on more
    than one GPU: :func:`on_gpus`."""
    return any(r.has(k) for k in DISTRIBUTED_KEYS)


def read_fsdp(r: Reading) -> None:
    """FSDP2 as ``shard_model`` applies it, and what of its keys moves memory."""
    r.imply(DISTRIBUTED, "fsdp", True, f"{_SHARDED} (training.shard_model): give --gpus N")
    if r.get("fsdp_reshard_after_forward", True) is False:
        r.use("fsdp_reshard_after_forward", "zero", 2,
              "every layer's shards and, from its forward to its backward, its gathered "
              "parameters (SHARD_GRAD_OP)")  # fmt: skip
    elif r.has("fsdp_reshard_after_forward"):
        r.use("fsdp_reshard_after_forward", "zero", 3, "layers resharded after forward")
    if r.get("fsdp_cpu_offload"):
        r.use("fsdp_cpu_offload", "offload_optimizer", True, FSDP_OFFLOAD)
    else:
        r.ignore("fsdp_cpu_offload", NO_MEMORY + " (off)")
    if r.get("custom_sharded_layers"):
        r.ignore(
            "custom_sharded_layers",
            "groups of their own, gathered only while they run: counted in the root's group, "
            "gathered through the step (an upper bound)",
        )
    else:
        r.ignore("custom_sharded_layers", NO_MEMORY + " (none)")
    r.ignore("data_parallel_shard_dim", NO_MEMORY + " (-1: every GPU --gpus gives)")
    r.ignore("tensor_parallel_plan._component_", NO_MEMORY + " (the plan tensor_parallel_dim "
             "> 1 applies)")  # fmt: skip
    for key in ("data_parallel_replicate_dim", "tensor_parallel_dim"):
        if (r.get(key) or 1) > 1:
            r.ignore(key, "HSDP / tensor parallelism under torchtune: not modelled; give the "
                     "plan's degrees")  # fmt: skip
        else:
            r.ignore(key, NO_MEMORY + " (1)")


__all__ = ["DISTRIBUTED_KEYS", "distributed", "on_gpus", "read_fsdp"]
