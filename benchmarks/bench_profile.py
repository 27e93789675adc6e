"""MemoryProfiler benchmarks; prints JSON.

1. Overhead: ``record_step`` plus three ``phase`` blocks, per step, against a 10 ms step
   (floor: < 1 %). Measured directly (steps whose phases are empty, so all the time is ours),
   with and without the CPU live-tensor accounting; and end to end on a 10 ms busy step with
   and without the profiler (noisy on a shared machine: reported, not judged). On a machine
   with a GPU also ``overhead_cuda``: real steps of gpt2-small and llama-1b with and without
   the profiler, blocks interleaved, the baseline in the same run (floor: < 1 %).
2. Our step timer against ``torch.utils.benchmark.Timer`` on the same training steps of the
   reference workloads (floor: medians within 5 %). Single steps alternate (ours, Timer, Timer,
   ours, …) so a shared machine's load swings affect both alike. The live-tensor accounting's
   cost per step is reported beside it (tracked steps against Timer steps interleaved the same
   way).
3. Measured ÷ traced on CPU for the reference workloads: each phase's peak, the memory at its
   end, the step's peak — the same tensors counted for real and under fake tensors.

    python benchmarks/bench_profile.py [--workloads tiny-gpt2 tiny-llama gpt2-small]
                                       [--timer-workloads tiny-gpt2 tiny-llama] [--skip-timer]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

FLOOR_OVERHEAD = 0.01
FLOOR_TIMER = 0.05
STEP_S = 0.010


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def bench_overhead(steps: int = 3000) -> dict:
    from profiling.measure.profiler import MemoryProfiler

    out: dict = {"step_s": STEP_S, "floor": FLOOR_OVERHEAD}
    for track in (False, True):
        prof = MemoryProfiler(device="cpu", track_tensors=track, warmup=0)
        prof.start()
        t0 = time.perf_counter()
        for step in range(steps):
            with prof.phase("forward"):
                pass
            with prof.phase("backward"):
                pass
            with prof.phase("optimizer"):
                pass
            prof.record_step(step)
        per_step = (time.perf_counter() - t0) / steps
        prof.stop()
        key = "with_tensor_accounting" if track else "without_tensor_accounting"
        out[key] = {
            "per_step_us": round(per_step * 1e6, 2),
            "self_reported_us": round(prof.summary().overhead_s_per_step * 1e6, 2),
            "fraction_of_10ms_step": round(per_step / STEP_S, 5),
            "ok": per_step / STEP_S < FLOOR_OVERHEAD,
        }
    # End to end: 10 ms busy steps, interleaved blocks with and without the profiler.
    plain, profiled = [], []
    prof = MemoryProfiler(device="cpu", warmup=0)
    prof.start()
    for block in range(10):
        t0 = time.perf_counter()
        for _ in range(10):
            _busy(STEP_S / 3)
            _busy(STEP_S / 3)
            _busy(STEP_S / 3)
        plain.append((time.perf_counter() - t0) / 10)
        t0 = time.perf_counter()
        for i in range(10):
            with prof.phase("forward"):
                _busy(STEP_S / 3)
            with prof.phase("backward"):
                _busy(STEP_S / 3)
            with prof.phase("optimizer"):
                _busy(STEP_S / 3)
            prof.record_step(block * 10 + i)
        profiled.append((time.perf_counter() - t0) / 10)
    prof.stop()
    out["end_to_end"] = {
        "plain_median_ms": round(statistics.median(plain) * 1e3, 4),
        "profiled_median_ms": round(statistics.median(profiled) * 1e3, 4),
        "fraction": round(statistics.median(profiled) / statistics.median(plain) - 1, 5),
        "note": "busy-wait steps on a shared machine: scheduling noise is of the same order",
    }
    return out


def _workload(name: str, seq: int, batch: int):
    import torch

    from profiling.models.workloads import build_model

    torch.manual_seed(0)
    model = build_model(name)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = model.example_inputs(batch, seq)

    def step() -> None:
        loss = model(*x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, opt, x, step


def _profiled_step(prof, model, opt, x, step: int) -> None:
    with prof.phase("forward"):
        loss = model(*x)
    with prof.phase("backward"):
        loss.backward()
        del loss
    with prof.phase("optimizer"):
        opt.step()
        opt.zero_grad(set_to_none=True)
    prof.record_step(step)


def _phase_sums(prof) -> list[float]:
    """Per step, the sum of its phases' times: the phase timer alone. (A step's own time runs
    from the previous record_step, so here it would include the Timer's interleaved step.)"""
    sums: dict[int, float] = {}
    for snap in prof.snapshots:
        if snap.at == "phase":
            sums[snap.step] = sums.get(snap.step, 0.0) + snap.duration_s
    return list(sums.values())


