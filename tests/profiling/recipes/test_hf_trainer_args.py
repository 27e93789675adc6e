"""The Trainer's arguments read as the Trainer reads them (#31/#32, audit3 D36, D40, D41): FSDP's
``offload`` is FSDP2's CPU offload (weights, gradients and optimizer state on the host, judged
against ``--cpu-mem``), refusals are one sentence in the file's own keys, and every field of the
installed transformers' ``TrainingArguments`` is used, refused or ignored with a reason."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.plans.closed_form import estimate_plan
from profiling.plans.host import plan_host
from profiling.recipes import read_recipe, with_recipe

HF = Path(__file__).parent / "fixtures" / "hf_trainer"
UNKNOWN = "not a setting this reader knows"


def _write(tmp_path: Path, args: dict[str, Any]) -> Path:
    path = tmp_path / "args.json"
    path.write_text(json.dumps(args), encoding="utf-8")
    return path


def _values(path: Path, **given: Any) -> dict[str, Any]:
    return with_recipe(read_recipe([path]), {"model": "hf:llama-3.2-1b", **given})


# ---------------------------------------------------------------- D36: FSDP2's CPU offload


def test_fsdp_offload_puts_weights_gradients_and_state_on_the_host(cli, tmp_path: Path) -> None:
    done = cli("estimate", "--from", str(HF / "a9.json"), "--model", "hf:llama-3.2-1b",
               "--gpus", "8", "--cpu-mem", "64", "--json", "--no-save", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    used = {(s["key"], s["field"]) for s in data["recipe"]["used"]}
    assert ("fsdp", "offload_optimizer") in used
    assert ("fsdp_config.transformer_layer_cls_to_wrap", None) in used  # read with the wrap
    assert not any(UNKNOWN in s["why"] for s in data["recipe"]["ignored"])
    on_gpu = {c["category"]: 0 for c in data["components"]}
    for c in data["components"]:
        if c["group"] == "model states":
            on_gpu[c["category"]] += c["bytes"]
    assert on_gpu["gradients"] == 0 and on_gpu["optimizer"] == 0
    host = data["deepspeed"]["host"]
    assert host["per_node_bytes"] == 8 * host["per_rank_bytes"]
    assert host["fits"] is (host["per_node_bytes"] <= 64e9)


def _offloaded(precision: str, model: str = "llama-7b") -> tuple[Any, Any]:
    base = {"model": model, "precision": precision, "fsdp": True, "gpus": 8}
    return (
        estimate(TrainingConfig(**base)),
        estimate(TrainingConfig(**base, offload_optimizer=True)),
    )


@pytest.mark.parametrize("precision", ["mixed", "bf16", "fp32", "amp-bf16"])
def test_the_host_holds_what_the_gpu_held_and_the_gpu_a_groups_shards(precision: str) -> None:
    on, off = _offloaded(precision)

    def states(e: Any, category: str) -> int:
        return sum(
            c.bytes for c in e.components if c.group == "model states" and c.category == category
        )

    moved = sum(states(on, c) for c in ("parameters", "gradients", "optimizer"))
    assert off.deepspeed["host"]["per_rank_bytes"] == pytest.approx(moved, abs=8)
    assert states(off, "gradients") == states(off, "optimizer") == 0
    # on the GPU: one group's shard in and one gradient shard out (plans.cpu_offload)
    root = int(on.shape["root_params"])
    shard = 2 if precision == "bf16" else 4
    assert states(off, "parameters") == 2 * -(-root // 8) * shard
    assert off.per_gpu_bytes < on.per_gpu_bytes


@pytest.mark.parametrize("precision", ["mixed", "bf16", "fp32"])
def test_the_host_is_the_plans_fsdp2_offload_model(precision: str) -> None:
    """The same model as fit --gpus N's FSDP2 CPU-offload plan (5340447): its host bytes per
    node, the optimizer's step counters (4 B per tensor) included in both."""
    _, off = _offloaded(precision)
    plan = TrainingConfig(model="llama-7b", precision=precision, fsdp=True, gpus=8,
                          offload_optimizer=True, dp_shard=8)  # fmt: skip
    ours = off.deepspeed["host"]["per_node_bytes"]
    theirs = plan_host(estimate_plan(plan))
    assert theirs is not None and theirs["per_node_bytes"] == ours


def test_fsdp_config_cpu_offload_is_the_same_offload(tmp_path: Path) -> None:
    fsdp_config = {"cpu_offload": True, "reshard_after_forward": False}
    path = _write(tmp_path, {"per_device_train_batch_size": 1, "bf16": True, "fsdp": True,
                             "fsdp_config": fsdp_config})  # fmt: skip
    values = _values(path)
    assert values["fsdp"] and values["offload_optimizer"] and values["zero"] == 2


