"""A named model with part of its shape given by hand: ``--model llama-7b --layers 4``.

Each shape flag given beside a named model (a reference model or ``hf:NAME`` / ``hf:PATH``) —
``--layers --hidden --heads --kv-heads --ffn --vocab`` — replaces that one field of the model,
and every command (estimate, trace, fit, profile) runs the model so changed; a note says so.
Before, ``--layers`` was dropped without a word (the model's own shape won). A Hugging Face
config is changed in its own ``config.json`` fields and read again, so the estimate's shape and
the module ``transformers`` builds for the trace (``hf_module.build_hf``) are the same model,
fields the family derives from the changed one included (GPT-2's ``n_inner`` None: 4 · n_embd,
``GPT2Config``; Falcon's ``ffn_hidden_size`` None: 4 · hidden, ``FalconConfig.__post_init__``).

A field a model has no setting for is refused in one sentence (:func:`refusal`): grouped
key/value heads outside the Llama family (GPT-2, GPT-NeoX and BLOOM have none; Falcon's follow
its architecture flags), BLOOM's MLP width (4 · hidden, fixed by ``BloomMLP``), T5's layers
(two stacks, ``num_layers`` and ``num_decoder_layers``), a ViT's vocabulary (it has none).
No torch here.
"""

from __future__ import annotations

from typing import Any

from profiling.errors import ProfilingError
from profiling.models.config import WorkloadConfig

# The shape flags a named model takes, in the order a note names them.
OVERRIDES = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")

# Where a config.json holds each field beside the Llama family's name: the family's own keys
# (GPT2Config's n_layer …, BloomConfig's n_layer / n_head / n_embed, T5Config's d_model …,
# FalconConfig's ffn_hidden_size), which its class reads.
_KEYS: dict[str, dict[str, str]] = {
    "gpt2": {"layers": "n_layer", "hidden": "n_embd", "heads": "n_head", "ffn": "n_inner"},
    "bloom": {"layers": "n_layer", "heads": "n_head", "hidden": "n_embed"},
    "falcon": {"ffn": "ffn_hidden_size"},
    "t5": {"hidden": "d_model", "heads": "num_heads", "ffn": "d_ff"},
    "mt5": {"hidden": "d_model", "heads": "num_heads", "ffn": "d_ff"},
}
_CANONICAL = {
    "layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
    "kv_heads": "num_key_value_heads", "ffn": "intermediate_size", "vocab": "vocab_size",
}  # fmt: skip
_WORDS = {
    "layers": "layers", "hidden": "hidden size", "heads": "attention heads",
    "kv_heads": "key/value heads", "ffn": "MLP width", "vocab": "vocabulary",
}  # fmt: skip


def given(cfg: Any) -> dict[str, int]:
    """The shape flags ``cfg`` (a ``TrainingConfig``) gives beside a named model, or {} (no
    model, or a factory: :func:`factory_given` passes them to it as its arguments)."""
    if cfg.model is None or cfg.is_factory:
        return {}
    return {f: v for f in OVERRIDES if (v := getattr(cfg, f, None)) is not None}


def factory_given(cfg: Any) -> dict[str, int]:
    """The shape flags given beside a factory (``--model package.module:function``), each
    passed to the factory as its parameter of that name (``models.factory.shape_kwargs``: one
    sentence where it has none); {} for anything else."""
    if cfg.model is None or not cfg.is_factory:
        return {}
    return {f: v for f, v in ((f, getattr(cfg, f, None)) for f in OVERRIDES) if v is not None}


def titled(cfg: Any) -> str:
    """The model's name for a title, with the shape flags given beside it: 'tiny-llama with
    --layers 4', 'my_models:build with --layers 4' (a factory, called with them)."""
    name = str(cfg.model)
    if hand := given(cfg) or factory_given(cfg):
        name += " with " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in hand.items())
    return name


def refusal(w: WorkloadConfig, fields: dict[str, int]) -> tuple[str, str] | None:
    """(sentence, field) when ``w`` has no setting for a field given, else None."""
    kind = w.hf_model_type or w.arch
    why = {
        "kv_heads": None
        if w.arch == "llama" and not w.mla
        else f"{kind}'s attention has no "
        "grouped key/value heads to set (its class gives every head its own)",
        "ffn": "BLOOM's MLP is 4 × hidden, fixed by its class" if kind == "bloom" else None,
        "layers": "T5 has two stacks (num_layers, num_decoder_layers): give a config.json "
        "(hf:PATH) with both"
        if w.arch == "t5"
        else None,
        "vocab": "a ViT reads image patches and has no vocabulary" if w.patch_size else None,
    }
    for field in fields:
        if reason := why.get(field):
            flag = "--" + field.replace("_", "-")
            return f"{flag} cannot replace {w.name}'s own {_WORDS[field]}: {reason}", field
    return None


