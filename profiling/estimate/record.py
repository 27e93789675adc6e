"""An estimate's record, JSON and categories: what ``estimate`` saves and prints.

Light: no torch.
"""

from __future__ import annotations

import re
from typing import Any

from profiling.estimate.counters import Counters
from profiling.estimate.memory import Estimate, describe_setup, render_text
from profiling.estimate.render import comm_of
from profiling.records import (
    MeasurementRecord,
    Quantity,
    new_record_id,
    software_versions,
)

# --------------------------------------------------------------------- estimates

# "weights 13.48 GB", "step temporaries 524.3 MB" in a moment's sum, as the text prints them.
_TERM = re.compile(r"(?<![\w.·])(\d+(?:\.\d+)?) (B|KB|MB|GB|TB)\b")
_SCALE = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "MiB": 2**20}
# The same in a counter's sentence, where digit groups appear ("1,234.5 MB").
_AMOUNT = re.compile(
    r"(?<![\w.·,])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?) (B|KB|MB|GB|TB|MiB)\b"
)


def _printed_quantities(est: Estimate) -> list[Quantity]:
    """The other numbers the text shows, so that each can be cited: the terms of each moment's
    sum (category totals, the logits and their copy), the model states and DeepSpeed's own
    estimator, which the notes compare."""
    out = []
    for m in est.moments:
        for n, term in enumerate(_TERM.finditer(m.calculation), start=1):
            value = float(term.group(1)) * _SCALE[term.group(2)]
            out.append(Quantity(name=f"moment: {m.name}: term {n}", value=value, unit="B"))
    if est.counters is not None:
        out += counter_quantities(est.counters, est.gpu_mem_bytes)
    states = sum(c.bytes for c in est.components if c.group == "model states")
    out.append(Quantity(name="model_states", value=states, unit="B"))
    for key in ("zero2_gpu_bytes", "zero3_gpu_bytes"):
        if est.deepspeed and est.deepspeed.get(key):
            name = f"deepspeed_{key.removesuffix('_gpu_bytes')}_model_states"
            out.append(Quantity(name=name, value=est.deepspeed[key], unit="B"))
        cpu = key.replace("gpu_bytes", "cpu_bytes_per_node")
        if est.deepspeed and est.deepspeed.get(cpu):
            name = f"deepspeed_{key.removesuffix('_gpu_bytes')}_host_per_node"
            out.append(Quantity(name=name, value=est.deepspeed[cpu], unit="B"))
    return out + host_quantities((est.deepspeed or {}).get("host"))


def host_quantities(host: dict[str, Any] | None) -> list[Quantity]:
    """The host block's numbers (``--deepspeed`` with an offload), each citable."""
    if not host:
        return []
    out = [Quantity(name=f"host: {x['name']}", value=x["bytes"], unit="B") for x in host["lines"]]
    for key in ("per_rank_bytes", "pinned_per_rank_bytes", "per_node_bytes", "cpu_mem_bytes"):
        if host.get(key) is not None:
            out.append(Quantity(name=f"host: {key.removesuffix('_bytes')}", value=host[key],
                                unit="B"))  # fmt: skip
    return out


def counter_quantities(counters: Counters, gpu_mem: int | None) -> list[Quantity]:
    """Each counter and the terms its sentence shows, and the usable memory of the verdict."""
    out = []
    for value in (counters.allocated, counters.reserved, counters.nvml):
        out.append(Quantity(name=f"counter: {value.counter}", value=value.bytes, unit="B"))
        for n, term in enumerate(_AMOUNT.finditer(value.how), start=1):
            amount = float(term.group(1).replace(",", "")) * _SCALE[term.group(2)]
            out.append(Quantity(name=f"counter: {value.counter}: term {n}", value=amount, unit="B"))
    if counters.held() < counters.reserved.bytes:  # what must fit on a GPU near full
        out.append(Quantity(name="counter: reserved near full", value=counters.held(), unit="B"))
        for n, term in enumerate(_AMOUNT.finditer(counters.need_how), start=1):
            amount = float(term.group(1).replace(",", "")) * _SCALE[term.group(2)]
            out.append(Quantity(name=f"counter: reserved near full: term {n}", value=amount,
                                unit="B"))  # fmt: skip
    if counters.paged:
        out.append(Quantity(name="counter: paged optimizer state", value=counters.paged, unit="B"))
    if gpu_mem:
        from profiling.estimate.render import SAFETY_MARGIN

        usable = gpu_mem * (1 - SAFETY_MARGIN)
        out.append(Quantity(name="usable (after the safety margin)", value=usable, unit="B"))
        if counters.paged and counters.nvml.bytes > usable:
            out.append(Quantity(name="paged to host", value=counters.nvml.bytes - usable, unit="B"))
    return out


