"""--from a DeepSpeed JSON config, the Trainer's arguments naming one (JSON and the real
training_args.bin), and an accelerate config: every key used or ignored with its reason, and
"auto" resolved as the Hugging Face integration resolves it or said as not resolved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.recipes import read_recipe, with_recipe

# The shape of the ZeRO-3 offload config transformers' docs and DeepSpeed's HF tutorials use.
Z3_OFFLOAD = {
    "bf16": {"enabled": "auto"},
    "zero_optimization": {
        "stage": 3,
        "offload_optimizer": {"device": "cpu", "pin_memory": True},
        "offload_param": {"device": "cpu", "pin_memory": True},
        "overlap_comm": True,
        "contiguous_gradients": True,
        "sub_group_size": 1e9,
        "reduce_bucket_size": "auto",
        "stage3_prefetch_bucket_size": "auto",
        "stage3_param_persistence_threshold": "auto",
        "stage3_max_live_parameters": 1e9,
        "stage3_max_reuse_distance": 1e9,
        "stage3_gather_16bit_weights_on_model_save": True,
    },
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
}


def _write(folder: Path, name: str, data: dict | str) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _lines(recipe) -> dict[str, str]:
    return {s.key: s.line() for s in recipe.used + recipe.ignored}


def test_a_deepspeed_config_alone_says_what_auto_leaves_unresolved(tmp_path: Path) -> None:
    recipe = read_recipe([_write(tmp_path, "ds_z3.json", Z3_OFFLOAD)])
    assert recipe.framework == "DeepSpeed"
    v = recipe.values
    assert v["zero"] == 3 and v["deepspeed"] is True
    assert v["offload_optimizer"] is True and v["offload_param"] is True
    assert v["reduce_bucket_size"] == "auto" and v["prefetch_bucket_size"] == "auto"
    assert "precision" not in v and "batch" not in v  # "auto" with no Trainer to fill it
    lines = _lines(recipe)
    assert '"auto" not resolved' in lines["train_micro_batch_size_per_gpu"]
    assert '"auto" not resolved' in lines["bf16.enabled"]
    assert v["sub_group_size"] == 10**9 and v["max_reuse_distance"] == 10**9  # ZeRO-3's own
    # Every key of the file is accounted for.
    said = {s.key for s in recipe.used + recipe.ignored}
    flat = {"bf16.enabled", "gradient_accumulation_steps", "gradient_clipping",
            "train_batch_size", "train_micro_batch_size_per_gpu"}  # fmt: skip
    flat |= {f"zero_optimization.{k}" for k, v in Z3_OFFLOAD["zero_optimization"].items()
             if not isinstance(v, dict)}  # fmt: skip
    assert flat <= said
    # "auto" buckets resolve from the model the user names: hidden² for llama-7b.
    cfg = TrainingConfig.parse(**with_recipe(recipe, {"model": "llama-7b", "gpus": 8}))
    bucket = next(c for c in estimate(cfg).components if c.name.startswith("DeepSpeed gradient"))
    assert bucket.bytes == 4096 * 4096 * 4  # fp32: bf16 "auto" was not resolved


def test_the_trainers_arguments_fill_the_deepspeed_configs_auto(tmp_path: Path) -> None:
    _write(tmp_path, "ds_z3.json", Z3_OFFLOAD)
    args = {
        "output_dir": "out", "per_device_train_batch_size": 4, "gradient_accumulation_steps": 8,
        "bf16": True, "deepspeed": "ds_z3.json", "model_name_or_path": "meta-llama/Llama-2-7b-hf",
    }  # fmt: skip
    recipe = read_recipe([_write(tmp_path, "args.json", args)])
    v = recipe.values
    assert v["batch"] == 4 and v["grads_kept"] is True and v["zero"] == 3
    # DeepSpeed's bf16 engine, not the Trainer's autocast reading of bf16.
    assert v["precision"] == "mixed"
    lines = _lines(recipe)
    assert "read by DeepSpeed's engine: bf16.enabled" in lines["bf16"]
    assert "the Trainer's per_device_train_batch_size" in lines["train_micro_batch_size_per_gpu"]
    assert not any("autocast over the model as it was loaded" in n for n in recipe.notes)
    # Each DeepSpeed key names its own file.
    assert {s.file for s in recipe.used if s.key.startswith("zero_optimization")} == {"ds_z3.json"}


def test_a_trainer_checkpoints_training_args_bin_names_its_deepspeed_config(
    tmp_path: Path,
) -> None:
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path), per_device_train_batch_size=2, report_to=[]
        )
    args.deepspeed = "ds_z2.json"  # (DeepSpeed is not installed here to validate it)
    args.bf16 = True
    torch.save(args, tmp_path / "training_args.bin")
    missing = read_recipe([tmp_path / "training_args.bin"])
    assert "is not a file here" in _lines(missing)["deepspeed"]
    z2 = {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"},
          "reduce_bucket_size": 2e8, "allgather_bucket_size": 2e8, "overlap_comm": True},
          "bf16": {"enabled": "auto"},
          "train_micro_batch_size_per_gpu": "auto"}  # fmt: skip
    _write(tmp_path, "ds_z2.json", z2)
    recipe = read_recipe([tmp_path / "training_args.bin"])
    v = recipe.values
    assert v["zero"] == 2 and v["deepspeed"] and v["offload_optimizer"]
    assert v["reduce_bucket_size"] == 200_000_000 and v["overlap_comm"] is True
    assert v["precision"] == "mixed" and v["batch"] == 2
    lines = _lines(recipe)
    assert "does not change memory (off)" not in lines["deepspeed"]
    assert "gathered in place" in lines["zero_optimization.allgather_bucket_size"]


def test_an_accelerate_config_and_the_deepspeed_file_it_names(tmp_path: Path) -> None:
    _write(tmp_path, "ds_z3.json", Z3_OFFLOAD)
    yaml = (
        "compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n"
        "  deepspeed_config_file: ds_z3.json\n  zero3_init_flag: true\n"
        "distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_machines: 2\n"
        "num_processes: 16\nmachine_rank: 0\nuse_cpu: false\n"
    )
    recipe = read_recipe([_write(tmp_path, "accelerate.yaml", yaml)])
    assert recipe.framework == "accelerate"
    v = recipe.values
    assert v["gpus"] == 16 and v["gpus_per_node"] == 8 and v["zero"] == 3 and v["deepspeed"]
    # accelerate fills bf16 "auto" from mixed_precision: DeepSpeed's bf16 engine
    assert v["precision"] == "mixed"
    cfg = TrainingConfig.parse(**with_recipe(recipe, {"model": "llama-7b", "cpu_mem": 64}))
    ds = estimate(cfg).deepspeed
    assert ds is not None
    host = ds["host"]
    # 20 B per parameter of a rank's sixteenth, 8 ranks on each of the 2 nodes
    assert host["gpus_per_node"] == 8 and host["per_node_bytes"] == 8 * 20 * 6738415616 // 16
    assert host["fits"] is False  # 67.38 GB of 64 GB


def test_an_accelerate_config_inline_and_fsdp(tmp_path: Path) -> None:
    inline = (
        "distributed_type: DEEPSPEED\nnum_processes: 8\nmixed_precision: bf16\n"
        "deepspeed_config:\n  zero_stage: 2\n  offload_optimizer_device: nvme\n"
        "  offload_param_device: none\n  gradient_accumulation_steps: 4\n"
        "compute_environment: LOCAL_MACHINE\n"
    )
    v = read_recipe([_write(tmp_path, "ds.yaml", inline)]).values
    assert v["zero"] == 2 and v["offload_optimizer"] and v["offload_to"] == "nvme"
    assert v["grads_kept"] and v["precision"] == "mixed" and "offload_param" not in v
    fsdp = (
        "distributed_type: FSDP\nnum_processes: 4\nmixed_precision: bf16\n"
        "fsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_offload_params: false\n"
        "  fsdp_activation_checkpointing: true\ncompute_environment: LOCAL_MACHINE\n"
    )
    v = read_recipe([_write(tmp_path, "fsdp.yaml", fsdp)]).values
    assert v["fsdp"] and v["zero"] == 2 and v["gpus"] == 4 and v["checkpointing"] == "full"
    assert "deepspeed" not in v


FIXTURES = Path(__file__).parent / "fixtures" / "deepspeed"


@pytest.mark.parametrize(("optimizer", "params"), [("nvme", "cpu"), ("cpu", "nvme"),
                                                    ("nvme", "nvme"), ("cpu", "cpu")])  # fmt: skip
def test_each_offloaded_parts_device_is_read_as_its_own(
    tmp_path: Path, optimizer: str, params: str
) -> None:
    # DeepSpeed's JSON and accelerate's config name each part's device apart; reading both as
    # nvme when one was counted the parameters' or the optimizer's host memory short.
    zero = {**Z3_OFFLOAD["zero_optimization"], "offload_optimizer": {"device": optimizer},
            "offload_param": {"device": params}}  # fmt: skip
    ds = read_recipe([_write(tmp_path, "ds.json", {**Z3_OFFLOAD, "zero_optimization": zero})])
    yaml = (
        "distributed_type: DEEPSPEED\nnum_processes: 8\nmixed_precision: bf16\n"
        f"deepspeed_config:\n  zero_stage: 3\n  offload_optimizer_device: {optimizer}\n"
        f"  offload_param_device: {params}\ncompute_environment: LOCAL_MACHINE\n"
    )
    acc = read_recipe([_write(tmp_path, "acc.yaml", yaml)])
    for recipe in (ds, acc):
        v = recipe.values
        assert v["offload_optimizer"] and v["offload_param"]
        assert v.get("offload_to", "cpu") == optimizer
        assert v.get("offload_param_to") == (params if params != optimizer else None)
        cfg = TrainingConfig.parse(**with_recipe(recipe, {"model": "llama-7b", "gpus": 8}))
        host = estimate(cfg).deepspeed["host"]
        names = " ".join(x["name"] for x in host["lines"])
        assert ("fp32 master weights" in names) == (optimizer == "cpu")
        assert ("NVMe swap buffers of the parameters" in names) == (params == "nvme")


@pytest.mark.parametrize("name", ["ds_config_zero3.json", "ds_config_zero2.json"])
def test_transformers_own_deepspeed_configs_through_the_trainer(tmp_path: Path, name: str) -> None:
    """transformers' tests/deepspeed configs (fp16 "auto", no bf16 section) with a Trainer that
    asks for bf16: accelerate's set_mixed_precision adds the bf16 section, so the engine is
    DeepSpeed's 16-bit one; every key of the file is accounted for."""
    (tmp_path / name).write_bytes((FIXTURES / name).read_bytes())
    args = {"output_dir": "out", "per_device_train_batch_size": 2, "bf16": True,
            "deepspeed": name, "learning_rate": 1e-5}  # fmt: skip
    recipe = read_recipe([_write(tmp_path, "args.json", args)])
    v = recipe.values
    assert v["precision"] == "mixed" and v["deepspeed"] and v["offload_optimizer"]
    assert v["zero"] == (3 if "zero3" in name else 2) and v["batch"] == 2
    lines = _lines(recipe)
    assert "set_mixed_precision" in lines["(the Trainer's bf16)"]
    assert "read by DeepSpeed's engine" in lines["bf16"]
    assert not any("overrides" in n or "autocast" in n for n in recipe.notes)
    from profiling.recipes.recipe import flatten

    data = json.loads((FIXTURES / name).read_text())
    said = {s.key for s in recipe.used + recipe.ignored if s.file == name}
    assert set(flatten(data)) <= said


