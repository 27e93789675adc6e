"""DeepSpeed's own ZeRO estimators beside ours (issue #32), for bench_peer.py.

benchmarks/peer/deepspeed_estimator.json holds what DeepSpeed 0.19.6's
``estimate_zero{2,3}_model_states_mem_needs_all_live`` print for transformers' own models (made
by benchmarks/peer/make_deepspeed_rows.py): per GPU and host memory per node, for each model ×
GPUs per node × nodes × offload_optimizer / offload_param / zero_init. For each row this takes

- parity: the numbers ``estimate --deepspeed`` reports as DeepSpeed's estimator (its note and
  ``--json``'s ``deepspeed``), from our catalogue's parameter count and largest module: equal
  to DeepSpeed's bytes, and to its printed ``{:.2f}GB``. ``zero_init=0``, which our estimate
  does not print (the engine loads under ``zero.Init`` in the Hugging Face integration), from
  the same transcription with our counts;
- beside it, our engine's own numbers at DeepSpeed's convention (no buckets, no persistent
  parameters, no prefetch): the model states per GPU at the optimizer step ÷ the estimator's,
  and the host memory per node ÷ the estimator's less its ``additional_buffer_factor`` of 1.5,
  where the offloaded states decide it (not the fp32 copy of the model each process loads).
  These differ by convention, said in benchmarks/peer/README.md; they are shown, not targets.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.deepspeed import (
    estimate_zero2_model_states_mem_needs,
    estimate_zero3_model_states_mem_needs,
)
from profiling.estimate.memory import estimate

ROWS = Path(__file__).resolve().parent / "peer" / "deepspeed_estimator.json"
FACTOR = 1.5  # DeepSpeed's additional_buffer_factor


def _printed(value: int) -> str:
    return f"{value / 2**30:.2f}GB"  # as DeepSpeed prints it


def _config(row: dict[str, Any], **engine: Any) -> TrainingConfig:
    return TrainingConfig(
        model=row["model"], precision="mixed", gpus=row["gpus_per_node"] * row["nodes"],
        gpus_per_node=row["gpus_per_node"], zero=row["stage"], deepspeed=True,
        offload_optimizer=row["offload_optimizer"], offload_param=row["offload_param"], **engine,
    )  # fmt: skip


def _transcribed(row: dict[str, Any], params: int, largest: int) -> tuple[int, int]:
    per_node, nodes, off = row["gpus_per_node"], row["nodes"], row["offload_optimizer"]
    if row["stage"] == 2:
        return estimate_zero2_model_states_mem_needs(params, per_node, nodes, off)
    cpu, gpu, _ = estimate_zero3_model_states_mem_needs(
        params, largest, per_node, nodes, off, row["offload_param"], row["zero_init"]
    )
    return cpu, gpu


def _states_decide(row: dict[str, Any]) -> bool:
    """Whether the offloaded states (16 or 18 B per parameter over the nodes), not the fp32
    model every process loads (4 B × GPUs per node, or × all GPUs in ZeRO-2), make DeepSpeed's
    host number."""
    if not row["offload_optimizer"] or (row["stage"] == 3 and not row["zero_init"]):
        return False
    k = 18 if row["offload_param"] else 16
    if row["stage"] == 2:  # the ZeRO-2 estimator neither divides by nodes nor counts per node
        return row["nodes"] == 1 and 4 * row["gpus_per_node"] <= k
    return True


def one(row: dict[str, Any]) -> dict[str, Any]:
    est = estimate(_config(row))
    params, largest = est.params, int(est.shape.get("largest_module_params") or 0)
    cpu, gpu = _transcribed(row, params, largest)
    ds, z = est.deepspeed or {}, row["stage"]
    if row.get("zero_init", True):  # what estimate --deepspeed reports, where it reports it
        cpu, gpu = ds[f"zero{z}_cpu_bytes_per_node"], ds[f"zero{z}_gpu_bytes"]
    out: dict[str, Any] = {
        "id": row["id"],
        "deepspeed": {"gpu": row["gpu_bytes"], "cpu_per_node": row["cpu_bytes_per_node"]},
        "ours": {"gpu": gpu, "cpu_per_node": cpu},
        "exact": (gpu, cpu) == (row["gpu_bytes"], row["cpu_bytes_per_node"]),
        "as_printed": (_printed(gpu), _printed(cpu))
        == (row["printed_gpu"], row["printed_cpu_per_node"]),
    }
    if params != row["total_params"] or (z == 3 and largest != row["largest_layer_params"]):
        theirs = [row["total_params"], row.get("largest_layer_params")]
        out["counts"] = {"ours": [params, largest], "deepspeed": theirs}
    if not row.get("zero_init", True):
        return out
    free = {"reduce_bucket_size": 0}
    if z == 3:
        free |= {"prefetch_bucket_size": 0, "param_persistence_threshold": 0}
    engine = estimate(_config(row, **free))
    step = next(s.value for s in engine.steps if s.name.startswith("Ours beside"))
    out["engine_gpu_ratio"] = round(step / row["gpu_bytes"], 4)
    host = (engine.deepspeed or {}).get("host")
    if host and _states_decide(row):
        states = row["cpu_bytes_per_node"] / FACTOR
        out["engine_host_ratio"] = round(host["per_node_bytes"] / states, 4)
    return out


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def kind(row_id: str) -> str:
    """A row's stage and offloads, its model and GPUs left out: 'zero3 opt=1 param=0'."""
    parts = row_id.split()
    return " ".join(p for p in parts[1:] if not p[0].isdigit() and not p.startswith("init"))


def run(rows: list[dict[str, Any]]) -> dict[str, Any]:
    done = [one(r) for r in rows]
    by_kind: dict[str, dict[str, Any]] = {}
    for r in done:
        if "engine_gpu_ratio" not in r:
            continue
        k = by_kind.setdefault(kind(r["id"]), {"gpu": [], "host": []})
        k["gpu"].append(r["engine_gpu_ratio"])
        if "engine_host_ratio" in r:
            k["host"].append(r["engine_host_ratio"])
    summary = {
        "rows": len(done),
        "estimator_exact": f"{sum(r['exact'] for r in done)} of {len(done)}",
        "estimator_as_printed": f"{sum(r['as_printed'] for r in done)} of {len(done)}",
        "counts_differ": [r["id"] for r in done if "counts" in r],
        "engine_beside_estimator": {
            k: {"gpu": _spread(v["gpu"]), "host_per_node": _spread(v["host"])}
            for k, v in by_kind.items()
        },
        "target_met": all(r["exact"] and r["as_printed"] for r in done),
    }
    return {"rows": done, "summary": summary}
