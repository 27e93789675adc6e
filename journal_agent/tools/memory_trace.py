"""MemoryTrace: exact bytes of one training step under fake tensors, saved as a record."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from journal_agent.tools._config_input import (
    FROM_FILE_FIELD,
    config_input_model,
    confined_hf_model,
    with_recipe,
)
from journal_agent.tools.base import Tool, ToolContext, ToolError, ToolResult
from journal_agent.tools.confined_paths import workspace_root
from profiling._config_deepspeed import DEEPSPEED_FIELDS

if TYPE_CHECKING:
    from profiling.records import RecordStore

TRACE_TIMEOUT_S = 120.0  # the default bound of one call (the model may ask for up to 600 s)
# A sandboxed child is stopped from outside this much after its own bound: torch's import and
# the sandbox's start come first, and the child says it ran out of time itself when it can.
_CHILD_GRACE_S = 30.0

# The schema is the shared training configuration's, plus the comparison switch; a parallel
# plan is MemoryEstimate's (its per-rank trace is the CLI's `trace`), so its fields are not
# offered here (each costs tokens in every request the CLI sends).
MemoryTraceInput = config_input_model(
    "MemoryTraceInput",
    exclude=(
        "dp_shard",
        "dp_replicate",
        "cp",
        "pp",
        "pp_schedule",
        "microbatches",
        "virtual_stages",
        "float8",  # a plan's (MemoryEstimate names them); each field costs tokens
        "float8_all_gather",
        "async_tp",
        *DEEPSPEED_FIELDS,
        "activation_offload",  # estimated only: the trace refuses it
        "compile",  # a recipe in from_file sets it (each field costs tokens in every request)
        "fabric_bnb",  # LitGPT's QLoRA: a LitGPT config as from_file sets it
        "torchao_nf4",  # torchtune's QLoRA: a torchtune config as from_file sets it
        "torchao_optim",  # torchao's AdamW8bit: a torchtune config as from_file names it
        "checkpoint_every",  # torchtitan's every N-th block: a plan's, as from_file sets it
        "ulysses",  # DeepSpeed's sequence_parallel_size: a plan's, as from_file sets it
        "target_seq",  # an encoder-decoder's target length: the CLI's (tokens in every request)
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
    model=(
        str | None,
        Field(
            None,
            description="A reference model (gpt2-small, gpt2-medium, gpt2-large, gpt2-xl, "
            "llama-1b, llama-7b), a Hugging Face config (hf:NAME from the shipped catalogue, "
            "e.g. hf:llama-3.1-8b, or hf:PATH to a config.json in the workspace), or a factory "
            "in the workspace, 'package.module:function', returning a module and its inputs "
            "(or the model from_file names).",
        ),
    ),
    from_file=FROM_FILE_FIELD,
    compare_estimate=(
        bool,
        Field(False, description="Also show the closed-form estimate of the same step beside it."),
    ),
    timeout=(
        float,
        Field(
            default=TRACE_TIMEOUT_S,
            gt=0,
            le=600,
            description="Seconds before the trace is stopped (an error result says so).",
        ),
    ),
)


class MemoryTrace(Tool):
    name = "MemoryTrace"
    description = (
        "Trace a steady-state training step (a first step creates the optimizer's state, then "
        "the traced forward, loss, backward and optimizer step) under fake tensors with "
        "PyTorch's memory tracker: exact peak bytes by category (parameters, gradients, "
        "optimizer state, activations, temporaries) and by module, the first step's peak "
        "beside it, and the step's FLOPs, with no GPU and nothing allocated. FSDP2 sharding at "
        "any world size gives the per-rank peak; gpu adds the step time at mfu.\n"
        "- Returns the breakdown and a record id; cite the numbers as [m:<id>].\n"
        "- A 7B model takes several seconds; small models well under one. Bounded by "
        "timeout; FSDP over a world size it cannot shard in that time is refused at once.\n"
        "- A workspace factory runs the user's code: it is permission-checked like Bash and "
        "runs in the sandbox, like Bash. A Hugging Face config (hf:NAME, hf:PATH) is data: it "
        "needs no approval and is traced in the sandbox too."
    )
    Input = MemoryTraceInput

    def run(self, ctx: ToolContext, params: MemoryTraceInput) -> ToolResult:  # type: ignore[override,valid-type]  # Input is a model generated at import (config_input_model), not a class statement
        values, said = with_recipe(ctx, params.config_values(), params.from_file)
        model = str(values.get("model") or "")
        if model.startswith("hf:"):
            # A config is data, not code: no Bash approval (a rule naming the tool still
            # decides), the file read inside the workspace only, the trace in the sandbox.
            if ctx.policy is not None:
                ctx.policy.ensure(self.name)
            values = confined_hf_model(ctx, values)
            text = _trace_in_sandbox(params, ctx, values, factory=False)
        elif ":" in model:
            # A workspace factory runs the user's code: in the sandbox, as Bash would run it.
            text = _trace_in_sandbox(params, ctx, values)
        else:
            # A ProfilingError (a model that will not trace) becomes an error result.
            text = _trace(params, values, ctx.workspace.records)
        return ToolResult("\n".join([*said, text]))


def _trace(params: MemoryTraceInput, values: dict, store: RecordStore) -> str:  # type: ignore[valid-type]  # Input is a model generated at import (config_input_model), not a class statement
    """A reference model, in this process: our own code only, under fake tensors."""
    from profiling.config import TrainingConfig
    from profiling.errors import ProfilingError
    from profiling.trace.run import trace_and_record

    cfg = TrainingConfig.parse(style="field", **values)
    if cfg.model is None:
        raise ProfilingError(
            "MemoryTrace needs model: a reference model or 'package.module:function'"
        )
    return trace_and_record(
        cfg, store, compare_estimate=params.compare_estimate, timeout=params.timeout
    ).text()


def _trace_in_sandbox(
    params: MemoryTraceInput,  # type: ignore[valid-type]  # Input is a model generated at import (config_input_model), not a class statement
    ctx: ToolContext,
    values: dict,
    factory: bool = True,
) -> str:
    """A child in the sandbox, with Bash's environment and limits; the report comes back on
    stdout, the records through the outbox. A factory (the user's code) needs the same
    approval as Bash, in every mode (bypassPermissions too), and may write what Bash may; a
    Hugging Face config needs none and writes nothing but its records."""
    import json
    import subprocess
    import sys

    from journal_agent.processes import stop_groups
    from journal_agent.tools.sandbox import SandboxSettings, available_confinement
    from journal_agent.tools.sandbox.call import sandboxed
    from profiling.trace.run import TRACE_HINT

    root = Path(workspace_root(ctx.root))
    settings = ctx.policy.sandbox if ctx.policy is not None else SandboxSettings()
    writes, read_deny, home = factory, (), None
    if ctx.policy is not None:
        if factory:
            conf = available_confinement(settings, root)
            command = f"journal-agent trace --model {values.get('model')}"
            writes = ctx.policy.ensure("Bash", command=command, confined=conf.active).writes
        read_deny, home = ctx.policy.read_deny_paths(), ctx.policy.home
    request = json.dumps(
        {"config": values, "compare_estimate": params.compare_estimate, "timeout": params.timeout}
    )
    with sandboxed(
        root, settings, writes=writes, read_deny=read_deny, home=home, outbox=True
    ) as box:
        argv = box.argv([sys.executable, "-I", "-m", "journal_agent.tools._trace_child", request])
        proc = subprocess.Popen(argv, cwd=root, env=box.env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)  # fmt: skip
        try:
            out, err = proc.communicate(timeout=params.timeout + _CHILD_GRACE_S)
        except subprocess.TimeoutExpired:
            stop_groups([proc.pid], grace_s=2.0, leaders=[proc])
            raise ToolError(
                f"the trace of {values.get('model')} did not finish within {params.timeout:g} "
                f"s; it was stopped — {TRACE_HINT}"
            ) from None
    if proc.returncode != 0:
        said = [
            line.removeprefix("error: ") for line in err.splitlines() if line.startswith("error:")
        ]
        raise ToolError(" ".join(said) or err.strip()[-2000:] or "the trace failed")
    return out.rstrip("\n")