def test_accelerates_template_names_a_file_that_is_not_here() -> None:
    recipe = read_recipe([FIXTURES / "accelerate_deepspeed.yaml"])
    assert recipe.framework == "accelerate" and recipe.values["gpus"] == 2
    assert "is not a file here" in _lines(recipe)["deepspeed_config.deepspeed_config_file"]


def test_the_agents_tool_takes_a_deepspeed_config_as_from_file(tmp_path: Path) -> None:
    """The tool's schema leaves DeepSpeed's fields out (tokens); its from_file sets them."""
    from journal_agent.tools.base import ToolContext
    from journal_agent.tools.memory_estimate import MemoryEstimate

    (tmp_path / "ds_config_zero3.json").write_bytes(
        (FIXTURES / "ds_config_zero3.json").read_bytes()
    )
    ctx = ToolContext(root=tmp_path)
    done = MemoryEstimate().call(
        ctx, {"from_file": ["ds_config_zero3.json"], "model": "llama-7b", "gpus": 8}
    )
    assert not done.is_error, done.content
    assert "DeepSpeed ZeRO-3, optimizer and parameters offloaded to cpu" in done.content
    assert "Host (CPU) memory per rank, offloaded by DeepSpeed" in done.content
    refused = MemoryEstimate().call(ctx, {"model": "llama-7b", "deepspeed": True, "zero": 3})
    assert refused.is_error


