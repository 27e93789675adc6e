"""Context parallelism's ring attention, as torchtitan runs it: torch's own, on the plan's mesh.

torchtitan (9dec370) wraps each training step in ``context_parallel(cp_mesh, buffers=[inputs,
labels, freqs_cis], …)`` (``torch/distributed/tensor/experimental/_context_parallel``): the
inputs are cut into 2·cp chunks and rank r keeps chunks r and 2·cp − 1 − r (the head-tail load
balancer), and while the step runs, SDPA's query, key and value are DTensors sharded on the
sequence over the ``cp`` mesh, which DTensor's dispatcher sends to ``_templated_ring_attention``:

- forward: key and value made contiguous, concatenated into one flat buffer and all-gathered
  once over the cp group (the default rotate method, ``allgather``: cp × the rank's k + v);
  cp attention kernels (flash / memory-efficient / cuDNN, as CUDA picks it), each on this rank's
  queries against one rank's chunk of k/v (a half of either for every chunk but its own, the
  load balancer's causal rule), their outputs and logsumexps merged in fp32 as they come.
  Autograd keeps what the kernel keeps for the whole (local) attention: q, k, v, the merged
  output and its fp32 logsumexp — never the gathered keys and values.
- backward: the same gather again, the kernel's backward per chunk, the query's gradient
  accumulated in fp32 here and the key/value gradients (fp32) rotated to the next rank by an
  all-to-all (``permute_tensor``) at every step, their owner getting them back at the end.

Here torch's own code runs: the attention's q, k and v become DTensors on the ``cp`` dimension
of the plan's fake mesh and DTensor's context-parallel dispatcher (torch's
``_enable_cp_dtensor_dispatcher``, what ``context_parallel`` turns on) runs the ring, its
collectives on the fake process group, its kernels as fake ops (CUDA's kernel choice:
``profiling.trace.target``). The traced rank is rank 1 of its ring (:func:`traced_rank`).
torchtitan's shard of the rotary table for the step is its buffer resized in place (its storage
kept whole: the model here keeps the whole table, the same bytes); the copy ``context_parallel``
keeps to put it back after the step (``seq · head_dim · 8`` bytes) is not counted.

Imports torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from profiling.plans.titan import Transformer


class Ring:
    """One attention's ring over the ``cp`` mesh."""

    def __init__(self, mesh: DeviceMesh) -> None:
        self.mesh = mesh

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(b, h, s/cp, d) each -> this rank's (b, h, s/cp, d) of causal attention over the
        whole sequence (torch's ``sdpa_input_fn`` / ``sdpa_output_fn``)."""
        import torch.nn.functional as F
        from torch.distributed.tensor import DTensor, Shard

        place = [Shard(2)]
        q, k, v = (DTensor.from_local(t, self.mesh, place, run_check=False) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.to_local()  # pyright: ignore[reportAttributeAccessIssue]  # a DTensor here


def traced_rank(shape: dict[str, int], place: int = 1) -> int:
    """The global rank traced: the first whose place on the ring is ``place`` (every other
    coordinate 0). Under the load balancer rank 0 attends with half its queries to every other
    chunk and holds less than the others at attention's highest moment (by 2·q's bytes in the
    forward with 16-bit q); ranks 1 … cp − 1 hold the same there. At cp 2 rank 0 keeps wo's
    copy of the merged output (a block's queries) where rank 1 does not: both are traced."""
    names = list(shape)
    stride = 1
    for name in names[names.index("cp") + 1 :]:
        stride *= shape[name]
    return stride * place


def apply_ring(model: Transformer, mesh: DeviceMesh) -> None:
    """Every block's attention attends around the ``cp`` ring."""
    for block in model.layers.values():
        block.attention.ring = Ring(mesh)  # type: ignore[union-attr]  # titan's blocks


@contextlib.contextmanager
def ring_dispatch(rotate: str = "allgather") -> Iterator[None]:
    """DTensor's SDPA sent to torch's ring attention (``context_parallel``'s dispatcher), with
    torchtitan's options: load balancing on, keys and values rotated by ``rotate``."""
    from torch.distributed.tensor.experimental._context_parallel import _attention as cp

    options = cp._cp_options
    before = (options.enable_load_balance, options.rotate_method)
    options.enable_load_balance = True
    options.rotate_method = (
        cp._RotateMethod.ALL_GATHER if rotate == "allgather" else cp._RotateMethod.ALL_TO_ALL
    )
    cp._enable_cp_dtensor_dispatcher()
    try:
        yield
    finally:
        cp._disable_cp_dtensor_dispatcher()
        options.enable_load_balance, options.rotate_method = before


__all__ = ["Ring", "apply_ring", "ring_dispatch", "traced_rank"]
