"""The framework behaviours that move the peak, for ``profiling.config``: the loss each stack
computes (and what it keeps of the logits), the fields that name them, what they refuse.

Each is one field of ``TrainingConfig`` (the CLI flag, the tools' field and the ``--from``
readers' setting at once); the field objects live here so ``config.py`` stays one line each.
No torch here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from profiling._config_accum import (
    ACCUMULATE_UNSHARDED_FIELD,
    FSDP_FLAT_FIELD,
    check_accumulation,
)
from profiling._config_distill import KD_TEACHER_FIELD, check_distill
from profiling._config_optimizers import check_torchao_optim
from profiling._config_preference import DPO_FIELD, check_dpo
from profiling.errors import ConfigError

# ``cfg`` is a profiling.config.TrainingConfig, which imports this module: typed Any here so
# the two do not import each other.
TrainingConfig = Any

# The loss at the end of a causal LM's step, by the stack that computes it. What each keeps of
# the logits (V per token, the largest tensors of a small model) is read from its source:
# profiling/models/losses.py says where.
Loss = Literal[
    "cross-entropy",
    "transformers-4.46",
    "transformers-4.45",
    "litgpt",
    "litgpt-full",
    "chunked",
    "linear-chunked",
    "liger",
    "cce",
]
LOSSES: dict[str, str] = {
    "cross-entropy": "the logits, their fp32 copy and fp32 log-probabilities (PyTorch's "
    "cross_entropy on logits.float(); transformers 4.49 on)",
    "transformers-4.46": "transformers 4.46-4.48's loss: also the shifted logits' contiguous "
    "fp32 copy",
    "transformers-4.45": "transformers 4.45 and earlier: the model returns fp32 logits (the "
    "16-bit ones freed), then the shifted logits' contiguous fp32 copy",
    "litgpt": "LitGPT's finetune scripts: the LM head in chunks of 128 tokens, cast to fp32 by "
    "Lightning Fabric, and chunked_cross_entropy",
    "litgpt-full": "LitGPT's full.py: the whole logits, cast to fp32 by Lightning Fabric, and "
    "chunked_cross_entropy on their rows in chunks of 128",
    "chunked": "torchtune's CEWithChunkedOutputLoss: the LM head in --loss-chunks chunks, "
    "each upcast to fp32 one at a time",
    "linear-chunked": "torchtune's LinearCrossEntropyLoss: the hidden states of the labelled "
    "tokens copied, the LM head and the fp32 loss per chunk",
    "liger": "Liger Kernel's fused linear cross-entropy: no logits kept; the gradients of the "
    "hidden states and the LM head made in forward, a chunk of logits at a time",
    "cce": "Apple's Cut Cross-Entropy: no logits ever; one fp32 log-sum-exp per token, the "
    "gradients made in backward block by block",
}
LOSS_CHUNKS_DEFAULT = 8  # torchtune's num_output_chunks

LOSS_FIELD: Any = Field(
    "cross-entropy",
    description="The loss as the training stack computes it: cross-entropy (logits.float(), "
    "transformers 4.49 on) | transformers-4.46 (4.46-4.48: + the shifted fp32 copy) | "
    "transformers-4.45 (earlier: fp32 logits, shifted copy) | litgpt (128-token chunks) | "
    "litgpt-full (full.py) | chunked (torchtune's CEWithChunkedOutputLoss) | linear-chunked "
    "(torchtune's LinearCrossEntropyLoss) | liger (Liger's fused linear cross-entropy) | cce "
    "(Apple's Cut Cross-Entropy).",
)
TIED_HEAD_FIELD: Any = Field(
    None,
    description="Whether the LM head shares the embedding's weight (default: as the model's "
    "config says); --no-tied-head gives the head its own copy, as LitGPT's converted "
    "checkpoints do.",
)
TARGET_SEQ_FIELD: Any = Field(
    None,
    ge=1,
    le=10**7,  # config.MAX_SEQ
    description="An encoder-decoder's (T5, mT5) target length: the decoder's tokens per "
    "sequence (default: --seq, the encoder's).",
)
ACTIVATION_OFFLOAD_FIELD: Any = Field(
    False,
    description="torchtune's enable_activation_offloading: with --checkpointing full, each "
    "block's input is copied to pinned host memory in forward and brought back in backward.",
)
COMPILE_FIELD: Any = Field(
    False,
    description="torch.compile of each block: what it keeps for backward is what AOTAutograd's "
    "partitioner (Inductor's min-cut) saves, run on fake tensors.",
)
LOSS_CHUNKS_FIELD: Any = Field(
    None,
    ge=1,
    le=4096,
    description="Chunks of the chunked and linear-chunked losses (torchtune's "
    "num_output_chunks, default 8).",
)

TORCHAO_NF4_FIELD: Any = Field(
    False,
    description="--qlora as torchtune runs it: torchao's NF4Tensor (blocks of 64, int8 scalers "
    "per 256 blocks), dequantized by its eager ops in forward and again in backward.",
)


LITGPT_NORM_FIELD: Any = Field(
    False,
    description="LitGPT's own GPT (its finetune scripts' models): the RMSNorm of a Llama, Mistral, "
    "Qwen2 or Phi-3 shape, eager ops that keep the fp32 normalized values and the weight's fp32 "
    "copy; the attention of a Llama, Mistral, Qwen2, Phi-3 or Gemma shape, q, k, v one fused "
    "Linear.",
)
# litgpt/lora.py and adapter.py at 00af8b0 (v0.4.13-v0.5.4, the peer rows' commit): with
# ``lm_head_chunk_size > 0`` GPT.forward returns ``[self.lm_head(x_i) for x_i in x.split(...)]``
# before its ``final_logit_softcapping`` line, so Gemma 2's final soft cap is never applied;
# from 17a58dfa (v0.5.5) model.py's forward caps every chunk (``clamp_head``). The default, the
# cap applied, is the newer LitGPT's and the larger count.
LITGPT_UNCAPPED_FIELD: Any = Field(
    False,
    description="LitGPT before v0.5.5 (with --loss litgpt): its LoRA and adapter models return "
    "the LM head's chunks without Gemma 2's final soft cap.",
)


# The optimizers bitsandbytes pages (its 8-bit and 32-bit Adam/AdamW, Lion).
PAGED_OPTIMIZERS = ("adam8bit", "adamw", "adam", "lion")


def check_behaviours(cfg: TrainingConfig) -> None:
    """One ConfigError sentence for a behaviour that contradicts the rest of the configuration."""
    check_accumulation(cfg)
    check_dpo(cfg)
    check_distill(cfg)
    if cfg.optimizer_in_bwd and (cfg.grads_kept or cfg.precision == "mixed"):
        raise ConfigError(
            "--optimizer-in-bwd frees each gradient once stepped: it takes no "
            "--grads-kept, and steps the parameters themselves (no --precision mixed "
            "master copy: use bf16, fp32 or amp-*)",
            "optimizer_in_bwd",
        )
    if cfg.qlora and cfg.lora_rank is None:
        raise ConfigError("--qlora needs --lora-rank R", "qlora")
    if cfg.torchtune_dora and not cfg.dora:
        raise ConfigError("--torchtune-dora describes --dora's layers", "torchtune_dora")
    _check_torchao_nf4(cfg)
    check_torchao_optim(cfg)
    if (cfg.bnb_keeps_inputs or cfg.double_quant is not None or cfg.fabric_bnb) and not cfg.qlora:
        field = (
            "bnb_keeps_inputs"
            if cfg.bnb_keeps_inputs
            else "double_quant"
            if cfg.double_quant is not None
            else "fabric_bnb"
        )
        raise ConfigError(f"--{field.replace('_', '-')} describes --qlora's 4-bit layers", field)
    _check_litgpt(cfg)
    if cfg.paged_optimizer and cfg.optimizer not in PAGED_OPTIMIZERS:
        raise ConfigError(
            f"--paged-optimizer is bitsandbytes' paging of its Adam, AdamW and Lion states "
            f"(--optimizer {', '.join(PAGED_OPTIMIZERS)}), not of {cfg.optimizer}",
            "paged_optimizer",
        )
    if cfg.paged_optimizer and cfg.offload_optimizer:
        raise ConfigError(
            "--paged-optimizer keeps the state on the GPU while it fits; --offload-optimizer "
            "keeps it on the CPU: give one",
            "paged_optimizer",
        )
    if cfg.activation_offload and (cfg.checkpointing != "full" or _plan(cfg.__dict__)):
        raise ConfigError(
            "--activation-offload is torchtune's, which offloads the blocks' inputs of "
            "--checkpointing full (its recipes refuse it without) on one data-parallel axis "
            "(no --pp, --cp, --dp-shard, --dp-replicate)",
            "activation_offload",
        )
    if cfg.compile and cfg.ulysses > 1:
        raise ConfigError(
            "--compile is modelled on one GPU and on FSDP, TP, PP and CP plans (traced), not "
            "yet with --ulysses: drop --compile, or --ulysses",
            "compile",
        )
    if cfg.compile and cfg.qlora and not cfg.torchao_nf4:
        raise ConfigError(
            "--compile with bitsandbytes' --qlora is not modelled yet (its 4-bit layers are "
            "represented for the trace's fake tensors only; torchao's NF4, --torchao-nf4, is): "
            "drop one of them",
            "compile",
        )
    if cfg.loss_chunks is not None and cfg.loss not in ("chunked", "linear-chunked"):
        raise ConfigError(
            f"--loss-chunks is torchtune's num_output_chunks, for --loss chunked or "
            f"linear-chunked (--loss {cfg.loss} has none)",
            "loss_chunks",
        )
    if cfg.loss != "cross-entropy" and _plan(cfg.__dict__):
        raise ConfigError(
            f"--loss {cfg.loss} is not modelled under a parallel plan yet (--pp, --cp, "
            "--dp-shard, --dp-replicate): drop --loss, or the plan's degrees",
            "loss",
        )
    if cfg.loss in ("liger", "cce") and cfg.lora_rank is not None and "lm_head" in cfg.lora_targets:
        raise ConfigError(
            f"--loss {cfg.loss} multiplies by the LM head's weight inside its kernel, so an "
            "adapted LM head (--lora-targets lm_head) is not fused; drop lm_head or the fused loss",
            "loss",
        )


def _plan(values: dict[str, Any]) -> bool:
    """``_config_plan.is_plan`` on a dict of fields (a recipe's values, or a config's dump)."""
    return (
        (values.get("pp") or 1) > 1
        or (values.get("cp") or 1) > 1
        or values.get("dp_shard") is not None
        or values.get("dp_replicate") is not None
    )


def _check_litgpt(cfg: TrainingConfig) -> None:
    """LitGPT's finetune scripts' own knobs need its loss; DoRA is not among its adapters."""
    if cfg.fabric_bnb and cfg.loss != "litgpt":
        # The real reason first: "add --loss litgpt" where that loss is refused here too (a
        # recipe's loss dropped by recipe.unmodelled_loss) sent the user to a second refusal
        conflict = loss_conflict({**cfg.model_dump(), "loss": "litgpt"})
        raise ConfigError(
            "--fabric-bnb is LitGPT's QLoRA, whose finetune scripts compute the LM head and the "
            "loss as --loss litgpt: "
            + (f"the estimate cannot model {conflict}" if conflict else "add it"),
            "fabric_bnb",
        )
    if cfg.litgpt_uncapped and cfg.loss != "litgpt":
        raise ConfigError(
            "--litgpt-uncapped describes the LM head's chunks of LitGPT's LoRA and adapter "
            "scripts: add --loss litgpt",
            "litgpt_uncapped",
        )
    # LitGPT has no DoRA: its LoRA layers (litgpt/lora.py: LoRALinear, LoRAQKVLinear on the
    # fused q/k/v) carry A and B only, and no script or config reads a DoRA key (Lightning-AI/
    # litgpt at 26857050: no "dora" anywhere). Its fused q/k/v was traced as plain LoRA while the
    # estimate counted DoRA on q, k, v apart (1.086 of the trace): no run of LitGPT is either.
    if cfg.dora and (cfg.loss in ("litgpt", "litgpt-full") or cfg.litgpt_norm):
        raise ConfigError(
            "--dora is peft's or torchtune's adapter; LitGPT's finetune scripts (--loss litgpt, "
            "--loss litgpt-full, --litgpt-norm) have no DoRA: drop one of them",
            "dora",
        )


def _check_torchao_nf4(cfg: TrainingConfig) -> None:
    """torchao's NF4 base: torchtune's QLoRA, in its dtype, with none of bitsandbytes' knobs."""
    if not cfg.torchao_nf4:
        return
    if not cfg.qlora:
        raise ConfigError(
            "--torchao-nf4 describes --qlora's 4-bit base: add --qlora", "torchao_nf4"
        )
    if cfg.fabric_bnb or cfg.bnb_keeps_inputs or cfg.double_quant is not None:
        raise ConfigError(
            "--torchao-nf4 is torchao's NF4, not bitsandbytes': drop --fabric-bnb, "
            "--bnb-keeps-inputs and --double-quant (torchao always quantizes the scalers)",
            "torchao_nf4",
        )
    if cfg.precision != "bf16":
        raise ConfigError(
            f"--torchao-nf4 is modelled as torchtune's QLoRA recipes train (dtype bf16, no "
            f"autocast): give --precision bf16, not {cfg.precision}",
            "torchao_nf4",
        )