def test_the_trace_says_fsdp_offload_is_estimated() -> None:
    from profiling.trace.untraceable import untraceable

    cfg = TrainingConfig(model="hf:llama-3.2-1b", fsdp=True, gpus=2, offload_optimizer=True)
    assert any("FSDP2's CPU offload is estimated" in p for p in untraceable(cfg))


# ---------------------------------------------------------------- D40: one sentence, own keys


def test_paged_optimizer_with_fsdp_offload_is_one_sentence_in_the_files_keys() -> None:
    with pytest.raises(ProfilingError) as caught:
        _values(HF / "a2.json", gpus=8)
    text = str(caught.value)
    assert "optim = 'paged_adamw_32bit'" in text and "fsdp = 'full_shard auto_wrap offload'" in text
    assert "--" not in text and text.count(". ") == 0


# ---------------------------------------------------------------- D41: the rest


def test_galore_is_read_as_a_bound_with_its_target_modules() -> None:
    recipe = read_recipe([HF / "a4.json"])
    optim = next(s for s in recipe.used if s.key == "optim")
    assert optim.to == "adamw" and "GaLore" in optim.why and "bound" in optim.why
    assert any(s.key == "optim_target_modules" for s in recipe.used)
    assert not any(UNKNOWN in s.why for s in recipe.ignored)


@pytest.mark.parametrize(
    "optim", ["galore_adamw_8bit", "galore_adafactor", "apollo_adamw", "ademamix", "lomo",
              "grokadamw", "schedule_free_adamw", "stable_adamw", "adamw_torch_xla", "nonsense"],
)  # fmt: skip
def test_an_optimizer_not_modelled_is_refused_unless_given(tmp_path: Path, optim: str) -> None:
    path = _write(tmp_path, {"per_device_train_batch_size": 1, "optim": optim})
    with pytest.raises(ProfilingError, match=f"optim = '{optim}' is not estimated"):
        _values(path)
    assert _values(path, optimizer="adamw")["optimizer"] == "adamw"


def test_no_precision_key_is_said_without_unset() -> None:
    recipe = read_recipe([HF / "a8.json"])
    line = next(s.line() for s in recipe.used if s.field == "precision")
    assert "(unset)" not in line and line.startswith("(neither bf16 nor fp16)")


@pytest.mark.parametrize(
    ("extra", "field", "to"),
    [
        ({"use_liger_kernel": True}, "loss", "liger"),
        ({"gradient_checkpointing": True, "gradient_checkpointing_kwargs": {"offload": True}},
         "activation_offload", True),
        ({"use_cpu": True}, "target", "cpu"),
        ({"fsdp": "full_shard", "gradient_accumulation_steps": 4}, "accumulate_unsharded", 4),
        ({"gradient_accumulation_steps": 4}, "grads_kept", True),
    ],
)  # fmt: skip
def test_settings_that_change_the_step_are_used(
    tmp_path: Path, extra: dict[str, Any], field: str, to: Any
) -> None:
    path = _write(tmp_path, {"per_device_train_batch_size": 1, "bf16": True, **extra})
    assert read_recipe([path]).values[field] == to


def test_liger_without_its_fused_loss_keeps_pytorchs_loss(tmp_path: Path) -> None:
    path = _write(tmp_path, {"per_device_train_batch_size": 1, "use_liger_kernel": True,
                             "liger_kernel_config": {"fused_linear_cross_entropy": False,
                                                     "cross_entropy": True}})  # fmt: skip
    recipe = read_recipe([path])
    assert "loss" not in recipe.values
    assert not any(UNKNOWN in s.why for s in recipe.ignored)


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"label_smoothing_factor": 0.1}, "label_smoothing_factor"),
        ({"use_cache": True}, "use_cache"),
        ({"gradient_checkpointing": True,
          "gradient_checkpointing_kwargs": {"every_n_layers": 2}}, "every_n_layers"),
        ({"parallelism_config": {"tp_size": 2}}, "parallelism_config"),
        ({"accelerator_config": {"split_batches": True}}, "split_batches"),
        ({"debug": "underflow_overflow"}, "debug"),
        ({"fsdp": "hybrid_shard"}, "fsdp"),
        ({"fsdp": True, "fsdp_config": {"auto_wrap_policy": "SIZE_BASED_WRAP"}}, "auto_wrap"),
        ({"fsdp": "full_shard offload", "gradient_accumulation_steps": 2},
         "gradient_accumulation_steps"),
    ],
)  # fmt: skip
def test_settings_not_modelled_are_refused_in_one_sentence(
    tmp_path: Path, extra: dict[str, Any], key: str
) -> None:
    path = _write(tmp_path, {"per_device_train_batch_size": 1, **extra})
    with pytest.raises(ProfilingError) as caught:
        _values(path, gpus=8)
    assert key in str(caught.value) and "args.json" in str(caught.value)


