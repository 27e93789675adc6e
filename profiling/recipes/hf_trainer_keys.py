"""The Trainer's arguments the reader leaves out, each with why: every field of transformers'
``TrainingArguments`` (transformers 5.24, training_args.py, the dataclass's fields) that does not
change what one training step holds on the GPU, the older versions' names and TRL's
``SFTConfig`` additions. The fields that do change it are read in ``hf_trainer`` (used, or
refused in one sentence). No torch, no framework.
"""

from __future__ import annotations

from profiling.recipes.recipe import NO_MEMORY

_EVAL = "evaluation, which runs between training steps, not in them"
_LOGS = "logging and run tracking"
_SAVE = "checkpoints and the Hub, written between training steps"
_ARITHMETIC = "the optimizer's arithmetic, not its state"
_STEPS = "how many steps run, not what one step holds"
_LOADER = "the data loader's workers and its pinned host batches, not the GPU's step"
_COLUMNS = "which dataset columns and in which order: sequences are counted at --seq"
_DDP = "DDP's broadcast of the model's buffers (a few KB), backend and timeout"
_RUNTIME = "set by the launcher or kept from an older transformers"

# (glob over the file's dotted keys, why it is left out), first match wins.
_REASONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("output_dir", "overwrite_output_dir"), "where checkpoints and logs go"),
    (("num_train_epochs", "max_steps"), _STEPS),
    (("learning_rate", "lr_scheduler*", "warmup*", "weight_decay", "adam_*"), _ARITHMETIC),
    (("max_grad_norm",), "clip_grad_norm_'s per-tensor norms: scalars"),
    (("average_tokens_across_devices",), "one scalar all-reduced per step"),
    (("tf32",), "TF32 matmuls keep the same tensors"),
    (
        (
            "bf16_full_eval",
            "fp16_full_eval",
            "eval*",
            "per_device_eval*",
            "prediction_loss_only",
            "include_for_metrics",
            "include_inputs_for_metrics",
            "batch_eval_metrics",
            "do_eval",
            "do_predict",
            "metric_for_best_model",
            "greater_is_better",
            "load_best_model_at_end",
            "label_names",
        ),
        _EVAL,
    ),
    (
        (
            "logging*",
            "log_*",
            "log_level*",
            "include_num_input_tokens_seen",
            "include_tokens_per*",
            "disable_tqdm",
            "report_to",
            "run_name",
            "project",
            "trackio*",
            "skip_memory_metrics",
        ),
        _LOGS,
    ),
    (
        (
            "save*",
            "enable_jit_checkpoint",
            "push_to_hub*",
            "hub_*",
            "resume_from_checkpoint",
            "restore_callback_states_from_checkpoint",
            "ignore_data_skip",
        ),
        _SAVE,
    ),
    (("seed", "data_seed"), "random seeds"),
    (
        ("full_determinism",),
        "deterministic kernels; its cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG "
        "= :16:8, transformers' enable_full_determinism) is smaller than the default's",
    ),
    (("dataloader*",), _LOADER),
    (
        (
            "remove_unused_columns",
            "train_sampling_strategy",
            "length_column_name",
            "group_by_length",
        ),
        _COLUMNS,
    ),
    (
        ("ddp_broadcast_buffers", "ddp_backend", "ddp_timeout"),
        _DDP,
    ),
    (
        ("ddp_bucket_cap_mb",),
        "the size of DDP's gradient buckets, which together hold the same "
        "gradients whatever their size",
    ),
    (
        ("torch_empty_cache_steps",),
        "empties the allocator's cache between steps: what it reserves then, not the step's peak",
    ),
    (
        ("auto_find_batch_size",),
        "after an out-of-memory error the Trainer halves the batch: "
        "estimated at per_device_train_batch_size (fit --max-batch finds the largest)",
    ),
    (
        ("distributed_state", "distributed_state.*"),
        "accelerate's state of the process that saved training_args.bin (its launcher's "
        "world size, device, backend); --gpus says the job's GPUs",
    ),
    (
        (
            "do_train",
            "local_rank",
            "_n_gpu",
            "_setup_devices",
            "deepspeed_plugin",
            "hf_deepspeed_config*",
            "mp_parameters",
            "xpu_backend",
            "use_ipex",
            "jit_mode*",
            "torchdynamo",
            "ray_*",
            "fp16_opt_level",
            "fp16_backend",
            "half_precision_backend",
            "use_legacy*",
            "use_mps_device",
            "no_cuda",
            "tpu_*",
            "past_index",
        ),
        _RUNTIME,
    ),
    # older transformers' names (4.x) and Seq2SeqTrainingArguments'
    (
        ("fsdp_min_num_params", "fsdp_transformer_layer_cls_to_wrap", "fsdp_plugin_args"),
        "an older transformers' wrap settings (fsdp_config's now): each decoder layer its own "
        "group is estimated",
    ),
    (
        ("per_gpu_eval_batch_size", "predict_with_generate", "generation_*", "sortish_sampler"),
        _EVAL,
    ),
    (("dispatch_batches", "enable_jit*", "mixed_precision"), _RUNTIME),
    # TRL's SFTConfig: what the dataset becomes (sequences counted at --seq, packing read)
    (
        (
            "dataset_*",
            "dataset",
            "completion_only*",
            "assistant_only*",
            "chat_template*",
            "model_init_kwargs*",
            "eos_token",
            "pad_token",
            "num_of_sequences",
            "pad_to_multiple_of",
            "shuffle_dataset",
        ),
        "TRL's dataset preparation",
    ),
)

# each said as not changing memory, and why (Recipe.lines lists them after the rest)
TRAINER_KNOWN: list[tuple[str, str]] = [
    (p, f"{NO_MEMORY}: {why}") for keys, why in _REASONS for p in keys
]

__all__ = ["TRAINER_KNOWN"]