def loss_conflict(values: dict[str, Any]) -> str | None:
    """What of a stack's loss (``values["loss"]``) the trace and estimate do not model together
    with the rest of ``values`` (a configuration's fields), as a clause, or None."""
    loss = values.get("loss") or "cross-entropy"
    if loss == "cross-entropy":
        return None
    if _plan(values):
        return f"--loss {loss} under a parallel plan (--pp, --cp, --dp-shard, --dp-replicate)"
    if (values.get("tp") or 1) > 1:
        return f"--loss {loss} under tensor parallelism (its vocabulary-parallel forms)"
    if values.get("fsdp") and loss in ("chunked", "linear-chunked"):
        torchtune = _torchtune_fsdp(loss, values)
        if torchtune:
            return torchtune
    elif (values.get("fsdp") and loss != "litgpt-full") or (
        values.get("zero") == 3 and not values.get("fsdp")
    ):
        return f"--loss {loss} under FSDP or ZeRO-3 (the gathered head's gradient moments)"
    if values.get("lora_rank") is not None and "lm_head" in (values.get("lora_targets") or []):
        if loss != "litgpt":  # LitGPT's LoRALinear head: loss_tapes._adapter
            return f"--loss {loss} with an adapted LM head"
        precision = values.get("precision") or "fp32"
        if precision not in ("bf16", "fp32"):  # the adapter's output in another dtype
            return (
                f"--loss litgpt with an adapted LM head under --precision {precision} "
                "(modelled in bf16 and fp32: LitGPT's configs run bf16-true)"
            )
    return None


