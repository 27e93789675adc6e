"""The one training configuration: error sentences, older spellings, generated flags and schemas."""

from __future__ import annotations

import math

import pytest

from profiling.config import OPTIMIZERS, ConfigError, TrainingConfig
from profiling.gpus import GPUS, find_gpu


@pytest.mark.parametrize(
    ("values", "flag_message", "field_message"),
    [
        ({"model": "llama-7b", "gpus": -2}, "--gpus must be at least 1 (got -2)", "gpus must"),
        ({"model": "llama-7b", "seq": 0}, "--seq must be at least 1 (got 0)", "seq must"),
        ({"model": "llama-7b", "seq": 10**12}, "--seq must be at most 100,000,000", "seq must"),
        (
            {"model": "llama-7b", "gpu": "a100"},
            "--gpu 'a100' is ambiguous; say a100-40gb or",
            "gpu ",
        ),
        (
            {"model": "llama-7b", "gpu": "tpu"},
            "--gpu 'tpu' is not a GPU we know; use one of",
            "gpu ",
        ),
        ({"params": math.nan}, "--params must be a finite number", "params must"),
        ({"params": "lots"}, "--params: cannot read 'lots' as a count", "params:"),
        (
            {"model": "llama-7b", "gpu_mem": math.inf},
            "--gpu-mem must be a finite number",
            "gpu_mem",
        ),
        ({"model": "llama-7b", "mfu": 1.5}, "--mfu must be at most 1", "mfu must"),
        (
            {"model": "llama-7b", "precision": "fp16"},
            "unknown precision 'fp16'; --precision takes fp32, amp-bf16, amp-fp16, mixed, bf16",
            "precision takes",
        ),
        (
            {"model": "llama-7b", "optimizer": "adamax"},
            "unknown optimizer 'adamax'; --optimizer takes adamw, adam, sgd",
            "optimizer takes",
        ),
        (
            {"params": 7e9, "precision": "fp32", "fp32_grads": True},
            "--fp32-grads is DeepSpeed's extra gradient copy under --precision mixed",
            "fp32_grads is",
        ),
        ({"params": 7e9, "fsdp": True, "zero": 1}, "FSDP2 has no ZeRO-1 mode", "zero 2"),
        ({"params": 7e9, "sequence_parallel": True}, "--sequence-parallel needs --tp > 1", "tp"),
        ({"model": "gpt2-small", "seq": 4096}, "--seq 4096 exceeds gpt2-small's maximum", "seq"),
        ({"model": "llama-7b", "foo": 1}, "unknown setting 'foo'; the settings are model", "foo"),
    ],
)
def test_bad_values_are_one_sentence_naming_flag_or_field(
    values: dict, flag_message: str, field_message: str
) -> None:
    with pytest.raises(ConfigError) as flag_err:
        TrainingConfig.parse(**values)
    assert flag_message in str(flag_err.value)
    assert "\n" not in str(flag_err.value)
    with pytest.raises(ConfigError) as field_err:
        TrainingConfig(**values)  # library callers: the same sentence with field names
    assert field_message in str(field_err.value) and "--" not in str(field_err.value).split()[0]


def test_counts_accept_numbers_and_suffixes() -> None:
    for value in (7_000_000_000, 7e9, "7B", "7e9", "7000M"):
        assert TrainingConfig(params=value).params == 7_000_000_000
    for value in (1_000_000_000, 1e9, "1e9", "1B"):  # --tokens 1e9 as people write it
        assert TrainingConfig(model="gpt2-small", tokens=value).tokens == 1_000_000_000


@pytest.mark.parametrize(
    ("legacy", "expected"),
    [
        ({"dtype": "bf16"}, {"precision": "amp-bf16"}),
        ({"dtype": "fp16"}, {"precision": "amp-fp16"}),
        ({"dtype": "fp32"}, {"precision": "fp32"}),
        ({"param_dtype": "bf16"}, {"precision": "bf16"}),
        ({"dtype": "bf16", "fsdp": True, "world_size": 4}, {"precision": "mixed", "gpus": 4}),
        ({"recompute": "selective"}, {"checkpointing": "selective"}),
        ({"checkpointing": True}, {"checkpointing": "full"}),
        ({"flash_attention": True}, {"attention": "flash"}),
        ({"world_size": 2, "fsdp": True, "no_reshard": True}, {"zero": 2, "fsdp": True}),
        ({"fsdp": True, "world_size": 2}, {"zero": 3}),
        ({"gpu_mem_gb": 40}, {"gpu_mem": 40}),
    ],
)
def test_older_spellings_map_to_the_vocabulary(legacy: dict, expected: dict) -> None:
    cfg = TrainingConfig(model="llama-7b", **legacy)
    assert cfg.model_dump(include=set(expected)) == expected


