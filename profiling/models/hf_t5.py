"""Hugging Face configs of encoder-decoders, read as transformers builds them: T5 (v1.0 and
v1.1, Flan-T5) and mT5 (arch ``t5`` of :class:`WorkloadConfig`).

Two stacks of pre-RMSNorm blocks share one embedding: the encoder's (``num_layers``) read the
input tokens, bidirectionally; the decoder's (``num_decoder_layers``, the encoder's count by
default) read the targets shifted right, causally, and each attends to the encoder's output
(cross-attention: its own k and v projections of that output). No linear has a bias; queries
and keys are not scaled; each stack's first block holds a relative position table (buckets ×
heads) whose bias every block of the stack adds to its scores. The MLP is ReLU (``relu``,
v1.0) or a GELU-gated pair (``gated-gelu``, tanh GELU: v1.1, mT5, Flan-T5).

The LM head: v1.0 checkpoints tie it to the embedding and scale the decoder's output by
d_model**-0.5 first; v1.1, mT5 and Flan-T5 publish ``tie_word_embeddings: false`` and a head of
their own. transformers 5 ties it whatever the config says, then ``from_pretrained`` unties it
again when the checkpoint's two matrices differ — what training starts from, so the untied
count is the model's. No torch here.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from profiling.errors import ProfilingError
from profiling.models.config import WorkloadConfig

# T5's config.json names, as hf_config's fields call them
T5_KEYS = {
    "d_model": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "d_ff": "intermediate_size",
    "d_kv": "head_dim",
}
# Relative positions set no length of their own: this bound is ours (fit's search, typos)
T5_MAX_SEQ = 65536


class T5Fields(BaseModel):
    """The ``config.json`` fields only encoder-decoders read (``hf_config._Fields`` has them)."""

    num_decoder_layers: int | None = Field(None, ge=1, le=10**5)
    relative_attention_num_buckets: int = Field(32, ge=1, le=10**6)
    feed_forward_proj: str | None = None  # T5Config's default relu, MT5Config's gated-gelu


class _Fields(Protocol):
    num_hidden_layers: int
    tie_word_embeddings: bool | None
    num_decoder_layers: int | None
    relative_attention_num_buckets: int
    feed_forward_proj: str | None


def _t5(f: _Fields, kind: str, proj: str, tied_default: bool) -> dict[str, Any]:
    proj = f.feed_forward_proj or proj
    if proj not in ("relu", "gated-gelu"):
        raise ProfilingError(
            f"this {kind} config's feed_forward_proj is {proj!r}; only 'relu' (T5 v1.0) and "
            "'gated-gelu' (v1.1, mT5, Flan-T5) are modelled"
        )
    tied = tied_default if f.tie_word_embeddings is None else f.tie_word_embeddings
    return {
        "arch": "t5",
        "decoder_layers": f.num_decoder_layers or f.num_hidden_layers,
        "rel_buckets": f.relative_attention_num_buckets,
        "gated": proj == "gated-gelu",
        "tied_embeddings": tied,
        "max_seq": T5_MAX_SEQ,
    }


def _t5_family(f: _Fields) -> dict[str, Any]:
    return _t5(f, "t5", "relu", True)


def _mt5(f: _Fields) -> dict[str, Any]:
    # MT5Config's default is gated-gelu; every published mT5 config unties the head
    return _t5(f, "mt5", "gated-gelu", False)


def t5_refusal(w: WorkloadConfig, cfg: Any) -> tuple[str, str] | None:
    """(one sentence, the field) for a training option not modelled on an encoder-decoder;
    None when every option given is. ``cfg``: ``profiling.config.TrainingConfig``."""
    kind = w.name
    if cfg.target_seq is not None and cfg.target_seq > w.max_seq:
        return (f"--target-seq {cfg.target_seq} exceeds the bound of {w.max_seq} tokens; give "
                "a shorter target", "target_seq")  # fmt: skip
    if cfg.attention == "eager":
        # modeling_t5.py's eager_attention_forward keeps each attention's s² scores, softmax
        # and dropout mask (encoder s·s, decoder t·t, cross t·s per head), which the estimate's
        # T5 terms (SDPA's) do not count: it read 0.80-0.83 of the trace (audit7 D70)
        return (f"--attention eager on an encoder-decoder ({kind}) is not modelled yet (its s² "
                "scores and probabilities per attention); leave --attention out: transformers "
                "runs T5 with SDPA", "attention")  # fmt: skip
    asked = [
        (cfg.qlora, "--qlora", "qlora"),
        (cfg.dora, "--dora", "dora"),
        ("lm_head" in cfg.lora_targets and cfg.lora_rank is not None, "LoRA on lm_head",
         "lora_targets"),
        (cfg.compile, "--compile", "compile"),
        (cfg.loss != "cross-entropy", f"--loss {cfg.loss}", "loss"),
        (cfg.checkpointing not in ("none", "full"), f"--checkpointing {cfg.checkpointing}",
         "checkpointing"),
        (cfg.tied_head is not None and cfg.tied_head != w.tied_embeddings, "--tied-head",
         "tied_head"),
        (cfg.optimizer_in_bwd, "--optimizer-in-bwd", "optimizer_in_bwd"),
        (cfg.activation_offload, "--activation-offload", "activation_offload"),
    ]  # fmt: skip
    for given, flag, field in asked:
        if given:
            return (
                f"{flag} on an encoder-decoder ({kind}) is not modelled yet; estimate or trace "
                "its full finetune or peft's LoRA (--lora-rank) with transformers' own loss and "
                "no or full checkpointing",
                field,
            )
    return None


def target_refusal(w: WorkloadConfig | None, cfg: Any) -> tuple[str, str] | None:
    """--target-seq on a model that has no decoder of its own."""
    if cfg.target_seq is not None and (w is None or w.arch != "t5"):
        return ("--target-seq is the decoder's length of an encoder-decoder (T5, mT5); this "
                "model reads one sequence: leave it out", "target_seq")  # fmt: skip
    return None


T5_FAMILIES = {"t5": _t5_family, "mt5": _mt5}
T5_NAMES = {"t5": "T5", "mt5": "mT5"}

__all__ = [
    "T5_FAMILIES",
    "T5_KEYS",
    "T5_MAX_SEQ",
    "T5_NAMES",
    "T5Fields",
    "t5_refusal",
    "target_refusal",
]