def _torchtune_fsdp(loss: str, values: dict[str, Any]) -> str | None:
    """torchtune's chunked losses under FSDP2 as its distributed recipes shard (every layer,
    then the root with reshard_after_forward=False: torchtune/training/_distributed.py
    ``shard_model``): the head stays gathered from the model's forward through the loss, as the
    trace runs it (the loss inside the root's forward), with or without resharding the layers
    after forward (``fsdp_reshard_after_forward``: --zero 2, the last block's all-gather output
    held too: ``fsdp_no_reshard.last_gather_held``). Estimated and traced alike there (the
    loss's scalars apart: tests/profiling/trace/test_fsdp_chunked_loss.py); what of it is not,
    as a clause."""
    if values.get("lora_rank") is not None:  # traced (trace.lora._fsdp2_lora), but below it
        # at short sequences, under mixed and untied fp32 linear-chunked (estimate.fsdp_lora)
        return f"--loss {loss} under FSDP with LoRA (the sharded adapters' head moments)"
    if values.get("compile"):  # the trace compiles no block under FSDP2
        return f"--loss {loss} compiled under FSDP"
    return None


def loss_chunks(cfg: TrainingConfig) -> int:
    """The chunk count a chunked loss runs with (torchtune's default when not given)."""
    return cfg.loss_chunks or LOSS_CHUNKS_DEFAULT