def raw_config(shape: WorkloadConfig, spec: str) -> dict[str, object]:
    """The ``config.json`` of ``hf:NAME`` (the catalogue's copy) or ``hf:PATH`` (read again)."""
    from profiling.models.hf_config import catalogue_entry, catalogue_names, read_config_file

    name = spec.removeprefix("hf:")
    if name in catalogue_names():
        return dict(catalogue_entry(name)["config"])
    # Read again, bounded as the shape's read was: the file may have changed since.
    raw = read_config_file(shape.source, spec)
    if not isinstance(raw, dict) or raw.get("model_type") != shape.hf_model_type:
        raise ProfilingError(f"{spec}: {shape.source} changed while it was read; run it again")
    return raw


def with_overrides(raw: dict[str, object], fields: dict[str, int]) -> dict[str, object]:
    """``raw`` (a config.json) with ``fields`` written where its family's class reads them: the
    family's own key (FalconConfig reads ffn_hidden_size, never intermediate_size; BloomConfig's
    n_embed wins over hidden_size), and the Llama family's name where it has none or the file
    holds it too."""
    own = _KEYS.get(str(raw.get("model_type")), {})
    out = dict(raw)
    for field, value in fields.items():
        canonical = _CANONICAL[field]
        for key in (own.get(field), canonical if canonical in raw or field not in own else None):
            if key is not None:
                out[key] = value
    return out


def _value(w: WorkloadConfig, field: str) -> int:
    return w.n_kv_heads if field == "kv_heads" else int(getattr(w, field))


def overridden(w: WorkloadConfig, spec: str, fields: dict[str, int]) -> WorkloadConfig:
    """``w`` (the shape ``spec`` names) with ``fields`` in place of its own."""
    if not fields:
        return w
    if no := refusal(w, fields):
        raise ProfilingError(no[0])
    if "heads" in fields and w.arch == "llama" and not w.mla and w.n_kv_heads == w.heads:
        fields = {"kv_heads": fields["heads"], **fields}  # every head its own stays so
    if w.hf_model_type is None:  # our own blocks, built from these fields
        return w.model_copy(update=fields)
    from profiling.models.hf_config import catalogue_entry, catalogue_names, workload_from_config

    out = workload_from_config(with_overrides(raw_config(w, spec), fields), spec, w.source)
    if (name := spec.removeprefix("hf:")) in catalogue_names():  # as _catalogue_workload
        out.description = f"{catalogue_entry(name)['repo']}: {out.description}"
    for field, value in fields.items():  # a field its family reads from elsewhere
        if _value(out, field) != value:
            raise ProfilingError(
                f"--{field.replace('_', '-')} cannot replace {w.name}'s own {_WORDS[field]}: "
                f"its {w.hf_model_type} config sets it otherwise ({_value(out, field)})"
            )
    return out


def workload_of(cfg: Any) -> WorkloadConfig | None:
    """The shape ``cfg.model`` names, with the shape flags given beside it in place of its own
    fields (``cfg``: a ``TrainingConfig``); None for a factory or no model."""
    from profiling.models.workloads import find_workload

    w = find_workload(cfg.model)
    return None if w is None else overridden(w, str(cfg.model), given(cfg))


def override_note(cfg: Any) -> str | None:
    """'--layers 4 --vocab 32000 given beside --model tiny-llama: they replace its 2 layers and
    vocabulary of 512', or None when no shape flag is given beside a named model."""
    from profiling.models.workloads import find_workload

    if passed := factory_given(cfg):
        flags = ", ".join(f"{f}={v}" for f, v in passed.items())
        return f"the factory {cfg.model} was called with {flags} (the shape flags given)"
    fields = given(cfg)
    own = find_workload(cfg.model) if fields else None
    if own is None:
        return None
    flags = " ".join(f"--{f.replace('_', '-')} {v}" for f, v in fields.items())
    was = ", ".join(f"{_WORDS[f]} {_value(own, f)}" for f in fields)
    verb = "replaces" if len(fields) == 1 else "replace"
    return f"{flags} given beside --model {cfg.model}: {verb} its own ({was})"


__all__ = [
    "OVERRIDES",
    "factory_given",
    "given",
    "overridden",
    "override_note",
    "raw_config",
    "refusal",
    "titled",
    "with_overrides",
    "workload_of",
]  # fmt: skip
