"""``--checkpointing selective`` traced: each block's attention core under non-reentrant
activation checkpointing, what the estimate (``profiling.estimate.selective``) says is recomputed.

Korthikanti et al.'s selective recomputation (Megatron-LM's ``--recompute-granularity
selective``: ``CoreAttention`` run through ``tensor_parallel.checkpoint``) recomputes the core
attention alone — QKᵀ, the softmax, its dropout and ·V — and keeps everything else a block saves.
The core is one call in every model the trace wraps:

- Hugging Face's modules (GPT-2, the Llama family, GPT-NeoX, Phi, …): the attention function
  their attention module looks up (``ALL_ATTENTION_FUNCTIONS.get_interface(…,
  eager_attention_forward)``, transformers 5.x ``modeling_llama.py`` ``LlamaAttention.forward``):
  the module's own ``eager_attention_forward`` (its ``repeat_kv`` too) or ``sdpa_attention_forward``
  (the fused call). While the attention module runs, both names in its modeling module are
  swapped for checkpointed ones (``_checkpointed_core``); the recomputation in backward calls the
  function checkpoint stored, so nothing stays swapped.
- our own blocks: ``profiling.models.blocks._attend`` checkpoints itself when the shape says
  ``selective`` (``WorkloadConfig.selective``, set by the trace).

The recomputation runs under the target's kernel rules (``context_fn``: autograd does not carry
torch function modes into backward) and restores the RNG state (dropout's mask is the same).
Falcon and BLOOM write their attention inline (no function to wrap): refused. Imports torch.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from torch import nn

from profiling.errors import ProfilingError


def core_checkpoint(target: str | None) -> Callable[..., Any]:
    """``torch.utils.checkpoint.checkpoint`` non-reentrant, recomputing under ``target``'s
    kernel rules (a trace) or as it is (a measurement)."""
    from torch.utils.checkpoint import checkpoint

    extra: dict[str, Any] = {}
    if target is not None:
        from profiling.trace.target import kernels

        extra["context_fn"] = lambda: (contextlib.nullcontext(), kernels(target))
    return functools.partial(checkpoint, use_reentrant=False, **extra)


class _Interfaces:
    """A modeling module's ``ALL_ATTENTION_FUNCTIONS`` whose functions run checkpointed."""

    def __init__(self, interfaces: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]):
        self._interfaces = interfaces
        self._wrap = wrap

    def get_interface(self, name: str, default: Callable[..., Any]) -> Callable[..., Any]:
        found = self._interfaces.get_interface(name, default)
        # ``default`` is the module's eager function, already swapped for a checkpointed one
        return found if found is default else self._wrap(found)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._interfaces, name)


@contextlib.contextmanager
def _swapped(module: types.ModuleType, wrapped: dict[str, Any]) -> Iterator[None]:
    """While an attention module (or our block) runs: its module's core functions swapped."""
    before = {name: getattr(module, name) for name in wrapped}
    for name, value in wrapped.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(module, name, value)


def _core_names(block: nn.Module) -> dict[str, Any]:
    """What to swap while ``block`` runs to checkpoint its attention core: a Hugging Face
    modeling module's eager function and interface table (the attention module is defined
    beside its decoder layer), our blocks' ``_attend`` (``hf_blocks``' ``_attend_windowed``,
    which calls it, where it has one)."""
    mod = sys.modules[type(block).__module__]
    names = ("eager_attention_forward", "ALL_ATTENTION_FUNCTIONS", "_attend_windowed", "_attend")
    found = {name: getattr(mod, name) for name in names if hasattr(mod, name)}
    if "_attend_windowed" in found:
        del found["_attend"]
    return found


def _refusal(block: nn.Module) -> ProfilingError:
    return ProfilingError(
        f"--checkpointing selective is traced where each block runs its attention core through "
        f"one function, and {type(block).__name__} does not (Falcon, BLOOM, T5, encoders, "
        "DeepSeek's latent attention, LitGPT's attention): use --checkpointing none or full to "
        "trace it, or estimate selective alone"
    )


def _wrap(block: nn.Module, names: dict[str, Any], ckpt: Callable[..., Any]) -> None:
    module = sys.modules[type(block).__module__]
    calls = [0]

    def counted(fn: Callable[..., Any]) -> Callable[..., Any]:
        def core(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            return ckpt(fn, *args, **kwargs)

        return core

    wrapped: dict[str, Any] = {
        name: _Interfaces(value, counted) if name == "ALL_ATTENTION_FUNCTIONS" else counted(value)
        for name, value in names.items()
    }
    # held weakly: the block keeps ``run`` in its own __dict__ (block_checkpoint's reason)
    own = weakref.WeakMethod(block.forward)  # type: ignore[arg-type]

    def run(*args: Any, **kwargs: Any) -> Any:
        forward = own()
        assert forward is not None, "called through its block, which is alive"
        before = calls[0]
        with _swapped(module, wrapped):
            out = forward(*args, **kwargs)
        if calls[0] == before:  # its attention is inline, or in another module
            raise _refusal(block)
        return out

    block.forward = run  # type: ignore[method-assign]


def apply_selective(blocks: list[nn.Module], target: str | None) -> int:
    """Checkpoint the attention core of each block (a Hugging Face module's or our own);
    returns the blocks wrapped. A block that runs no core function is refused as it runs."""
    ckpt = core_checkpoint(target)
    for block in blocks:
        names = _core_names(block)
        if not names:
            raise _refusal(block)
        _wrap(block, names, ckpt)
    return len(blocks)


__all__ = ["apply_selective", "core_checkpoint"]
