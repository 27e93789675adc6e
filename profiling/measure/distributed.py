"""Many ranks: ``profile --nproc N`` (or the same command under ``torchrun``).

One process per rank through ``torch.distributed`` (gloo on CPU, NCCL on GPU), the model in
DDP or FSDP2 (``fully_shard`` per block and at the root). Each rank measures itself with its
own :class:`~profiling.measure.profiler.MemoryProfiler`; rank 0 gathers the summaries
(``gather_object``) into one report — per-rank peaks and times side by side, the slowest rank
named. ``--nproc N`` is torchrun's own launcher (``torch.distributed.run --standalone``);
several machines use torchrun's multi-node flags with the same command, nothing home-made.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import BaseModel, Field

from profiling.measure.nodes import LOOPBACK_ENV
from profiling.records import MeasurementRecord, Quantity, new_record_id
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    import torch
    from torch import nn
    from torch.distributed.device_mesh import DeviceMesh

    from profiling.config import TrainingConfig
    from profiling.measure.profiler import MemoryProfiler
    from profiling.measure.run import RunOptions


# The pid of the journal-agent that started torchrun, for its ranks.
LAUNCHER_ENV = "JOURNAL_AGENT_RANKS_OF"


def launched_by_torchrun() -> bool:
    """True inside a rank started by torchrun (it sets these for every rank)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"))


def run_under_torchrun(
    nproc: int, argv: list[str], nodes: tuple[int, int | None, str | None] = (1, None, None)
) -> int:
    """Start ``nproc`` ranks of this command with torchrun on this machine — alone, as one node
    of ``nnodes`` meeting at an endpoint, or as ``nnodes`` node groups here on loopback
    (``nodes``: nnodes, node rank, endpoint; ``profiling.measure.nodes``); their exit code.

    The ranks print (global rank 0 the report); torchrun's own chatter is dropped unless a rank
    failed without saying why in one ``error:`` line. torchrun and the ranks die with this
    process however it ends, and their temp folder with them (:func:`_ranks_of_ours`).
    """
    from profiling.measure.nodes import node_launches, wait_all

    # The ranks learn the world size from torchrun; and torchrun's own parser would take
    # "--nproc" for an abbreviation of its "--nproc-per-node".
    for name in ("--nproc", "--nnodes", "--node-rank", "--rdzv-endpoint"):
        argv = _without_option(argv, name)
    nnodes, node_rank, endpoint = nodes
    if nnodes == 1:
        launches, extra = [["--standalone", f"--nproc-per-node={nproc}"]], {}
    else:
        launches, extra = node_launches(nproc, nnodes, node_rank, endpoint)
    env = {**os.environ, **extra}
    # torchrun sets 1 thread per rank with a warning when unset; say it ourselves, fairly.
    here = nproc * len(launches)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // here)))
    # Every rank runs isolated (-I): nothing of the working directory on sys.path, so a
    # typer.py or profiling.py there is never imported in place of the library (a user's
    # factory is made importable from it by profiling.models.factory, for that import only).
    run = [sys.executable, "-I", "-m", "torch.distributed.run"]
    ranks = ["--no-python", sys.executable, "-I", "-m", "journal_agent", *argv]
    with _ranks_of_ours(env) as start:
        procs = [start([*run, *launch, *ranks]) for launch in launches]
        errs = wait_all(procs)
    killed = [p.returncode for p in procs if p.returncode < 0]
    if killed:  # torchrun itself was killed: its ranks went with it
        import signal

        name = signal.Signals(-killed[0]).name
        print(f"error: torchrun was killed by {name}; its ranks were stopped with it and "
              "nothing was measured", file=sys.stderr)  # fmt: skip
        return 1
    code = next((p.returncode for p in procs if p.returncode != 0), 0)
    if code != 0:
        said: list[str] = []
        for line in "\n".join(errs).splitlines():
            if line.startswith("error:") and line not in said:
                said.append(line)
        failed = next(e for p, e in zip(procs, errs, strict=True) if p.returncode != 0)
        print("\n".join(said) or failed[-3000:], file=sys.stderr)
    return code


