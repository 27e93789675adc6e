"""MemoryEstimate: closed-form training memory with every step shown, saved as a record."""

from __future__ import annotations

from journal_agent.tools._config_input import (
    FROM_FILE_FIELD,
    config_input_model,
    confined_hf_model,
    with_recipe,
)
from journal_agent.tools.base import Tool, ToolContext, ToolResult
from profiling._config_deepspeed import DEEPSPEED_FIELDS

# The schema is the shared training configuration's (profiling.config.TrainingConfig).
# DeepSpeed's engine settings (Ulysses' degree too), torchtune's activation offloading and
# compile are not offered (each field costs tokens in every request): a recipe in from_file
# sets them.
MemoryEstimateInput = config_input_model(
    "MemoryEstimateInput",
    exclude=(
        *DEEPSPEED_FIELDS,
        "activation_offload",
        "compile",
        "fabric_bnb",
        "torchao_nf4",
        "torchao_optim",  # torchao's AdamW8bit: a torchtune config as from_file names it
        "checkpoint_every",
        "ulysses",
        "target_seq",  # an encoder-decoder's target length: the CLI's
        "kd_teacher",  # torchtune's distillation teacher: its KD yaml as from_file sets it
        "accumulate_unsharded",  # FSDP's no_sync accumulation: a LitGPT config sets it
        "fsdp_flat",  # FSDP1's flat parameters: a LitGPT config sets it
        "dora",  # DoRA: peft's or torchtune's adapter config as from_file sets it
        "torchtune_dora",  # torchtune's DoRALinear: its yaml's use_dora sets it
        "autocast_adapters",  # peft's fp32 adapters: from_file's peft + Trainer files set it
        "litgpt_norm",  # LitGPT's own GPT (its RMSNorm, its attention): a LitGPT config sets it
        "litgpt_uncapped",  # LitGPT before v0.5.5's uncapped LM head chunks: a peer row sets it
        "reshard_always",  # torchtitan's "always" reshard policy: its TOML as from_file sets it
        "pp_keeps_outputs",  # torch 2.6's pipeline stages: a config file as from_file sets it
        "titan_root_group",  # torchtitan's 2024 FSDP groups: a TOML's late-2024 layout sets it
        "ddp_find_unused",  # DDP's find_unused_parameters: the Trainer's file sets it
        "ddp_bucket_view",  # set in code (accelerate, Lightning): the CLI's flag, for the budget
    ),
    from_file=FROM_FILE_FIELD,
)
# A closed form takes milliseconds; the bound is there so that no input keeps a call running.
ESTIMATE_TIMEOUT_S = 60.0


class MemoryEstimate(Tool):
    name = "MemoryEstimate"
    description = (
        "Estimate the GPU memory of one training step in closed form, every step of the "
        "calculation shown: weights, gradients and optimizer state by precision and optimizer, "
        "ZeRO stages over N GPUs, activations with tensor/sequence parallelism, checkpointing "
        "and the attention kernel, logits, LoRA/QLoRA; with a gpu, step time at the MFU.\n"
        "- Returns the table (component, bytes per GPU, calculation, ✅/⚠️/❌ against gpu_mem) "
        "and a record id; cite the numbers in the journal as [m:<id>].\n"
        "- These are estimates; use MemoryTrace for exact traced bytes of the same step."
    )
    Input = MemoryEstimateInput

    def run(self, ctx: ToolContext, params: MemoryEstimateInput) -> ToolResult:  # type: ignore[override,valid-type]  # Input is a model generated at import (config_input_model), not a class statement
        from profiling.config import TrainingConfig
        from profiling.estimate.run import estimate_and_record

        # A ProfilingError (bad sizes, an unknown model) becomes an error result in Tool.call.
        # hf:PATH is a file the tool reads: inside the workspace only.
        values, said = with_recipe(ctx, params.config_values(), params.from_file)
        values = confined_hf_model(ctx, values)
        config = TrainingConfig.parse(style="field", **values)
        if config.is_plan:  # a parallel plan: every distinct rank (profiling.plans)
            from profiling.plans.report import plan_and_record

            store = ctx.workspace.records
            plan = plan_and_record(config, store, traced=False, timeout=ESTIMATE_TIMEOUT_S)
            return ToolResult("\n".join([*said, plan.text()]))
        run = estimate_and_record(config, ctx.workspace.records, timeout=ESTIMATE_TIMEOUT_S)
        return ToolResult("\n".join([*said, run.text()]))
