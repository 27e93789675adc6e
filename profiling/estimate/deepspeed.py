"""DeepSpeed's own model-state estimators, beside ours: its formulas reproduced and the
difference of convention (18 B/param against 16) said in a note, not hidden. No torch here.
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.states import Ledger
from profiling.units import fmt_bytes, fmt_count


def deepspeed_zero2_gpu_bytes(total_params: int, gpus: int, cpu_offload: bool = False) -> int:
    """DeepSpeed 0.19.8 ``estimate_zero2_model_states_mem_needs`` GPU bytes.

    Its multipliers: 2 = fp16 params (replicated); 18 = 2 fp16 grads + 4 fp32 grads + 4 fp32
    params + 8 optimizer states, partitioned over all GPUs. With CPU offload only the fp16
    params stay on the GPU.
    """
    if cpu_offload:
        return 2 * total_params
    return 2 * total_params + int(18 * total_params / gpus)


def deepspeed_zero3_gpu_bytes(
    total_params: int,
    largest_layer_params: int,
    gpus: int,
    cpu_offload: bool = False,
    cpu_offload_params: bool = False,
) -> int:
    """DeepSpeed 0.19.8 ``estimate_zero3_model_states_mem_needs`` GPU bytes."""
    largest = 4 * largest_layer_params
    if cpu_offload:
        return largest if cpu_offload_params else largest + int(2 * total_params / gpus)
    return largest + int(18 * total_params / gpus)


def deepspeed_note(
    inp: TrainingConfig, shape: dict[str, Any], ledger: Ledger
) -> dict[str, Any] | None:
    """DeepSpeed's own model-state estimators beside ours, with why they differ."""
    if inp.precision != "mixed" or inp.optimizer not in ("adam", "adamw") or inp.lora_rank:
        return None
    psi, n, z = int(shape["params"]), inp.gpus, inp.zero
    big = int(shape.get("largest_module_params") or 0)
    ds: dict[str, Any] = {
        "zero2_gpu_bytes": deepspeed_zero2_gpu_bytes(psi, n),
        "zero2_formula": f"2Ψ + 18Ψ/N = 2·{fmt_count(psi)} + 18·{fmt_count(psi)}/{n}",
    }
    if big:
        ds["zero3_gpu_bytes"] = deepspeed_zero3_gpu_bytes(psi, big, n)
        ds["zero3_formula"] = (
            f"4·largest module + 18Ψ/N = 4·{fmt_count(big)} + 18·{fmt_count(psi)}/{n}"
        )
    if z in (2, 3) and f"zero{z}_gpu_bytes" in ds and inp.tp == 1:
        ours = sum(ln.bytes for ln in ledger.lines if ln.group in ("model states", "overhead"))
        why = (
            "DeepSpeed also keeps an fp32 gradient copy (18 B/param where the ZeRO paper "
            "counts 16); --fp32-grads reproduces its number"
            if z == 2
            else "DeepSpeed counts 18Ψ/N (fp16 and fp32 gradients, fp32 weights, two "
            "states) plus 4 B per parameter of the largest single module; we count "
            "16Ψ/N plus the largest block gathered twice (current + prefetch)"
        )
        ledger.note(
            f"DeepSpeed's ZeRO-{z} estimator gives "
            f"{fmt_bytes(ds[f'zero{z}_gpu_bytes'], 'GiB')} per GPU for model states "
            f"({ds[f'zero{z}_formula']}); ours is {fmt_bytes(ours, 'GiB')}: {why}"
        )
    return ds


__all__ = ["deepspeed_note", "deepspeed_zero2_gpu_bytes", "deepspeed_zero3_gpu_bytes"]