@contextlib.contextmanager
def _ranks_of_ours(env: dict[str, str]) -> Iterator[Callable[[list[str]], subprocess.Popen[str]]]:
    """Start torchrun so that it and its ranks end with this process, whatever ends it.

    - torchrun runs in a session of its own (Ctrl-C on the terminal reaches this process
      only), with a temp folder of its own (``TMPDIR``: its ``torchelastic_*`` logs, the ranks'
      caches);
    - leaving the block by an exception (Ctrl-C, a time bound) stops torchrun's group
      (SIGTERM: it stops its ranks; SIGKILL after a grace) and every process carrying the
      launch's mark (each rank is in a session of its own), and removes the folder;
    - if this process is killed, the watchdog (``profiling.watchdog``) does the same from
      outside; each rank also asks the kernel to kill it when torchrun dies
      (:func:`die_with_torchrun`).
    """
    from profiling import watchdog

    folder = tempfile.mkdtemp(prefix="journal-agent-ranks-")
    mark = watchdog.mark()
    watchdog.folder(folder)
    env.update({watchdog.OWNER_ENV: mark, "TMPDIR": folder, LAUNCHER_ENV: str(os.getpid())})
    started: list[subprocess.Popen[str]] = []

    def start(cmd: list[str]) -> subprocess.Popen[str]:
        proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)  # fmt: skip
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            if proc.poll() is None:
                _stop(proc)
        _stop_marked(mark)
        shutil.rmtree(folder, ignore_errors=True)
        watchdog.release(mark=mark, folder=folder)


def _stop(proc: subprocess.Popen[str]) -> None:
    """torchrun's group: SIGTERM (it stops its ranks), SIGKILL after a grace."""
    import signal

    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _stop_marked(mark: str) -> None:
    """SIGKILL every process left with the launch's mark (a rank torchrun did not stop)."""
    import signal

    from profiling.watchdog import OWNER_ENV

    wanted = f"\0{OWNER_ENV}={mark}\0".encode()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                marked = wanted in b"\0" + f.read()
        except OSError:
            continue
        if marked:
            with contextlib.suppress(OSError):
                os.kill(int(entry), signal.SIGKILL)


def die_with_torchrun() -> None:
    """In a rank we launched: ask the kernel to SIGKILL this process when torchrun dies (Linux's
    ``PR_SET_PDEATHSIG``), and end at once if it already has (the rank then has another
    parent); a rank left running would hold the port and the GPU. No-op elsewhere."""
    import ctypes
    import signal

    if not sys.platform.startswith("linux") or not os.environ.get(LAUNCHER_ENV):
        return  # a torchrun of the user's own: theirs to stop
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read()
    except OSError:
        parent = b""
    if b"torch.distributed.run" not in parent and b"torchrun" not in parent:
        os._exit(1)  # torchrun is gone already: the kernel will not tell us


def _without_option(argv: list[str], name: str) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(name + "="):
            out.append(arg)
    return out


class RankResult(BaseModel):
    rank: int
    node: int = 0  # torchrun's GROUP_RANK: the node (agent) the rank runs on
    local_rank: int = 0
    host: str
    device: str
    peak_bytes: int
    peak_phase: str | None
    phases: dict[str, dict[str, float | None]]  # name -> peak_bytes, median_time_s
    time_per_step_s: float | None
    time_per_step_iqr_s: float | None
    tokens_per_s: float | None
    rss_end: int | None
    oom: str | None = None


class RanksSummary(BaseModel):
    world_size: int
    backend: str
    strategy: str
    config: dict[str, Any]
    steps: int
    warmup: int
    ranks: list[RankResult]
    slowest_rank: int | None
    notes: list[str] = Field(default_factory=list)
    nnodes: int = 1


def _wrap(
    config: TrainingConfig, device: torch.device, mesh: DeviceMesh | None
) -> Callable[[nn.Module, MemoryProfiler], nn.Module]:
    def wrap(model: nn.Module, _prof: MemoryProfiler) -> nn.Module:
        if config.fsdp:
            import torch

            assert mesh is not None, "profile_rank makes the mesh of an FSDP run"

            from profiling.trace.build import _shard

            mp = torch.bfloat16 if config.precision == "mixed" else None
            _shard(model, mesh, config.reshard_after_forward, mp)
            return model
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    return wrap