def double_quant(cfg: TrainingConfig) -> bool:
    """Whether --qlora's 4-bit weights are double-quantized (on unless --no-double-quant)."""
    return cfg.double_quant is not False


__all__ = [
    "ACCUMULATE_UNSHARDED_FIELD",
    "ACTIVATION_OFFLOAD_FIELD",
    "COMPILE_FIELD",
    "DPO_FIELD",
    "FSDP_FLAT_FIELD",
    "KD_TEACHER_FIELD",
    "LITGPT_NORM_FIELD",
    "LITGPT_UNCAPPED_FIELD",
    "LOSSES",
    "LOSS_CHUNKS_DEFAULT",
    "LOSS_CHUNKS_FIELD",
    "LOSS_FIELD",
    "PAGED_OPTIMIZERS",
    "TORCHAO_NF4_FIELD",
    "Loss",
    "check_behaviours",
    "double_quant",
    "loss_chunks",
    "loss_conflict",
]


def model_check(w: Any, cfg: TrainingConfig) -> tuple[str, str] | None:
    """all-linear's roles narrowed to the model's own linears (``own_linears``), then (one
    sentence, the field) for an option the model's kind does not model (a gate it lacks, an
    encoder's, an encoder-decoder's, --target-seq without a decoder of its own); ``w`` its
    ``WorkloadConfig`` or None."""
    from profiling._config_lora import compiled_gpt2_lora, missing_gate, own_linears
    from profiling.models.hf_encoders import encoder_refusal
    from profiling.models.hf_t5 import t5_refusal, target_refusal

    cfg.lora_targets = own_linears(w, cfg.lora_targets)
    if no := target_refusal(w, cfg) or missing_gate(w, cfg) or compiled_gpt2_lora(w, cfg):
        return no
    if w is not None and w.arch == "encoder":
        return encoder_refusal(w, cfg)
    return t5_refusal(w, cfg) if w is not None and w.arch == "t5" else None
