"""`--from FILE`: real recipe files (fixtures/SOURCES.md) read as their frameworks read them,
every key accounted for, the framework never imported."""

from __future__ import annotations

import contextlib
import json
import pickle
import sys
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.recipes import read_recipe, with_recipe
from profiling.recipes.recipe import flatten

FIXTURES = Path(__file__).parent / "fixtures"


def _accounted(recipe, *files: Path) -> None:
    """Every key of every file is used or ignored (with a reason), none silently dropped."""
    import tomllib

    import yaml

    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
        keys = set(flatten(data))
        said = {s.key for s in recipe.used + recipe.ignored if s.file == path.name}
        assert keys <= said, sorted(keys - said)
    assert all(s.why for s in recipe.ignored)


def test_litgpt_qlora_config_is_read_as_litgpt_reads_it() -> None:
    path = FIXTURES / "litgpt" / "llama-3.1-8b-qlora.yaml"
    recipe = read_recipe([path])
    assert recipe.framework == "LitGPT finetune lora"
    v = recipe.values
    assert v["model"] == "hf:llama-3.1-8b"  # checkpoints/meta-llama/Meta-Llama-3.1-8B
    assert v["precision"] == "bf16"  # bf16-true
    assert v["qlora"] is True and v["lora_rank"] == 32
    assert v["fabric_bnb"] is True  # Lightning's BitsandbytesPrecision: the head 4-bit too
    assert (v["batch"], v["seq"], v["gpus"]) == (2, 512, 1)
    assert v["grads_kept"] is True  # global 8 / micro 2: four micro-batches accumulated
    assert v["optimizer"] == "adamw"
    _accounted(recipe, path)
    # Settings our configuration cannot express yet are listed as such, not dropped.
    lines = "\n".join(recipe.lines())
    assert "lora_alpha = 16: does not change memory" in lines
    config = TrainingConfig.parse(**with_recipe(recipe, {}))
    assert config.describe().startswith("hf:llama-3.1-8b, bf16 paged adamw, QLoRA r=32")


def test_litgpt_quantized_trains_with_bitsandbytes_paged_adamw(tmp_path: Path) -> None:
    """quantize bnb.* makes LitGPT build bnb.optim.PagedAdamW whatever AdamW the file names
    (litgpt/utils.py instantiate_bnb_optimizer): fp32 states, those of tensors of 10⁵ values
    or more outside PyTorch's allocator, so out of the allocated peak LitGPT prints."""
    from profiling.estimate.memory import estimate

    path = FIXTURES / "litgpt" / "llama-3.1-8b-qlora.yaml"
    recipe = read_recipe([path])
    assert recipe.values["paged_optimizer"] is True and recipe.values["optimizer"] == "adamw"
    _accounted(recipe, path)
    est = estimate(TrainingConfig.parse(**with_recipe(recipe, {})))
    parts = {c.name: c.bytes for c in est.components}
    # r=32 on q and v of Llama 3.1 8B (h 4,096, k/v 1,024 wide), LitGPT's fused q/k/v adapter
    # (litgpt/lora.py LoRAQKVLinear: one A of 2·r rows, one B of q's and v's widths): A
    # 2·32·4,096 = 262,144 values and B (4,096 + 1,024)·32 = 163,840, both past 10⁵ and paged.
    # Two fp32 states (4 B each) per paged value, 32 blocks.
    paged = 32 * (2 * 32 * 4096 + (4096 + 1024) * 32) * 2 * 4
    assert parts["Paged optimizer state (CUDA managed memory)"] == paged
    assert est.counters is not None and est.counters.paged == paged
    assert parts["Optimizer: momentum"] == 4 * est.trainable_params - paged // 2
    # A paged optimizer the file names itself is paged without quantization too.
    text = path.read_text().replace("quantize: bnb.nf4", "quantize:")
    text = text.replace("torch.optim.AdamW", "bitsandbytes.optim.PagedAdamW8bit")
    (tmp_path / "paged.yaml").write_text(text)
    named = read_recipe([tmp_path / "paged.yaml"]).values
    assert (named["optimizer"], named["paged_optimizer"]) == ("adam8bit", True)
    # LitGPT refuses any other optimizer under quantization, and so do we, in one sentence.
    sgd = path.read_text().replace("torch.optim.AdamW", "torch.optim.SGD")
    (tmp_path / "sgd.yaml").write_text(sgd)
    with pytest.raises(ProfilingError, match=r"LitGPT refuses torch\.optim\.SGD with quantize"):
        read_recipe([tmp_path / "sgd.yaml"])


