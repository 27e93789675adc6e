"""The Trainer's arguments that change what its step runs beyond precision, optimizer and
sharding (transformers 5.24: trainer.py, training_args.py, modeling_utils.py,
modeling_layers.py, integrations/liger.py; accelerate 1.15 accelerator.py), each used or refused
in one sentence in the file's own keys:

- ``gradient_accumulation_steps`` N > 1: the micro-batches before the last run under
  ``accelerator.no_sync`` (Trainer's inner loop, unless ``accelerator_config``'s
  ``gradient_accumulation_kwargs.sync_each_batch``): one GPU or DDP keeps the gradients through
  the later micro-batches' forward; FSDP (``set_requires_gradient_sync(False)``) keeps every
  rank's unsharded gradients (``--accumulate-unsharded N``); DeepSpeed reduces as it goes;
- ``activation_checkpointing_kwargs`` (or ``gradient_checkpointing_kwargs``): ``every_n_layers``
  checkpoints one decoder layer in N, ``offload`` saves the checkpointed inputs in pinned host
  memory (``save_on_cpu`` around ``checkpoint``), the rest goes to torch's checkpoint;
- ``use_liger_kernel`` with ``liger_kernel_config``: Liger's fused linear cross-entropy unless
  the config turns it off;
- ``label_smoothing_factor``: the Trainer's ``LabelSmoother`` computes the loss from the logits
  (refused); ``use_cache`` without checkpointing keeps every layer's keys and values (refused);
  ``use_cpu``: the CPU's kernels; ``parallelism_config``, ``accelerator_config.split_batches``,
  ``debug`` underflow_overflow: refused; ``neftune_noise_alpha``: one noise tensor beside the
  embedding's output during the forward's first op.

No torch, no framework.
"""

from __future__ import annotations

from profiling.recipes.recipe import NO_MEMORY, Reading, Recipe

_SYNC = "accelerator_config.gradient_accumulation_kwargs.sync_each_batch"


def read_step_keys(r: Reading) -> None:
    """Every key of the module's list."""
    _accumulation(r)
    _checkpoint_kwargs(r)
    _liger(r)
    _refused(r)
    if r.get("use_cpu"):
        r.use("use_cpu", "target", "cpu", "the Trainer trains on the CPU: its kernels' tensors")
    elif r.has("use_cpu"):
        r.ignore("use_cpu", NO_MEMORY + " (off)")
    if r.get("neftune_noise_alpha"):
        r.ignore("neftune_noise_alpha", "NEFTune's noise, one tensor of the embedding's output "
                 "made and added at the forward's start, freed before the first block: below "
                 "the step's peak")  # fmt: skip
    elif r.has("neftune_noise_alpha"):
        r.ignore("neftune_noise_alpha", NO_MEMORY + " (off)")
    for key in r.unseen("accelerator_config"):
        r.ignore(key, "how accelerate deals the batches and syncs: " + NO_MEMORY)


def _on(r: Reading, field: str) -> bool:
    return any(s.field == field and s.to for s in r.used)


def _accumulation(r: Reading) -> None:
    n = int(r.get("gradient_accumulation_steps", 1) or 1)
    if n <= 1:
        r.ignore("gradient_accumulation_steps", NO_MEMORY + " (no accumulation)")
        return
    if not _on(r, "fsdp") or str(r.get(_SYNC)).lower() == "true":
        r.use("gradient_accumulation_steps", "grads_kept", True,
              "gradients stay allocated through the later micro-batches' forward")  # fmt: skip
        r.seen(_SYNC, main="gradient_accumulation_steps")
        return
    if _on(r, "offload_optimizer"):
        r.refuse("gradient_accumulation_steps", f"{r.file}: gradient_accumulation_steps = {n} "
                 "under fsdp's offload is not estimated: accelerate's no_sync keeps each rank's "
                 "unsharded gradients on the GPU through the micro-batches, which is modelled "
                 "with the optimizer on the GPU only")  # fmt: skip
        return
    r.use("gradient_accumulation_steps", "accumulate_unsharded", n, "FSDP under accelerate's "
          "no_sync (set_requires_gradient_sync(False)): each rank keeps the unsharded gradients "
          "until the last micro-batch")  # fmt: skip
    r.seen(_SYNC, main="gradient_accumulation_steps")


