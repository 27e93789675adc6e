"""FSDP2's CPU offload on a plan: torchtitan's ``training.enable_cpu_offload`` passes
``offload_policy=CPUOffloadPolicy()`` to ``fully_shard`` (pytorch/torchtitan
torchtitan/distributed/fsdp.py at b5bcd76, ``apply_fsdp``), given as ``--offload-optimizer`` on
a plan that shards with FSDP.

What FSDP2 then keeps where (torch 2.13, torch/distributed/fsdp/_fully_shard/):

- the sharded parameters live in pinned host memory (``_fsdp_param.py``,
  ``FSDPParam._init_sharded_param``: ``padded_sharded_param.cpu().pin_memory()``), so the
  optimizer's state, made like them, and its step are on the CPU too;
- before each group's all-gather its shard is copied to the GPU (``all_gather_inputs``:
  ``sharded_param_data.to(self.device, non_blocking=True)``, then cast to the parameter dtype)
  — one group's shard at a time;
- after the reduce-scatter each sharded gradient is copied to pinned host memory
  (``_fsdp_collectives.py``, ``foreach_reduce``: the reduce output's shard ``.to`` the CPU), so
  the GPU holds a group's reduce output until its copy is done, not every sharded gradient.

On the GPU the closed form therefore counts no sharded parameters, gradients or optimizer
state, but one group's shard copied in and one group's gradient shard on its way out for the
whole step (an upper bound: each lives only around its collective). The host holds, per GPU,
the shard's parameters, gradients and optimizer state; per node that × the GPUs of a node. The
step time counts the PCIe transfers and the host's step as DeepSpeed's offload
(``profiling.estimate.step_time.optimizer_overheads``). No torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def offloaded(cfg: TrainingConfig) -> bool:
    """Whether the plan runs FSDP2's CPU offload (see the module)."""
    return cfg.is_plan and cfg.fsdp and cfg.offload_optimizer


def gpu_transient(one_group: int, n: int, shard_bytes: int) -> int:
    """Bytes an offloaded plan keeps on the GPU of its sharded state: the largest group's shard
    copied in for its all-gather and a group's gradient shard copied out (``one_group``
    elements over ``n`` ranks, ``shard_bytes`` each)."""
    return 2 * -(-one_group // n) * shard_bytes


def on_gpu(cfg: TrainingConfig, base: dict[str, int], one_group: int, n: int, shard: int
           ) -> dict[str, int]:  # fmt: skip
    """A stage's base as the GPU holds it: offloaded, one group's shard in and a gradient
    shard out (:func:`gpu_transient`) in place of the sharded parameters and the optimizer's
    state (all on the host); else as it is."""
    if not offloaded(cfg):
        return base
    out = {**base, "parameters": gpu_transient(one_group, n, shard), "optimizer": 0}
    out["total"] = sum(v for k, v in out.items() if k != "total")
    return out


__all__ = ["gpu_transient", "offloaded", "on_gpu"]
