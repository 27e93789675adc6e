"""Hugging Face configs of GPT-NeoX's kind of decoder, read as their ``transformers`` classes
build them: GPT-NeoX (Pythia, StableLM-alpha), Phi-1/1.5/2, Falcon and BLOOM.

What they share, and set them apart from the Llama family: LayerNorm with a bias, a plain
two-matmul GELU MLP, rotary attention on all or the leading part of each head, and (except
Falcon-7B's) biases on every Linear. Where they differ are the fields of :class:`WorkloadConfig`
(arch ``neox``): whether attention and the MLP run one after the other or in parallel from the
same block input (GPT-NeoX: two LayerNorms; Phi and Falcon-7B: one), q, k and v as one Linear
(GPT-NeoX, Falcon) or three (Phi), how many key/value heads (Falcon-7B: one, multi-query), the
rotary share (GPT-NeoX's ``rotary_pct``, Phi's ``partial_rotary_factor``) and Phi's biased LM
head. BLOOM is GPT-NeoX's sequential block with ALiBi biases for positions (no rotary) and a
LayerNorm on the embeddings; its config names some sizes as GPT-2 did (``n_layer``, ``n_head``,
``n_embed``) and has no MLP width (4h). Each reader follows the defaults of its transformers
config class (5.x) where the JSON is silent. What the classes have and we do not model is
refused in one sentence. No torch here.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from profiling.errors import ProfilingError


class BloomFields(BaseModel):
    """The ``config.json`` fields only BLOOM reads (``hf_config._Fields`` inherits them), with
    BloomConfig's defaults."""

    apply_residual_connection_post_layernorm: bool = False
    pretraining_tp: int = Field(1, ge=1, le=10**4)
    slow_but_exact: bool = False


# BloomConfig's attribute_map and its n_embed alias: the names the shape's fields go by
BLOOM_KEYS = {
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_embed": "hidden_size",
}


class _Fields(Protocol):
    """The fields of ``hf_config._Fields`` these readers use (no import: hf_config imports
    this module)."""

    hidden_size: int
    num_attention_heads: int
    head_dim: int | None
    tie_word_embeddings: bool | None
    attention_bias: bool
    rope_theta: float
    rotary_pct: float
    partial_rotary_factor: float
    rotary_emb_base: float | None
    use_parallel_residual: bool
    parallel_attn: bool
    new_decoder_architecture: bool
    num_ln_in_parallel_attn: int | None
    multi_query: bool
    num_kv_heads: int | None
    bias: bool
    alibi: bool
    qk_layernorm: bool
    hidden_act: str | None
    ffn_hidden_size: int | None
    apply_residual_connection_post_layernorm: bool
    pretraining_tp: int
    slow_but_exact: bool

    @property
    def model_fields_set(self) -> set[str]: ...


# transformers' activations that are GELU's tanh approximation
_TANH = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")


def _rotary(f: _Fields, share: float) -> int:
    """Rotating dims per head, as transformers computes them: ``int(head_dim · share)``."""
    hd = f.head_dim or f.hidden_size // f.num_attention_heads
    return int(hd * share)


def _set(f: _Fields, name: str) -> bool:
    """Whether the JSON gives the field (else the config class's default applies)."""
    return name in f.model_fields_set


def _tied(f: _Fields, default: bool) -> bool:
    return default if f.tie_word_embeddings is None else f.tie_word_embeddings


def _gpt_neox(f: _Fields) -> dict[str, Any]:
    # GPTNeoXConfig: attention_bias True, use_parallel_residual True, tie_word_embeddings False
    bias = f.attention_bias if "attention_bias" in f.model_fields_set else True
    return {
        "arch": "neox",
        "residual": "parallel" if f.use_parallel_residual else "sequential",
        # GPTNeoXConfig (5.x): rotary_pct, else a quarter of each head
        "rotary_dim": _rotary(f, f.rotary_pct if _set(f, "rotary_pct") else 0.25),
        "linear_bias": bias,
        "fused_qkv": True,
        "tied_embeddings": _tied(f, False),
        "rope_theta": f.rotary_emb_base or f.rope_theta,
        "gelu": "tanh" if f.hidden_act in _TANH else "exact",
    }


def _phi(f: _Fields) -> dict[str, Any]:
    if f.qk_layernorm:
        raise ProfilingError(
            "this phi config normalizes queries and keys (qk_layernorm), which is not modelled; "
            "give one without it (Phi-1, 1.5 and 2 have none)"
        )
    return {
        "arch": "neox",
        "residual": "parallel_one_norm",
        # PhiConfig: partial_rotary_factor, else half of each head
        "rotary_dim": _rotary(
            f, f.partial_rotary_factor if _set(f, "partial_rotary_factor") else 0.5
        ),
        "linear_bias": True,
        "head_bias": True,
        "tied_embeddings": _tied(f, False),
        "gelu": "tanh" if f.hidden_act in (None, *_TANH) else "exact",  # PhiConfig: gelu_new
    }


def _falcon(f: _Fields) -> dict[str, Any]:
    if f.alibi:
        raise ProfilingError(
            "this falcon config uses ALiBi position biases (alibi: true), which are not "
            "modelled; give a rotary Falcon (falcon-7b, falcon-40b and their kin)"
        )
    heads = f.num_attention_heads
    # FalconConfig: num_kv_heads under the new architecture, else one (multi_query) or all
    old_kv = 1 if f.multi_query else heads
    kv = (f.num_kv_heads or heads) if f.new_decoder_architecture else old_kv
    two_norms = f.new_decoder_architecture or f.num_ln_in_parallel_attn == 2
    residual = "parallel" if two_norms else "parallel_one_norm"
    return {
        "arch": "neox",
        "kv_heads": kv,
        "residual": residual if f.parallel_attn or two_norms else "sequential",
        "linear_bias": f.bias,
        "fused_qkv": True,
        "tied_embeddings": _tied(f, True),
    }


def _bloom(f: _Fields) -> dict[str, Any]:
    if f.apply_residual_connection_post_layernorm:
        raise ProfilingError(
            "this bloom config adds the LayerNorms' outputs to the residual stream "
            "(apply_residual_connection_post_layernorm), which is not modelled; give one without "
            "it (every published BLOOM has it off)"
        )
    if f.slow_but_exact and f.pretraining_tp > 1:
        raise ProfilingError(
            "this bloom config splits its dense matmuls into pretraining_tp slices "
            "(slow_but_exact), which is not modelled; give one with slow_but_exact false"
        )
    return {
        "arch": "neox",
        "residual": "sequential",
        "rotary_dim": 0,  # ALiBi: nothing rotates
        "alibi": True,
        "embed_norm": True,
        "linear_bias": True,
        "fused_qkv": True,
        "tied_embeddings": _tied(f, True),  # BloomConfig: tied
        "gelu": "tanh",  # bloom_gelu_forward: GELU's tanh form
    }


def neox_ffn(f: _Fields, kind: str) -> int | None:
    """Falcon's MLP width, ``ffn_hidden_size`` or 4h (its class reads no
    ``intermediate_size``), BLOOM's 4h (fixed by its class); None for the others (they give
    ``intermediate_size``)."""
    if kind == "falcon":
        return f.ffn_hidden_size or 4 * f.hidden_size
    if kind == "bloom":
        return 4 * f.hidden_size
    return None


NEOX_FAMILIES = {"gpt_neox": _gpt_neox, "phi": _phi, "falcon": _falcon, "bloom": _bloom}

__all__ = ["BLOOM_KEYS", "NEOX_FAMILIES", "BloomFields", "neox_ffn"]