def on_gpus(recipe: Recipe, gpus: int) -> None:
    """The Trainer's FSDP on one GPU has no other rank to sync with: its micro-batches keep
    their gradients as one GPU does (``--grads-kept``), not ``--accumulate-unsharded``."""
    if gpus > 1 or "Hugging Face Trainer" not in recipe.framework:
        return
    if recipe.values.pop("accumulate_unsharded", None) is None:
        return
    recipe.values["grads_kept"] = True
    for s in recipe.used:
        if s.field == "accumulate_unsharded":
            s.field, s.to = "grads_kept", True
            s.why = "one GPU: gradients stay allocated through the later micro-batches' forward"


def _checkpoint_kwargs(r: Reading) -> None:
    """The Trainer's checkpointing kwargs (trainer.py pops ``every_n_layers`` and ``offload``
    and hands the rest to torch.utils.checkpoint.checkpoint)."""
    on = _on(r, "checkpointing") or any(r.get(k) for k in ("activation_checkpointing",
                                                           "gradient_checkpointing"))  # fmt: skip
    for kind in ("activation", "gradient"):
        base = f"{kind}_checkpointing_kwargs"
        for key in r.unseen(base):
            name, value = key.removeprefix(base + "."), r.get(key)
            if not on:
                r.ignore(key, f"read only with {kind}_checkpointing on")
            elif name == "every_n_layers" and int(value or 1) > 1:
                r.refuse(
                    key,
                    f"{r.file}: {key} = {value} checkpoints one decoder layer in "
                    f"{value}, which is modelled on a parallel plan only: not estimated",
                )
            elif name == "offload" and str(value).lower() == "true":
                r.use(key, "activation_offload", True, "the checkpointed layers' inputs saved "
                      "in pinned host memory (save_on_cpu around checkpoint), as torchtune's "
                      "offloading")  # fmt: skip
            else:
                r.ignore(key, "torch's checkpoint keeps the same layer inputs: " + NO_MEMORY)


def _liger(r: Reading) -> None:
    """transformers' ``_apply_liger_kernel`` hands ``liger_kernel_config`` to Liger's
    ``apply_liger_kernel_to_<model>``, whose defaults fuse the LM head with the loss."""
    config = "liger_kernel_config"
    if not r.get("use_liger_kernel"):
        r.ignore("use_liger_kernel", NO_MEMORY + " (off)")
        for key in r.unseen(config):
            r.ignore(key, "read only with use_liger_kernel")
        return
    flce = str(r.get(f"{config}.fused_linear_cross_entropy", True)).lower() == "true"
    if flce:
        why = "Liger's fused linear cross-entropy; its RMSNorm, RoPE and SwiGLU kernels are "
        r.use("use_liger_kernel", "loss", "liger", why + "taken to keep what PyTorch's ops keep")
    else:
        r.ignore("use_liger_kernel", f"{config}.fused_linear_cross_entropy is false: the loss "
                 "is PyTorch's over the whole logits (Liger's cross_entropy kernel writes the "
                 "gradient into the logits in place, keeping no more); its RMSNorm, RoPE and "
                 "SwiGLU kernels taken to keep what PyTorch's ops keep")  # fmt: skip
    r.seen(*r.unseen(config), main="use_liger_kernel")


def _paged_offload(r: Reading) -> None:
    """bitsandbytes' paged optimizer beside FSDP's CPU offload: the two put the same state in
    different places, and the estimate models each alone (D40)."""
    off = next((s for s in r.used if s.field == "offload_optimizer" and s.to), None)
    if off is None or not _on(r, "paged_optimizer"):
        return
    r.refuse("optim", f"{r.file}: optim = {r.get('optim')!r} with {off.key} = {off.value!r} is "
             "not estimated: bitsandbytes pages the optimizer's state on the GPU while FSDP's "
             "offload keeps it on the CPU, so drop paged_ from optim or the offload",
             unless="paged_optimizer")  # fmt: skip