def test_older_and_newer_spelling_that_disagree_is_refused() -> None:
    with pytest.raises(ConfigError, match="--dtype bf16 means --precision amp-bf16, but"):
        TrainingConfig.parse(model="llama-7b", dtype="bf16", precision="mixed")


def test_gpu_table_and_names() -> None:
    assert find_gpu("H100 SXM").key == "h100-sxm" and find_gpu("RTX 4090").key == "rtx-4090"
    assert find_gpu("A100_80GB").memory_gb == 80
    # Datasheet dense 16-bit peaks (no sparsity), bandwidth in TB/s.
    table = {k: (g.bf16_tflops, g.bandwidth_tbs) for k, g in GPUS.items()}
    assert table["a100-40gb"] == (312, 1.555) and table["h100-sxm"] == (989, 3.35)
    assert table["h100-pcie"] == (756, 2.0) and table["h200"] == (989, 4.8)
    assert table["l4"] == (121, 0.3) and table["rtx-3090"] == (71, 0.936)
    # What users rent (the audit's `--gpu a10g` was unknown): AWS's A10G, the A10, the H100 NVL
    assert find_gpu("a10g").key == "a10g" and find_gpu("A10G").memory_gb == 24
    assert table["a10g"] == (70, 0.6) and table["a10"] == (125, 0.6)
    assert find_gpu("H100 NVL").key == "h100-nvl" and table["h100-nvl"] == (835, 3.9)
    assert GPUS["h100-nvl"].memory_gb == 94 and GPUS["l40s"].bf16_tflops == 362
    cfg = TrainingConfig(model="llama-7b", gpu="l40s")
    assert cfg.gpu_mem_bytes() == 48 * 10**9  # the datasheet's memory unless --gpu-mem says
    assert TrainingConfig(model="llama-7b", gpu="l40s", gpu_mem=40).gpu_mem_bytes() == 40 * 10**9


def test_cli_flags_and_tool_schemas_come_from_the_config(run_cli, tmp_path, monkeypatch) -> None:
    from journal_agent.tools.memory_estimate import MemoryEstimate
    from journal_agent.tools.memory_trace import MemoryTrace
    from profiling._config_deepspeed import DEEPSPEED_FIELDS

    # DeepSpeed's engine settings are offered by neither tool (a DeepSpeed config as from_file
    # sets them): every field costs tokens in each request. Nor is torchtune's activation
    # offloading, torch.compile, LitGPT's Fabric bitsandbytes or torchtitan's every N-th block
    # checkpointing (a recipe as from_file sets them).
    from_file_only = {*DEEPSPEED_FIELDS, "activation_offload", "compile", "fabric_bnb"}
    from_file_only |= {"checkpoint_every", "ulysses"}  # a DeepSpeed config sets ulysses
    from_file_only.add("target_seq")  # T5's target length: the CLI's flag, not the tools'
    from_file_only.add("accumulate_unsharded")  # FSDP's no_sync: a LitGPT config sets it
    from_file_only.add("fsdp_flat")  # FSDP1's flat parameters: a LitGPT config sets it
    from_file_only.add("litgpt_norm")  # LitGPT's own RMSNorm: a LitGPT config sets it
    from_file_only.add("litgpt_uncapped")  # LitGPT before v0.5.5's head chunks: a peer row sets it
    from_file_only.add("torchao_nf4")  # torchtune's QLoRA: its yaml sets it
    from_file_only.add("torchao_optim")  # torchao's AdamW8bit: a torchtune yaml names it
    from_file_only.add("dora")  # DoRA: peft's adapter_config.json or torchtune's yaml sets it
    from_file_only.add("torchtune_dora")  # torchtune's DoRALinear: its yaml's use_dora sets it
    from_file_only.add("autocast_adapters")  # peft's adapter_config.json + the Trainer's
    from_file_only.add("reshard_always")  # torchtitan's "always" policy: its TOML sets it
    from_file_only.add("pp_keeps_outputs")  # torch 2.6's pipeline stages: a config file sets it
    from_file_only.add("titan_root_group")  # torchtitan's 2024 FSDP groups: its TOML's layout
    from_file_only.add("kd_teacher")  # torchtune's distillation teacher: its KD yaml sets it
    from_file_only.add("ddp_find_unused")  # DDP's find_unused_parameters: a Trainer file sets it
    from_file_only.add("ddp_bucket_view")  # set in code, not files: the CLI's flag only
    fields = set(TrainingConfig.model_fields) - from_file_only
    plan = {"dp_shard", "dp_replicate", "cp", "pp", "pp_schedule", "microbatches", "virtual_stages"}
    plan |= {"float8", "float8_all_gather", "async_tp"}  # a plan's: MemoryEstimate names them
    for tool in (MemoryEstimate, MemoryTrace):
        schema = tool.definition()["input_schema"]
        # MemoryTrace refuses a parallel plan, so it does not offer a plan's fields.
        assert fields - (plan if tool is MemoryTrace else set()) <= set(schema["properties"])
        assert tool is MemoryEstimate or not plan & set(schema["properties"])
        assert not from_file_only & set(schema["properties"])
        assert schema["properties"]["optimizer"]["enum"] == list(OPTIMIZERS)
        assert schema["properties"]["precision"]["enum"] == [
            "fp32", "amp-bf16", "amp-fp16", "mixed", "bf16"
        ]  # fmt: skip
    for command in ("estimate", "trace"):
        monkeypatch.setenv("COLUMNS", "200")  # one option per line in the rich help
        help_text = run_cli(command, "--help", cwd=tmp_path).stdout
        for flag in ("--precision", "--checkpointing", "--attention", "--gpu ", "--mfu", "--zero"):
            assert flag in help_text, (command, flag)
        assert "amp-bf16" in help_text and "sgd-nomomentum" in help_text
        assert "--dtype" not in help_text  # older spellings work but are not advertised