def test_litgpt_full_and_lora_configs() -> None:
    full = read_recipe([FIXTURES / "litgpt" / "llama-3.2-1B-full.yaml"])
    assert full.framework == "LitGPT finetune full"
    assert full.values["model"] == "hf:llama-3.2-1b" and "lora_rank" not in full.values
    assert (full.values["batch"], full.values["seq"]) == (4, 512)
    lora = read_recipe([FIXTURES / "litgpt" / "llama-3.2-1B-lora.yaml"])
    assert lora.framework == "LitGPT finetune lora" and lora.values["lora_rank"] == 32
    _accounted(lora, FIXTURES / "litgpt" / "llama-3.2-1B-lora.yaml")


def test_litgpt_full_on_many_gpus_steps_fsdp1s_foreach_adamw(tmp_path: Path) -> None:
    """finetune/full.py shards with Lightning's FSDPStrategy (FSDP1): its parameters are plain
    tensors, so torch's AdamW takes the foreach path, whose step holds a sqrt of every second
    moment at once — one more sharded state. LitGPT's Phi-2 full finetune on 2 GPUs (14.44 GB
    published) peaks there; with FSDP2's for-loop step we said 12.05 GB. finetune/lora.py on
    more than one device makes the same FSDPStrategy (litgpt at 43c44323 and 00af8b0), refused
    since the frozen weights' gradients were found (Lightning's use_orig_params=True)."""
    from profiling.estimate.memory import estimate

    def two_gpus(name: str) -> Path:
        text = (FIXTURES / "litgpt" / name).read_text().replace("devices: 1", "devices: 2")
        path = tmp_path / name
        path.write_text(text)
        return path

    full = read_recipe([two_gpus("llama-3.2-1B-full.yaml")])
    assert full.values["fsdp"] is True and full.values["foreach"] is True
    assert "Lightning's FSDPStrategy is FSDP1" in "\n".join(full.lines())
    ours = TrainingConfig.parse(**with_recipe(full, {}))
    est = estimate(ours)
    loop = estimate(ours.model_copy(update={"foreach": False}))

    def temps(e) -> dict[str, float]:
        return {c.name: c.bytes for c in e.components if c.name.startswith("Optimizer step temp")}

    def step(e) -> int:
        return next(m.bytes for m in e.moments if m.name.startswith("optimizer step"))

    # one bf16 temporary per state tensor: the rank's shard of every parameter
    assert temps(est) == {"Optimizer step temporaries (foreach)": est.params * 2 / 2}
    grew = est.params * 2 / 2 - sum(temps(loop).values())  # the for-loop's: the largest tensor
    assert step(est) - step(loop) == pytest.approx(grew, abs=2)
    # finetune/lora.py on more than one device: the same FSDPStrategy, whose default
    # use_orig_params=True puts a block's frozen and adapted weights in one flat parameter, so
    # the frozen weights' gradients are made too: refused, not counted low (the adapters' alone)
    with pytest.raises(ProfilingError, match=r"use_orig_params=True.*frozen weights' gradients"):
        read_recipe([two_gpus("llama-3.2-1B-lora.yaml")])
    # ... and says what they cost: a full finetune's gradients (the flat parameter requires grad
    # when any of its tensors does: torch's _flat_param.py)
    with pytest.raises(ProfilingError, match=r"Ψ/N·2 B sharded, Ψ·2 B on every device"):
        read_recipe([two_gpus("llama-3.2-1B-lora.yaml")])
    single = read_recipe([FIXTURES / "litgpt" / "llama-3.2-1B-full.yaml"])
    assert "foreach" not in single.values  # one GPU: torch's own default, nothing implied
    # A file that chooses is read as it says: foreach off, or fused (no foreach path at all).
    for args, foreach in (("foreach: false", False), ("fused: true", None)):
        path = two_gpus("llama-3.2-1B-full.yaml")
        head, tail = path.read_text().rsplit("  init_args:\n", 1)  # the optimizer's
        path.write_text(f"{head}  init_args:\n    {args}\n{tail}")
        assert read_recipe([path]).values.get("foreach") is foreach, args


