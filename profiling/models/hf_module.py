"""The model a Hugging Face config describes, built for the trace: the real ``transformers``
module when it is installed (``pip install 'journal-agent[hf]'``), else our own blocks.

``build_hf`` runs inside the trace's ``FakeTensorMode`` (with the parameter dtype as torch's
default), so ``AutoModelForCausalLM.from_config`` allocates nothing, even for a 70B. The module
is wrapped so ``model(idx, targets)`` returns Hugging Face's own loss (``labels=``), and the
returned dict says which of the two was built and under which assumptions: the attention
implementation (``sdpa``, or ``eager`` with ``--attention eager``; ``flash_attention_2`` needs a
GPU and its kernels, so ``--attention flash`` is traced as ``sdpa``, which on the CPU device runs
a flash kernel too) and the dropout (``--dropout``, applied to every dropout field of the config).

Mixtures of experts keep our own blocks even with transformers: Hugging Face's expert dispatch
reads which experts the router chose (``nonzero`` over the routing mask), a value fake tensors do
not have. Imports torch.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn
from torch.types import Device

from profiling._quiet_import import import_quietly
from profiling.errors import ProfilingError
from profiling.models.config import WorkloadConfig
from profiling.models.implementation import project_blocks, project_blocks_asked
from profiling.models.shape_overrides import given, raw_config, with_overrides

if TYPE_CHECKING:
    from transformers import AutoConfig, AutoModelForCausalLM

    from profiling.models.blocks import BlocksLM


class BuildChoices(Protocol):
    """What the trace's configuration (``profiling.config.TrainingConfig``, a floor above this
    wing) decides about the built model."""

    @property
    def model(self) -> str | None: ...
    @property
    def attention(self) -> str: ...
    @property
    def dropout(self) -> float: ...


# Every dropout field a supported config may carry.
_DROPOUTS = (
    "attention_dropout",
    "hidden_dropout",
    "resid_pdrop",
    "embd_pdrop",
    "attn_pdrop",
    "summary_first_dropout",
    "hidden_dropout_prob",  # BERT, RoBERTa
    "attention_probs_dropout_prob",
    "dropout_rate",  # T5, mT5 (every dropout of the model)
)


class HFCausalLM(nn.Module):
    """``model(idx, targets)`` over a transformers ``...ForCausalLM``: its own loss."""

    def __init__(self, model: nn.Module, shape: WorkloadConfig) -> None:
        super().__init__()
        self.model = model
        self.config = shape

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        loss = self.config.loss
        if targets is not None and loss != "cross-entropy":
            return self._stack_loss(idx, targets)
        with _one_sequence_per_row():
            out = self.model(input_ids=idx, labels=targets, use_cache=False)
        return out.logits if targets is None else out.loss

    def _stack_loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Another stack's loss on transformers' hidden states and LM head, as Liger's and Cut
        Cross-Entropy's patches of the model's forward compute it (``profiling.models.losses``)."""
        from profiling.models.losses import lm_loss

        c = self.config
        cap = c.logit_softcap  # the model's final_logit_softcapping, unless the run drops it
        return lm_loss(c.loss, self.head(), lambda: self.final_hidden(idx), targets,
                       c.loss_chunks, cap, c.target == "cuda", c.compile_loss)  # fmt: skip

    def final_hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """The decoder's final norm output (the base model's ``last_hidden_state``)."""
        base: Any = self.model.base_model  # transformers' PreTrainedModel (untyped here)
        with _one_sequence_per_row():
            return base(input_ids=idx, use_cache=False).last_hidden_state

    def head(self) -> nn.Module:
        """The LM head (``get_output_embeddings``)."""
        model: Any = self.model
        return model.get_output_embeddings()

    def example_inputs(
        self, batch: int, seq: int, device: Device = None
    ) -> tuple[torch.Tensor, ...]:
        vocab = self.config.vocab
        idx = torch.randint(0, vocab, (batch, seq), device=device)
        return idx, torch.randint(0, vocab, (batch, seq), device=device)


