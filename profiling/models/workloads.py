"""Reference workloads: GPT-2 small/medium/large/XL and Llama-shaped 1B/7B in pure torch.

Configurations are plain data (``WORKLOADS``) so ``estimate --model NAME`` gets layers, hidden
size, heads, vocabulary and the exact parameter count without importing torch or building
anything. ``build_model`` imports torch; nothing is downloaded.

The models follow nanoGPT's convention: ``model(idx, targets)`` returns the scalar
cross-entropy loss (logits upcast to fp32 first, as real training code does), and
``model.example_inputs(batch, seq)`` makes token ids and targets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.errors import ProfilingError
from profiling.models.config import WorkloadConfig

if TYPE_CHECKING:
    from torch.types import Device

    from profiling.models.blocks import BlocksLM


def _gpt2(name: str, layers: int, hidden: int, heads: int) -> WorkloadConfig:
    return WorkloadConfig(
        name=name,
        arch="gpt2",
        layers=layers,
        hidden=hidden,
        heads=heads,
        vocab=50257,
        ffn=4 * hidden,
        max_seq=1024,
        tied_embeddings=True,
        description=f"GPT-2 {name.split('-')[1]} ({layers} layers, hidden {hidden})",
    )


WORKLOADS: dict[str, WorkloadConfig] = {
    "gpt2-small": _gpt2("gpt2-small", 12, 768, 12),
    "gpt2-medium": _gpt2("gpt2-medium", 24, 1024, 16),
    "gpt2-large": _gpt2("gpt2-large", 36, 1280, 20),
    "gpt2-xl": _gpt2("gpt2-xl", 48, 1600, 25),
    # TinyLlama-1.1B's shape: a Llama-2 architecture with grouped-query attention.
    "llama-1b": WorkloadConfig(
        name="llama-1b",
        arch="llama",
        layers=22,
        hidden=2048,
        heads=32,
        kv_heads=4,
        vocab=32000,
        ffn=5632,
        description="Llama-shaped 1.1B (TinyLlama shape: 22 layers, hidden 2048, GQA 32/4)",
    ),
    # Llama-2-7B's shape.
    "llama-7b": WorkloadConfig(
        name="llama-7b",
        arch="llama",
        layers=32,
        hidden=4096,
        heads=32,
        vocab=32000,
        ffn=11008,
        description="Llama-shaped 7B (Llama-2-7B shape: 32 layers, hidden 4096, FFN 11008)",
    ),
    # Small shapes for tests and quick looks.
    "tiny-gpt2": WorkloadConfig(
        name="tiny-gpt2",
        arch="gpt2",
        layers=2,
        hidden=64,
        heads=4,
        vocab=512,
        ffn=256,
        max_seq=128,
        tied_embeddings=True,
        description="a 2-layer GPT-2-shaped toy for tests",
    ),
    "tiny-llama": WorkloadConfig(
        name="tiny-llama",
        arch="llama",
        layers=2,
        hidden=64,
        heads=4,
        kv_heads=2,
        vocab=512,
        ffn=172,
        max_seq=128,
        description="a 2-layer Llama-shaped toy for tests",
    ),
}

REFERENCE_NAMES = ["gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "llama-1b", "llama-7b"]


def get_workload(name: str) -> WorkloadConfig:
    try:
        return WORKLOADS[name]
    except KeyError:
        known = ", ".join(WORKLOADS)
        raise ProfilingError(
            f"unknown model {name!r}; use one of {known} or a factory 'package.module:function'"
        ) from None


def find_workload(name: str | None) -> WorkloadConfig | None:
    """The shape ``name`` means: a reference model, ``hf:NAME`` / ``hf:PATH`` (a Hugging Face
    config; its problems raise one ProfilingError sentence), or None (a factory, no model)."""
    if not name:
        return None
    if name.startswith("hf:"):
        from profiling.models.hf_config import load_hf

        return load_hf(name)
    return WORKLOADS.get(name)


def tied_as_asked(w: WorkloadConfig | None, tied: bool | None) -> WorkloadConfig | None:
    """The model's shape with the LM head tied or not as ``--tied-head`` says (LitGPT's
    checkpoints give every model its own head: the estimate and the trace build it so)."""
    if w is None or tied is None or w.tied_embeddings == tied:
        return w
    return w.model_copy(update={"tied_embeddings": tied})


def as_run(
    w: WorkloadConfig | None,
    tied: bool | None,
    loss: str,
    litgpt_norm: bool = False,
    uncapped: bool = False,
) -> WorkloadConfig | None:
    """The model as the step runs it: the LM head tied or not as ``--tied-head`` says, and under
    LitGPT's finetune scripts (``--loss litgpt``) a Phi config built as LitGPT's own GPT builds
    it (``WorkloadConfig.litgpt``; litgpt/model.py at 00af8b0: one fused ``attn`` Linear,
    ``apply_rope`` after the transpose and a ``torch.cat``, ``GptNeoxMLP``'s fused
    ``gelu(approximate='tanh')``) — transformers' PhiForCausalLM runs gelu_new as eager ops
    and q, k, v apart, which LitGPT never runs. Under any of LitGPT's scripts (``--loss litgpt``
    or ``litgpt_norm``, which its full.py sets too) a Llama-shaped config's norms are LitGPT's
    RMSNorm (``WorkloadConfig.litgpt_norm``, ``profiling.models.litgpt_norm``) and a Llama,
    Mistral, Qwen2, Phi-3, Gemma or Gemma 2 config's attention LitGPT's
    (``WorkloadConfig.litgpt_qkv``, ``profiling.models.litgpt_attention``). ``uncapped``: LitGPT
    before v0.5.5, whose LoRA and adapter models return the LM head's chunks without the final
    soft cap (``--litgpt-uncapped``: no cap anywhere in the model)."""
    w = tied_as_asked(w, tied)
    if w is not None and uncapped and loss == "litgpt" and w.logit_softcap:
        w = w.model_copy(update={"logit_softcap": None})
    litgpt = loss == "litgpt" or litgpt_norm  # LitGPT's own GPT, whichever loss its script runs
    if w is not None and litgpt and w.hf_model_type in LITGPT_QKV | LITGPT_RMS_NORM:
        return w.model_copy(
            update={
                "litgpt_norm": w.hf_model_type in LITGPT_RMS_NORM,
                "litgpt_qkv": w.hf_model_type in LITGPT_QKV,
            }
        )
    if w is None or loss != "litgpt" or w.hf_model_type != "phi":
        return w
    return w.model_copy(update={"fused_qkv": True, "litgpt": True})


# transformers' model types LitGPT builds with its own RMSNorm (its Llama, Mistral, Qwen2 and
# Phi-3 configs: norm_class_name "RMSNorm"; Gemma's already keeps the fp32 normalized values)
LITGPT_RMS_NORM = frozenset({"llama", "mistral", "qwen2", "phi3"})
# ... and with its own attention (profiling.models.litgpt_attention; Phi-3's a Llama's in
# LitGPT: one adapter, one dropout on its fused q/k/v; Gemma 2's soft-capped scores take
# LitGPT's explicit path, which keeps what transformers' eager attention keeps)
LITGPT_QKV = frozenset({"llama", "mistral", "qwen2", "gemma", "gemma2", "phi3"})


def is_variant(config: WorkloadConfig) -> bool:
    """Whether the shape needs the Llama family's variations (``hf_blocks``): every Hugging
    Face config does (tied embeddings, its RoPE base), so the blocks follow the config."""
    if config.hf_model_type is not None:
        return True
    defaults = WorkloadConfig.model_fields
    fields = ("head_size", "qkv_bias", "qk_norm", "norms", "mlp", "experts", "sliding_window")
    fields += ("embed_scale", "logit_softcap")
    return any(getattr(config, f) != defaults[f].default for f in fields)


# what our blocks do not build, by the shape's arch (BLOOM's ALiBi: ``alibi``)
_NOT_BUILT = {"encoder": "an encoder (BERT's kind)", "t5": "T5's encoder-decoder"}


def build_model(config: WorkloadConfig | str, device: Device = None) -> BlocksLM:
    """Build the model for ``config`` (a name or a config) from our own blocks. Imports torch."""
    if isinstance(config, str):
        config = find_workload(config) or get_workload(config)
    if config.arch in ("encoder", "t5") or config.alibi:
        # reached by `profile` (profiling.measure.run measures our blocks only) and by a trace
        # asked for our blocks; a trace of an hf: config builds transformers' module instead
        kind = "ALiBi attention" if config.alibi else _NOT_BUILT[config.arch]
        raise ProfilingError(
            f"{config.name} ({config.hf_model_type}): the project's own blocks do not build "
            f"{kind}, and `profile` measures only those; `estimate --compare-trace` and `trace` "
            "run transformers' own module instead"
        )
    if config.arch == "neox":
        from profiling.models.neox_blocks import NeoX

        return NeoX(config, device=device)
    if config.arch == "llama" and is_variant(config):
        from profiling.models import hf_blocks

        return hf_blocks.HFLlama(config, device=device)
    from profiling.models import blocks as _models

    cls = _models.GPT2 if config.arch == "gpt2" else _models.Llama
    return cls(config, device=device)


def describe(config: WorkloadConfig) -> dict[str, str | int | float]:
    info: dict[str, str | int | float] = {
        "name": config.name,
        "arch": config.arch,
        "layers": config.layers,
        "hidden": config.hidden,
        "heads": config.heads,
        "kv_heads": config.n_kv_heads,
        "ffn": config.ffn,
        "vocab": config.vocab,
        "params": config.param_count(),
        "params_b": round(config.param_count() / 1e9, 3),
        "description": config.description,
    }
    if config.moe:
        info.update(
            experts=config.experts,
            experts_per_token=config.experts_per_token,
            expert_ffn=config.mlp_ffn,
            routing=routing_assumption(config),
        )
    if config.source:
        info["source"] = config.source
    return info


def routing_assumption(config: WorkloadConfig) -> str:
    """The stated assumption behind a mixture of experts' activations."""
    k, e = config.experts_per_token, config.experts
    return (
        f"top-{k} of {e} experts; balanced routing (capacity factor "
        f"{config.capacity_factor:g}): each expert takes k·T/E = {k}/{e} of the tokens, so "
        f"the experts' activations total those of {k} dense MLPs of width {config.mlp_ffn}; "
        "all experts' parameters, gradients and optimizer state are counted"
        + (
            f"; {config.shared_experts} shared experts run every token"
            if config.shared_experts
            else ""
        )
        + (f"; the first {config.dense_layers} layers are dense" if config.dense_layers else "")
    )


__all__ = [
    "REFERENCE_NAMES",
    "WORKLOADS",
    "WorkloadConfig",
    "as_run",
    "build_model",
    "describe",
    "find_workload",
    "get_workload",
    "routing_assumption",
    "tied_as_asked",
]