def test_litgpt_gives_a_tied_model_its_own_lm_head() -> None:
    """Llama 3.2 ties its head to the embedding; LitGPT's converted checkpoint copies the
    embedding into lm_head, so its finetune keeps a second V·h table (0.53 GB in bf16)."""
    from profiling.estimate.memory import estimate

    for name in ("llama-3.2-1B-lora.yaml", "llama-3.2-1B-full.yaml"):
        recipe = read_recipe([FIXTURES / "litgpt" / name])
        assert recipe.values["tied_head"] is False
        lines = "\n".join(recipe.lines())
        assert "LitGPT's checkpoints give the LM head its own copy" in lines
        ours = TrainingConfig.parse(**with_recipe(recipe, {}))
        hubs = ours.model_copy(update={"tied_head": None})  # as the Hub's checkpoint ties it
        grew = estimate(ours).category_bytes("parameters") - estimate(hubs).category_bytes(
            "parameters"
        )
        per = 2 if ours.lora_rank is not None else 4 if ours.precision == "fp32" else 2
        assert grew == 128256 * 2048 * per, name


def test_torchtune_recipes_name_their_model_by_builder() -> None:
    path = FIXTURES / "torchtune" / "8B_qlora_single_device.yaml"
    recipe = read_recipe([path])
    assert recipe.framework == "torchtune"
    v = recipe.values
    assert v["model"] == "hf:llama-3.1-8b"  # torchtune.models.llama3_1.qlora_llama3_1_8b
    assert v["qlora"] is True and v["lora_rank"] == 8
    assert v["precision"] == "bf16" and v["batch"] == 2 and v["checkpointing"] == "full"
    assert "seq" not in v  # tokenizer.max_seq_len: null — the data decides
    assert any("max_seq_len unset" in n for n in recipe.notes)
    _accounted(recipe, path)
    # With the sequence given, it is a configuration.
    TrainingConfig.parse(**with_recipe(recipe, {"seq": 2048}))

    full = read_recipe([FIXTURES / "torchtune" / "1B_full_single_device.yaml"])
    assert full.values["model"] == "hf:llama-3.2-1b"
    assert full.values["optimizer"] == "adam8bit"  # bitsandbytes.optim.PagedAdamW8bit
    # optimizer_in_bwd: gradients are never all alive, so none are kept between micro-batches.
    assert "grads_kept" not in full.values
    keys = {s.key for s in full.used + full.ignored}
    assert "optimizer_in_bwd" in keys
    # ... and it sets --optimizer-in-bwd (it named a field we lack, so it was listed as not
    # modelled), beside the chunked linear loss the estimate now models with it.
    assert full.values["optimizer_in_bwd"] is True
    assert full.values["loss"] == "linear-chunked"
    est = estimate(TrainingConfig.parse(**with_recipe(full, {"seq": 2048})))
    assert est.category_bytes("gradients") == 0


def test_gemma_1_is_named_by_litgpt_checkpoints_and_torchtune_builders() -> None:
    from profiling.recipes.model_names import hub_model, torchtune_model

    assert hub_model("checkpoints/google/gemma-2b")[0] == "hf:gemma-2b"
    assert hub_model("google/gemma-7b-it")[0] == "hf:gemma-7b"
    assert torchtune_model("torchtune.models.gemma.lora_gemma_2b")[:3] == (
        "hf:gemma-2b",
        True,
        False,
    )
    assert torchtune_model("torchtune.models.gemma.gemma_7b")[0] == "hf:gemma-7b"
    assert torchtune_model("torchtune.models.gemma2.gemma2_2b")[0] == "hf:gemma-2-2b"


