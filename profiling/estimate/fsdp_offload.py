"""FSDP2's CPU offload on data parallelism (``--fsdp --gpus N --offload-optimizer``, no plan): the
Trainer's ``fsdp`` ``offload`` (accelerate hands ``cpu_offload`` to ``fully_shard`` as
``CPUOffloadPolicy()``: accelerate/utils/dataclasses.py, ``set_cpu_offload``), torchtune's
``fsdp_cpu_offload`` and accelerate's ``fsdp_offload_params``. The same model as a plan's
(``profiling.plans.cpu_offload``, torch 2.13 torch/distributed/fsdp/_fully_shard/):

- the sharded parameters live in pinned host memory (``FSDPParam._init_sharded_param``:
  ``padded_sharded_param.pin_memory()``), so the optimizer's state, made like them, is on the
  host (not pinned) and its step runs there;
- each sharded gradient is copied to pinned host memory after its reduce-scatter
  (``_fsdp_collectives.foreach_reduce``: ``new_sharded_grad.to(cpu, non_blocking=True)``);
- on the GPU: one group's shard copied in for its all-gather and one gradient shard on its way
  out, counted for the whole step (``plans.cpu_offload.gpu_transient``: a bound).

The host memory per rank (and per node: × the GPUs of a node) is what the GPU lines held, judged
against ``--cpu-mem`` with DeepSpeed's offload (``deepspeed_engine.host_summary``). No torch.
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.ledger import Ledger, Line
from profiling.estimate.states import fsdp_root
from profiling.plans.cpu_offload import gpu_transient
from profiling.units import fmt_count

# shape's key for the host lines (name, bytes per rank, formula, pinned), read by host_lines
HOST_KEY = "fsdp_offload_host"
_MOVED = ("parameters", "gradients", "optimizer")


def fsdp_offloaded(cfg: TrainingConfig) -> bool:
    """FSDP2's CPU offload outside a plan (a plan's: ``plans.cpu_offload.offloaded``)."""
    return bool(cfg.fsdp and cfg.offload_optimizer and not cfg.deepspeed and not cfg.is_plan)


def fsdp_offload(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any]) -> bool:
    """Move the sharded weights, gradients and optimizer state to the host and add the GPU's
    transient shards (see the module); False (nothing done) without FSDP2's CPU offload."""
    if not fsdp_offloaded(cfg):
        return False
    moved = [ln for ln in ledger.lines if ln.group == "model states" and ln.category in _MOVED]
    shape[HOST_KEY] = [
        (ln.name, ln.bytes, ln.substituted, ln.category != "optimizer") for ln in moved if ln.bytes
    ]
    for ln in moved:
        ln.name += " (CPU)"
        ln.bytes = 0
        ln.substituted += " → CPU memory"
    root_block = fsdp_root(cfg, shape)
    one = max(root_block) if root_block else int(shape.get("largest_layer_params") or 0)
    shard = 2 if cfg.precision == "bf16" else 4  # the sharded parameters' dtype (fp32 master)
    n = cfg.gpus
    line = Line(
        name="FSDP2's CPU offload: a group's shard copied in for its all-gather, a gradient "
        "shard copied out",
        bytes=gpu_transient(one, n, shard),
        unsharded=0,
        formula=f"2 · ⌈largest group / N⌉ · {shard} B",
        substituted=f"2 · ⌈{fmt_count(one)} / {n}⌉ · {shard}",
        group="model states",
        category="parameters",
    )
    ledger.add(line)  # beside the model states it replaces on the GPU
    ledger.lines.insert(ledger.lines.index(moved[-1]) + 1 if moved else 0, ledger.lines.pop())
    host = sum(b for _, b, _, _ in shape[HOST_KEY])
    ledger.note(
        f"FSDP2's CPU offload: the sharded weights, gradients and optimizer state, "
        f"{host / 1e9:.2f} GB per GPU rank, live in host memory (accelerate's "
        "CPUOffloadPolicy); the optimizer step runs on the CPU, so it is slower"
    )
    return True


__all__ = ["HOST_KEY", "fsdp_offload", "fsdp_offloaded"]
