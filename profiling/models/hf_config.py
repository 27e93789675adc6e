"""Hugging Face ``config.json`` files as model shapes: ``--model hf:PATH`` and ``hf:NAME``.

``hf:PATH`` reads a ``config.json`` (or a model folder holding one); ``hf:NAME`` reads one of
the configs shipped in ``profiling/models/catalogue/`` (each with its public source, date and
published parameter count). The config's fields are validated with their types, its
``model_type`` decides the block (the Llama family's variations are fields of
:class:`WorkloadConfig`), and the result is the same plain shape the reference models have: the
estimate, the trace (``profiling.models.hf_blocks`` or the real ``transformers`` module) and fit
read it alike. Bad input is one :class:`ProfilingError` sentence.

No torch here, and no network: nothing is downloaded.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Literal, TypedDict

from pydantic import ConfigDict, Field, ValidationError

from profiling.errors import ProfilingError
from profiling.models.config import WorkloadConfig
from profiling.models.hf_encoders import ENCODER_FAMILIES, ENCODER_NAMES, EncoderFields
from profiling.models.hf_neox import BLOOM_KEYS, NEOX_FAMILIES, BloomFields, neox_ffn
from profiling.models.hf_t5 import T5_FAMILIES, T5_KEYS, T5_NAMES, T5Fields

PREFIX = "hf:"
CATALOGUE = Path(__file__).with_name("catalogue")
# The largest published models have about 2·10¹² parameters; a config far beyond is a typo
# (a width with three zeros too many) and its arithmetic would describe no real model.
MAX_PARAMS = 3 * 10**12
MAX_BYTES = 1 << 20  # a config.json is a few KB; anything larger is not one


class _Fields(EncoderFields, BloomFields, T5Fields):
    """The ``config.json`` fields the shape needs, with their types (strict: "4096" is wrong)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    model_type: str
    vocab_size: int = Field(ge=1, le=10**8)
    hidden_size: int = Field(ge=1, le=10**7)
    num_hidden_layers: int = Field(ge=1, le=10**5)
    num_attention_heads: int = Field(ge=1, le=10**5)
    intermediate_size: int | None = Field(None, ge=1, le=10**8)
    num_key_value_heads: int | None = Field(None, ge=1, le=10**5)
    head_dim: int | None = Field(None, ge=1, le=10**5)
    max_position_embeddings: int = Field(2048, ge=1, le=10**8)
    tie_word_embeddings: bool | None = None
    attention_bias: bool = False
    sliding_window: int | None = Field(None, ge=1)
    use_sliding_window: bool | None = None
    rope_theta: float = 10000.0
    rms_norm_eps: float | None = None
    layer_norm_epsilon: float | None = None
    # mixture of experts
    num_local_experts: int | None = Field(None, ge=1, le=10**5)
    num_experts: int | None = Field(None, ge=1, le=10**5)
    num_experts_per_tok: int | None = Field(None, ge=1, le=10**5)
    moe_intermediate_size: int | None = Field(None, ge=1, le=10**8)
    decoder_sparse_step: int = Field(1, ge=1)
    mlp_only_layers: list[int] = Field(default_factory=list)
    # Gemma 2 (its attention logits are soft-capped at 50 unless the config says otherwise)
    final_logit_softcapping: float | None = None
    attn_logit_softcapping: float | None = 50.0
    # DeepSeek-V2: latent attention, shared experts, dense first layers
    n_routed_experts: int | None = Field(None, ge=1, le=10**5)
    n_shared_experts: int | None = Field(None, ge=0, le=10**5)
    first_k_dense_replace: int = Field(0, ge=0)
    moe_layer_freq: int = Field(1, ge=1)
    kv_lora_rank: int | None = Field(None, ge=1, le=10**6)
    q_lora_rank: int | None = Field(None, ge=1, le=10**6)
    qk_nope_head_dim: int = Field(0, ge=0, le=10**5)
    qk_rope_head_dim: int = Field(0, ge=0, le=10**5)
    v_head_dim: int = Field(0, ge=0, le=10**5)
    # GPT-NeoX's kind (profiling.models.hf_neox reads them)
    rotary_pct: float = Field(1.0, gt=0, le=1)  # GPT-NeoX
    partial_rotary_factor: float = Field(1.0, gt=0, le=1)  # Phi
    rotary_emb_base: float | None = None
    use_parallel_residual: bool = True
    parallel_attn: bool = True  # Falcon
    new_decoder_architecture: bool = False
    num_ln_in_parallel_attn: int | None = Field(None, ge=1, le=2)
    multi_query: bool = True
    num_kv_heads: int | None = Field(None, ge=1, le=10**5)
    bias: bool = False
    alibi: bool = False
    qk_layernorm: bool = False
    layer_norm_eps: float | None = None
    hidden_act: str | None = None
    ffn_hidden_size: int | None = Field(None, ge=1, le=10**8)


