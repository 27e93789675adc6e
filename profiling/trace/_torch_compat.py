"""The torch internals the tracer leans on, in one place, with a branch per torch that differs.

GPU machines carry the torch they were built with (2.11 on the lent H200; 2.13 here; the
registry's newest is 2.15). Public APIs are used where torch has them; where it does not —
``MemTracker``'s bookkeeping, which the trace extends, and the fake mode that is active — the
differences are handled here and nowhere else:

- ``MemTracker.__enter__`` records the fake mode active at entry (``_fake_mode_on_entry``) from
  torch 2.12 on, to skip DTensor's shape propagation; 2.11 has no such attribute. The tracer
  records the mode itself (:func:`entry_fake_mode`), so it reads no upstream attribute.
- FLOP formulas: torch 2.11's ``sdpa_flop_count`` asserts on grouped-query shapes (keys and
  values with fewer heads than the queries; 2.13 counts them). :func:`safe_flop_formulas`
  gives each formula the key/value heads expanded to the queries' (the FLOPs of grouped-query
  attention are those of its expanded heads), and turns a formula that still fails into a
  noted zero instead of an exception inside the user's forward.
- :data:`MEMTRACKER_INTERNALS`: the private members the tracker's mixins use;
  :func:`missing_memtracker_internals` names those a torch lacks, so the trace can say so in
  one sentence instead of failing deep inside a step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch._subclasses.fake_tensor import FakeTensorMode

MEMTRACKER_INTERNALS = (
    "_track",
    "_track_module_params_and_buffers",
    "_track_optimizer_states",
    "_update_and_maybe_create_winfos",
    "_register_global_optimizer_hook",
    "_update_peak_stats",
    "_update_snap",
    "_delete_callback",
    "get_tracker_snapshot",
    "reset_mod_stats",
    "track_external",
)
MEMTRACKER_STATE = (
    "_mod_tracker",
    "_curr_mem_snap",
    "_peak_mem",
    "_peak_mem_snap",
    "_in_opt",
    "_ref_class",
    "_optimizer_hook_handles",
    "_param_to_grad_hook_handles",
    "_WINFO",
)

# The attention ops whose formulas take (query, key, value, ...) first.
_SDPA_OPS = (
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
)
_SDPA_BACKWARD_OPS = (
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
)


def torch_version(version: str | None = None) -> tuple[int, int]:
    """(major, minor) of ``version`` (default: the installed torch's)."""
    if version is None:
        import torch

        version = torch.__version__
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def active_fake_mode() -> FakeTensorMode | None:
    """The ``FakeTensorMode`` active now, or None (``torch._guards``, 2.1 and later)."""
    from torch._guards import active_fake_mode as active

    return active()


def entry_fake_mode(tracker: object) -> object:
    """The fake mode recorded when ``tracker`` was entered (ours, set by the tracker's mixin;
    upstream's own attribute only where torch has it)."""
    mine = getattr(tracker, "entry_fake_mode", None)
    if mine is not None:
        return mine
    return getattr(tracker, "_fake_mode_on_entry", None)


def missing_memtracker_internals(cls: type | None = None) -> list[str]:
    """The private ``MemTracker`` members the trace needs that ``cls`` (default: this torch's
    ``MemTracker``) lacks; [] when every one is there."""
    if cls is None:
        from torch.distributed._tools.mem_tracker import MemTracker

        cls = MemTracker
    missing = [name for name in MEMTRACKER_INTERNALS if not hasattr(cls, name)]
    try:
        probe = cls()
    except Exception as exc:  # a constructor that changed its signature
        return [*missing, f"MemTracker() ({type(exc).__name__})"]
    missing += [name for name in MEMTRACKER_STATE if not hasattr(probe, name)]
    if hasattr(probe, "_mod_tracker") and not hasattr(probe._mod_tracker, "parents"):
        missing.append("_mod_tracker.parents")
    return missing


def _heads_expanded(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """(query, key, value, ...) with key and value expanded to the query's heads (views)."""
    q, k, v, *rest = args
    hq, hk = q.shape[-3], k.shape[-3]
    if hk == hq or hk == 0 or hq % hk:
        return args
    k = k.unsqueeze(-3).expand(*k.shape[:-2], hq // hk, *k.shape[-2:]).flatten(-4, -3)
    v = v.unsqueeze(-3).expand(*v.shape[:-2], hq // hk, *v.shape[-2:]).flatten(-4, -3)
    return (q, k, v, *rest)


def _backward_heads_expanded(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The backward ops take (grad_out, query, key, value, ...)."""
    grad, *rest = args
    return (grad, *_heads_expanded(tuple(rest)))


def safe_formula(
    formula: Callable[..., Any],
    name: str,
    failures: dict[str, str],
    expand: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None,
) -> Callable[..., int]:
    """``formula`` that never raises: a failure is recorded in ``failures`` and counts 0."""

    def counted(*args: Any, **kwargs: Any) -> int:
        try:
            if expand is not None:
                args = expand(args)
            return int(formula(*args, **kwargs))
        except Exception as exc:  # a formula is optional: the step must go on
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            failures.setdefault(name, f"{type(exc).__name__}: {text[:200]}")
            return 0

    counted._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode: do not re-wrap
    return counted


def safe_flop_formulas(
    failures: dict[str, str], registry: dict[Any, Any] | None = None
) -> dict[Any, Callable[..., int]]:
    """torch's FLOP formulas (``torch.utils.flop_counter.flop_registry``, already taking
    tensors), each made safe; grouped-query attention counted with its heads expanded.

    Pass the result as ``FlopCounterMode(custom_mapping=...)``; ``failures`` collects the ops
    whose formula failed (name → the error's first line).
    """
    if registry is None:
        from torch.utils.flop_counter import flop_registry as registry
    out = {}
    for op, formula in registry.items():
        name = str(getattr(op, "__name__", op))
        expand = (
            _heads_expanded
            if name in _SDPA_OPS
            else _backward_heads_expanded
            if name in _SDPA_BACKWARD_OPS
            else None
        )
        out[op] = safe_formula(formula, name, failures, expand)
    return out


@functools.cache
def cpu_flash_formulas() -> dict[Any, Any]:
    """The CPU flash-attention kernels (which fake tensors run on the cpu device) mapped to the
    CUDA flash formulas: same arguments, same matmuls."""
    import torch
    from torch.utils.flop_counter import flop_registry

    aten = torch.ops.aten
    extra = {}
    pairs = (
        ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention"),
        (
            "_scaled_dot_product_flash_attention_for_cpu_backward",
            "_scaled_dot_product_flash_attention_backward",
        ),
    )
    for cpu_op, cuda_op in pairs:
        if hasattr(aten, cpu_op) and getattr(aten, cuda_op) in flop_registry:
            extra[getattr(aten, cpu_op)] = flop_registry[getattr(aten, cuda_op)]
    return extra


__all__ = [
    "MEMTRACKER_INTERNALS",
    "active_fake_mode",
    "cpu_flash_formulas",
    "entry_fake_mode",
    "missing_memtracker_internals",
    "safe_flop_formulas",
    "safe_formula",
    "torch_version",
]