def leave_rank(code: int) -> NoReturn:
    """End a torchrun rank now, its output flushed, without the interpreter's finalisation.

    Even after ``destroy_process_group``, gloo's worker threads can still hold finished work
    whose tensors are released while the interpreter is being torn down; that aborts the
    process (SIGABRT, "terminate called without an active exception", pytorch#179291), and
    torchrun then reports the whole run as failed although every rank finished. Our results
    are saved and printed by now, so nothing is lost by skipping finalisation.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def profile_rank(config: TrainingConfig, options: RunOptions) -> RanksSummary | None:
    """Measure this rank; gather every rank's result on rank 0 (None on the other ranks)."""
    import torch
    import torch.distributed as dist

    from profiling.measure.devices import cuda_available, set_cuda_device
    from profiling.measure.run import measure_step

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    on_gpu = cuda_available() and options.device != "cpu"
    backend = "nccl" if on_gpu else "gloo"
    if on_gpu:
        set_cuda_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend)
    try:
        mesh = None
        if config.fsdp:
            from torch.distributed.device_mesh import init_device_mesh

            mesh = init_device_mesh(device.type, (world,))
        opts = options.model_copy(update={"device": str(device), "compare_trace": False})
        torch.manual_seed(rank)  # each rank its own batch, as a data-parallel loader gives
        run = measure_step(config, opts, wrap=_wrap(config, device, mesh))
        s = run.summary
        mine = RankResult(
            rank=rank,
            node=int(os.environ.get("GROUP_RANK", "0")),
            local_rank=local,
            host=s.device.get("host", "?"),
            device=str(device),
            peak_bytes=s.peak_bytes,
            peak_phase=s.peak_phase,
            phases={
                p.name: {
                    "peak_bytes": p.peak_bytes,
                    "median_time_s": p.time.median if p.time else None,
                }
                for p in s.phases
            },
            time_per_step_s=s.step_time.median if s.step_time else None,
            time_per_step_iqr_s=s.step_time.iqr if s.step_time else None,
            tokens_per_s=s.tokens_per_s,
            rss_end=s.rss_end,
            oom=s.oom.message if s.oom else None,
        )
        # rank 0 receives every rank's RankResult (as a dict) here
        gathered: list[object] | None = [None for _ in range(world)] if rank == 0 else None
        dist.gather_object(mine.model_dump(), gathered, dst=0)
        # A rank that tears gloo down while rank 0 is still receiving can abort ("terminate
        # called without an active exception", seen once in CI): all leave together.
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    ranks = [RankResult.model_validate(g) for g in gathered or []]
    timed = [r for r in ranks if r.time_per_step_s is not None]
    slowest = max(timed, key=lambda r: r.time_per_step_s or 0).rank if timed else None
    notes = []
    nnodes = len({r.node for r in ranks})
    if nnodes > 1 and os.environ.get(LOOPBACK_ENV):
        notes.append(
            f"{nnodes} node groups on this machine, each a torchrun agent meeting the others "
            "through the c10d rendezvous on 127.0.0.1 (a test of the multi-node launch: the "
            "ranks share one machine's cores and memory)"
        )
    if not on_gpu and config.fsdp:
        notes.append(
            "FSDP2 on CPU: the live-tensor count over-counts — FSDP2 frees gathered parameters "
            "by resizing their storage to 0 outside any operator, which it does not see; for "
            "FSDP2 peaks use a GPU (allocator statistics are exact) or trace with --fsdp --gpus N"
        )
    return RanksSummary(
        world_size=world,
        backend=backend,
        strategy="FSDP2" if config.fsdp else "DDP",
        config=config.model_dump(),
        steps=options.steps,
        warmup=options.warmup,
        ranks=ranks,
        slowest_rank=slowest,
        notes=notes,
        nnodes=nnodes,
    )


