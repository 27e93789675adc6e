"""The model a configuration gives by hand, its shape flag by flag: ``TrainingConfig.hand_workload``
(here, as ``config`` is at its size limit)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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


__all__ = ["SHAPE_FIELDS", "hand_workload"]