def test_torchtitan_toml_is_one_gpus_share() -> None:
    path = FIXTURES / "torchtitan" / "llama3_8b.toml"
    recipe = read_recipe([path])
    assert recipe.framework == "torchtitan"
    v = recipe.values
    assert v["model"] == "hf:llama-3.1-8b" and v["seq"] == 8192 and v["batch"] == 1
    assert v["precision"] == "mixed" and v["fsdp"] is True
    assert v["checkpointing"] == "selective-op"  # selective_ac_option = "op"
    _accounted(recipe, path)


def test_peft_adapter_config_with_the_model_given() -> None:
    path = FIXTURES / "peft" / "adapter_config.json"
    recipe = read_recipe([path])
    assert recipe.framework == "peft"
    assert recipe.values["lora_rank"] == 32
    _accounted(recipe, path)
    with pytest.raises(ProfilingError, match="names no model we ship"):
        with_recipe(recipe, {})
    values = with_recipe(recipe, {"model": "hf:llama-3.2-3b", "seq": 768, "batch": 4})
    TrainingConfig.parse(**values)


def test_flags_win_over_the_file_and_say_so() -> None:
    recipe = read_recipe([FIXTURES / "litgpt" / "llama-3.1-8b-qlora.yaml"])
    values = with_recipe(recipe, {"seq": 1024})
    assert values["seq"] == 1024
    assert any("--seq 1024 given: it overrides the recipe's 512" in n for n in recipe.notes)


