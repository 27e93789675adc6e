"""Older spellings of the training configuration, and what they mean now.

``--dtype bf16`` is ``--precision amp-bf16``, ``--recompute`` is ``--checkpointing``,
``--world-size`` is ``--gpus`` … (``LEGACY`` says each in one line: the CLI shows it as the
hidden flag's help). :func:`map_legacy` rewrites a dict of values before validation, refusing
an old and a new spelling that disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from profiling.errors import ConfigError

# Older spellings -> what they mean now (CLI flags and keyword arguments alike).
LEGACY: dict[str, str] = {
    "dtype": "--dtype fp32|bf16|fp16 (autocast dtype) -> --precision fp32|amp-bf16|amp-fp16 "
    "(with --fsdp, --dtype bf16 was FSDP's MixedPrecisionPolicy: --precision mixed)",
    "param_dtype": "--param-dtype bf16 (pure bf16 parameters) -> --precision bf16",
    "recompute": "--recompute none|selective|full -> --checkpointing none|selective|full",
    "flash_attention": "--flash-attention -> --attention flash",
    "world_size": "--world-size N -> --gpus N",
    "no_reshard": "--no-reshard (FSDP keeps gathered parameters) -> --zero 2",
    "reshard_after_forward": "reshard_after_forward=False -> zero=2 (True -> zero=3)",
    "gpu_mem_gb": "gpu_mem_gb=G (keyword) -> gpu_mem=G",
}


def _legacy_precision(dtype: object, param_dtype: object, fsdp: bool) -> str | None:
    """The precision the trace's old ``--dtype`` / ``--param-dtype`` pair meant."""
    if param_dtype not in (None, "fp32"):
        if param_dtype != "bf16":
            raise ConfigError(
                f"--param-dtype {param_dtype} (pure {param_dtype} training) is not offered; use "
                "--precision bf16 or --precision amp-fp16",
                "precision",
            )
        return "bf16"
    if dtype is None:
        return "fp32" if param_dtype == "fp32" else None
    mapping = {"fp32": "fp32", "bf16": "amp-bf16", "fp16": "amp-fp16"}
    if not isinstance(dtype, str) or dtype not in mapping:
        raise ConfigError(f"--dtype must be one of fp32, bf16, fp16 (got {dtype!r})", "dtype")
    # With FSDP, --dtype bf16 meant FSDP's MixedPrecisionPolicy: 16-bit gathers, fp32 shards.
    return "mixed" if fsdp and dtype != "fp32" else mapping[dtype]


# Older keyword -> (today's field, how its value maps).
_RENAMES: dict[str, tuple[str, Callable[[object], object]]] = {
    "recompute": ("checkpointing", lambda v: v),
    "flash_attention": ("attention", lambda v: "flash" if v else None),
    "world_size": ("gpus", lambda v: v),
    "gpu_mem_gb": ("gpu_mem", lambda v: v),
    "no_reshard": ("zero", lambda v: 2 if v else None),
    "reshard_after_forward": ("zero", lambda v: 3 if v else 2),
}


def map_legacy(data: Mapping[str, object]) -> dict[str, object]:
    """Rewrite older keywords (see ``LEGACY``) into today's fields, refusing contradictions."""
    out = dict(data)

    def take(old: str, new: str, value: object) -> None:
        if new in data and data[new] != value:
            raise ConfigError(
                f"{_flag(old)} {data.get(old)} means {_flag(new)} {value}, but {_flag(new)} "
                f"{data[new]} was given too; give {_flag(new)} only",
                new,
            )
        out[new] = value

    dtype, param_dtype = out.pop("dtype", None), out.pop("param_dtype", None)
    precision = _legacy_precision(dtype, param_dtype, bool(out.get("fsdp")))
    if precision is not None:
        old = "param_dtype" if param_dtype not in (None, "fp32") else "dtype"
        if old in data:
            take(old, "precision", precision)
        else:  # only --param-dtype fp32: the default precision, unless one was given
            out.setdefault("precision", precision)
    if isinstance(out.get("checkpointing"), bool):  # the trace's old boolean flag
        out["checkpointing"] = "full" if out["checkpointing"] else "none"
    for old, (new, convert) in _RENAMES.items():
        if old not in out:
            continue
        value = convert(out.pop(old))
        if value is None:
            continue
        if new == "zero":
            out["fsdp"] = True  # resharding is FSDP's switch
        take(old, new, value)
    return out


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


__all__ = ["LEGACY", "map_legacy"]
