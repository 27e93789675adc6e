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


def bucket_bytes(cfg: TrainingConfig) -> int:
    """Bytes per element of a bucket: the trainable parameters' dtype (``initialize_buckets``
    takes it from the parameter): fp32 under autocast and fp32, 16-bit under bf16 and mixed;
    peft's adapters fp32 but under pure bf16. What DDP's all-reduce sends per element too."""
    return adapter_bytes(cfg) if cfg.lora_rank is not None else weight_bytes(cfg.precision)


def add_buckets(ledger: Ledger, cfg: TrainingConfig, trainable: int) -> None:
    """The buckets' line: Ψ_t trainable parameters (LoRA: the adapters) at their dtype's bytes
    (``bucket_bytes``), split by tensor parallelism like the gradients they copy."""
    if not is_ddp(cfg):
        # said, not refused. A recipe's find_unused never gets here off DDP: the Trainer's files
        # imply it for every run, and recipes.hf_trainer_ddp.off_ddp lists it ignored instead
        # (else this note would land on every one-GPU estimate of a Trainer checkpoint)
        unused = [f for f, on in (("--ddp-find-unused", cfg.ddp_find_unused),
                                  ("--ddp-bucket-view", cfg.ddp_bucket_view)) if on]  # fmt: skip
        if unused:
            verb, what = ("is", "it changes") if len(unused) == 1 else ("are", "they change")
            ledger.note(
                f"{' and '.join(unused)} {verb} for torch's DistributedDataParallel (--gpus N, "
                "N > 1, nothing sharded: no --fsdp, --zero or --deepspeed), which this step "
                f"does not run: {what} nothing here"
            )
        return
    w = bucket_bytes(cfg)
    t = cfg.tp
    value = trainable * w / t
    add_line(  # shown with the other model states
        ledger, NAME, value, f"Ψ_t · {w} B" + (" / t" if t > 1 else ""),
        f"{fmt_count(trainable)} · {w} B" + (f" / {t}" if t > 1 else ""),
        unsharded=value, group="model states", category=CATEGORY,
    )  # fmt: skip
    if cfg.ddp_bucket_view:
        ledger.note(
            f"DDP over {cfg.gpus} GPUs with gradient_as_bucket_view=True: torch's Reducer "
            "holds every trainable gradient in its buckets, alive at every moment, and each "
            ".grad is a view of them once ready: the optimizer step holds no gradient beside "
            "them; backward's moments count the gradients made so far beside them too (a "
            "bound: the Reducer lets each go as it is copied in)"
        )
        return
    ledger.note(
        f"DDP over {cfg.gpus} GPUs: torch's Reducer holds a flat copy of every trainable "
        "gradient (its buckets, gradient_as_bucket_view=False) beside .grad, alive at every "
        "moment; the rest of a rank's step is the one-GPU step"
    )


def held(lines: list[Line]) -> tuple[float, str]:
    """The buckets' bytes and the moments' text for them (every moment holds them)."""
    value = sum(ln.bytes for ln in lines if ln.category == CATEGORY)
    return value, f" + DDP's gradient buckets {fmt_bytes(value)}" if value else ""


def viewed(cfg: TrainingConfig, lines: list[Line], moment: str) -> tuple[float, str]:
    """What a moment counts that ``gradient_as_bucket_view=True`` makes the buckets' own, and
    its text: at the optimizer step every ``.grad`` is a view of its bucket (``mark_variable_
    ready_dense``: ``grad = bucket_view``, torch 2.13 c10d/reducer.cpp), so the gradients are
    not held beside the buckets (0 at every other moment: a bound in backward)."""
    if not (is_ddp(cfg) and cfg.ddp_bucket_view and moment == "optimizer step"):
        return 0.0, ""
    value = sum(ln.bytes for ln in lines if ln.category == "gradients")
    return value, f" − the gradients, views of the buckets {fmt_bytes(value)}"


__all__ = ["CATEGORY", "NAME", "add_buckets", "bucket_bytes", "held", "is_ddp", "viewed"]