def _trainer_files(tmp_path: Path) -> Path:
    """A checkpoint folder as the Trainer, peft and transformers write it: training_args.bin
    (torch.save of the real TrainingArguments), adapter_config.json, config.json."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    import warnings

    folder = tmp_path / "checkpoint-500"
    folder.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = transformers.TrainingArguments(
            output_dir=str(folder), per_device_train_batch_size=4, gradient_accumulation_steps=4,
            gradient_checkpointing=True, optim="paged_adamw_8bit", report_to=[],
        )  # fmt: skip
    args.bf16 = True  # (this machine has no GPU to validate bf16 against)
    torch.save(args, folder / "training_args.bin")
    bnb = transformers.BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True
    )
    from profiling.models.hf_config import catalogue_entry

    config = dict(catalogue_entry("llama-3.2-1b")["config"])
    config["quantization_config"] = bnb.to_dict()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    adapter = {
        "peft_type": "LORA", "r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "bias": "none",
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"], "task_type": "CAUSAL_LM",
        "base_model_name_or_path": "meta-llama/Llama-3.2-1B",
    }  # fmt: skip
    (folder / "adapter_config.json").write_text(json.dumps(adapter), encoding="utf-8")
    return folder


def test_a_trainer_checkpoint_folder_is_read_together(tmp_path: Path) -> None:
    folder = _trainer_files(tmp_path)
    before = set(sys.modules)
    recipe = read_recipe([folder])
    # Read as data: reading the pickle imported nothing it names.
    assert not {m for m in set(sys.modules) - before if m.startswith(("transformers", "peft"))}
    assert recipe.framework == "Hugging Face Trainer + bitsandbytes + peft"
    v = recipe.values
    assert v["batch"] == 4 and v["grads_kept"] is True and v["checkpointing"] == "full"
    assert v["optimizer"] == "adam8bit" and v["precision"] == "amp-bf16"
    assert v["qlora"] is True and v["lora_rank"] == 16
    assert v["model"] == "hf:llama-3.2-1b"  # the adapter's base model (a later file wins)
    config = TrainingConfig.parse(**with_recipe(recipe, {"seq": 1024}))
    assert config.qlora and config.lora_rank == 16


def test_a_hostile_pickle_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Attack:
        def __reduce__(self):
            import os

            return (os.system, (f"touch {marker}",))

    path = tmp_path / "training_args.bin"
    path.write_bytes(pickle.dumps({"per_device_train_batch_size": 2, "x": Attack()}))
    with contextlib.suppress(ProfilingError):  # one sentence is fine; running it is not
        read_recipe([path])
    assert not marker.exists()


def test_a_yaml_that_names_python_objects_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "lora.yaml"
    path.write_text(f'checkpoint_dir: !!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(ProfilingError, match="cannot be read as yaml"):
        read_recipe([path])
    assert not marker.exists()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("huge.yaml", "a: " + "x" * (2 << 20), "is over 1,048,576 bytes"),
        ("notes.txt", "hello", "a recipe is a .yaml, .json, .toml or training_args.bin"),
        ("list.json", "[1, 2]", "holds no table of settings"),
        ("other.yaml", "foo: 1\n", "not a recipe this reads"),
        ("broken.toml", "[model\n", "cannot be read as toml"),
    ],
)
def test_a_file_that_is_no_recipe_is_one_sentence(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ProfilingError, match=message):
        read_recipe([path])


def test_a_recipes_bad_value_names_its_key(tmp_path: Path) -> None:
    from profiling.errors import ConfigError
    from profiling.recipes import explain

    text = (FIXTURES / "litgpt" / "llama-3.2-1B-full.yaml").read_text()
    path = tmp_path / "full.yaml"
    path.write_text(text.replace("micro_batch_size: 4", "micro_batch_size: 0"))
    recipe = read_recipe([path])
    with pytest.raises(ConfigError) as caught:
        try:
            TrainingConfig.parse(**with_recipe(recipe, {}))
        except ConfigError as exc:
            raise explain(recipe, exc) from None
    assert "full.yaml's train.micro_batch_size = 0 gives" in str(caught.value)


def test_cli_estimate_from_a_recipe(cli, tmp_path: Path) -> None:
    path = FIXTURES / "litgpt" / "llama-3.1-8b-qlora.yaml"
    done = cli("estimate", "--from", str(path), "--gpu-mem", "24", "--json",
               "--root", str(tmp_path), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    recipe = data["recipe"]
    assert recipe["framework"] == "LitGPT finetune lora"
    assert {s["key"] for s in recipe["used"]} >= {"checkpoint_dir", "lora_r", "quantize"}
    assert any(s["key"] == "lora_alpha" for s in recipe["ignored"])
    text = cli("estimate", "--from", str(path), "--seq", "256", "--root", str(tmp_path),
               cwd=tmp_path)  # fmt: skip
    assert text.returncode == 0, text.stderr
    assert "used: train.micro_batch_size = 2 → --batch 2" in text.stdout
    assert "--seq 256 given: it overrides the recipe's 512" in text.stdout
    assert "seq 256 × batch 2" in text.stdout


def test_cli_turns_off_a_switch_the_recipe_turns_on(cli, tmp_path: Path) -> None:
    """Every switch has its --no- form: the file's optimizer_in_bwd: True is overridden (the
    flag alone could only turn switches on, so a recipe's True could not be undone)."""
    path = FIXTURES / "torchtune" / "1B_full_single_device.yaml"
    args = ("estimate", "--from", str(path), "--root", str(tmp_path))
    as_file = cli(*args, "--json", cwd=tmp_path)
    off = cli(*args, "--no-optimizer-in-bwd", "--json", cwd=tmp_path)
    assert as_file.returncode == 0 and off.returncode == 0, as_file.stderr + off.stderr
    in_bwd = "optimizer in backward: each parameter is stepped by a hook"
    assert any(in_bwd in n for n in json.loads(as_file.stdout)["notes"])
    assert not any(in_bwd in n for n in json.loads(off.stdout)["notes"])
    text = cli(*args, "--no-optimizer-in-bwd", cwd=tmp_path)
    assert "--no-optimizer-in-bwd given: it overrides the recipe's True" in text.stdout