_GPT2_KEYS = {
    "n_embd": "hidden_size",
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_positions": "max_position_embeddings",
    "n_inner": "intermediate_size",
}


class _Shape(TypedDict, total=False):
    """Keyword arguments of :class:`WorkloadConfig` a config sets (each family some of them)."""

    name: str
    arch: Literal["gpt2", "llama", "neox", "encoder", "t5"]
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    vocab: int
    ffn: int
    max_seq: int
    tied_embeddings: bool
    head_size: int | None
    rope_theta: float
    norm_eps: float
    hf_model_type: str
    source: str
    qkv_bias: bool
    qk_norm: Literal["none", "head", "full"]
    norms: Literal["pre", "post", "sandwich"]
    mlp: Literal["swiglu", "geglu"]
    experts: int
    experts_per_token: int
    expert_ffn: int | None
    sliding_window: int | None
    sliding_layers: Literal["all", "alternate"]
    embed_scale: bool
    logit_softcap: float | None
    attn_softcap: float | None
    kv_lora_rank: int | None
    q_lora_rank: int | None
    qk_nope_dim: int
    qk_rope_dim: int
    v_dim: int
    shared_experts: int
    dense_layers: int
    residual: Literal["sequential", "parallel", "parallel_one_norm"]
    rotary_dim: int | None
    linear_bias: bool
    fused_qkv: bool
    head_bias: bool
    gelu: Literal["exact", "tanh"]


def _llama(f: _Fields) -> _Shape:
    return {"qkv_bias": f.attention_bias}


def _mistral(f: _Fields) -> _Shape:
    return {"sliding_window": f.sliding_window}


def _mixtral(f: _Fields) -> _Shape:
    return {
        "sliding_window": f.sliding_window,
        "experts": f.num_local_experts or 8,
        "experts_per_token": f.num_experts_per_tok or 2,
    }


def _qwen2(f: _Fields) -> _Shape:
    # Qwen2's sliding window is off unless use_sliding_window says otherwise.
    return {"qkv_bias": True, "sliding_window": f.sliding_window if f.use_sliding_window else None}


def _qwen3(f: _Fields) -> _Shape:
    return {
        "qkv_bias": f.attention_bias,
        "qk_norm": "head",
        "sliding_window": f.sliding_window if f.use_sliding_window else None,
    }


def _qwen3_moe(f: _Fields) -> _Shape:
    if f.mlp_only_layers or f.decoder_sparse_step != 1:
        raise ProfilingError(
            "this qwen3_moe config mixes dense and expert layers (mlp_only_layers or "
            "decoder_sparse_step), which is not modelled; give a config whose every layer is MoE"
        )
    return {
        **_qwen3(f),
        "experts": f.num_experts or 128,
        "experts_per_token": f.num_experts_per_tok or 8,
        "expert_ffn": f.moe_intermediate_size,
    }