def _distributed(r: Reading) -> None:
    """accelerate's N-D parallelism and batch splitting, fairscale's sharded DDP: refused."""
    f = r.file
    sizes = {
        k: v
        for k, v in r.flat.items()
        if k.startswith("parallelism_config.") and k.endswith("_size") and (v or 1) > 1
    }
    if sizes:
        said = ", ".join(f"{k.split('.', 1)[1]} = {v}" for k, v in sizes.items())
        r.refuse("parallelism_config", f"{f}: parallelism_config ({said}) is accelerate's N-D "
                 "parallelism, not read from the arguments: give the plan's degrees as flags "
                 "(--dp-shard, --dp-replicate, --tp, --cp) without the file")  # fmt: skip
    for key in r.unseen("parallelism_config"):
        r.ignore(key, NO_MEMORY + " (one of everything)")
    for key in ("accelerator_config.split_batches", "split_batches"):  # (4.x: top-level)
        if r.get(key):
            r.refuse(key, f"{f}: {key} = true splits each per_device_train_batch_size batch "
                     "over the GPUs: give --batch (one GPU's share)", unless="batch")  # fmt: skip
        elif r.has(key):
            r.ignore(key, NO_MEMORY + " (off)")
    if r.get("sharded_ddp"):  # transformers 4.x before 4.35: fairscale
        r.refuse("sharded_ddp", f"{f}: sharded_ddp = {r.get('sharded_ddp')!r} is fairscale's "
                 "sharded DDP (transformers before 4.35), which is not modelled")  # fmt: skip
    elif r.has("sharded_ddp"):
        r.ignore("sharded_ddp", NO_MEMORY + " (off)")


def _refused(r: Reading) -> None:
    f = r.file
    _paged_offload(r)
    _distributed(r)
    smoothing = r.get("label_smoothing_factor") or 0
    if float(smoothing):
        r.refuse("label_smoothing_factor", f"{f}: label_smoothing_factor = {smoothing} is not "
                 "estimated: the Trainer's LabelSmoother takes the loss from the logits (their "
                 "log-softmax and padding mask), which is not modelled")  # fmt: skip
    else:
        r.ignore("label_smoothing_factor", NO_MEMORY + " (0: the model's own loss)")
    checkpointed = any(r.get(k) for k in ("activation_checkpointing", "gradient_checkpointing"))
    if r.get("use_cache") and not checkpointed:
        r.refuse("use_cache", f"{f}: use_cache = true without checkpointing is not estimated: "
                 "the model keeps every layer's keys and values in its cache through the "
                 "forward")  # fmt: skip
    elif r.has("use_cache"):
        r.ignore("use_cache", NO_MEMORY + " (off, or dropped by checkpointing: modeling_layers)")
    debug = r.get("debug")
    if debug and "underflow_overflow" in str(debug):
        r.refuse("debug", f"{f}: debug = {debug!r} is not estimated: DebugUnderflowOverflow's "
                 "hooks copy each module's output to check it")  # fmt: skip
    elif r.has("debug"):
        r.ignore("debug", NO_MEMORY)
    if r.get("activation_offloading") and not checkpointed:
        r.refuse("activation_offloading", f"{f}: activation_offloading = true without "
                 "checkpointing offloads every saved tensor, which is not modelled (with "
                 "gradient_checkpointing it is: the layers' inputs)")  # fmt: skip
    elif r.get("activation_offloading"):  # TRL's SFTConfig: torchtune's OffloadActivations
        r.use("activation_offloading", "activation_offload", True, "TRL's port of torchtune's "
              "activation offloading")  # fmt: skip
    elif r.has("activation_offloading"):
        r.ignore("activation_offloading", NO_MEMORY + " (off)")


__all__ = ["on_gpus", "read_step_keys"]