def test_cli_without_a_model_is_one_sentence(cli, tmp_path: Path) -> None:
    done = cli("estimate", "--from", str(FIXTURES / "peft" / "adapter_config.json"),
               "--root", str(tmp_path), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1
    assert "names no model we ship" in done.stderr and "Traceback" not in done.stderr


def test_the_tool_reads_a_recipe_in_the_workspace_only(tmp_path: Path) -> None:
    from journal_agent.tools.base import ToolContext
    from journal_agent.tools.memory_estimate import MemoryEstimate

    (tmp_path / "lora.yaml").write_text(
        (FIXTURES / "litgpt" / "llama-3.2-1B-lora.yaml").read_text()
    )
    ctx = ToolContext(root=tmp_path)
    ok = MemoryEstimate().call(ctx, {"from_file": ["lora.yaml"]})
    assert not ok.is_error, ok.content
    assert "LitGPT finetune lora" in ok.content and "record:" in ok.content
    elsewhere = str(FIXTURES / "peft" / "adapter_config.json")
    outside = MemoryEstimate().call(ctx, {"from_file": [elsewhere], "model": "hf:llama-3.2-1b"})
    assert outside.is_error and "workspace" in outside.content, outside.content


def test_torchtitan_405b_preset_reads_its_parallelism_float8_and_async_tp() -> None:
    path = FIXTURES / "torchtitan" / "llama3_405b.toml"
    recipe = read_recipe([path])
    v = recipe.values
    assert v["tp"] == 8 and v["fsdp"] is True and "dp_shard" not in v  # -1: the launch decides
    assert v["checkpointing"] == "full" and (v["batch"], v["seq"]) == (2, 8192)
    _accounted(recipe, path)
    lines = "\n".join(recipe.lines())
    assert "used: parallelism.tensor_parallel_degree = 8 → --tp 8" in lines
    assert "give --dp-shard N" in lines  # what -1 leaves to the user
    assert "enable_async_tensor_parallel = true → --async-tp true" in lines
    assert "model.converters = 'float8' → --float8 'tensorwise'" in lines
    assert v["float8"] == "tensorwise" and v["float8_all_gather"] is True and v["async_tp"]
    # torchtitan's filter is ours; the scales precomputed after the step are said as not counted
    assert "float8.filter_fqns = 'output' (read with model.converters)" in lines
    assert "precompute_float8_dynamic_scale_for_fsdp = true: one fp32 scale" in lines
    # torchtitan's 405B flavour is the catalogue's Llama 3.1 405B (126 blocks of 16,384)
    assert v["model"] == "hf:llama-3.1-405b"


def test_a_shape_by_hand_replaces_the_model_a_recipe_names_and_says_so() -> None:
    """Flags win over the file: the 405B flavour's model is set aside for the shape given."""
    recipe = read_recipe([FIXTURES / "torchtitan" / "llama3_405b.toml"])
    shape = {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 32000, "arch": "llama"}
    values = with_recipe(recipe, {**shape, "dp_shard": 2})
    assert "model" not in values and values["layers"] == 4
    assert any("the shape by hand replaces the recipe's model 'hf:llama-3.1-405b'" in n
               for n in recipe.notes)  # fmt: skip
    cfg = TrainingConfig.parse(
        **{k: v for k, v in values.items() if k in TrainingConfig.model_fields}
    )
    assert cfg.hand_workload() is not None and cfg.hand_workload().layers == 4


def test_part_of_a_shape_replaces_those_fields_of_the_recipes_model() -> None:
    """--layers 4 alone beside a recipe: its model with 4 blocks, as beside --model (#31)."""
    from profiling.models.shape_overrides import workload_of

    recipe = read_recipe([FIXTURES / "torchtitan" / "llama3_405b.toml"])
    values = with_recipe(recipe, {"layers": 4, "dp_shard": 2})
    assert values["model"] == "hf:llama-3.1-405b" and values["layers"] == 4
    cfg = TrainingConfig.parse(
        **{k: v for k, v in values.items() if k in TrainingConfig.model_fields}
    )
    w = workload_of(cfg)
    assert w is not None and (w.layers, w.hidden) == (4, 16384)


def test_a_whole_shape_without_arch_shrinks_the_recipes_model_in_its_family() -> None:
    """All four of --layers --hidden --heads --vocab beside a LitGPT Llama recipe (a small
    variant to trace beside the estimate): the recipe's model with those fields, a Llama as
    transformers builds it. It was set aside for a GPT-2 shape by hand (LayerNorm, GELU), which
    the trace beside the estimate refused ("needs a --model … not --params") (#31)."""
    from profiling.models.shape_overrides import workload_of

    recipe = read_recipe([FIXTURES / "litgpt" / "llama-3.2-1B-lora.yaml"])
    shape = {"layers": 2, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn": 256, "vocab": 512}
    values = with_recipe(recipe, {**shape, "seq": 64})
    assert values["model"] == "hf:llama-3.2-1b"
    assert not any("replaces the recipe's model" in n for n in recipe.notes)
    cfg = TrainingConfig.parse(
        **{k: v for k, v in values.items() if k in TrainingConfig.model_fields}
    )
    w = workload_of(cfg)
    assert w is not None and w.arch == "llama" and w.hf_model_type == "llama"
    assert (w.layers, w.hidden, w.heads, w.n_kv_heads, w.ffn, w.vocab) == tuple(shape.values())


def _pipelined_toml(tmp_path: Path, parallelism: str) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(
        '[model]\nname = "llama3"\nflavor = "70B"\n\n'
        "[training]\nlocal_batch_size = 8\nseq_len = 8192\n\n"
        '[activation_checkpoint]\nmode = "full"\n\n'
        f"[parallelism]\n{parallelism}\n",
        encoding="utf-8",
    )
    return path


def test_torchtitan_pipeline_section_becomes_the_plan(tmp_path: Path) -> None:
    path = _pipelined_toml(
        tmp_path,
        "data_parallel_shard_degree = 8\ntensor_parallel_degree = 8\n"
        'pipeline_parallel_degree = 4\npipeline_parallel_schedule = "Interleaved1F1B"\n'
        "pipeline_parallel_microbatch_size = 2\ncontext_parallel_degree = 2\n"
        "data_parallel_replicate_degree = 2",
    )
    recipe = read_recipe([path])
    v = recipe.values
    assert (v["dp_shard"], v["tp"], v["pp"], v["cp"], v["dp_replicate"]) == (8, 8, 4, 2, 2)
    assert v["pp_schedule"] == "interleaved" and v["microbatches"] == 4  # 8 in fours of 2
    _accounted(recipe, path)
    config = TrainingConfig.parse(**with_recipe(recipe, {}))
    assert config.is_plan and config.gpus == 16  # dp_shard × dp_replicate
    # the flags win over the file, as for every other setting
    config = TrainingConfig.parse(**with_recipe(recipe, {"pp_schedule": "1f1b"}))
    assert config.pp_schedule == "1f1b"


def test_torchtitan_schedule_not_modelled_is_said_not_guessed(tmp_path: Path) -> None:
    path = _pipelined_toml(
        tmp_path,
        'pipeline_parallel_degree = 2\npipeline_parallel_schedule = "GPipe"\n'
        "pipeline_parallel_layers_per_stage = 4",
    )
    recipe = read_recipe([path])
    assert "pp_schedule" not in recipe.values and recipe.values["pp"] == 2
    lines = "\n".join(recipe.lines())
    assert "the GPipe schedule is not modelled" in lines
    assert "pipeline_parallel_layers_per_stage = 4: a stage split by hand is not modelled" in lines
    _accounted(recipe, path)


@pytest.mark.parametrize(
    ("policy", "parallelism", "zero", "said"),
    [
        ("never", "data_parallel_shard_degree = 8", 2, "→ --zero 2 (FSDP2 keeps each group"),
        ("default", "data_parallel_shard_degree = 8", None, "default: what the plan runs"),
        ("always", "data_parallel_shard_degree = 8", None, "final norm and output"),
        ("always", "pipeline_parallel_degree = 2", None, "every group after each microbatch"),
        (
            "always",
            "data_parallel_shard_degree = 1\ncontext_parallel_degree = 8",
            None,
            "final norm and output",
        ),
        ("never", "data_parallel_shard_degree = 1", None, "no FSDP"),
        ("sometimes", "data_parallel_shard_degree = 8", None, "not a policy this reader knows"),
    ],
)
def test_torchtitan_reshard_after_forward_policy_is_read_or_said(
    tmp_path: Path, policy: str, parallelism: str, zero: int | None, said: str
) -> None:
    # torchtitan's fsdp_reshard_after_forward: "never" is FSDP2's reshard_after_forward=False
    # on every group (our --zero 2); the others are what a plan runs or said not to be
    path = _pipelined_toml(tmp_path, f'{parallelism}\nfsdp_reshard_after_forward = "{policy}"')
    recipe = read_recipe([path])
    assert recipe.values.get("zero") == zero
    assert said in "\n".join(recipe.lines())
    _accounted(recipe, path)
    if zero:
        config = TrainingConfig.parse(**with_recipe(recipe, {}))
        assert config.is_plan and not config.reshard_after_forward
    if recipe.values.get("reshard_always"):  # a plan that runs it (beside CP too)
        assert TrainingConfig.parse(**with_recipe(recipe, {})).reshard_always


def test_torchtitan_context_parallel_alone_shards_over_the_cp_ranks(tmp_path: Path) -> None:
    # torchtitan applies FSDP2 over dp_shard_cp whenever CP is on: with dp_shard 1 the
    # parameters are sharded over the cp ranks alone (its 8B and 405B FSDP 1 × CP 8 rows)
    path = _pipelined_toml(tmp_path, "data_parallel_shard_degree = 1\ncontext_parallel_degree = 8")
    recipe = read_recipe([path])
    assert recipe.values["fsdp"] is True and recipe.values["dp_shard"] == 1
    assert recipe.values["cp"] == 8
    _accounted(recipe, path)
    config = TrainingConfig.parse(**with_recipe(recipe, {}))
    assert config.fsdp and config.gpus == 1 and config.cp == 8
    # without CP, dp_shard 1 still shards nothing
    plain = read_recipe([_pipelined_toml(tmp_path, "data_parallel_shard_degree = 1")])
    assert "fsdp" not in plain.values


@pytest.mark.parametrize(
    ("parallelism", "precision"),
    [
        ("data_parallel_shard_degree = 8", "mixed"),  # fully_shard's MixedPrecisionPolicy
        ("data_parallel_shard_degree = 1\ncontext_parallel_degree = 8", "mixed"),  # dp_shard_cp
        ("data_parallel_shard_degree = 1\ntensor_parallel_degree = 8", "fp32"),
        ("data_parallel_shard_degree = 1\npipeline_parallel_degree = 2", "fp32"),
        ("data_parallel_shard_degree = 1\ndata_parallel_replicate_degree = 8", "amp-bf16"),
    ],
)
def test_torchtitan_mixed_precision_is_what_maybe_enable_amp_makes_of_it(
    tmp_path: Path, parallelism: str, precision: str
) -> None:
    # torchtitan/distributed/utils.py maybe_enable_amp: fully_shard's policy under FSDP (CP
    # included), nothing beside TP or PP without FSDP ("Mixed precision training is disabled"),
    # torch.autocast over fp32 parameters under DDP alone — a plan's mixed (16-bit weights and
    # an fp32 master copy) was read for all of them
    recipe = read_recipe([_pipelined_toml(tmp_path, parallelism)])
    assert recipe.values["precision"] == precision
    _accounted(recipe, tmp_path / "plan.toml")
    if precision == "amp-bf16":  # DDP under autocast: a plan says it does not model it
        from profiling.plans.closed_form import estimate_plan

        with pytest.raises(ProfilingError, match="maybe_enable_amp"):
            estimate_plan(TrainingConfig.parse(**with_recipe(recipe, {})))


def test_a_litgpt_config_never_sets_dora_and_dora_beside_it_is_one_sentence(
    cli, tmp_path: Path
) -> None:
    """LitGPT has no DoRA (Lightning-AI/litgpt at 26857050), so none of its configs sets --dora
    and --dora given beside one is refused in one sentence (the trace had run LitGPT's fused
    q/k/v as plain LoRA while the estimate counted DoRA on q, k, v apart)."""
    for name in ("llama-3.2-1B-lora.yaml", "llama-3.1-8b-qlora.yaml", "llama-3.2-1B-full.yaml"):
        assert "dora" not in read_recipe([FIXTURES / "litgpt" / name]).values
    path = FIXTURES / "litgpt" / "llama-3.2-1B-lora.yaml"
    done = cli("estimate", "--from", str(path), "--dora", "--root", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1
    assert "LitGPT's finetune scripts (--loss litgpt" in done.stdout + done.stderr
    assert "have no DoRA: drop one of them" in done.stdout + done.stderr
