"""The traced step is the steady state of a real loop: proved against real CPU steps.

Each case runs the same small model for real (real tensors, CPU) for three steps of a PyTorch
training loop — ``zero_grad(set_to_none=True)``, forward, backward, ``optimizer.step()`` — with
a fresh memory tracker around every step, and checks the fake-tensor trace's steady-state peak
and its categories against step 3's, byte for byte, and its first-step peak against step 1's.
The loop here is written independently of the tracer: only the memory tracker (the instrument,
the same one the trace uses) and the optimizer constructors are shared.
"""

from __future__ import annotations

import contextlib
import functools

import pytest

torch = pytest.importorskip("torch")

from profiling.models.workloads import WORKLOADS, build_model  # noqa: E402
from profiling.trace.master_weights import MasterWeightOptimizer  # noqa: E402
from profiling.trace.optimizers import make_optimizer  # noqa: E402
from profiling.trace.step import TraceConfig, trace_step  # noqa: E402
from profiling.trace.tracker import make_tracker, merge_snapshots, to_categories  # noqa: E402


@contextlib.contextmanager
def _real_process_group(world_size: int):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=0, world_size=world_size, store=FakeStore())
    try:
        yield init_device_mesh("cpu", (world_size,))
    finally:
        dist.destroy_process_group()


def _real_model(cfg: TraceConfig, mesh):
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16 if cfg.param_dtype == "bf16" else torch.float32)
    try:
        workload = WORKLOADS[cfg.model].model_copy(
            update={
                "attention": "eager" if cfg.attention == "eager" else "sdpa",
                "dropout": cfg.dropout,
            }
        )
        model = build_model(workload)
    finally:
        torch.set_default_dtype(previous)
    blocks = model.layers if hasattr(model, "layers") else model.h
    if cfg.checkpointing == "full":
        from torch.utils.checkpoint import checkpoint

        for block in blocks:
            block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False)
    if mesh is not None:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        kwargs = {"mesh": mesh, "reshard_after_forward": cfg.reshard_after_forward}
        if cfg.precision == "mixed":
            kwargs["mp_policy"] = MixedPrecisionPolicy(
                param_dtype=torch.bfloat16, reduce_dtype=torch.float32
            )
        for block in blocks:
            fully_shard(block, **kwargs)
        fully_shard(model, **kwargs)
    return model


def _real_loop(cfg: TraceConfig, steps: int = 3) -> list[dict[str, int]]:
    """Peak snapshot (merged over devices) of each of ``steps`` real training steps."""
    with _real_process_group(cfg.world_size) if cfg.fsdp else contextlib.nullcontext() as mesh:
        model = _real_model(cfg, mesh)
        params = [p for p in model.parameters() if p.requires_grad]
        foreach = cfg.foreach if cfg.foreach is not None else mesh is None
        if cfg.precision == "mixed" and mesh is None:
            optimizer = MasterWeightOptimizer(
                params,
                lambda masters: make_optimizer(cfg.optimizer, masters, foreach),
                fp32_grads=cfg.fp32_grads,
            )
        else:
            optimizer = make_optimizer(cfg.optimizer, params, foreach)
        inputs = model.example_inputs(cfg.batch, cfg.seq)
        peaks = []
        for step in range(steps):
            if step:
                optimizer.zero_grad(set_to_none=not cfg.grads_kept)
            tracker = make_tracker(model, optimizer, inputs, mesh)
            with tracker:
                autocast = (
                    torch.autocast("cpu", dtype={"bf16": torch.bfloat16}[cfg.dtype])
                    if cfg.autocast
                    else contextlib.nullcontext()
                )
                with autocast:
                    loss = model(*inputs)
                loss.backward()
                del loss
                optimizer.step()
            peaks.append(merge_snapshots(tracker.get_tracker_snapshot("peak")))
        return peaks


CASES = {
    "plain-fp32-foreach": TraceConfig(model="tiny-llama", batch=2, seq=16),
    "gpt2-amp-bf16": TraceConfig(model="tiny-gpt2", batch=2, seq=16, precision="amp-bf16"),
    "mixed-master-weights": TraceConfig(model="tiny-llama", batch=2, seq=16, precision="mixed"),
    "mixed-fp32-grads": TraceConfig(
        model="tiny-gpt2", batch=2, seq=16, precision="mixed", fp32_grads=True, foreach=False
    ),
    "pure-bf16": TraceConfig(model="tiny-llama", batch=2, seq=16, precision="bf16"),
    "gpt2-eager-dropout": TraceConfig(
        model="tiny-gpt2", batch=2, seq=32, attention="eager", dropout=0.1
    ),
    "llama-eager-gqa-amp": TraceConfig(
        model="tiny-llama", batch=2, seq=32, attention="eager", precision="amp-bf16"
    ),
    "checkpointed": TraceConfig(model="tiny-llama", batch=4, seq=32, checkpointing=True),
    "grads-kept-sgd": TraceConfig(
        model="tiny-gpt2", batch=2, seq=16, optimizer="sgd", grads_kept=True
    ),
    "fsdp-2-ranks": TraceConfig(model="tiny-llama", batch=2, seq=16, fsdp=True, world_size=2),
    "fsdp-mixed-checkpointed": TraceConfig(
        model="tiny-llama",
        batch=2,
        seq=16,
        fsdp=True,
        world_size=4,
        precision="mixed",
        checkpointing=True,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_trace_is_step_three_of_a_real_loop(name: str) -> None:
    # The real loop runs on this machine's CPU: the trace targets its kernels.
    cfg = CASES[name].model_copy(update={"target": "cpu"})
    traced = trace_step(cfg)
    real = _real_loop(traced.config)
    step1, step2, step3 = real
    assert int(step2["Total"]) == int(step3["Total"]), "step 2 is already the steady state"
    assert traced.peak_bytes == int(step3["Total"])
    assert traced.by_category == to_categories(step3)
    assert traced.first_step_peak_bytes == int(step1["Total"])


def test_steady_state_peak_exceeds_first_step_when_forward_peaks() -> None:
    # Adam's states are created inside the first optimizer.step(): a trace of step 1 alone
    # misses them whenever the peak is in forward or backward (big activations).
    r = trace_step(TraceConfig(model="tiny-gpt2", batch=16, seq=128, optimizer="adamw"))
    assert r.peak_phase in ("forward", "backward")
    assert r.by_category["optimizer"] == r.after_step["optimizer"] > 0
    assert r.peak_bytes - r.first_step_peak_bytes == r.after_step["optimizer"]
