"""torchtitan's training TOML (``train_configs/*.toml``, the format up to v0.2.2): one GPU's
share of the job it describes.

- ``[model] name``, ``flavor``: the model (``llama3`` ``8B`` is Llama 3.1 8B's shape).
- ``[training] local_batch_size`` (``batch_size`` before), ``global_batch_size`` (the
  microbatches accumulated: on a plan ``--microbatches M``, M = global / (local × dp)),
  ``seq_len``,
  ``mixed_precision_param`` (bf16 by default: FSDP2's ``MixedPrecisionPolicy``, fp32 sharded
  parameters and bf16 gathers), ``mixed_precision_reduce``.
- ``[activation_checkpoint] mode``: ``none``, ``selective`` with ``selective_ac_option = "op"``
  (``--checkpointing selective-op``: torchtitan's per-op policy, ``profiling.plans.op_sac``;
  an integer N, every N-th block a rank builds checkpointed whole: ``--checkpointing full
  --checkpoint-every N``), ``full``.
- ``[optimizer] name`` (AdamW, Adam), ``implementation`` (``foreach``, ``fused``).
- ``[compile] enable``.
- A file of late 2024 (the degrees under ``[training]``): torchtitan's FSDP groups before
  83e6941 (``--titan-root-group``: the embedding, norm and output in the root's group).
- ``[training] enable_cpu_offload``: FSDP2's CPU offload (``--offload-optimizer``) where FSDP
  runs; without FSDP it is listed as ignored (torchtitan offloads through ``fully_shard``).
- The launch script's ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``
  (``--expandable-segments``), which no TOML says.
- ``[parallelism]``: the plan (``profiling.plans``): ``data_parallel_shard_degree`` (FSDP2;
  torchtitan's -1 takes the GPUs the other degrees leave, which only the launch knows: give
  ``--dp-shard N``), ``data_parallel_replicate_degree``, ``tensor_parallel_degree``,
  ``context_parallel_degree``, ``pipeline_parallel_degree`` with ``pipeline_parallel_schedule``
  (torch's ``1F1B``, ``Interleaved1F1B``, ``ZBVZeroBubble``; the others are not modelled) and
  ``pipeline_parallel_microbatch_size`` (the microbatches: the batch over it; a file of the
  ``[experimental]`` era: ``pipeline_parallel_microbatches``, unset the pipeline degree, as
  torchtitan ran them until 90567fc). Asynchronous TP,
  Float8 (``model.converters``, ``[float8]``, ``[quantize]``), expert parallelism and a stage
  split by hand (``pipeline_parallel_layers_per_stage``, ``..._split_points``) are listed as not
  modelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiling.recipes.model_names import torchtitan_model
from profiling.recipes.recipe import FSDP_OFFLOAD, NO_MEMORY, Reading

_SPLIT = (
    "a stage split by hand is not modelled: stages are split as torchtitan's default "
    "(give --virtual-stages for more stages per rank)"
)
KNOWN = [
    ("job.*", NO_MEMORY), ("profiling.*", NO_MEMORY), ("metrics.*", NO_MEMORY),
    ("model.hf_assets_path", NO_MEMORY), ("model.tokenizer_path", NO_MEMORY),
    ("model.converters", "only the float8 converter is modelled"), ("optimizer.lr", NO_MEMORY),
    ("optimizer.eps", NO_MEMORY), ("optimizer.weight_decay", NO_MEMORY),
    ("optimizer.beta*", NO_MEMORY), ("lr_scheduler.*", NO_MEMORY), ("training.steps", NO_MEMORY),
    ("training.max_norm", NO_MEMORY), ("training.dataset*", NO_MEMORY),
    ("training.seed", NO_MEMORY), ("training.deterministic", NO_MEMORY),
    ("checkpoint.*", NO_MEMORY), ("validation.*", NO_MEMORY), ("comm.*", NO_MEMORY),
    ("experimental.*", NO_MEMORY), ("fault_tolerance.*", NO_MEMORY),
    ("memory_estimation.*", NO_MEMORY), ("float8.*", "not modelled: torchtitan's defaults are"),
    ("quantize.*", "float8/MX training is not modelled"), ("compile.components", NO_MEMORY),
    ("activation_checkpoint.selective_ac_option", NO_MEMORY + " beyond the mode"),
    ("activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns", NO_MEMORY),
    ("parallelism.pipeline_parallel_schedule_csv", "a schedule from a file is not modelled"),
    ("parallelism.pipeline_parallel_layers_per_stage", _SPLIT),
    ("parallelism.pipeline_parallel_split_points", _SPLIT),
    ("parallelism.context_parallel_rotate_method", NO_MEMORY),
    ("parallelism.enable_compiled_autograd", NO_MEMORY),
    ("parallelism.disable_loss_parallel", NO_MEMORY),
    ("parallelism.expert*", "expert parallelism is issue 32's"),
    ("training.warmup_steps", NO_MEMORY), ("model.norm_type", NO_MEMORY + " beyond RMSNorm"),
]  # fmt: skip

_DEGREES = {
    "tensor_parallel_degree": "tp",
    "pipeline_parallel_degree": "pp",
    "context_parallel_degree": "cp",
    "data_parallel_replicate_degree": "dp_replicate",
}


def looks_like(data: dict[str, Any]) -> bool:
    return isinstance(data.get("model"), dict) and "flavor" in data["model"]


def read(path: Path, data: dict[str, Any]) -> Reading:
    r = Reading(path.name, data, KNOWN)
    model, note = torchtitan_model(r.get("model.name"), r.get("model.flavor"))
    if model is not None:
        r.use("model.flavor", "model", model, note)
    else:
        r.notes.append(f"{note}; give --model")
        r.ignore("model.flavor", f"{note}: give --model, or its shape (--layers --hidden …)")
    r.seen("model.name", main="model.flavor")
    if r.has("training.seq_len"):
        r.use("training.seq_len", "seq", r.get("training.seq_len"))
    r.ignore("training.mixed_precision_reduce", NO_MEMORY + " (fp32 gradient shards either way)")
    _checkpointing(r)
    _optimizer(r)
    _parallelism(r)
    _precision(r)
    _batch(r)
    if not _degree_key(r, "data_parallel_shard_degree").startswith("parallelism."):
        # a late-2024 file: torchtitan's FSDP groups of then (profiling.plans.root_group)
        r.imply("(its [training] degrees: before 83e6941)", "titan_root_group", True,
                "torchtitan's FSDP groups before July 2025: the embedding, norm and output "
                "in the root's group, gathered all step; the last block kept after "
                "forward")  # fmt: skip
    r.imply("(run_llama_train.sh)", "expandable_segments", True, "torchtitan's launch script "
            "runs torchrun with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "(run_llama_train.sh at 9dec370, run_train.sh since)")  # fmt: skip
    compile_key = "compile.enable" if r.has("compile.enable") else "training.compile"
    if r.get(compile_key):
        r.use(compile_key, "compile", True, "torch.compile of each block, as the partitioner "
              "splits it")  # fmt: skip
    else:
        r.ignore(compile_key, NO_MEMORY + " (off)")
    r.finish()
    return r


def check_every_gpu(recipe: Any, values: dict[str, Any]) -> None:
    """``data_parallel_shard_degree = -1`` shards over the GPUs the other degrees leave
    (torchtitan's ``ParallelDims``: world size ÷ the rest), which only the launch knows. With no
    --gpus / --dp-shard that is one rank, where torchtitan applies no FSDP at all and its
    precision depends on its version (AMP outside FSDP came in 2025): one sentence naming the
    file's field, not the plan check's about flags the user never gave."""
    shard = next(
        (s for s in recipe.used if s.key.endswith("data_parallel_shard_degree") and s.value == -1),
        None,
    )
    if shard is None or _degree(values.get("cp")) > 1:
        return  # with CP torchtitan shards over the cp ranks alone (dp_shard_cp)
    if _degree(values.get("gpus")) > 1 or _degree(values.get("dp_shard")) > 1:
        return
    from profiling.errors import ProfilingError

    raise ProfilingError(
        f"{shard.file}: {shard.key} = -1 shards over every GPU the other degrees leave, which "
        "only the launch knows: give --gpus N (N > 1) for the data-parallel ranks (on one GPU "
        "torchtitan applies no FSDP; give that run's flags instead of the file)"
    )


def _precision(r: Reading) -> None:
    """``mixed_precision_param`` (bf16 by default) as torchtitan's ``maybe_enable_amp``
    (torchtitan/distributed/utils.py) applies it: under FSDP (``dp_shard`` > 1 or -1, or CP)
    fully_shard's policy; without FSDP beside TP or a pipeline nothing ("Mixed precision
    training is disabled": fp32); DDP alone or one GPU ``torch.autocast`` over fp32
    parameters — since 2025: a late-2024 file (degrees under [training]) ran fp32 there."""
    key = "training.mixed_precision_param"
    if str(r.get(key, "bfloat16")) != "bfloat16":
        r.use(key, "precision", "fp32")
        return
    shard = r.get(_degree_key(r, "data_parallel_shard_degree"), -1)
    cp, tp, pp = (_degree(r.get(_degree_key(r, f"{d}_parallel_degree")))
                  for d in ("context", "tensor", "pipeline"))  # fmt: skip
    if shard == -1 or _degree(shard) > 1 or cp > 1:
        r.imply(key, "precision", "mixed", "FSDP2's MixedPrecisionPolicy: fp32 sharded "
                "parameters, bf16 gathers")  # fmt: skip
    elif tp > 1 or pp > 1:
        r.imply(key, "precision", "fp32", "no FSDP beside TP or a pipeline: torchtitan's "
                "maybe_enable_amp turns mixed precision off (fp32)")  # fmt: skip
    elif not _degree_key(r, "data_parallel_shard_degree").startswith("parallelism."):
        r.imply(key, "precision", "fp32", "no FSDP: late-2024 torchtitan applied mixed "
                "precision through fully_shard alone (fp32)")  # fmt: skip
    else:
        r.imply(key, "precision", "amp-bf16", "no FSDP (DDP or one GPU): torchtitan's "
                "maybe_enable_amp runs torch.autocast(bf16) over fp32 parameters")  # fmt: skip


def _degree(value: Any) -> int:
    """A degree as given: the file's int, or the command line's text (parsed later); 1 when
    unset or not a number (the configuration's own check says what is wrong with it)."""
    try:
        return int(value or 1)
    except (TypeError, ValueError):
        return 1


def _degree_key(r: Reading, degree: str) -> str:
    """Where the file spells a degree: v0.2 under [parallelism], late-2024 configs under
    [training] or [experimental]."""
    return next(
        (f"{t}.{degree}" for t in ("parallelism", "training", "experimental")
         if r.has(f"{t}.{degree}")),
        f"parallelism.{degree}",
    )  # fmt: skip


def _parallelism(r: Reading) -> None:
    """The [parallelism] section as a plan's degrees (see the module)."""
    for degree, field in _DEGREES.items():
        key = _degree_key(r, degree)
        value = r.get(key)
        if value in (None, 1):
            r.ignore(key, NO_MEMORY + " (1)")
        elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
            r.ignore(key, f"{value!r} is not a degree this reader knows")
        else:
            r.use(key, field, value)
    key = _degree_key(r, "data_parallel_shard_degree")
    shard = r.get(key, -1)
    if shard == -1:
        r.imply(key, "fsdp", True, "FSDP2 over the GPUs the other degrees leave: give "
                "--dp-shard N (or --gpus N) for how many")  # fmt: skip
    elif isinstance(shard, int) and not isinstance(shard, bool) and shard > 1:
        r.use(key, "dp_shard", shard, "FSDP2 fully_shard")
    elif shard == 1 and (r.get(_degree_key(r, "context_parallel_degree")) or 1) > 1:
        # torchtitan applies FSDP over dp_shard_cp whenever CP is on
        r.use(key, "dp_shard", 1, "1 with context parallelism: FSDP2 over the cp ranks alone "
              "(torchtitan's dp_shard_cp)")  # fmt: skip
        r.imply(key, "fsdp", True, "torchtitan shards over dp_shard × cp whenever CP is on")
    elif shard == 1:
        r.ignore(key, NO_MEMORY + " (1: no sharding)")
    else:
        r.ignore(key, f"{shard!r} is not a degree this reader knows")
    _pipeline(r)
    _reshard(r)
    _cpu_offload(r, sharded=shard == -1 or (isinstance(shard, int) and shard > 1)
                 or _degree(r.get(_degree_key(r, "context_parallel_degree"))) > 1)  # fmt: skip
    key = _degree_key(r, "enable_async_tensor_parallel")
    if r.get(key) and r.get(_degree_key(r, "tensor_parallel_degree"), 1) not in (None, 1):
        r.use(key, "async_tp", True, "torch's micro-pipelined TP: its symmetric-memory "
              "workspace in nvidia-smi's count")  # fmt: skip
    else:
        r.ignore(key, "no tensor parallelism to overlap" if r.get(key) else NO_MEMORY + " (off)")
    key = "parallelism.disable_loss_parallel"
    r.ignore(key, "a loss gathered over the vocabulary is not modelled: the plan's loss is "
             "parallel" if r.get(key) else NO_MEMORY + " (off)")  # fmt: skip
    _float8(r)


def _cpu_offload(r: Reading, sharded: bool) -> None:
    """``training.enable_cpu_offload``: torchtitan hands ``CPUOffloadPolicy()`` to
    ``fully_shard`` (torchtitan/distributed/fsdp.py at b5bcd76, ``apply_fsdp_to_decoder``), so
    it offloads only where FSDP runs (``parallel_dims.fsdp_enabled``: dp_shard or CP) —
    ``profiling.plans.cpu_offload`` on a plan, ``estimate.fsdp_offload`` on FSDP alone."""
    key = "training.enable_cpu_offload"
    if not r.get(key):
        r.ignore(key, NO_MEMORY + " (off)")
    elif sharded:
        r.use(key, "offload_optimizer", True, FSDP_OFFLOAD)
    else:
        r.ignore(key, "no FSDP (data_parallel_shard_degree 1, no CP): torchtitan offloads "
                 "through fully_shard alone, so nothing is offloaded")  # fmt: skip


def _float8(r: Reading) -> None:
    """Float8 training: ``model.converters = ["float8"]`` with ``[float8] recipe_name`` (v0.2),
    or ``[float8] enable_float8_linear`` (late 2024: tensorwise, the only recipe then)."""
    from profiling._config_float8 import FLOAT8_RECIPES

    converters = r.get("model.converters") or []
    key = "model.converters" if "float8" in converters else "float8.enable_float8_linear"
    if not r.get(key):
        for k in (
            "float8.enable_float8_linear",
            "float8.enable_fsdp_float8_all_gather",
            "float8.precompute_float8_dynamic_scale_for_fsdp",
            "float8.recipe_name",
        ):
            r.ignore(k, NO_MEMORY + " (Float8 off)")  # fmt: skip
        return
    recipe = str(r.get("float8.recipe_name") or "tensorwise")
    if recipe not in FLOAT8_RECIPES:
        r.ignore(key, f"the Float8 recipe {recipe!r} is not modelled (tensorwise, rowwise and "
                 "rowwise_with_gw_hp are): give --float8")  # fmt: skip
        return
    r.use(key, "float8", recipe, "torchao's Float8 training: every Linear of the blocks "
          "converted, the output projection left out")  # fmt: skip
    r.seen("float8.recipe_name", main=key)
    fqns = r.get("float8.filter_fqns", ["output"])
    if fqns in ("output", ["output"]):
        r.seen("float8.filter_fqns", main=key)
    else:
        r.ignore("float8.filter_fqns", "Linears left out other than the output projection are "
                 "not modelled: every block's Linears are converted")  # fmt: skip
    gather = "float8.enable_fsdp_float8_all_gather"
    if r.get(gather):
        r.use(gather, "float8_all_gather", True, "FSDP2 gathers the Float8 weights in fp8")
    else:
        r.ignore(gather, NO_MEMORY + " (off)")
    pre = "float8.precompute_float8_dynamic_scale_for_fsdp"
    r.ignore(pre, "one fp32 scale per Float8 weight after each optimizer step (a few KB): not "
             "counted" if r.get(pre) else NO_MEMORY + " (off)")  # fmt: skip


def _batch(r: Reading) -> None:
    """``local_batch_size`` (``batch_size`` before): a data-parallel rank's microbatch; with
    ``global_batch_size`` the microbatches it accumulates per step (:func:`_accumulated`)."""
    key = next((k for k in ("training.local_batch_size", "training.batch_size") if r.has(k)), "")
    local = r.get(key)
    if not isinstance(local, int) or isinstance(local, bool) or local < 1:
        r.ignore("training.global_batch_size", "read with local_batch_size, which the file "
                 "does not give: give --batch (and --microbatches to accumulate)")  # fmt: skip
        if key:
            r.use(key, "batch", local, "per data-parallel rank")
        return
    m = _accumulated(r, local)
    why = f": {m} microbatches of {local}" if m > 1 else ""
    r.use(key, "batch", local * m, "per data-parallel rank" + why)


def _accumulated(r: Reading, local: int) -> int:
    """``global_batch_size``: torchtitan runs ``global_batch_size // (local_batch_size ×
    batch degree)`` microbatches per step (the batch mesh dp_replicate × dp_shard; -1: one),
    each a forward and backward with gradient sync on (pytorch/torchtitan torchtitan/train.py
    at v0.2.2, 73a0e69). On a plan that is ``--microbatches M`` with ``--batch local × M``
    (returned: M); on one GPU the gradients kept through the later forwards (1)."""
    key = "training.global_batch_size"
    total = r.get(key, -1)
    shard = r.get(_degree_key(r, "data_parallel_shard_degree"), -1)
    rep = r.get(_degree_key(r, "data_parallel_replicate_degree"), 1) or 1
    pp = r.get(_degree_key(r, "pipeline_parallel_degree"), 1) or 1
    if not isinstance(total, int) or total < 0:
        r.ignore(key, NO_MEMORY + " (-1: one microbatch per step)")
        return 1
    if shard == -1:
        r.ignore(key, "the microbatches it accumulates are global / (local_batch_size × the "
                 "data-parallel degree), which data_parallel_shard_degree -1 leaves to the "
                 "launch: give --microbatches M and --batch local_batch_size × M")  # fmt: skip
        return 1
    dp = max(shard, 1) * rep
    m, rest = divmod(total, local * dp)
    if rest or m < 1:
        r.ignore(key, f"not a multiple of local_batch_size {local} × the data-parallel degree "
                 f"{dp}: torchtitan refuses it")  # fmt: skip
        return 1
    if m == 1:
        r.ignore(key, NO_MEMORY + f" (local_batch_size {local} × data-parallel degree {dp}: "
                 "one microbatch per step)")  # fmt: skip
        return 1
    why = (
        f"{total} / ({local} × data-parallel degree {dp}), torchtitan's gradient_accumulation_steps"
    )
    if pp > 1:
        r.ignore(key, f"{m} pipeline schedules accumulated per step ({why}) are not modelled: the "
                 "estimate is one schedule's, below by the gradient shards held through the later "
                 "ones")  # fmt: skip
        r.notes.append(f"{key}: {m} pipeline schedules per step are not modelled (one is): an "
                       "under-estimate by the sharded gradients")  # fmt: skip
        return 1
    if shard > 1 or rep > 1 or (r.get(_degree_key(r, "context_parallel_degree")) or 1) > 1:
        r.use(key, "microbatches", m, f"{m} microbatches accumulated per step: {why}")
        return m
    r.use(key, "grads_kept", True, f"{m} microbatches accumulated ({why}): the gradients stay "
          "allocated through the later microbatches' forward")  # fmt: skip
    return 1


# torchtitan's schedule names (torch's get_schedule_class) and ours
_SCHEDULES = {"1F1B": "1f1b", "Interleaved1F1B": "interleaved", "ZBVZeroBubble": "zbv"}


def _reshard(r: Reading) -> None:
    """``fsdp_reshard_after_forward`` (torchtitan's get_fsdp_reshard_after_forward_policy):
    "never" is FSDP2's ``reshard_after_forward=False`` for every group (``--zero 2``); "default"
    reshards after forward without a pipeline and keeps the weights gathered with one, as a
    plan runs; "always" reshards the final norm and output too (``--reshard-always``), and
    under a pipeline after every microbatch's forward (not beside ZBV: said)."""
    key = "parallelism.fsdp_reshard_after_forward"
    policy = r.get(key, "default")
    pp = r.get(_degree_key(r, "pipeline_parallel_degree"), 1) not in (None, 1)
    zbv = r.get(_degree_key(r, "pipeline_parallel_schedule"), "1F1B") == "ZBVZeroBubble"
    cp = (r.get(_degree_key(r, "context_parallel_degree")) or 1) > 1
    shard_one = r.get(_degree_key(r, "data_parallel_shard_degree"), -1) == 1
    if (policy == "never" and shard_one) or (policy == "always" and shard_one and not cp):
        r.ignore(key, NO_MEMORY + " (no FSDP: data_parallel_shard_degree 1)")
    elif policy == "never":
        r.use(key, "zero", 2, "FSDP2 keeps each group gathered from its forward to its "
              "backward (fully_shard(reshard_after_forward=False))")  # fmt: skip
    elif policy == "always" and pp and zbv:
        r.ignore(key, "resharding after each microbatch's forward under ZBV's split backward is "
                 "not modelled: the plan keeps each stage's weights gathered (torchtitan's "
                 "default)")  # fmt: skip
    elif policy == "always" and pp:
        r.use(key, "reshard_always", True, "FSDP2 reshards every group after each "
              "microbatch's forward, gathering it again for its backward")  # fmt: skip
    elif policy == "always":
        r.use(key, "reshard_always", True, "FSDP2 reshards the final norm and output after "
              "forward too, gathering them again for their backward")  # fmt: skip
    elif r.has(key) and policy == "default":
        r.ignore(key, NO_MEMORY + " (default: what the plan runs)")
    elif r.has(key):
        r.ignore(key, f"{policy!r} is not a policy this reader knows (default, always, never)")


def _pipeline(r: Reading) -> None:
    pp = r.get(_degree_key(r, "pipeline_parallel_degree"), 1)
    key = _degree_key(r, "pipeline_parallel_schedule")
    name = r.get(key, "1F1B")
    sizes = [_degree_key(r, k) for k in ("pipeline_parallel_microbatch_size",
                                         "pipeline_parallel_microbatches")]  # fmt: skip
    if pp in (None, 1):
        for k in (key, *sizes):
            r.ignore(k, NO_MEMORY + " (no pipeline)")
        return
    if name not in _SCHEDULES:
        r.ignore(key, f"the {name} schedule is not modelled (1F1B, Interleaved1F1B and "
                 "ZBVZeroBubble are): give --pp-schedule")  # fmt: skip
    elif r.has(key):
        r.use(key, "pp_schedule", _SCHEDULES[name])
    else:
        r.imply(key, "pp_schedule", "1f1b", "torchtitan's default schedule")
    if r.has(sizes[1]):  # late 2024: the number of microbatches itself
        r.use(sizes[1], "microbatches", r.get(sizes[1]))
        return
    section = _degree_key(r, "pipeline_parallel_degree").split(".")[0]
    if section != "parallelism":
        # a file of the [experimental] era (until 785c34c), before microbatch sizes: unset,
        # build_pipeline_schedule took pipeline_parallel_degree microbatches (pytorch/
        # torchtitan torchtitan/parallelisms/pipelining_utils.py at 9dec370), the number of
        # stages only from 90567fc (2025-01-07) on
        key = f"{section}.pipeline_parallel_microbatches"
        r.imply(key, "microbatches", pp, "torchtitan's default until 90567fc "
                "(January 2025): pipeline_parallel_degree microbatches; the number of stages "
                "after it: give --microbatches")  # fmt: skip
        return
    key = sizes[0]
    size, batch = r.get(key, 1), r.get("training.local_batch_size", r.get("training.batch_size"))
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        r.ignore(key, f"{size!r} is not a microbatch size this reader knows")
    elif isinstance(batch, int) and batch % size == 0:
        (r.use if r.has(key) else r.imply)(
            key, "microbatches", batch // size, f"the batch of {batch} in microbatches of {size}"
        )
    else:
        r.ignore(key, f"microbatches of {size} do not divide the batch {batch!r}: give "
                 "--microbatches")  # fmt: skip


def _checkpointing(r: Reading) -> None:
    mode = str(r.get("activation_checkpoint.mode", "selective"))
    option = str(r.get("activation_checkpoint.selective_ac_option", "2"))
    if mode == "full":
        r.use("activation_checkpoint.mode", "checkpointing", "full", "every block")
    elif mode == "none":
        r.use("activation_checkpoint.mode", "checkpointing", "none")
    elif mode == "selective" and option == "op":
        r.use(
            "activation_checkpoint.mode",
            "checkpointing",
            "selective-op",
            "selective_ac_option op: torchtitan's per-op policy (matmuls but every second, "
            "SDPA, reduce-scatters and max kept; the rest recomputed)",
        )
    elif mode == "selective" and option.isdigit():
        # torchtitan wraps the N-th, 2N-th… block a process builds (ptd_checkpoint_wrapper's
        # _count); "0" and "1" wrap every block
        every = int(option)
        r.use("activation_checkpoint.mode", "checkpointing", "full",
              f"selective_ac_option {option}: " + ("every block" if every <= 1 else
              f"every {every}-th block checkpointed whole, the others not"))  # fmt: skip
        if every > 1:
            r.use("activation_checkpoint.selective_ac_option", "checkpoint_every", every)
    elif mode == "selective":
        r.ignore(
            "activation_checkpoint.selective_ac_option",
            f"{option!r} is neither 'op' nor a block count",
        )
    else:
        r.ignore("activation_checkpoint.mode", f"{mode!r} is not a mode this reader knows")


def _optimizer(r: Reading) -> None:
    name = str(r.get("optimizer.name", "AdamW"))
    ours = {"AdamW": "adamw", "Adam": "adam"}.get(name)
    if ours is None:
        r.ignore("optimizer.name", f"{name} is not an optimizer this reader knows")
    elif r.has("optimizer.name"):
        r.use("optimizer.name", "optimizer", ours)
    implementation = r.get("optimizer.implementation", "fused")
    if implementation == "fused":
        r.imply(
            "optimizer.implementation",
            "fused_optimizer",
            True,
            "torchtitan's default fused AdamW: no foreach temporaries",
        )
    elif implementation == "foreach":
        r.use("optimizer.implementation", "foreach", True)
    else:
        r.use("optimizer.implementation", "foreach", False, "a for-loop over the parameters")


__all__ = ["looks_like", "read"]