def _gemma(f: _Fields) -> _Shape:
    return {"mlp": "geglu", "embed_scale": True, "tied_embeddings": _tied(f, True)}


def _gemma2(f: _Fields) -> _Shape:
    return {
        **_gemma(f),
        "norms": "sandwich",
        "sliding_window": f.sliding_window,
        "sliding_layers": "alternate",
        "logit_softcap": f.final_logit_softcapping,
        "attn_softcap": f.attn_logit_softcapping,
    }


def _phi3(f: _Fields) -> _Shape:
    return {"sliding_window": f.sliding_window}


def _olmo2(f: _Fields) -> _Shape:
    return {"norms": "post", "qk_norm": "full", "qkv_bias": f.attention_bias}


def _olmoe(f: _Fields) -> _Shape:
    return {
        "qk_norm": "full",
        "qkv_bias": f.attention_bias,
        "experts": f.num_experts or 64,
        "experts_per_token": f.num_experts_per_tok or 8,
    }


def _deepseek_v2(f: _Fields) -> _Shape:
    if f.moe_layer_freq != 1:
        raise ProfilingError(
            "this deepseek_v2 config interleaves dense and expert layers (moe_layer_freq "
            f"{f.moe_layer_freq}), which is not modelled; give one whose layers after "
            "first_k_dense_replace are all MoE"
        )
    if not (f.kv_lora_rank and f.qk_rope_head_dim and f.v_head_dim):
        raise ProfilingError(
            "this deepseek_v2 config lacks kv_lora_rank, qk_rope_head_dim or v_head_dim"
        )
    fields: _Shape = {
        "qkv_bias": f.attention_bias,
        "kv_lora_rank": f.kv_lora_rank,
        "q_lora_rank": f.q_lora_rank,
        "qk_nope_dim": f.qk_nope_head_dim,
        "qk_rope_dim": f.qk_rope_head_dim,
        "v_dim": f.v_head_dim,
        "head_size": f.qk_rope_head_dim,  # the rotary part: RoPE's tables
    }
    if f.n_routed_experts:
        fields["experts"] = f.n_routed_experts
        fields["experts_per_token"] = f.num_experts_per_tok or 6
        fields["expert_ffn"] = f.moe_intermediate_size
        fields["shared_experts"] = f.n_shared_experts or 0
        fields["dense_layers"] = f.first_k_dense_replace
    return fields


def _gpt2(f: _Fields) -> _Shape:
    return {"arch": "gpt2", "tied_embeddings": _tied(f, True)}


FAMILIES = {
    **NEOX_FAMILIES,
    **ENCODER_FAMILIES,
    **T5_FAMILIES,
    "deepseek_v2": _deepseek_v2,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gpt2": _gpt2,
    "llama": _llama,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "olmo2": _olmo2,
    "olmoe": _olmoe,
    "phi3": _phi3,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
}


def _tied(f: _Fields, default: bool) -> bool:
    return default if f.tie_word_embeddings is None else f.tie_word_embeddings


def workload_from_config(data: object, name: str, source: str = "") -> WorkloadConfig:
    """The shape a ``config.json`` (already parsed) describes; one sentence if it cannot."""
    if not isinstance(data, dict):
        raise ProfilingError(f"{name}: a config.json holds a JSON object, not {_kind(data)}")
    kind = data.get("model_type")
    if kind not in FAMILIES:
        raise ProfilingError(
            f"{name}: model_type {kind!r} is not supported; supported types are "
            f"{', '.join(sorted(FAMILIES))}"
        )
    if kind in ("gpt2", "bloom", "t5", "mt5"):
        keys = {"gpt2": _GPT2_KEYS, "bloom": BLOOM_KEYS}.get(kind, T5_KEYS)
        data = {keys.get(k, k): v for k, v in data.items()}
    if kind == "vit":  # no vocabulary (its reader sets vocab 0) and no max_position_embeddings
        data = {"vocab_size": 1, **data}
    try:
        f = _Fields.model_validate(data)
    except ValidationError as exc:
        raise ProfilingError(f"{name}: {_field_problem(exc)}") from None
    shape = _shape(f, kind, name, source)
    n = shape.param_count()
    if n > MAX_PARAMS:
        raise ProfilingError(
            f"{name}: this config describes {n / 1e12:.1f} trillion parameters, more than the "
            f"{MAX_PARAMS // 10**12} trillion of the largest published models; check its sizes "
            "(hidden_size, intermediate_size, num_hidden_layers, vocab_size)"
        )
    return shape


