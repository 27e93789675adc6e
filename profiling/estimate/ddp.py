"""DDP's gradient buckets: plain data parallelism (``--gpus N``, N > 1, nothing sharded) is
torch's ``DistributedDataParallel``, whose C++ Reducer holds a flat copy of every trainable
gradient from the moment it wraps the model. No torch here.

torch 2.13 ``torch/nn/parallel/distributed.py``: ``_build_params_for_reducer`` buckets the
parameters with ``requires_grad``, deduplicated (a tied weight once; LoRA's frozen base none);
``_ddp_init_helper`` builds the ``dist.Reducer``, whose ``initialize_buckets``
(``c10d/reducer.cpp``) makes ``bucket.gradients = at::empty({offset}, options)`` per bucket in
the parameter's dtype, with no padding: Σ buckets = Σ numel·element_size whatever the cap
(``bucket_cap_mb`` moves only where one ends). With ``gradient_as_bucket_view=False`` (the
default of torch, accelerate and the Trainer) ``.grad`` is made as on one GPU and copied in and
out of its bucket (``mark_variable_ready_dense``, ``copy_bucket_to_grad``), so both are alive;
the buckets die only at the one rebuild (the second forward, which frees them before making the
new ones) or with the module: alive at every moment of every step. ``--zero``/``--fsdp``/
``--deepspeed`` run no Reducer; a parallel plan's ``--dp-replicate`` is ``profiling.plans``'.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.estimate.deepspeed_groups import add_line
from profiling.estimate.ledger import Ledger, Line
from profiling.estimate.lora_bytes import adapter_bytes
from profiling.estimate.ranks import is_ddp
from profiling.estimate.states import weight_bytes
from profiling.units import fmt_bytes, fmt_count

NAME = "DDP's gradient buckets (every trainable parameter's gradient, made when DDP wraps it)"
CATEGORY = "buckets"


def add_buckets(ledger: Ledger, cfg: TrainingConfig, trainable: int) -> None:
    """The buckets' line: Ψ_t trainable parameters (LoRA: the adapters) at their dtype's bytes
    (fp32 under autocast and fp32, 16-bit under bf16 and mixed; peft's adapters: fp32 but under
    pure bf16), split by tensor parallelism like the gradients they copy."""
    if not is_ddp(cfg):
        return
    w = adapter_bytes(cfg) if cfg.lora_rank is not None else weight_bytes(cfg.precision)
    t = cfg.tp
    value = trainable * w / t
    add_line(  # shown with the other model states
        ledger, NAME, value, f"Ψ_t · {w} B" + (" / t" if t > 1 else ""),
        f"{fmt_count(trainable)} · {w} B" + (f" / {t}" if t > 1 else ""),
        unsharded=value, group="model states", category=CATEGORY,
    )  # fmt: skip
    ledger.note(
        f"DDP over {cfg.gpus} GPUs: torch's Reducer holds a flat copy of every trainable "
        "gradient (its buckets, gradient_as_bucket_view=False) beside .grad, alive at every "
        "moment; the rest of a rank's step is the one-GPU step"
    )


def held(lines: list[Line]) -> tuple[float, str]:
    """The buckets' bytes and the moments' text for them (every moment holds them)."""
    value = sum(ln.bytes for ln in lines if ln.category == CATEGORY)
    return value, f" + DDP's gradient buckets {fmt_bytes(value)}" if value else ""


__all__ = ["CATEGORY", "NAME", "add_buckets", "held", "is_ddp"]
