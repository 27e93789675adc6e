"""The host memory a plan under FSDP2's CPU offload needs (``profiling.plans.cpu_offload``
says what FSDP2 keeps where): per GPU rank and per node, in the host block's form the
estimate prints for DeepSpeed's and FSDP's offload (``estimate.deepspeed_engine.host_text``).
Kept apart from ``cpu_offload``, which the one-GPU estimate imports. No torch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.plans.cpu_offload import offloaded

if TYPE_CHECKING:
    from profiling.plans.result import PlanResult


def plan_host(result: PlanResult) -> dict[str, Any] | None:
    """The host memory an offloaded plan pins and holds, per GPU rank and per node, in
    ``deepspeed_engine.host_summary``'s form (printed by ``host_text``, judged against
    ``--cpu-mem``); None when not offloaded.

    A GPU rank's host holds its shards: the sharded parameters (pinned), their sharded
    gradients (pinned: the copy out is ``.to(cpu, non_blocking=True)``) and the optimizer's
    state made like the parameters (pageable). Pipeline ranks hold different stages (the first
    the embedding, the last the output): the rank holding the most shard elements is counted,
    and a node is counted as that many GPUs of it — an upper bound."""
    cfg, lay = result.config, result.layout
    if not offloaded(cfg):
        return None
    from profiling.estimate.comm import GPUS_PER_NODE
    from profiling.estimate.states import optimizer_states
    from profiling.plans.model import plan_workload
    from profiling.plans.shapes import Sizes, _shard, stage_tensors
    from profiling.plans.step_form import step_counters

    w, s, n = plan_workload(cfg), Sizes.of(cfg), lay.shard_ranks
    tensors = [stage_tensors(w, st, st.layers, lay.tp) for st in lay.stages]
    by_stage = [sum(_shard(d, r, n) for d, r in ts) for ts in tensors]
    el, held = max((sum(by_stage[i] for i in held), held) for held in lay.rank_stages)
    counters = step_counters(cfg.optimizer, sum(len(tensors[i]) for i in held))
    dtype = "bf16" if s.shard == 2 else "fp32"
    lines = [
        (f"Weights ({dtype} shards)", el * s.shard, f"{el:,} · {s.shard} B", True),
        (f"Gradients ({dtype} shards)", el * s.shard, f"{el:,} · {s.shard} B", True),
    ] + [
        (f"Optimizer: {name}", el * b, f"{el:,} · {label}", False)
        for name, b, label in optimizer_states(cfg.optimizer, cfg.precision, w.hidden)
    ]
    if counters:  # a 0-d fp32 step per parameter tensor (plans.step_form.step_counters)
        lines.append(("Optimizer: step counters", counters, f"{counters // 4:,} · 4 B", False))
    rank = sum(b for _, b, _, _ in lines)
    per_node = min(cfg.gpus_per_node or GPUS_PER_NODE, lay.world)
    cpu = int(cfg.cpu_mem * 1e9) if cfg.cpu_mem is not None else None
    return {
        "by": "FSDP2's CPU offload",
        "lines": [
            {"name": x, "bytes": round(b), "calculation": f, "pinned": pin}
            for x, b, f, pin in lines
        ],
        "per_rank_bytes": round(rank),
        "pinned_per_rank_bytes": round(sum(b for _, b, _, pin in lines if pin)),
        "gpus_per_node": per_node,
        "per_node_bytes": round(rank * per_node),
        "cpu_mem_bytes": cpu,
        "fits": None if cpu is None else rank * per_node <= cpu,
    }


__all__ = ["plan_host"]