def test_a_deepspeed_config_given_beside_the_trainers_arguments(tmp_path: Path) -> None:
    """The agents' tools follow no reference: the user gives both files; the DeepSpeed one is
    read with the Trainer's values, as the Trainer reads the file it names."""
    (tmp_path / "ds_config_zero3.json").write_bytes(
        (FIXTURES / "ds_config_zero3.json").read_bytes()
    )
    args = {"output_dir": "out", "per_device_train_batch_size": 2, "bf16": True,
            "deepspeed": "ds_config_zero3.json"}  # fmt: skip
    paths = [_write(tmp_path, "args.json", args), tmp_path / "ds_config_zero3.json"]
    recipe = read_recipe(paths, follow=False)
    v = recipe.values
    assert v["precision"] == "mixed" and v["zero"] == 3 and v["deepspeed"]
    lines = _lines(recipe)
    assert "the Trainer's per_device_train_batch_size" in lines["train_micro_batch_size_per_gpu"]
    assert "given beside it" in lines["deepspeed"]
    assert not any("overrides" in n for n in recipe.notes)


def test_zero3s_sub_groups_partial_offload_and_dtypes_are_read(tmp_path: Path) -> None:
    """sub_group_size, stage3_max_reuse_distance, offload_optimizer.ratio, data_types and
    communication_data_type set the estimate's fields at ZeRO-3, where DeepSpeed reads them;
    at ZeRO-2 each is said as what it is there, and activation_checkpointing as the engine's
    no-op (only deepspeed.checkpointing's own callers read it)."""
    zero = {"stage": 3, "sub_group_size": 2e8, "stage3_max_reuse_distance": 0,
            "offload_optimizer": {"device": "cpu", "ratio": 0.4}}  # fmt: skip
    data = {"bf16": {"enabled": True}, "zero_optimization": zero,
            "data_types": {"grad_accum_dtype": "fp32"}, "communication_data_type": "fp32",
            "activation_checkpointing": {"partition_activations": True,
                                         "cpu_checkpointing": True}}  # fmt: skip
    recipe = read_recipe([_write(tmp_path, "ds_z3.json", data)])
    v = recipe.values
    assert (v["sub_group_size"], v["max_reuse_distance"], v["offload_ratio"]) == (2e8, 0, 0.4)
    assert v["grad_accum_dtype"] == "fp32" and v["comm_dtype"] == "fp32"
    lines = _lines(recipe)
    assert "engine never reads it" in lines["activation_checkpointing.partition_activations"]
    assert "engine never reads it" in lines["activation_checkpointing.cpu_checkpointing"]
    cfg = TrainingConfig.parse(**with_recipe(recipe, {"model": "llama-7b", "gpus": 1}))
    by = {c.name: c.bytes for c in estimate(cfg).components}
    assert by["DeepSpeed gradient bucket (reduce_bucket_size)"] == 500_000_000 * 4
    assert any(n.startswith("DeepSpeed offload_optimizer.ratio") for n in by)
    zero2 = {**data, "zero_optimization": {**zero, "stage": 2}}
    recipe = read_recipe([_write(tmp_path, "ds_z2.json", zero2)])
    assert not {"sub_group_size", "offload_ratio"} & set(recipe.values)
    assert recipe.values["grad_accum_dtype"] == recipe.values["comm_dtype"] == "fp32"
    lines = _lines(recipe)
    assert "ZeRO-3 only" in lines["zero_optimization.sub_group_size"]
    assert "converts the bucket's flattened slices" in lines["communication_data_type"]
    assert "stays in the model's dtype" in lines["data_types.grad_accum_dtype"]
    # under fp16 they are read against fp16 (ds_fp16): fp32 converts either way
    fp16 = {**zero2, "bf16": {"enabled": False}, "fp16": {"enabled": True}}
    v = read_recipe([_write(tmp_path, "ds_z2_fp16.json", fp16)]).values
    assert v["ds_fp16"] is True and v["comm_dtype"] == v["grad_accum_dtype"] == "fp32"
    assert "offloaded" in lines["zero_optimization.offload_optimizer.ratio"]
    TrainingConfig.parse(**with_recipe(recipe, {"model": "llama-7b", "gpus": 8}))  # estimable