def estimate_record(est: Estimate) -> MeasurementRecord:
    results = [
        Quantity(name="per_gpu_total", value=est.per_gpu_bytes, unit="B"),
        Quantity(name="peak", value=est.per_gpu_bytes, unit="B"),
        Quantity(name="total_all_gpus", value=est.total_bytes, unit="B"),
        Quantity(name="unsharded_total", value=est.unsharded_bytes, unit="B"),
        Quantity(name="params", value=est.params, unit=""),
    ]
    results += [Quantity(name=c.name, value=c.bytes, unit="B") for c in est.components]
    results += [Quantity(name=f"moment: {m.name}", value=m.bytes, unit="B") for m in est.moments]
    results += _printed_quantities(est)
    found = comm_of(est)
    if found:
        from profiling.estimate.comm import comm_quantities

        results += comm_quantities(*found)
    if est.gpu_mem_bytes is not None:
        results.append(Quantity(name="gpu_mem", value=est.gpu_mem_bytes, unit="B"))
    if est.time is not None:
        results += [
            Quantity(name="flops_per_step", value=est.time.flops_per_step, unit="FLOP"),
            Quantity(name="flops_forward", value=est.time.flops_forward, unit="FLOP"),
            Quantity(name="flops_backward", value=est.time.flops_backward, unit="FLOP"),
        ]
        t = est.time.time
        if t is not None:
            results += [
                Quantity(name="step_time", value=t.step_seconds, unit="s"),
                Quantity(name="tokens_per_second", value=t.tokens_per_second, unit="tokens/s"),
            ]
            if t.total_seconds is not None:
                results.append(Quantity(name="time_for_tokens", value=t.total_seconds, unit="s"))
    return MeasurementRecord(
        id=new_record_id("estimated"),
        kind="estimated",
        title=f"Estimate: {describe_setup(est.inputs, est.shape)}",
        device={"gpu_mem_bytes": est.gpu_mem_bytes, "gpus": est.inputs.gpus},
        software=software_versions(),
        config={**est.inputs.model_dump(), "shape": est.shape},
        results=results,
        steps=est.steps,
        notes="\n".join(est.notes),
        extra={"status": est.status, "fits": est.fits, "table": render_text(est)},
    )


def estimate_json(est: Estimate, record_id: str) -> dict[str, Any]:
    return {
        "record_id": record_id,
        "per_gpu_bytes": est.per_gpu_bytes,
        "total_bytes": est.total_bytes,
        "unsharded_bytes": est.unsharded_bytes,
        "gpu_mem_bytes": est.gpu_mem_bytes,
        "fits": est.fits,
        "status": est.status,
        "params": est.params,
        "trainable_params": est.trainable_params,
        "components": [
            {
                "name": c.name,
                "bytes": c.bytes,
                "calculation": c.calculation,
                "group": c.group,
                "category": c.category,
            }
            for c in est.components
        ],
        "moments": [m.model_dump() for m in est.moments],
        "peak_moment": est.peak_moment,
        "time": est.time.model_dump() if est.time is not None else None,
        "deepspeed": est.deepspeed,
        "counters": est.counters.model_dump() if est.counters is not None else None,
        "notes": est.notes,
    }


def estimate_categories(est: Estimate) -> dict[str, int]:
    """The estimate folded into the trace's categories, for a side-by-side comparison."""
    cats = ("parameters", "gradients", "optimizer", "activations", "temporaries", "buckets")
    return {cat: est.category_bytes(cat) for cat in cats}


# --------------------------------------------------------------------- traces