def bench_timer(workloads: list[tuple[str, int, int]], pairs: int = 21) -> dict:
    """Step by step, alternating which goes first: one step timed by our phase timer (the sum
    of its three phases, which cover the whole step), one by ``Timer.timeit(1)``; medians over
    the pairs. Interleaving single steps keeps a shared
    machine's load swings out of the comparison (blocks of steps did not)."""
    import os

    from torch.utils.benchmark import Timer

    from profiling.measure.profiler import MemoryProfiler

    out: dict = {"floor": FLOOR_TIMER, "load_average_1min": os.getloadavg()[0], "workloads": {}}
    for name, seq, batch in workloads:
        model, opt, x, step = _workload(name, seq, batch)
        for _ in range(3):
            step()  # warm up: optimizer state, allocator, kernels
        timer = Timer(stmt="step()", globals={"step": step}, num_threads=_threads())
        results = {}
        for track in (False, True):
            prof = MemoryProfiler(device="cpu", warmup=0, track_tensors=track)
            prof.start()
            theirs = []
            for i in range(pairs):
                if i % 2:
                    theirs.append(timer.timeit(1).median)
                    _profiled_step(prof, model, opt, x, i)
                else:
                    _profiled_step(prof, model, opt, x, i)
                    theirs.append(timer.timeit(1).median)
            prof.stop()
            results[track] = (statistics.median(_phase_sums(prof)), statistics.median(theirs))
        (o, t), (k, t2) = results[False], results[True]
        out["workloads"][name] = {
            "seq": seq,
            "batch": batch,
            "pairs": pairs,
            "ours_median_ms": round(o * 1e3, 3),
            "torch_timer_median_ms": round(t * 1e3, 3),
            "ours_over_timer": round(o / t, 4),
            "ok": abs(o / t - 1) < FLOOR_TIMER,
            "with_tensor_accounting_ms": round(k * 1e3, 3),
            "timer_alongside_ms": round(t2 * 1e3, 3),
            "tensor_accounting_cost": round(k / t2 - 1, 4),
        }
    return out


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def bench_measured_over_traced(workloads: list[tuple[str, int, int]]) -> dict:
    from profiling.measure.run import RunOptions, measure_step
    from profiling.trace.step import TraceConfig

    out = {}
    for name, seq, batch in workloads:
        # fp32: the CPU's fastest path (the self-check holds for every precision, see tests).
        cfg = TraceConfig(model=name, seq=seq, batch=batch, precision="fp32")
        run = measure_step(cfg, RunOptions(steps=2, warmup=1, count_flops=False))
        out[name] = {
            "seq": seq,
            "batch": batch,
            "precision": "fp32",
            "rows": {
                r["what"]: {
                    "measured_bytes": r["measured_bytes"],
                    "traced_bytes": r["traced_bytes"],
                    "ratio": round(r["ratio"], 6),
                }
                for r in run.comparison
            },
            "max_abs_deviation": round(max(abs(r["ratio"] - 1) for r in run.comparison), 6),
        }
    return out


