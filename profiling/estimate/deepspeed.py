"""DeepSpeed's own model-state estimators, beside ours: its formulas transcribed and the
difference of convention (18 B/param against 16) said in a note, not hidden; with
``--deepspeed``, the host memory its offload needs per node and the verdict against
``--cpu-mem``. No torch here.

The estimators are transcribed from DeepSpeed 0.19.6 (github.com/deepspeedai/DeepSpeed at
edaa7221): ``estimate_zero2_model_states_mem_needs`` (``deepspeed/runtime/zero/
stage_1_and_2.py:3081``) and ``estimate_zero3_model_states_mem_needs`` (``stage3.py:3744``).
Their host numbers are per node and carry an ``additional_buffer_factor`` of 1.5; the ones
without offload (and the ``4·num_gpus_per_node`` terms) are the model loaded in fp32 by every
process, which our host block, the training step's, does not count.
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.deepspeed_engine import gpus_per_node, host_summary
from profiling.estimate.ledger import Ledger
from profiling.records import Step
from profiling.units import fmt_bytes, fmt_count


def estimate_zero2_model_states_mem_needs(
    total_params: int,
    num_gpus_per_node: int = 1,
    num_nodes: int = 1,
    cpu_offload: bool = True,
    additional_buffer_factor: float = 1.5,
) -> tuple[int, int]:
    """(host bytes per node, GPU bytes): DeepSpeed's function, line for line."""
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        # 2 = params_16bit; 18 = 2 grads_16bit + 4 grads_32bit + 4 params_32bit + 8 states
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def estimate_zero3_model_states_mem_needs(
    total_params: int,
    largest_layer_params: int,
    num_gpus_per_node: int = 1,
    num_nodes: int = 1,
    cpu_offload: bool = True,
    cpu_offload_params: bool = True,
    zero_init: bool = True,
    additional_buffer_factor: float = 1.5,
) -> tuple[int, int, int]:
    """(host bytes per node, GPU bytes, the largest layer's bytes): DeepSpeed's function."""
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            k = 18 * gpus_factor if zero_init else max(4 * num_gpus_per_node, 18 * gpus_factor)
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            k = 16 * gpus_factor if zero_init else max(4 * num_gpus_per_node, 16 * gpus_factor)
        cpu_mem = total_params * k * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        base = largest_layer_params if zero_init else total_params
        cpu_mem = base * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem), largest_layer_memory


def deepspeed_zero2_gpu_bytes(total_params: int, gpus: int, cpu_offload: bool = False) -> int:
    """DeepSpeed's ZeRO-2 estimator's GPU bytes (all GPUs on one node)."""
    return estimate_zero2_model_states_mem_needs(total_params, gpus, 1, cpu_offload)[1]


def deepspeed_zero3_gpu_bytes(
    total_params: int,
    largest_layer_params: int,
    gpus: int,
    cpu_offload: bool = False,
    cpu_offload_params: bool = False,
) -> int:
    """DeepSpeed's ZeRO-3 estimator's GPU bytes (all GPUs on one node)."""
    return estimate_zero3_model_states_mem_needs(
        total_params, largest_layer_params, gpus, 1, cpu_offload, cpu_offload_params
    )[1]