def render_ranks(g: RanksSummary) -> str:
    from profiling.measure.report import fmt_time

    names = list(g.ranks[0].phases) if g.ranks else []
    on = f" over {g.nnodes} nodes" if g.nnodes > 1 else ""
    node_col = g.nnodes > 1
    lines = [
        f"Measured on {g.world_size} ranks{on} ({g.strategy}, {g.backend}): {g.steps} timed "
        f"steps after {g.warmup} warm-up, each rank measuring itself",
        "",
        ("node  local  " if node_col else "")
        + f"{'rank':<6}{'device':<9}{'peak':>11}"
        + "".join(f"{n + ' time':>16}" for n in names)
        + f"{'step (median)':>15}{'IQR':>11}",
    ]
    for r in g.ranks:
        phase_times = "".join(f"{fmt_time(r.phases[n]['median_time_s']):>16}" for n in names)
        lines.append(
            (f"{r.node:<6}{r.local_rank:<7}" if node_col else "")
            + f"{r.rank:<6}{r.device:<9}{fmt_bytes(r.peak_bytes):>11}{phase_times}"
            f"{fmt_time(r.time_per_step_s):>15}{fmt_time(r.time_per_step_iqr_s):>11}"
            + (f"  OOM: {r.oom}" if r.oom else "")
        )
    timed = [r for r in g.ranks if r.time_per_step_s]
    if g.slowest_rank is not None and timed:
        slow = next(r for r in g.ranks if r.rank == g.slowest_rank)
        fast = min(timed, key=lambda r: r.time_per_step_s or 0)
        slow_s, fast_s = slow.time_per_step_s, fast.time_per_step_s
        assert slow_s is not None and fast_s, "the slowest rank is timed; timed ones have a time"
        gap = 100 * (slow_s / fast_s - 1)
        lines.append("")
        lines.append(
            f"Slowest: rank {slow.rank} ({fmt_time(slow.time_per_step_s)} per step, "
            f"+{gap:.1f}% over the fastest, rank {fast.rank}); every rank waits for it at "
            "each gradient all-reduce"
        )
    peak = max(g.ranks, key=lambda r: r.peak_bytes)
    where = f" (node {peak.node}, local rank {peak.local_rank})" if node_col else ""
    lines.append(f"Highest peak: rank {peak.rank}{where}, {fmt_bytes(peak.peak_bytes)}")
    lines += _per_node(g) if node_col else []
    for note in g.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def _per_node(g: RanksSummary) -> list[str]:
    """Each node's ranks, highest peak and slowest step: a node that lags shows as one."""
    from profiling.measure.report import fmt_time

    out = []
    for node in sorted({r.node for r in g.ranks}):
        mine = [r for r in g.ranks if r.node == node]
        hosts = ", ".join(sorted({r.host for r in mine}))
        slow = max((r.time_per_step_s or 0.0 for r in mine), default=0.0)
        out.append(
            f"node {node} ({hosts}): ranks {', '.join(str(r.rank) for r in mine)}; highest peak "
            f"{fmt_bytes(max(r.peak_bytes for r in mine))}, slowest step {fmt_time(slow or None)}"
        )
    return out


def ranks_record(g: RanksSummary) -> MeasurementRecord:
    from profiling.measure.devices import software_versions

    results = []
    for r in g.ranks:
        results.append(Quantity(name=f"rank{r.rank}_peak", value=r.peak_bytes, unit="B"))
        if r.time_per_step_s is not None:
            results.append(
                Quantity(name=f"rank{r.rank}_time_per_step", value=r.time_per_step_s, unit="s")
            )
        for name, p in r.phases.items():
            peak, median = p.get("peak_bytes"), p.get("median_time_s")
            if peak is not None:
                results.append(Quantity(name=f"rank{r.rank}_peak_{name}", value=peak, unit="B"))
            if median is not None:
                results.append(
                    Quantity(name=f"rank{r.rank}_median_time_{name}", value=median, unit="s")
                )
    if g.ranks:
        results.append(Quantity(name="peak", value=max(r.peak_bytes for r in g.ranks), unit="B"))
    for node in sorted({r.node for r in g.ranks}) if g.nnodes > 1 else ():
        top = max(r.peak_bytes for r in g.ranks if r.node == node)
        results.append(Quantity(name=f"node{node}_peak", value=top, unit="B"))
    if g.slowest_rank is not None:
        results.append(Quantity(name="slowest_rank", value=g.slowest_rank, unit=""))
    return MeasurementRecord(
        id=new_record_id("measured"),
        kind="measured",
        title=f"Measured: {g.config.get('model')} on {g.world_size} ranks ({g.strategy})",
        device={
            "ranks": [
                {
                    "rank": r.rank,
                    "node": r.node,
                    "local_rank": r.local_rank,
                    "host": r.host,
                    "device": r.device,
                }
                for r in g.ranks
            ],
            "nnodes": g.nnodes,
        },
        software=software_versions(),
        config={**g.config, "world_size": g.world_size, "backend": g.backend, "nnodes": g.nnodes},
        results=results,
        notes="\n".join(g.notes),
        extra={"table": render_ranks(g), "ranks": g.model_dump(mode="json")},
    )