@contextlib.contextmanager
def _one_sequence_per_row() -> Iterator[None]:
    """Hugging Face's mask as a real batch of unpacked sequences gets it.

    Without an attention mask, transformers looks at the position ids for packed sequences
    (``find_packed_sequence_indices``): on real data it finds none and drops the mask, so SDPA
    runs ``is_causal`` (flash on a GPU, grouped-query heads unexpanded). A fake tensor has no
    values, so transformers takes it for a traced graph and keeps a packed-sequence mask: SDPA
    would get an s×s mask, which rules flash out and expands the key/value heads. Our inputs
    are one sequence per row (positions 0…s−1), so the answer on real data is known: none.
    """
    try:
        from transformers import masking_utils
    except ImportError:
        yield
        return
    find = getattr(masking_utils, "find_packed_sequence_indices", None)
    if find is None:
        yield
        return
    masking_utils.find_packed_sequence_indices = lambda *_a, **_k: None
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = find


class HFEncoder(nn.Module):
    """``model(idx, labels)`` over transformers' ``...ForMaskedLM`` or
    ``...ForSequenceClassification`` (an encoder, arch ``encoder``): its own loss."""

    def __init__(self, model: nn.Module, shape: WorkloadConfig) -> None:
        super().__init__()
        self.model = model
        self.config = shape

    def forward(self, idx: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        inputs = {"pixel_values" if self.config.patch_size else "input_ids": idx}
        out = self.model(**inputs, labels=labels)
        return out.logits if labels is None else out.loss

    def example_inputs(
        self, batch: int, seq: int, device: Device = None
    ) -> tuple[torch.Tensor, ...]:
        """Token ids and the task's labels: one per token for masked LM (transformers' loss
        runs over every position's logits whichever are masked), one per sequence for
        classification (a float for a regression, num_labels 1); ViT's images and labels."""
        c = self.config
        if c.patch_size:  # ViT: images (batch × channels × H × W) in the parameters' dtype
            images = torch.randn(batch, c.channels, c.image_size, c.image_size, device=device)
            return images, torch.randint(0, c.num_labels, (batch,), device=device)
        idx = torch.randint(0, c.vocab, (batch, seq), device=device)
        if c.encoder_head == "mlm":
            return idx, torch.randint(0, c.vocab, (batch, seq), device=device)
        if c.num_labels == 1:
            return idx, torch.rand(batch, device=device)
        return idx, torch.randint(0, c.num_labels, (batch,), device=device)


class HFSeq2Seq(nn.Module):
    """``model(idx, labels)`` over transformers' ``T5ForConditionalGeneration`` or
    ``MT5ForConditionalGeneration`` (arch ``t5``): its own loss, the decoder reading the labels
    shifted right (``_shift_right``), as a seq2seq Trainer's batch without decoder_input_ids."""

    def __init__(self, model: nn.Module, shape: WorkloadConfig) -> None:
        super().__init__()
        self.model = model
        self.config = shape

    def forward(self, idx: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        if labels is None:  # no targets: the decoder reads the input's length of start tokens
            out = self.model(input_ids=idx, decoder_input_ids=torch.zeros_like(idx))
            return out.logits
        return self.model(input_ids=idx, labels=labels, use_cache=False).loss

    def block_lists(self) -> list[nn.ModuleList]:
        """Both stacks' blocks (checkpointing wraps each)."""
        m: Any = self.model
        return [m.encoder.block, m.decoder.block]

    def example_inputs(
        self, batch: int, seq: int, device: Device = None
    ) -> tuple[torch.Tensor, ...]:
        """The input's token ids (batch × seq) and the target's (batch × target_seq, the
        input's length unless ``--target-seq`` says)."""
        c = self.config
        target = c.target_seq or seq
        idx = torch.randint(0, c.vocab, (batch, seq), device=device)
        return idx, torch.randint(0, c.vocab, (batch, target), device=device)


def _untie_head(model: nn.Module) -> None:
    """transformers 5 ties a T5's LM head to its embedding whatever the config says;
    from_pretrained unties them when the checkpoint's two differ (v1.1, mT5, Flan-T5): so
    does this, with an lm_head of its own."""
    m: Any = model
    if m.lm_head.weight is m.shared.weight:
        m.lm_head.weight = nn.Parameter(torch.empty_like(m.shared.weight))
        getattr(m, "all_tied_weights_keys", {}).pop("lm_head.weight", None)


def _auto_model(shape: WorkloadConfig) -> Any:
    """transformers' auto class of the task the shape trains."""
    import transformers

    if shape.arch == "t5":
        return transformers.AutoModelForSeq2SeqLM
    if shape.arch != "encoder":
        return transformers.AutoModelForCausalLM
    if shape.patch_size:
        return transformers.AutoModelForImageClassification
    if shape.encoder_head == "classify":
        return transformers.AutoModelForSequenceClassification
    return transformers.AutoModelForMaskedLM


def transformers_version() -> str | None:
    try:
        import transformers
    except ImportError:
        return None
    return str(transformers.__version__)


def _as_litgpt_runs(model: nn.Module, shape: WorkloadConfig, attention: str) -> str:
    """The model LitGPT's scripts run: its own RMSNorm and attention (one fused q/k/v); what
    the note says."""
    note = ""
    if shape.litgpt_norm:
        from profiling.models.litgpt_norm import use_litgpt_norms

        note += f"; LitGPT's RMSNorm ({use_litgpt_norms(model)})"
    # LitGPT runs SDPA, or with Gemma 2's soft-capped scores its own explicit path (transformers
    # builds that model eager only)
    if shape.litgpt_qkv and (attention == "sdpa" or shape.attn_softcap):
        from profiling.models.litgpt_attention import use_litgpt_attention

        note += f"; LitGPT's attention, q/k/v fused ({use_litgpt_attention(model)})"
    return note


def build_hf(
    shape: WorkloadConfig, cfg: BuildChoices
) -> tuple[HFCausalLM | HFEncoder | HFSeq2Seq | BlocksLM, dict[str, str]]:
    """(model, what was built) for the config ``cfg.model`` names, ``shape`` its (possibly
    block-reduced) shape. Called under the trace's fake mode."""
    version = transformers_version()
    reason = None
    if project_blocks_asked():
        reason = "asked for"
    elif version is None:
        reason = "transformers is not installed (pip install 'journal-agent[hf]')"
    elif shape.litgpt:
        reason = "LitGPT's own modules, as its finetune scripts (--loss litgpt) run Phi"
    elif shape.moe:
        reason = (
            "transformers' expert dispatch reads the router's choices (nonzero), which fake "
            "tensors cannot give"
        )
    if reason is not None:
        return _own(shape, reason)
    from transformers import AutoConfig

    assert cfg.model is not None, "the trace builds an hf: model only for --model hf:…"
    # the config.json with the shape flags given beside the model in its own fields, as the
    # estimate read it (profiling.models.shape_overrides)
    raw = with_overrides(raw_config(shape, cfg.model), given(cfg))
    raw.pop("architectures", None)
    raw.pop("torch_dtype", None)
    raw.pop("dtype", None)
    kind = str(raw.pop("model_type"))  # raw_config checked it is the shape's
    raw["tie_word_embeddings"] = shape.tied_embeddings  # --tied-head may have changed it
    # GPT-2's and BLOOM's configs name it n_layer (BloomConfig maps num_hidden_layers to it)
    raw["n_layer" if kind in ("gpt2", "bloom") else "num_hidden_layers"] = shape.layers
    raw.pop("num_hidden_layers" if kind == "bloom" else "", None)
    if shape.arch == "t5":  # T5's own names (num_hidden_layers is an alias T5Config maps)
        raw.pop("num_hidden_layers")
        raw.update(num_layers=shape.layers, num_decoder_layers=shape.decoder_layers)
        # _shift_right reads both; every published T5 config says 0 (the pad token)
        raw.setdefault("decoder_start_token_id", 0)
        raw.setdefault("pad_token_id", 0)
    if shape.encoder_head == "classify":
        raw["num_labels"] = shape.num_labels
    auto = _auto_model(shape)
    attention = "eager" if cfg.attention == "eager" else "sdpa"
    note = ""
    dropout = float(cfg.dropout)
    try:
        model = _from_config(AutoConfig, auto, kind, raw, attention, dropout)
    except ValueError as exc:
        if attention != "sdpa" or "scaled_dot_product_attention" not in str(exc):
            return _own(shape, f"transformers could not build it: {_first_line(exc)}")
        # Gemma 2 refuses SDPA (its attention logits are soft-capped): eager, as HF loads it.
        attention, note = "eager", "; this model class refuses sdpa"
        model = _from_config(AutoConfig, auto, kind, raw, attention, dropout)
    except Exception as exc:  # a config transformers rejects: our blocks, and why
        return _own(shape, f"transformers could not build it: {_first_line(exc)}")
    model.train()
    note += _as_litgpt_runs(model, shape, attention)
    if shape.arch == "t5" and not shape.tied_embeddings:
        _untie_head(model)
    wrapped: HFCausalLM | HFEncoder | HFSeq2Seq
    if shape.arch == "t5":  # the decoder's length: --target-seq (else the input's)
        target = getattr(cfg, "target_seq", None)
        wrapped = HFSeq2Seq(model, shape.model_copy(update={"target_seq": target}))
    elif shape.arch == "encoder":
        wrapped = HFEncoder(model, shape)
    else:
        wrapped = HFCausalLM(model, shape)
    return wrapped, {
        "traced": "transformers",
        "implementation": f"transformers {version} {type(model).__name__} "
        f"(attn_implementation={attention}{note}, dropout {cfg.dropout:g})",
        "attention": attention,
    }


def _from_config(
    auto_config: type[AutoConfig],
    auto_model: type[AutoModelForCausalLM] | Any,
    kind: str,
    raw: dict[str, object],
    attention: str,
    dropout: float = 0.0,
) -> nn.Module:
    # transformers' modeling_utils imports its torchao quantizer, whose Enums torch's pytree
    # warns about through a logging handler (not sys.stderr): held back as peft's import is.
    import_quietly("transformers.modeling_utils")
    with contextlib.redirect_stderr(io.StringIO()):  # its warnings are not our output
        config = auto_config.for_model(kind, **raw)
        # --dropout replaces every dropout the config class has, the JSON's and its defaults
        # (GPT2Config defaults to 0.1 where a config.json leaves them out).
        for key in _DROPOUTS:
            if hasattr(config, key):
                setattr(config, key, dropout)
        config._attn_implementation = attention
        config.use_cache = False
        with _no_init() if kind in _UNINITIALIZED else contextlib.nullcontext():
            return auto_model.from_config(config, dtype=torch.get_default_dtype())


# ViT initializes with trunc_normal_, which reads a value fake tensors do not have (the trace
# needs no values: transformers' own switch for building a model to load weights into)
_UNINITIALIZED = frozenset({"vit"})


def _no_init() -> contextlib.AbstractContextManager[None]:
    from transformers.initialization import no_init_weights

    return no_init_weights()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


def _own(shape: WorkloadConfig, reason: str) -> tuple[BlocksLM, dict[str, str]]:
    from profiling.models.workloads import build_model

    if (
        shape.arch in ("encoder", "t5") or shape.alibi
    ):  # no blocks of ours: transformers' or nothing
        raise ProfilingError(
            f"{shape.name} ({shape.hf_model_type}) is traced as transformers' own module only, "
            f"and {reason}; estimate it instead"
        )
    return build_model(shape), {
        "traced": "project blocks",
        "implementation": f"the project's own blocks built from the config ({reason})",
    }


__all__ = [
    "HFCausalLM",
    "HFEncoder",
    "HFSeq2Seq",
    "build_hf",
    "project_blocks",
    "transformers_version",
]