def cuda_step(config, device: str = "cuda"):
    """One training step of ``config`` on ``device`` as ``profile`` runs it, as a function
    ``step(prof=None, i=0)`` (phases and ``record_step`` when ``prof`` is given)."""
    import contextlib

    import torch

    from profiling.measure.run import _build, _optimizer
    from profiling.trace.build import _DTYPES, _loss_of

    previous = torch.get_default_dtype()
    torch.set_default_dtype(_DTYPES[config.param_dtype])
    try:
        model, inputs, _ = _build(config, torch.device(device), None)
    finally:
        torch.set_default_dtype(previous)
    opt = _optimizer(config, [p for p in model.parameters() if p.requires_grad], [])
    dtype = _DTYPES[config.compute_dtype]
    amp = (
        (lambda: torch.autocast("cuda", dtype=dtype)) if config.autocast else contextlib.nullcontext
    )

    def step(prof=None, i: int = 0) -> None:
        phase = prof.phase if prof is not None else (lambda _name: contextlib.nullcontext())
        with phase("forward"), amp():
            loss = _loss_of(model(*inputs))
        with phase("backward"):
            loss.backward()
            del loss
        with phase("optimizer"):
            opt.step()
        opt.zero_grad(set_to_none=True)
        if prof is not None:
            prof.record_step(i)

    return step


def cuda_overhead(config, steps: int = 10, blocks: int = 3) -> dict:
    """Steps with and without the profiler on the GPU, blocks interleaved, each block timed
    with a synchronize at both ends (the baseline is measured in the same run)."""
    import torch

    from profiling.measure.profiler import MemoryProfiler

    step = cuda_step(config)
    for _ in range(3):
        step()  # warm-up: optimizer state, allocator, kernel selection
    plain, profiled, own = [], [], []
    for _ in range(blocks):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        plain.append((time.perf_counter() - t0) / steps)
        prof = MemoryProfiler(device="cuda", warmup=0)
        prof.start()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(steps):
            step(prof, i)
        torch.cuda.synchronize()
        profiled.append((time.perf_counter() - t0) / steps)
        prof.stop()
        own.append(prof.summary().overhead_s_per_step)
    base, with_prof = statistics.median(plain), statistics.median(profiled)
    return {
        "step_s": round(base, 6),
        "profiled_step_s": round(with_prof, 6),
        "overhead_fraction": round(with_prof / base - 1, 5),
        "self_reported_s_per_step": round(statistics.median(own), 7),
        "self_reported_fraction": round(statistics.median(own) / base, 5),
        "floor": FLOOR_OVERHEAD,
    }


CUDA_WORKLOADS = [("gpt2-small", "amp-bf16", 8, 1024), ("llama-1b", "bf16", 4, 2048)]


def bench_cuda_overhead() -> dict:
    """The profiler's cost on a GPU, where there is one."""
    import torch

    from profiling.config import TrainingConfig

    if not torch.cuda.is_available():
        return {"skipped": "no CUDA device here: run this on a GPU machine"}
    out: dict = {"device": torch.cuda.get_device_name(0)}
    for model, precision, batch, seq in CUDA_WORKLOADS:
        cfg = TrainingConfig(model=model, precision=precision, batch=batch, seq=seq)
        out[f"{model} {precision} b{batch} s{seq}"] = cuda_overhead(cfg)
    return out


SHAPES = {"tiny-gpt2": (128, 4), "tiny-llama": (128, 4), "gpt2-small": (128, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=list(SHAPES))
    parser.add_argument(
        "--timer-workloads", nargs="+", default=["tiny-gpt2", "tiny-llama"],
        help="workloads for the timer comparison (many steps each: keep them small)",
    )  # fmt: skip
    parser.add_argument("--skip-timer", action="store_true")
    args = parser.parse_args()
    work = [(w, *SHAPES.get(w, (128, 1))) for w in args.workloads]
    timer_work = [(w, *SHAPES.get(w, (128, 1))) for w in args.timer_workloads]
    result: dict = {"overhead": bench_overhead(), "overhead_cuda": bench_cuda_overhead()}
    if not args.skip_timer:
        result["timer_vs_torch_benchmark"] = bench_timer(timer_work)
    result["measured_over_traced_cpu"] = bench_measured_over_traced(work)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
