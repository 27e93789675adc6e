"""The Trainer's ``fsdp`` and ``fsdp_config`` as TrainingArguments hands them to accelerate's
FSDP plugin (transformers 5.24 training_args.py, ``_process_fsdp_args`` and
``_apply_legacy_fsdp_to_config``; accelerate 1.15 utils/dataclasses.py,
``FullyShardedDataParallelPlugin``):

- ``fsdp`` is ``True`` (the current form) or the legacy string / list of options:
  ``full_shard`` is ``reshard_after_forward`` true (ZeRO-3), ``shard_grad_op`` false (ZeRO-2),
  ``offload`` is ``fsdp_config["cpu_offload"]``, ``auto_wrap`` changes nothing;
- ``fsdp_config``'s keys lose an ``fsdp_`` prefix; ``cpu_offload`` becomes accelerate's
  ``CPUOffloadPolicy()`` under FSDP2 (``CPUOffload(offload_params=True)`` under FSDP1,
  ``set_cpu_offload``): the sharded weights, their gradients and so the optimizer's state live
  in host memory — FSDP2's CPU offload, ``--offload-optimizer`` on ``--fsdp``
  (``profiling.plans.cpu_offload``);
- the transformer-based wrap (the default ``auto_wrap_policy``, ``transformer_layer_cls_to_wrap``
  naming the decoder layer) makes each decoder layer its own group, as estimated.

No torch, no framework.
"""

from __future__ import annotations

from profiling.recipes.recipe import FSDP_OFFLOAD, NO_MEMORY, Reading

_V1_ONLY = ("forward_prefetch", "backward_prefetch", "limit_all_gathers", "use_orig_params",
            "sync_module_states")  # fmt: skip
_LOADING = ("cpu_ram_efficient_loading", "state_dict_type", "min_num_params", "xla_fsdp_grad_ckpt",
            "xla_fsdp_v2")  # fmt: skip


def read_fsdp(r: Reading) -> None:
    """``fsdp`` and ``fsdp_config`` (see the module)."""
    fsdp = r.get("fsdp")
    items = fsdp.split() if isinstance(fsdp, str) else fsdp if isinstance(fsdp, list) else []
    items = [str(i).lower() for i in items]
    on = fsdp is True or bool(items)
    v1 = str(_conf(r, "version") or 2) == "1"
    if not on:
        r.ignore("fsdp", NO_MEMORY + " (off)")
        for key in r.unseen("fsdp_config"):
            r.ignore(key, "read only with fsdp on")
        return
    if not _strategy(r, fsdp, items, v1):
        return
    for name in ("reshard_after_forward", "cpu_offload"):
        if (key := _key(r, name)) is not None:
            r.seen(key, main="fsdp")
    _checkpointing_and_version(r)
    _wrap(r)
    for name in _V1_ONLY:
        key = _key(r, name)
        if key is not None and not v1:
            r.ignore(key, "read by FSDP1 only (fsdp_config version 1); FSDP2 runs as estimated")
        elif key is not None:
            r.ignore(key, "not modelled yet: FSDP1's prefetching and parameter views (estimated "
                     "as FSDP2 prefetches: one block ahead)")  # fmt: skip
    for name in _LOADING:
        if (key := _key(r, name)) is not None:
            r.ignore(key, "loading, saving or XLA settings: " + NO_MEMORY + " in the step")
    if str(_conf(r, "xla")).lower() == "true":
        r.refuse(str(_key(r, "xla")), f"{r.file}: fsdp_config xla = true runs FSDP on XLA "
                 "devices, not a CUDA GPU: not estimated")  # fmt: skip
    elif (key := _key(r, "xla")) is not None:
        r.ignore(key, NO_MEMORY + " (off)")


def _strategy(r: Reading, fsdp: object, items: list[str], v1: bool) -> bool:
    """The sharding (ZeRO-3 or ZeRO-2 style) and the CPU offload; False when refused."""
    other = next((i for i in items if i in ("hybrid_shard", "hybrid_shard_zero2", "no_shard")), "")
    if other and (not v1 or other != "hybrid_shard"):
        r.refuse("fsdp", f"{r.file}: fsdp = {fsdp!r} is not estimated: {other} "
                 + ("is FSDP1's (transformers refuses it under FSDP2, fsdp_config version 2)"
                    if not v1 else "is not modelled"))  # fmt: skip
        return False
    if other:
        r.notes.append(
            f"{r.file}: fsdp {other} shards within a node and replicates across "
            "nodes: estimated as sharded over --gpus, right up to a node's GPUs"
        )
    reshard = _conf(r, "reshard_after_forward")
    if "shard_grad_op" in items or str(reshard).lower() in ("false", "shard_grad_op"):
        r.use("fsdp", "fsdp", True, "FSDP SHARD_GRAD_OP (reshard_after_forward false): ZeRO-2 "
              "style (give --gpus N)")  # fmt: skip
        r.use("fsdp", "zero", 2)
    else:
        r.use("fsdp", "fsdp", True, "FSDP full shard: ZeRO-3 over the GPUs (give --gpus N)")
        r.use("fsdp", "zero", 3)
    if "offload" in items or str(_conf(r, "cpu_offload")).lower() == "true":
        key = "fsdp" if "offload" in items else str(_key(r, "cpu_offload"))
        r.use(key, "offload_optimizer", True, FSDP_OFFLOAD)
    return True


def _conf(r: Reading, name: str) -> object:
    key = _key(r, name)
    return r.get(key) if key is not None else None


def _key(r: Reading, name: str) -> str | None:
    """``fsdp_config``'s key for ``name``, with or without the ``fsdp_`` prefix
    transformers drops."""
    return next((f"fsdp_config.{p}{name}" for p in ("", "fsdp_")
                 if r.has(f"fsdp_config.{p}{name}")), None)  # fmt: skip


def _wrap(r: Reading) -> None:
    """The transformer-based wrap is each decoder layer its own group (as estimated); a wrap
    by size or none at all gathers other groups."""
    policy = str(_conf(r, "auto_wrap_policy") or "TRANSFORMER_BASED_WRAP").upper()
    if policy != "TRANSFORMER_BASED_WRAP":
        r.refuse(str(_key(r, "auto_wrap_policy")), f"{r.file}: fsdp_config auto_wrap_policy = "
                 f"{policy} does not make each decoder layer its own FSDP group, which is what "
                 "is estimated: not estimated")  # fmt: skip
    for name in ("auto_wrap_policy", "transformer_layer_cls_to_wrap"):
        if (key := _key(r, name)) is not None:
            r.seen(key, main="fsdp (each decoder layer its own group, as estimated)")


def _checkpointing_and_version(r: Reading) -> None:
    """``fsdp_config``'s ``activation_checkpointing`` (accelerate's FSDP plugin checkpoints
    every wrapped layer) and ``version`` (2 by default in transformers 5; 1 the legacy FSDP1)."""
    for name in ("activation_checkpointing", "version"):
        key = _key(r, name)
        if key is None:
            continue
        value = r.get(key)
        if name == "activation_checkpointing" and str(value).lower() == "true":
            r.use(key, "checkpointing", "full", "FSDP's own checkpointing of every wrapped layer")
        elif name == "activation_checkpointing":
            r.ignore(key, NO_MEMORY + " (off)")
        elif str(value) == "1":
            r.use(key, "fsdp_flat", True, "FSDP1: each wrapped layer's parameters views of one "
                  "flat parameter (give --gpus N)")  # fmt: skip
        else:
            r.seen(key, main="fsdp (FSDP2's fully_shard, as estimated)")


__all__ = ["read_fsdp"]
