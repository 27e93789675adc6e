"""A plan's trace stopped by its time bound anywhere leaves this process as it was (torch's
modes, the default dtype, grad mode, no process group, FSDP2 and DeviceMesh unpatched), and
past ``--timeout`` the CLI says so in one sentence."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def _state() -> tuple[object, ...]:
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp._fully_shard import _fsdp_param

    return (
        torch.is_grad_enabled(), torch.get_default_dtype(), torch._C._len_torch_function_stack(),
        torch._C._len_torch_dispatch_stack(), dist.is_initialized(), DeviceMesh.__init__,
        getattr(_fsdp_param, "_chunk_with_empty", None),  # patched only inside a trace
    )  # fmt: skip


def test_a_plan_trace_stopped_anywhere_leaves_the_process_as_it_was() -> None:
    from torch.overrides import TorchFunctionMode

    from profiling.config import parse_config
    from profiling.plans.trace import trace_plan
    from profiling.time_bound import TimeBound, TimedOut

    cfg = parse_config(model="tiny-llama", seq=32, batch=2, pp=2, dp_shard=2, tp=2)
    calls = {"n": 0, "at": -1, "bound": None}

    class Stop(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls["n"] += 1
            bound = calls["bound"]
            if bound is not None and calls["n"] == calls["at"]:
                bound.deadline = 0.0  # the next checkpoint stops the trace
            return func(*args, **(kwargs or {}))

    with Stop():
        trace_plan(cfg)
    total, before = calls["n"], _state()
    assert total > 1000
    stopped = 0
    for at in range(5, total, total // 8):
        calls.update(n=0, at=at)
        try:
            with Stop(), TimeBound(600, "the trace", "a hint") as bound:
                calls["bound"] = bound
                trace_plan(cfg)
        except TimedOut:
            stopped += 1
        calls["bound"] = None
        assert _state() == before, f"stopped at torch call {at} of {total}"
    assert stopped >= 6
    # and a trace after them all still runs
    assert trace_plan(cfg).highest.peak_bytes > 0


def test_a_plan_past_its_timeout_is_one_sentence(tmp_path, run_cli) -> None:
    res = run_cli("trace", "--model", "llama-7b", "--pp", "4", "--batch", "4", "--dp-shard",
                  "8", "--timeout", "0.5", "--root", str(tmp_path), cwd=tmp_path,
                  check=False)  # fmt: skip
    assert res.returncode == 1 and "Traceback" not in res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert lines == [
        "error: the trace of the plan did not finish within 0.5 s; it was stopped — give it a "
        "longer --timeout"
    ]
    assert not (tmp_path / ".journal" / "measurements").exists()