def _estimators(inp: TrainingConfig, psi: int, big: int) -> dict[str, Any]:
    """DeepSpeed's estimators at this configuration's nodes and offloads, formulas shown."""
    k = gpus_per_node(inp) if inp.deepspeed else inp.gpus
    nodes = -(-inp.gpus // k)
    # Without the engine, the ZeRO paper's sharding beside DeepSpeed's offload-free numbers.
    off, off_p = inp.offload_optimizer and inp.deepspeed, inp.offload_param
    n, P = inp.gpus, fmt_count(psi)
    cpu2, gpu2 = estimate_zero2_model_states_mem_needs(psi, k, nodes, off)
    ds: dict[str, Any] = {
        "zero2_gpu_bytes": gpu2,
        "zero2_formula": f"2Ψ = 2·{P}" if off else f"2Ψ + 18Ψ/N = 2·{P} + 18·{P}/{n}",
    }
    if inp.deepspeed:
        ds["zero2_cpu_bytes_per_node"] = cpu2
    if big:
        cpu3, gpu3, _ = estimate_zero3_model_states_mem_needs(psi, big, k, nodes, off, off_p)
        ds["zero3_gpu_bytes"] = gpu3
        B = fmt_count(big)
        if inp.deepspeed:  # host numbers only beside the engine's own host block
            ds["zero3_cpu_bytes_per_node"] = cpu3
        ds["zero3_formula"] = (
            f"4·largest module = 4·{B}" if off and off_p
            else f"4·largest module + 2Ψ/N = 4·{B} + 2·{P}/{n}" if off
            else f"4·largest module + 18Ψ/N = 4·{B} + 18·{P}/{n}"
        )  # fmt: skip
    return ds


def deepspeed_note(
    inp: TrainingConfig, shape: dict[str, Any], ledger: Ledger
) -> dict[str, Any] | None:
    """DeepSpeed's own model-state estimators beside ours, with why they differ; with
    ``--deepspeed``, the host memory (``host``) its offload needs."""
    host = host_summary(inp, shape)
    if inp.precision != "mixed" or inp.optimizer not in ("adam", "adamw") or inp.lora_rank:
        return {"host": host} if host else None
    psi, z = int(shape["params"]), inp.zero
    ds = _estimators(inp, psi, int(shape.get("largest_module_params") or 0))
    if host:
        ds["host"] = host
    if z in (2, 3) and f"zero{z}_gpu_bytes" in ds and inp.tp == 1:
        ours = sum(
            ln.bytes
            for ln in ledger.lines
            if ln.group in ("model states", "overhead") or ln.name.startswith("DeepSpeed")
        )
        if inp.deepspeed:
            why = (
                "ours is DeepSpeed's engine at its optimizer step (model states, its buckets, "
                "the fp32 gradients it makes for the step"
                + (
                    " — a sub-group's, beside their flattened copy"
                    if z == 3 and not inp.offload_optimizer
                    else ""
                )
                + (", the persistent and gathered parameters" if z == 3 else "")
                + "); the estimator counts no buckets"
                + (" and 4 B per parameter of the largest module" if z == 3 else "")
            )
        elif z == 2:
            why = (
                "DeepSpeed also keeps an fp32 gradient copy (18 B/param where the ZeRO paper "
                "counts 16); --fp32-grads reproduces its number"
            )
        else:
            why = (
                "DeepSpeed counts 18Ψ/N (fp16 and fp32 gradients, fp32 weights, two "
                "states) plus 4 B per parameter of the largest single module; we count "
                "16Ψ/N plus the largest block gathered twice (current + prefetch)"
            )
        if inp.deepspeed:  # the number the note gives, citable
            ledger.steps.append(
                Step(name=f"Ours beside DeepSpeed's ZeRO-{z} estimator", unit="B", value=ours,
                     formula="model states + overhead + DeepSpeed's lines",
                     substituted=fmt_bytes(ours, "GiB"))
            )  # fmt: skip
        ledger.note(
            f"DeepSpeed's ZeRO-{z} estimator gives "
            f"{fmt_bytes(ds[f'zero{z}_gpu_bytes'], 'GiB')} per GPU for model states "
            f"({ds[f'zero{z}_formula']}); ours is {fmt_bytes(ours, 'GiB')}: {why}"
        )
        cpu = ds.get(f"zero{z}_cpu_bytes_per_node")
        if host and cpu:
            ledger.note(
                f"DeepSpeed's ZeRO-{z} estimator gives {fmt_bytes(cpu, 'GiB')} of host memory "
                f"per node (× 1.5, its additional_buffer_factor); ours, the step's offloaded "
                f"states and buffers, is {fmt_bytes(host['per_node_bytes'], 'GiB')}"
            )
    return ds


def host_verdict(
    fits: bool | None, status: str | None, ds: dict[str, Any] | None
) -> tuple[bool | None, str | None]:
    """The GPU's verdict, and the host's: a step whose offload does not fit the host memory
    given (``--cpu-mem``) does not fit."""
    host = (ds or {}).get("host")
    if not host or host.get("fits") is None:
        return fits, status
    if not host["fits"]:
        return False, "❌"
    return (True, status) if fits is None else (fits, status)


__all__ = [
    "deepspeed_note",
    "deepspeed_zero2_gpu_bytes",
    "deepspeed_zero3_gpu_bytes",
    "estimate_zero2_model_states_mem_needs",
    "estimate_zero3_model_states_mem_needs",
    "host_verdict",
]