def test_the_trainers_own_optimizer_has_two_groups_and_bf16_accumulates_in_fp32(
    tmp_path: Path,
) -> None:
    """With no optimizer section the Trainer builds its AdamW itself (transformers'
    deepspeed_optim_sched → create_optimizer): weight decay and no decay, two groups DeepSpeed
    flattens apart; with one, DeepSpeed's own over one list. data_types.grad_accum_dtype fp32
    at ZeRO-1 with bf16 is DeepSpeed's BF16_Optimizer, read, not left out."""
    zero1 = {"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 1},
             "data_types": {"grad_accum_dtype": "fp32"},
             "communication_data_type": "fp32"}  # fmt: skip
    _write(tmp_path, "ds_z1.json", zero1)
    args = {"output_dir": "out", "per_device_train_batch_size": 1, "bf16": True,
            "deepspeed": "ds_z1.json"}  # fmt: skip
    recipe = read_recipe([_write(tmp_path, "args.json", args)])
    v = recipe.values
    assert v["hf_param_groups"] is True and v["grad_accum_dtype"] == "fp32" and v["zero"] == 1
    assert "BF16_Optimizer" in _lines(recipe)["data_types.grad_accum_dtype"]
    assert v["comm_dtype"] == "fp32"  # its all-reduce's dtype
    cfg = TrainingConfig.parse(**with_recipe(recipe, {"model": "gpt2-small", "gpus": 8}))
    names = {c.name for c in estimate(cfg).components}
    assert any(n.startswith("DeepSpeed BF16_Optimizer fp32 gradient accumulators") for n in names)
    own = {**zero1, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}
    _write(tmp_path, "ds_z1.json", own)
    assert "hf_param_groups" not in read_recipe([_write(tmp_path, "args.json", args)]).values
    # alone (no Trainer) the optimizer is the user's: nothing said of its groups
    assert "hf_param_groups" not in read_recipe([_write(tmp_path, "ds.json", zero1)]).values
    # offloaded, fp32 accumulation runs the ZeRO optimizer's grad_accum path: read as that
    off = {**zero1, "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}}
    recipe = read_recipe([_write(tmp_path, "ds_off.json", off)])
    assert recipe.values["grad_accum_dtype"] == "fp32"
    assert "fp32 grad_accum of every parameter" in _lines(recipe)["data_types.grad_accum_dtype"]
    # in fp16 the engine keeps its ZeRO optimizer (BF16_Optimizer is bf16's): its grad_accum
    fp16 = {**zero1, "bf16": {"enabled": False}, "fp16": {"enabled": True},
            "communication_data_type": "bf16"}  # fmt: skip
    recipe = read_recipe([_write(tmp_path, "ds_fp16.json", fp16)])
    v = recipe.values
    assert v["ds_fp16"] is True and v["grad_accum_dtype"] == "fp32" and v["comm_dtype"] == "bf16"
    assert "ZeRO-1 with fp16" in _lines(recipe)["data_types.grad_accum_dtype"]
    cfg = TrainingConfig.parse(**with_recipe(recipe, {"model": "gpt2-small", "gpus": 8}))
    names = {c.name for c in estimate(cfg).components}
    assert "DeepSpeed ZeRO-1 fp32 gradient accumulators (grad_accum, every parameter's)" in names
    # a partial offload to NVMe is read (stage3.py swaps the sub-groups of 1 MiB or more)
    nvme = {"bf16": {"enabled": True}, "zero_optimization": {"stage": 3, "offload_optimizer": {
        "device": "nvme", "nvme_path": "/local_nvme", "ratio": 0.3}}}  # fmt: skip
    assert read_recipe([_write(tmp_path, "ds_nvme.json", nvme)]).values["offload_ratio"] == 0.3


def test_deepspeeds_legacy_bfloat16_section_is_its_bf16_unless_accelerate_shadows_it(
    tmp_path: Path,
) -> None:
    # transformers' own tests/deepspeed/ds_config_zero3_bf16.json spells it "bfloat16": DeepSpeed
    # reads it when the file has no "bf16" section (get_bfloat16_config).
    legacy = {"bfloat16": {"enabled": True}, "zero_optimization": {"stage": 3}}
    recipe = read_recipe([_write(tmp_path, "ds.json", legacy)])
    assert recipe.values["precision"] == "mixed"
    assert "16-bit engine" in _lines(recipe)["bfloat16.enabled"]
    cfg = TrainingConfig.parse(**with_recipe(recipe, {"model": "llama-7b", "gpus": 8}))
    assert cfg.precision == "mixed"
    # "bf16" wins when both are there, as in DeepSpeed.
    both = {"bf16": {"enabled": False}, **legacy}
    recipe = read_recipe([_write(tmp_path, "both.json", both)])
    assert "precision" not in recipe.values
    # Through the Trainer, accelerate's set_mixed_precision adds a "bf16" section, which shadows
    # the legacy one: the Trainer's bf16 decides.
    _write(tmp_path, "ds_legacy.json", legacy)
    args = {"output_dir": "out", "per_device_train_batch_size": 1, "bf16": False,
            "deepspeed": "ds_legacy.json"}  # fmt: skip
    recipe = read_recipe([_write(tmp_path, "args.json", args)])
    assert recipe.values["precision"] == "fp32"
    assert "shadowed" in _lines(recipe)["bfloat16.enabled"]
    # "auto" in the legacy section: nothing fills it; said, not read as on or off.
    auto = {"bfloat16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}}
    recipe = read_recipe([_write(tmp_path, "auto.json", auto)])
    assert "precision" not in recipe.values
    assert '"auto" not resolved' in _lines(recipe)["bfloat16.enabled"]


def test_a_precision_the_trainer_would_refuse_is_refused(tmp_path: Path) -> None:
    """The Trainer raises on an explicit bf16.enabled / fp16.enabled that differs from its own
    fp16 / bf16 (HfTrainerDeepSpeedConfig.fill_match): not estimated as the config's bf16."""
    ds = {"bf16": {"enabled": True}, "zero_optimization": {"stage": 3},
          "train_micro_batch_size_per_gpu": "auto"}  # fmt: skip
    (tmp_path / "ds.json").write_text(json.dumps(ds), encoding="utf-8")
    args = {"output_dir": "o", "per_device_train_batch_size": 1, "fp16": True,
            "deepspeed": "ds.json"}  # fmt: skip
    (tmp_path / "args.json").write_text(json.dumps(args), encoding="utf-8")
    with pytest.raises(ProfilingError, match=r"bf16\.enabled = true does not match the Trainer"):
        read_recipe([tmp_path / "args.json", tmp_path / "ds.json"])
    args["bf16"], args["fp16"] = True, False
    (tmp_path / "args.json").write_text(json.dumps(args), encoding="utf-8")
    assert (
        read_recipe([tmp_path / "args.json", tmp_path / "ds.json"]).values["precision"] == "mixed"
    )


def test_a_trainer_that_ran_saves_accelerates_state_which_is_no_setting(tmp_path: Path) -> None:
    # A training_args.bin saved by a Trainer that ran holds accelerate's PartialState
    # (`args.device` sets it up): its keys were listed as settings the reader did not know.
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to=[])
        assert str(args.device) == "cpu"  # what a run does first: sets distributed_state
    torch.save(args, tmp_path / "training_args.bin")
    lines = _lines(read_recipe([tmp_path / "training_args.bin"]))
    state = {k: v for k, v in lines.items() if k.startswith("distributed_state.")}
    assert "distributed_state.num_processes" in state, sorted(lines)
    assert all("--gpus says the job's GPUs" in v for v in state.values()), state
    assert not [k for k, v in lines.items() if "not a setting this reader knows" in v]
