# Names vulture cannot see being used (read by `vulture`, see [tool.vulture] in pyproject.toml).
# Each group says who uses the name. Typer commands (@*.command / @*.callback), pydantic
# validators and `model_config` are ignored by the configuration itself, not listed here.
# ruff skips this file: it is a list of names, not a module.

# Frameworks and the standard library call these by name.
_.do_POST  # http.server.BaseHTTPRequestHandler (journal_agent/testing.py)
_.log_message  # http.server.BaseHTTPRequestHandler
_.whitespace  # shlex.shlex settings (journal_agent/tools/_shell.py)
_.whitespace_split
_.commenters
_.__signature__  # inspect / typer read them (journal_agent/cli/_config_flags.py)
_.__annotations__
_.__instancecheck__  # isinstance() calls it (journal_agent/cli/_help_render.py)
_.__path__  # the import system reads it (journal_agent/plugin_env/entry.py's package stub)
pytestmark  # pytest
fresh_support_check  # pytest fixtures requested by name (tests/profiling/trace/test_tracker.py,
deep_models  # tests/profiling/test_block_scaling.py)
sensor  # the parameter name nvidia-ml-py's nvmlDeviceGetTemperature is called with

# Fields of models read from files or written to JSON (pydantic / dataclasses / Literal types).
disable_model_invocation  # Claude Code command frontmatter (journal_agent/definitions.py)
Mode  # the permission modes' type (journal_agent/tools/permissions.py)
SnapshotKind  # profiling/measure/snapshot.py
closure  # torch.optim.Optimizer.step(closure) signature (profiling/trace/master_weights.py)
outputs  # profiling/trace/tracker.py
mfu  # profiling/config.py: a configuration field (the time estimate reads it)
scan_truncated  # journal_agent/tools/sandbox/view.py: a field of the sandbox view
ram_bytes  # profiling/measure/devices.py: a HostInfo key (read by name, shown by `gpu`)
published_params  # profiling/models/hf_config.py: a catalogue entry's key (its tests read it)
utilization_memory_pct  # profiling/measure/devices.py: fields of DeviceInfo / readings, in --json
peak_active
nvml_reserved
gpu_util_pct
_.nvml_reserved
_.gpu_util_pct
measured_bytes  # profiling/measure/report.py: ComparisonRow keys, read by string
traced_bytes

# The fake NVML of tests/profiling/measure/test_devices.py (nvidia-ml-py's names).
_.nvmlDeviceGetCount
_.nvmlDeviceGetHandleByIndex
_.nvmlDeviceGetName
_.nvmlDeviceGetUUID
_.nvmlDeviceGetMemoryInfo
_.nvmlDeviceGetUtilizationRates
_.nvmlDeviceGetTemperature
_.nvmlDeviceGetPowerUsage
_.nvmlDeviceGetComputeRunningProcesses
_.nvmlSystemGetDriverVersion
_.nvmlSystemGetCudaDriverVersion_v2
_.nvmlSystemGetNVMLVersion
_.resets
_.BUILT_AT_IMPORT  # tests/profiling/trace/test_trace.py: a user module's global, set by the test

# Public API of the measured work (#10), not yet called inside the repository: its owner
# confirms each or deletes it (listed here so CI can run vulture while #10 lands).
_.storages  # profiling/measure/live_tensors.py
_._register_global_optimizer_hook  # profiling/trace/tracker.py
_._optimizer_hook_handles
summary_json  # profiling/measure/report.py
_.current_gib  # profiling/measure/snapshot.py
_.peak_mb
_.peak_gb

# The learning work (#12), same status: its owner confirms or deletes.
reparse  # journal_agent/learning/ledger_edit.py
item_id_for_ledger_text  # journal_agent/learning/review.py

# The numbers work (#11), same status: its owner confirms or deletes.
_.peak_flops  # profiling/gpus.py

# markdown-it calls the link check we set on the parser (journal_agent/view/markdown.py).
_.validateLink  # journal_agent/view/markdown.py

# The inbox API (journal_agent/capture/inbox.py): a moment's content hash, read by other views.
_.hash  # journal_agent/capture/inbox.py

# click calls the lazy group's listing (journal_agent/cli/_app.py).
_.list_commands  # journal_agent/cli/_app.py

# TypedDict keys (journal_agent/learning/ledger_summary.py): read as dict keys, which vulture
# does not follow.
_.mastery  # journal_agent/learning/ledger_summary.py
_.other_sections
_.new_count  # journal_agent/learning/ledger_api.py: Overview
_.operation  # journal_agent/learning/review.py: Suggestion
# TypedDict keys of the memory snapshot format (profiling/trace/snapshot_export.py: PyTorch's
# memory viewer reads them) and of the estimate-beside-trace comparison
# (profiling/estimate/comparison.py: --json, the text and the chart read them by string).
addr
requested_size
total_size
allocated_size
active_size
segment_type
segment_pool_id
is_expandable
device_traces
estimated_bytes
model_states
estimated_total
why_total
pid_started  # journal_agent/runtime/background.py: a RunStatus key (written as a keyword)
cache_control  # journal_agent/tools/base.py: a ToolDefinition key (runtime/caching.py sets it by string)
# Hugging Face configs (profiling/models/hf_config.py, hf_module.py): a config.json field read by
# pydantic; transformers reads the attributes set on its config.
model_type
_._attn_implementation
_.use_cache

# torch.utils.flop_counter.FlopCounterMode reads it on custom formulas (profiling/trace/_torch_compat.py).
_._get_raw  # profiling/trace/_torch_compat.py

# pytest calls its hooks by name (tests/profiling/conftest.py: the gpu marker).
_.pytest_collection_modifyitems  # tests/profiling/conftest.py

# The stacked expert weights, read through getattr by name (profiling/models/hf_blocks.py's
# _Experts.project; QLoRA's trace replaces them by name in profiling/trace/lora.py).
_.gate
_.down

# pickle.Unpickler calls them by name (profiling/recipes/files.py: training_args.bin read inert).
_.find_class  # profiling/recipes/files.py
_.persistent_load  # profiling/recipes/files.py
set_to_none  # torch.optim.Optimizer.zero_grad's parameter (profiling/trace/in_backward.py)
# torch reads these off its own objects (profiling/plans/probe.py, profiling/trace/fake_world.py,
# tests/profiling/plans/test_schedule.py: a module tracker's hooks, a pipeline stage's fields).
_._fw_post_hook
_._fw_pre_hook
_.__class__  # an instance's class swapped for torch's subclass (probe.py's _forward_only)
_.has_backward
_.group_rank  # a stage's pipeline position, which torch's schedules read (pipe_replay.py)
_._inference_mode
_.pp_group_size
_.n_local_stages
_._n_microbatches
_.num_stages
_.microbatches_per_round
first_layer  # a Stage field, in the plan's layout in JSON and the record
per_microbatch_bytes  # a RankMemory field, in the plan's JSON and record (profiling/plans)
_.on_step_begin  # benchmarks/hf_peft_gpu.py: a transformers TrainerCallback hook
_.on_step_end  # benchmarks/hf_peft_gpu.py: a transformers TrainerCallback hook
# PlanComparison's and RankRow's keys: written for the JSON and the record (profiling/plans/compare)
diff_bytes
estimated_at
traced_at
highest_traced
highest_estimated
lowest_ratio_rank
below_trace
ranks_note
higher_ring_rank  # RankRow: each side's higher ring rank (profiling/plans/compare)
