"""Hugging Face configs of encoders, read as their ``transformers`` classes build them: BERT and
RoBERTa (arch ``encoder`` of :class:`WorkloadConfig`).

What sets them apart from the decoders: attention sees every token (no causal mask), each block
ends in a LayerNorm (post-norm: q, k, v and output projections, the MLP's two matmuls, all with
biases, exact GELU), and the embeddings add learned positions and token types under a LayerNorm
of their own. The task the model trains on decides its head: masked LM (``...ForMaskedLM``:
a dense layer, GELU and LayerNorm, then the decoder tied to the word embeddings with a bias of
its own) unless the config's ``architectures`` names a ``...ForSequenceClassification``
(BERT's pooler and classifier, RoBERTa's classification head: the same counts), with
``num_labels`` outputs (``id2label``'s length, 2 by default; 1 is a regression). RoBERTa's
positions start after its padding index, so its longest sequence is
``max_position_embeddings − pad_token_id − 1`` (512 of 514). What the classes have and we do
not model is refused in one sentence. No torch here.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from profiling.errors import ProfilingError
from profiling.models.config import WorkloadConfig


class EncoderFields(BaseModel):
    """The ``config.json`` fields only encoders read (``hf_config._Fields`` inherits them)."""

    type_vocab_size: int = Field(2, ge=0, le=10**6)  # BertConfig's and RobertaConfig's default
    architectures: list[str] | None = None
    id2label: dict[str, str] | None = None
    num_labels: int | None = Field(None, ge=1, le=10**6)
    pad_token_id: int | None = Field(None, ge=0, le=10**8)
    position_embedding_type: str = "absolute"
    is_decoder: bool = False
    # ViT (ViTConfig's defaults)
    image_size: int = Field(224, ge=1, le=10**5)
    patch_size: int = Field(16, ge=1, le=10**5)
    num_channels: int = Field(3, ge=1, le=10**4)
    qkv_bias: bool = True


class _Fields(Protocol):
    """The fields of ``hf_config._Fields`` these readers use."""

    max_position_embeddings: int
    tie_word_embeddings: bool | None
    hidden_act: str | None
    type_vocab_size: int
    architectures: list[str] | None
    id2label: dict[str, str] | None
    num_labels: int | None
    pad_token_id: int | None
    position_embedding_type: str
    is_decoder: bool
    image_size: int
    patch_size: int
    num_channels: int
    qkv_bias: bool


def _head(f: _Fields) -> dict[str, Any]:
    """The task's head: classification when the config's architecture is one, else masked LM."""
    if any(a.endswith("ForSequenceClassification") for a in f.architectures or []):
        labels = len(f.id2label) if f.id2label else (f.num_labels or 2)
        return {"encoder_head": "classify", "num_labels": labels}
    return {"encoder_head": "mlm"}


def _encoder(f: _Fields, kind: str, max_seq: int) -> dict[str, Any]:
    if f.position_embedding_type != "absolute":
        raise ProfilingError(
            f"this {kind} config uses {f.position_embedding_type!r} position embeddings "
            "(distance embeddings in every attention), which are not modelled; give one with "
            "absolute positions (bert-base/large, roberta-base/large)"
        )
    if f.is_decoder:
        raise ProfilingError(
            f"this {kind} config is a decoder (is_decoder: true), which is not modelled; give "
            "the encoder's config"
        )
    if (f.hidden_act or "gelu") != "gelu":
        raise ProfilingError(
            f"this {kind} config's hidden_act is {f.hidden_act!r}; only BERT's exact GELU "
            "('gelu') is modelled"
        )
    if max_seq < 1:
        raise ProfilingError(f"this {kind} config leaves no position for a token")
    return {
        "arch": "encoder",
        "type_vocab": f.type_vocab_size,
        "positions": f.max_position_embeddings,
        "max_seq": max_seq,
        "tied_embeddings": True if f.tie_word_embeddings is None else f.tie_word_embeddings,
        **_head(f),
    }


def _bert(f: _Fields) -> dict[str, Any]:
    return _encoder(f, "bert", f.max_position_embeddings)


def _roberta(f: _Fields) -> dict[str, Any]:
    # RobertaEmbeddings numbers positions from padding_idx + 1 (pad_token_id, 1 by default)
    pad = 1 if f.pad_token_id is None else f.pad_token_id
    return _encoder(f, "roberta", f.max_position_embeddings - pad - 1)


def encoder_refusal(w: WorkloadConfig, cfg: Any) -> tuple[str, str] | None:
    """(one sentence, the field) for a training option that does not apply to an encoder or is
    not modelled on one; None when every option given does. ``cfg`` is the training
    configuration (``profiling.config.TrainingConfig``, a floor above this wing)."""
    kind = w.name
    if w.patch_size and cfg.seq is not None and cfg.seq != w.max_seq:
        return (
            f"--seq does not apply to {kind}: its sequence is the image's patches and the class "
            f"token, ({w.image_size} / {w.patch_size})² + 1 = {w.max_seq}; leave --seq out",
            "seq",
        )
    if cfg.loss != "cross-entropy":
        return (
            f"--loss {cfg.loss} is a decoder's LM loss; {kind} trains with transformers' own "
            "loss of its task (masked LM or classification): leave --loss out",
            "loss",
        )
    wrong = [t for t in cfg.lora_targets if t in ("gate", "lm_head")]
    if cfg.lora_rank is not None and wrong:
        return (
            f"--lora-targets {', '.join(wrong)}: {kind} has no gate projection and no LM head "
            "to adapt; its roles are q, k, v, o (query, key, value, the attention's output), "
            "up and down (the MLP's two)",
            "lora_targets",
        )
    if cfg.lora_rank is not None and cfg.precision == "mixed" and w.encoder_head == "classify":
        return (
            f"--precision mixed with LoRA on {kind}'s classifier: peft's modules_to_save copy "
            "of the classifier stays 16-bit beside fp32 adapters, which is not modelled yet; "
            "use amp-bf16, bf16 or fp32",
            "precision",
        )
    asked = [
        (cfg.qlora, "--qlora", "qlora"),
        (cfg.lora_rank is not None and cfg.lora_dropout > 0, "--lora-dropout", "lora_dropout"),
        (cfg.compile, "--compile", "compile"),
        (cfg.attention == "eager", "--attention eager", "attention"),
        (cfg.dropout > 0, "--dropout", "dropout"),
        (cfg.checkpointing not in ("none", "full"), f"--checkpointing {cfg.checkpointing}",
         "checkpointing"),
        (cfg.tied_head is False, "--no-tied-head", "tied_head"),
    ]  # fmt: skip
    for given, flag, field in asked:
        if given:
            return (
                f"{flag} on an encoder ({kind}) is not modelled yet; estimate or trace its "
                "full finetune with SDPA attention, no dropout and no or full checkpointing",
                field,
            )
    return None


def _vit(f: _Fields) -> dict[str, Any]:
    """ViTForImageClassification: the sequence is the image's patches and the class token."""
    if f.image_size % f.patch_size:
        raise ProfilingError(
            f"this vit config's image_size {f.image_size} does not divide by its patch_size "
            f"{f.patch_size}; give a config whose patches tile the image"
        )
    if not f.qkv_bias:
        raise ProfilingError("this vit config has no q/k/v biases (qkv_bias: false), which is "
                             "not modelled; give one with them (every published ViT)")  # fmt: skip
    tokens = (f.image_size // f.patch_size) ** 2 + 1
    labels = len(f.id2label) if f.id2label else (f.num_labels or 2)
    fields = _encoder(f, "vit", tokens)
    return {**fields, "type_vocab": 0, "positions": tokens, "tied_embeddings": False,
            "encoder_head": "classify", "num_labels": labels, "vocab": 0,
            "patch_size": f.patch_size, "image_size": f.image_size,
            "channels": f.num_channels}  # fmt: skip


ENCODER_FAMILIES = {"bert": _bert, "roberta": _roberta, "vit": _vit}
ENCODER_NAMES = {"bert": "BERT", "roberta": "RoBERTa", "vit": "ViT"}

__all__ = ["ENCODER_FAMILIES", "ENCODER_NAMES", "EncoderFields", "encoder_refusal"]