def _shape(f: _Fields, kind: str, name: str, source: str) -> WorkloadConfig:
    h, heads = f.hidden_size, f.num_attention_heads
    kv = f.num_key_value_heads or heads
    if heads % kv:
        raise ProfilingError(
            f"{name}: num_key_value_heads {kv} must divide num_attention_heads {heads}"
        )
    if f.head_dim is None and h % heads:
        raise ProfilingError(
            f"{name}: hidden_size {h} does not divide by num_attention_heads {heads} and no "
            "head_dim is given"
        )
    ffn = neox_ffn(f, kind) or f.intermediate_size or (4 * h if kind == "gpt2" else None)
    if ffn is None:
        raise ProfilingError(f"{name}: the config lacks intermediate_size")
    fields: _Shape = {
        "name": name,
        "arch": "llama",
        "layers": f.num_hidden_layers,
        "hidden": h,
        "heads": heads,
        "kv_heads": kv,
        "vocab": f.vocab_size,
        "ffn": ffn,
        "max_seq": f.max_position_embeddings,
        "tied_embeddings": _tied(f, False),
        "head_size": f.head_dim if f.head_dim and f.head_dim != h // heads else None,
        "rope_theta": f.rope_theta,
        "norm_eps": f.rms_norm_eps or f.layer_norm_epsilon or f.layer_norm_eps or 1e-5,
        "hf_model_type": kind,
        "source": source,
    }
    fields.update(FAMILIES[kind](f))
    if fields.get("experts") and fields.get("expert_ffn") is None:
        fields["expert_ffn"] = ffn
    top_k, experts = fields.get("experts_per_token", 0), fields.get("experts", 0)
    if top_k > experts:
        raise ProfilingError(f"{name}: num_experts_per_tok {top_k} exceeds the {experts} experts")
    w = WorkloadConfig(**fields)
    kinds = {"gpt2": "GPT-2", "llama": "Llama", "gpt_neox": "GPT-NeoX", "phi": "Phi"}
    kinds.update(falcon="Falcon", bloom="BLOOM", **ENCODER_NAMES, **T5_NAMES)
    w.description = (
        f"{kinds.get(kind, kind)}-family config: {w.layers} layers, hidden {h}, "
        f"{heads}/{w.n_kv_heads} heads"
        + (f", {w.experts} experts top-{w.experts_per_token}" if w.moe else "")
        + (f" + {w.shared_experts} shared" if w.shared_experts else "")
        + (f", first {w.dense_layers} dense" if w.dense_layers else "")
        + (f", latent attention (kv rank {w.kv_lora_rank})" if w.mla else "")
        + (f", {_RESIDUAL[w.residual]}" if w.arch == "neox" else "")
        + (", ALiBi position biases" if w.alibi else "")
        + (f", {w.decoder_layers} decoder layers" if w.arch == "t5" else "")
        + (f", rotary on {w.rotary} of {w.head_dim} head dims" if 0 < w.rotary < w.head_dim else "")
    )
    return w


_RESIDUAL = {
    "sequential": "attention then MLP",
    "parallel": "attention and MLP in parallel (a LayerNorm each)",
    "parallel_one_norm": "attention and MLP in parallel from one LayerNorm",
}


