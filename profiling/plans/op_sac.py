"""torchtitan's op-level selective activation checkpointing (``[activation_checkpoint] mode =
"selective"``, ``selective_ac_option = "op"``), its policy as torchtitan writes it.

``torchtitan/models/llama/parallelize_llama.py`` at the plans' commit (December 2024, as in
0596be3): every block is wrapped by ``checkpoint_wrapper(module, context_fn=…,
preserve_rng_state=False)`` whose ``context_fn`` is ``create_selective_checkpoint_contexts`` of
a policy that keeps (``MUST_SAVE``) the outputs of the ops in ``_save_list`` — ``aten.mm``,
SDPA's flash and memory-efficient kernels, ``_c10d_functional.reduce_scatter_tensor`` and
``aten.max`` (the amax Float8's scales come from) — except every second ``mm`` of the block
(counted apart in the forward and in the recomputation), and recomputes everything else
(``PREFER_RECOMPUTE``). The trace runs exactly this, through torch's own
``torch.utils.checkpoint`` under fake tensors; the closed form
(``profiling.plans.closed_form``) counts what it keeps.

In torchtitan's Llama block the matmuls run ``wq wk wv`` (attention) ``wo`` ``w1 w3 w2`` (the
feed-forward), so the 1st, 3rd, 5th and 7th are kept: q, v, ``w1``'s output and ``w2``'s.

torchtitan 114151ad4 (torchtitan/distributed/activation_checkpoint.py, ``_get_save_ops``)
saves torch's compute-intensive ops (``get_default_op_list``), ``aten._scaled_mm`` among them,
beside these. Under Float8 that changes nothing: torchao's ``Float8Linear`` calls ``torch.mm``
on its ``Float8TrainingTensor``, so SAC's dispatch mode (modes dispatch before subclasses)
sees ``aten.mm``, counted every second as any matmul, and the ``_scaled_mm`` runs inside the
subclass's ``__torch_dispatch__``, below the mode — eager and compiled alike
(tests/profiling/plans/test_op_sac.py traces both lists to the same bytes on torchao 0.18). On
the flash and memory-efficient kernels the lists keep the same; the math SDPA kernel's
matmuls (``bmm`` is on torch's list) are not checked against the newer list.
Imports torch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch


def save_list() -> set[Any]:
    """torchtitan's ``_save_list`` (the ops whose outputs the policy keeps)."""
    ops = torch.ops
    return {
        ops.aten.mm.default,
        ops.aten._scaled_dot_product_efficient_attention.default,
        ops.aten._scaled_dot_product_flash_attention.default,
        ops._c10d_functional.reduce_scatter_tensor.default,
        # "for low precision training, it's useful to always save the result of max, since the
        # absolute maximum is used to compute the scaling factor for quantization"
        ops.aten.max.default,
    }


def policy(meta: dict[str, int]) -> Callable[..., Any]:
    """torchtitan's ``_custom_policy``: save the listed ops' outputs but every second mm."""
    from torch.utils.checkpoint import CheckpointPolicy

    saved = save_list()
    mm = torch.ops.aten.mm.default

    def _policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
        if func == mm:
            meta[key] += 1
        keep = func in saved and not (func == mm and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return _policy


def op_sac_context_fn(target: str | None) -> Callable[[], tuple[Any, Any]]:
    """The ``context_fn`` of each block's checkpoint: torchtitan's, a fresh count per call
    (``selective_checkpointing_context_fn``), the recomputation under the target's kernel
    rules as the forward ran."""
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    def context_fn() -> tuple[Any, Any]:
        forward, recompute = create_selective_checkpoint_contexts(policy(defaultdict(int)))
        if target is None:
            return forward, recompute
        from profiling.trace.target import kernels

        return forward, _Both(recompute, kernels(target))

    return context_fn


class _Both:
    """Two context managers entered as one (the recomputation's: SAC's cache, then the
    kernels), exited in reverse. Plain calls, no ExitStack or generator: the exception torch's
    checkpoint stops a recomputation with passes through here, and a frame kept by either
    would keep that recomputation's tensors alive until the next garbage collection."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second

    def __enter__(self) -> None:
        self.first.__enter__()
        self.second.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.second.__exit__(*exc)
        self.first.__exit__(*exc)


__all__ = ["op_sac_context_fn", "policy", "save_list"]