def _a_value(field: dataclasses.Field[Any]) -> Any:
    """A JSON value of the field's kind: its default, else a plausible setting."""
    if field.default is not dataclasses.MISSING and field.default is not None:
        value = field.default
        return value.value if hasattr(value, "value") else value
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return "x" if field.name.endswith(("dir", "name", "id")) else None


def test_every_training_argument_is_used_refused_or_ignored_with_a_reason(tmp_path: Path) -> None:
    """Each field of the installed transformers' TrainingArguments, at its default, lands in
    used or ignored with a reason this reader gives (none unknown), and the file is read."""
    transformers = pytest.importorskip("transformers")
    fields = dataclasses.fields(transformers.TrainingArguments)
    args = {f.name: _a_value(f) for f in fields if f.init}
    args = {k: v for k, v in args.items() if not (isinstance(v, (list, dict)) and not v)}
    recipe = read_recipe([_write(tmp_path, args)])
    unknown = [s.key for s in recipe.ignored if UNKNOWN in s.why]
    assert unknown == []
    said = {s.key.split(".")[0] for s in recipe.used + recipe.ignored}
    assert set(args) - said == set()
    assert recipe.values["precision"] == "fp32" and recipe.values["batch"] == 8


def test_fsdp_accumulation_is_unsharded_on_many_gpus_and_kept_on_one(tmp_path: Path) -> None:
    path = _write(tmp_path, {"per_device_train_batch_size": 1, "bf16": True,
                             "fsdp": "full_shard", "gradient_accumulation_steps": 4})  # fmt: skip
    assert _values(path, gpus=4)["accumulate_unsharded"] == 4
    one = _values(path)
    assert one["grads_kept"] and "accumulate_unsharded" not in one


# transformers 4.46's TrainingArguments.to_dict() keys that transformers 5 renamed or dropped
OLD_KEYS = {
    "per_gpu_train_batch_size": None, "per_gpu_eval_batch_size": None, "evaluation_strategy": "no",
    "fsdp_min_num_params": 0, "fsdp_transformer_layer_cls_to_wrap": None, "sharded_ddp": [],
    "split_batches": None, "dispatch_batches": None, "adafactor": False, "no_cuda": False,
    "use_mps_device": False, "tpu_num_cores": None, "tpu_metrics_debug": False, "warmup_ratio": 0.0,
    "logging_dir": "runs", "save_safetensors": True, "jit_mode_eval": False, "use_ipex": False,
    "fp16_backend": "auto", "push_to_hub_model_id": None, "include_inputs_for_metrics": False,
    "ray_scope": "last", "torchdynamo": None, "mp_parameters": "", "optim_args": None,
    "predict_with_generate": False, "generation_max_length": None, "sortish_sampler": False,
}  # fmt: skip


def test_an_older_transformers_arguments_are_accounted_for(tmp_path: Path) -> None:
    recipe = read_recipe([_write(tmp_path, {"per_device_train_batch_size": 2, **OLD_KEYS})])
    assert [s.key for s in recipe.ignored if UNKNOWN in s.why] == []
    assert recipe.values["batch"] == 2


@pytest.mark.parametrize(
    ("extra", "field", "to"),
    [
        ({"per_gpu_train_batch_size": 3}, "batch", 3),
        ({"adafactor": True}, "optimizer", "adafactor"),
    ],
)
def test_an_older_transformers_settings_are_read(
    tmp_path: Path, extra: dict[str, Any], field: str, to: Any
) -> None:
    path = _write(tmp_path, {"per_device_train_batch_size": 2, "optim": "adamw_torch", **extra})
    assert read_recipe([path]).values[field] == to


@pytest.mark.parametrize("key", ["sharded_ddp", "split_batches"])
def test_an_older_transformers_settings_not_modelled_are_refused(tmp_path: Path, key: str) -> None:
    value = "zero_dp_2" if key == "sharded_ddp" else True
    with pytest.raises(ProfilingError, match=key):
        _values(_write(tmp_path, {"per_device_train_batch_size": 1, key: value}), gpus=2)


def test_cpu_mem_is_taken_with_fsdp_whose_offload_fit_searches() -> None:
    """fit --fsdp searches FSDP2's CPU offload (fit.py's offload candidates): --cpu-mem judges
    its host memory, so it is no longer "a setting of DeepSpeed's ZeRO engine" there."""
    cfg = TrainingConfig.parse(model="llama-7b", gpus=8, fsdp=True, cpu_mem=64)
    off = estimate(cfg.model_copy(update={"offload_optimizer": True}))
    assert off.deepspeed["host"]["fits"] is (off.deepspeed["host"]["per_node_bytes"] <= 64e9)
