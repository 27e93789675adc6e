"""The model a configuration names or gives by hand, its shape flag by flag:
``TrainingConfig.hand_workload``, the checks of ``--model`` / ``--params`` / the shape, and the
model's shape with the flags given beside a named one (here, as ``config`` is at its size
limit).

A shape flag beside a named model (``--model llama-7b --layers 4``) replaces that field of the
model in every command (``profiling.models.shape_overrides``); ``--arch`` beside one is refused
(the model names its own kind of block), as is a field the model has no setting for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.errors import ConfigError, ProfilingError

if TYPE_CHECKING:
    from profiling.models.config import WorkloadConfig


SHAPE_FIELDS = ("params", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "arch")


def hand_workload(cfg: Any) -> WorkloadConfig | None:
    """The shape given by hand (--layers --hidden --heads --vocab [--ffn --kv-heads --arch]) as
    a model's shape, or None when part of it is missing. ``cfg``: a ``TrainingConfig``."""
    if not (cfg.layers and cfg.hidden and cfg.heads and cfg.vocab):
        return None
    if cfg.hidden % cfg.heads or (cfg.kv_heads and cfg.heads % cfg.kv_heads):
        return None  # said in one sentence by the configuration's checks
    from profiling.models.config import WorkloadConfig

    arch = cfg.arch or "gpt2"
    h = cfg.hidden
    ffn = cfg.ffn or (4 * h if arch == "gpt2" else -(-(8 * h // 3) // 256) * 256)
    return WorkloadConfig(
        name="shape", arch=arch, layers=cfg.layers, hidden=h, heads=cfg.heads,
        vocab=cfg.vocab, ffn=ffn, kv_heads=cfg.kv_heads, tied_embeddings=arch == "gpt2",
    )  # fmt: skip


def model_workload(cfg: Any) -> WorkloadConfig | None:
    """``TrainingConfig._workload``: the named model's shape with the shape flags given beside
    it, None for a factory; a config that cannot be read is one ConfigError sentence."""
    from profiling.models.shape_overrides import workload_of

    if cfg.is_factory:
        return None
    try:
        return workload_of(cfg)
    except ConfigError:
        raise
    except ProfilingError as exc:  # a Hugging Face config that cannot be read
        raise ConfigError(str(exc), "model") from None


def check_model(cfg: Any) -> None:
    """A model named (a reference, hf:, a factory), given by --params, or by its shape; a shape
    flag beside a named model one its model can take, the heads it leaves dividing."""
    from profiling.models.workloads import WORKLOADS

    if cfg.model is None and cfg.params is None:
        hand = cfg.hand_workload()
        if hand is None:
            raise ConfigError(
                "give --model NAME, --params N (e.g. --params 7e9), or the shape "
                "(--layers L --hidden H --heads A --vocab V)",
                "model",
            )
        cfg.params = hand.param_count()  # what the shape given by hand holds
    if cfg.model is None or cfg.is_factory:
        return
    if cfg.arch is not None:
        raise ConfigError(
            f"--arch {cfg.arch} names the blocks of a shape given by hand, and --model "
            f"{cfg.model} builds its own: drop --arch (--layers, --hidden … replace the "
            "model's own fields)",
            "arch",
        )
    own = _own_workload(cfg)
    if own is None:
        raise ConfigError(
            f"unknown model {cfg.model!r}; use one of {', '.join(WORKLOADS)}, "
            "hf:NAME (a shipped Hugging Face config) or hf:PATH (a config.json), "
            "'package.module:function', or --params N --layers L --hidden H --heads A "
            "--vocab V",
            "model",
        )
    _check_beside(cfg, own)


def _own_workload(cfg: Any) -> WorkloadConfig | None:
    from profiling.models.workloads import find_workload

    try:
        return find_workload(cfg.model)
    except ProfilingError as exc:  # a Hugging Face config that cannot be read
        raise ConfigError(str(exc), "model") from None


def _check_beside(cfg: Any, own: WorkloadConfig) -> None:
    """The shape flags beside ``own`` (the named model): fields it has, heads that divide."""
    from profiling.models.shape_overrides import given, refusal

    fields = given(cfg)
    if not fields:
        return
    if no := refusal(own, fields):
        raise ConfigError(*no)
    if cfg.kd_teacher is not None:
        raise ConfigError(
            f"--kd-teacher {cfg.kd_teacher} is a model of its own shape beside a student whose "
            "shape is changed by hand: give the student as a config (hf:PATH) instead",
            next(iter(fields)),
        )
    name = cfg.model
    heads = cfg.heads or own.heads
    kv = cfg.kv_heads or (heads if own.n_kv_heads == own.heads else own.n_kv_heads)  # MHA stays
    if heads % kv:
        field = "kv_heads" if cfg.kv_heads else "heads"
        raise ConfigError(
            f"--{field.replace('_', '-')} {fields[field]} leaves {name} {heads} attention heads "
            f"over {kv} key/value heads, which must divide them",
            field,
        )
    hidden = cfg.hidden or own.hidden
    if own.head_size is None and hidden % heads:
        field = "hidden" if cfg.hidden else "heads"
        raise ConfigError(
            f"--{field} {fields[field]} leaves {name} a hidden size of {hidden} over {heads} "
            "heads, which must divide it",
            field,
        )


def check_heads(cfg: Any) -> None:
    """--kv-heads divides --heads, and --heads --hidden, where both are given."""
    if cfg.kv_heads and cfg.heads and cfg.heads % cfg.kv_heads:
        raise ConfigError(f"--kv-heads {cfg.kv_heads} must divide --heads {cfg.heads}", "kv_heads")
    if cfg.hidden and cfg.heads and cfg.hidden % cfg.heads:
        raise ConfigError(f"--hidden {cfg.hidden} must divide by --heads {cfg.heads}", "heads")


__all__ = ["SHAPE_FIELDS", "check_heads", "check_model", "hand_workload", "model_workload"]