def _kind(value: object) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def _field_problem(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    if err["type"] == "missing":
        return f"the config lacks {field}"
    got = err.get("input")
    return f"{field} is {got!r}, but {err['msg'].lower()}"


# --------------------------------------------------------------------- catalogue and files


@functools.cache  # read once: fit --gpus N resolves the model for every plan's shape
def catalogue_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in CATALOGUE.glob("*.json")))


class CatalogueSource(TypedDict):
    url: str
    date: str  # the model's publication date, YYYY-MM-DD


class CatalogueEntry(TypedDict):
    """One shipped ``catalogue/NAME.json``."""

    name: str
    repo: str
    source: CatalogueSource
    published_params: int
    published: str
    config: dict[str, object]  # the model's config.json as published


def catalogue_entry(name: str) -> CatalogueEntry:
    """A shipped entry: name, repo, source {url, date}, published_params, config — a copy of
    its own for each caller: transformers' config classes rewrite the dicts they are given
    (5.x moves ``rope_theta`` into ``rope_scaling``), and a shared cached entry then told every
    later caller in the process a different config."""
    return json.loads(_catalogue_text(name))


@functools.cache
def _catalogue_text(name: str) -> str:
    return (CATALOGUE / f"{name}.json").read_text(encoding="utf-8")


def load_hf(spec: str) -> WorkloadConfig:
    """``hf:NAME`` (the catalogue) or ``hf:PATH`` (a config.json or a folder holding one)."""
    rest = spec.removeprefix(PREFIX)
    if rest in catalogue_names():
        return _catalogue_workload(rest, spec)
    path = Path(rest).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if not rest or not path.is_file():
        raise ProfilingError(
            f"{spec}: no catalogue model or config file of that name; give "
            "hf:PATH/TO/config.json (or a model folder), or one of "
            + ", ".join(f"hf:{n}" for n in catalogue_names())
        )
    stat = path.stat()
    return _file_workload(str(path.resolve()), stat.st_mtime_ns, stat.st_size, spec)


@functools.cache
def _catalogue_workload(name: str, spec: str) -> WorkloadConfig:
    entry = catalogue_entry(name)
    source = f"{entry['source']['url']} ({entry['source']['date']})"
    w = workload_from_config(entry["config"], spec, source)
    w.description = f"{entry['repo']}: " + w.description
    return w


@functools.lru_cache(maxsize=32)
def _file_workload(path: str, _mtime: int, size: int, spec: str) -> WorkloadConfig:
    if size > MAX_BYTES:
        raise ProfilingError(
            f"{spec}: {size:,} bytes is not a config.json (a few KB); check the path"
        )
    return workload_from_config(read_config_file(path, spec), spec, source=path)


def read_config_file(path: str, spec: str) -> object:
    """The JSON of ``path``, read at most :data:`MAX_BYTES` (the file may have grown since it
    was measured); one sentence for anything but a small JSON document — nesting too deep for
    the parser or a number of thousands of digits included (a config never has either)."""
    import os

    try:
        # O_NONBLOCK: a FIFO swapped in since the is_file() check cannot block the read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfilingError(f"{spec}: cannot read {path} ({exc}); check the file") from None
    if len(raw) > MAX_BYTES:
        raise ProfilingError(f"{spec}: {path} is over {MAX_BYTES:,} bytes, not a config.json")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfilingError(
            f"{spec}: {path} is not JSON ({exc.msg} at line {exc.lineno}); give a config.json"
        ) from None
    except (RecursionError, ValueError):  # [[[[… 100,000 deep, or a 10,000-digit number
        raise ProfilingError(
            f"{spec}: {path} is not a config.json (its JSON nests too deep or holds a number "
            "too long to be a size); give a model's config.json"
        ) from None


__all__ = [
    "CATALOGUE", "FAMILIES", "PREFIX", "catalogue_entry", "catalogue_names", "load_hf",
    "read_config_file", "workload_from_config",
]  # fmt: skip
