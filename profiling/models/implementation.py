"""Which module a Hugging Face config stands for: transformers' own, or the project's blocks.

The trace builds the real ``AutoModelForCausalLM`` when ``transformers`` is installed, and our
blocks (``profiling.models.hf_blocks``) otherwise, for mixtures of experts (transformers'
dispatch reads the router's choices, which fake tensors do not have) and inside
:func:`project_blocks`. The estimate models the same module the trace would build
(``profiling.estimate.hf_ops`` for transformers' ops), so the two describe one step and the
record says which. No torch here: it only asks whether transformers is installed.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.util
from collections.abc import Iterator

from profiling.models.config import WorkloadConfig

TRANSFORMERS, PROJECT = "transformers", "project blocks"

_PROJECT_BLOCKS: contextvars.ContextVar[bool] = contextvars.ContextVar("project", default=False)


@contextlib.contextmanager
def project_blocks() -> Iterator[None]:
    """Within it, Hugging Face configs are traced — and estimated — with our own blocks, even
    with transformers installed."""
    token = _PROJECT_BLOCKS.set(True)
    try:
        yield
    finally:
        _PROJECT_BLOCKS.reset(token)


def project_blocks_asked() -> bool:
    return _PROJECT_BLOCKS.get()


@functools.cache
def transformers_installed() -> bool:
    return importlib.util.find_spec("transformers") is not None


def implementation(w: WorkloadConfig) -> str | None:
    """``transformers`` or ``project blocks`` for a Hugging Face config; None for the others.

    What ``hf_module.build_hf`` will build, as far as it can be known without building it (a
    config transformers itself rejects falls back to our blocks, which only the trace sees).
    """
    if w.hf_model_type is None:
        return None
    if _PROJECT_BLOCKS.get() or w.moe or w.litgpt or not transformers_installed():
        return PROJECT
    return TRANSFORMERS


# model types whose class refuses SDPA: transformers runs its eager attention (BLOOM's adds
# ALiBi's bias to the scores by baddbmm, whatever attn_implementation says)
EAGER_ONLY = frozenset({"gemma2", "bloom"})

__all__ = [
    "EAGER_ONLY",
    "PROJECT",
    "TRANSFORMERS",
    "implementation",
    "project_blocks",
    "project_blocks_asked",
    "transformers_installed",
]