def test_every_door_takes_the_configurations_defaults(run_cli, tmp_path, monkeypatch) -> None:
    """One default each, stated once (profiling.config): the tools' schemas, the CLI's help and
    the library all say the configuration's, precision included (it was `mixed` in one tool)."""
    from journal_agent.tools.memory_estimate import MemoryEstimate
    from journal_agent.tools.memory_profile import MemoryProfile
    from journal_agent.tools.memory_trace import MemoryTrace
    from profiling import estimate_memory
    from profiling.config import DEFAULT_PRECISION

    assert TrainingConfig.model_fields["precision"].default == DEFAULT_PRECISION
    for tool in (MemoryEstimate, MemoryTrace, MemoryProfile):
        props = tool.definition()["input_schema"]["properties"]
        assert props["precision"]["default"] == DEFAULT_PRECISION, tool.name
        for field, info in TrainingConfig.model_fields.items():
            if field in props and field != "model":
                assert props[field].get("default", info.default) == info.default, (tool, field)
                assert props[field].get("description") == info.description, (tool, field)
    assert estimate_memory(model="gpt2-small").inputs.precision == DEFAULT_PRECISION
    monkeypatch.setenv("COLUMNS", "200")
    for command in ("estimate", "trace", "profile"):
        help_text = run_cli(command, "--help", cwd=tmp_path).stdout
        lines = help_text.splitlines()
        at = next(i for i, x in enumerate(lines) if x.lstrip("│ ").startswith("--precision"))
        option = " ".join(lines[at : at + 4])  # its help may wrap onto the next lines
        assert f"Default: {DEFAULT_PRECISION}." in option, (command, option)


@pytest.mark.parametrize(
    "values",
    [
        {"model": "tiny-gpt2", "batch": 2, "seq": 32},
        {"model": "llama-7b", "pp": 2, "pp_schedule": "interleaved", "virtual_stages": 2},
    ],
)
def test_a_config_read_back_from_its_json_is_the_same(values) -> None:
    # What the trace's child process, the records and the tools do: every field is then set,
    # the pipeline schedule's default too (profile's trace beside it failed on it).
    cfg = TrainingConfig(**values)
    assert TrainingConfig.model_validate_json(cfg.model_dump_json()) == cfg


def test_a_schedule_without_a_pipeline_is_still_refused() -> None:
    with pytest.raises(ConfigError, match="needs --pp > 1"):
        TrainingConfig.parse(model="llama-7b", pp_schedule="zbv")


def test_the_plan_checks_know_the_schedules_default() -> None:
    from profiling._config_plan import DEFAULT_SCHEDULE

    assert TrainingConfig.model_fields["pp_schedule"].default == DEFAULT_SCHEDULE
