"""One stage of a plan traced: torch's own ``PipelineStage`` driven through each kind of action
once, under fake tensors, on one rank of a fake world of the plan's mesh.

The stage is torchtitan's Llama 3 (``profiling.plans.titan``) with the blocks this trace asks
for, parallelized as torchtitan parallelizes it (``profiling.plans.parallelize``). A first step
(one microbatch: forward, backward, reduction, optimizer step) creates the optimizer's states;
the traced step then runs two microbatches through each kind of action the schedule has —
forward, forward; backward, backward (or input and weight backwards apart, for the zero-bubble
schedule); the reduction; the optimizer step — and records, for each, what it leaves and its
highest moment (:class:`~profiling.plans.profile.StageProfile`). Without pipeline parallelism
the step is a plain one: forward and loss, ``backward()`` (FSDP reduces block by block), the
optimizer step.

Imports torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from profiling.config import TrainingConfig
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Layout, Stage
from profiling.plans.profile import CATEGORIES, Move, StageProfile, Vec

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from profiling.plans.titan import Transformer
    from profiling.trace.allocations import AllocationLog
    from profiling.trace.tracker import StepTracker

Progress = Callable[[str], None]
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _snap(tracker: StepTracker) -> Vec:
    from profiling.trace.tracker import merge_snapshots, to_categories

    raw = merge_snapshots(tracker.get_tracker_snapshot())
    out = to_categories(raw)
    out["total"] = int(raw.get("Total", 0))
    return out


def _peak(tracker: StepTracker) -> Vec:
    from profiling.trace.tracker import merge_snapshots, to_categories

    raw = merge_snapshots(tracker.get_tracker_snapshot("peak"))
    out = to_categories(raw)
    out["total"] = int(raw.get("Total", 0))
    return out


def _minus(a: Vec, b: Vec) -> Vec:
    return {k: a.get(k, 0) - b.get(k, 0) for k in (*CATEGORIES, "total")}


class _Recorder:
    """Each action's delta and peak, from the tracker's snapshots around it; and a backward's
    peak from its stage's lowest block on (``lower``, see :func:`_lowest_block_split`)."""

    def __init__(self, tracker: StepTracker) -> None:
        self.tracker = tracker
        self.moves: dict[str, Move] = {}
        self.lower: dict[str, Vec] = {}
        self._upper: Vec | None = None
        self._name: str | None = None

    @contextlib.contextmanager
    def action(self, name: str) -> Any:
        self.tracker.begin_phase(name)
        start = _snap(self.tracker)
        self._name, self._upper = name, None
        yield
        self._name = None
        end, peak = _snap(self.tracker), _peak(self.tracker)
        if self._upper is not None:  # split: the window from the lowest block's backward on
            self.lower[name] = _minus(peak, start)
            # a tie keeps the earlier moment, as the tracker's own peak does (it moves only on
            # a strictly higher total): the category split is the first moment at the peak's
            peak = peak if peak["total"] > self._upper["total"] else self._upper
        self.moves[name] = Move(delta=_minus(end, start), peak=_minus(peak, start))

    def split(self) -> None:
        """The stage's lowest block's backward starts: the peak so far kept, a new one begun."""
        from profiling.trace.tracker import reset_peak

        if self._name is None or self._upper is not None:
            return
        self._upper = _peak(self.tracker)
        reset_peak(self.tracker)


@contextlib.contextmanager
def _microbatch(tracker: StepTracker) -> Any:
    """A forward of one microbatch, as one more scope of the tracker's module hierarchy: torch's
    trackers take a second call of the root module in one step for the next step (and refuse
    it); a pipeline runs its stage once per microbatch."""
    parents = tracker._mod_tracker.parents
    parents.add(MICROBATCH)
    try:
        yield
    finally:
        tracker._mod_tracker.parents.discard(MICROBATCH)


MICROBATCH = "Pipeline microbatch"


def _forward_only(tracker: StepTracker) -> None:
    """The tracker's module tracker without its backward hooks: zero-bubble's input-only
    backward runs ``autograd.grad``, whose engine cannot follow the hooks torch's module tracker
    puts on every module's inputs and outputs (``_will_engine_execute_node`` refuses a leaf).
    A plan reports no per-module table, so nothing is lost; the categories (forward or
    backward) come from autograd's own state, not from these hooks."""
    from torch.distributed._tools.mod_tracker import ModTracker

    class ForwardOnly(type(tracker._mod_tracker)):  # type: ignore[misc]  # torch's own class
        def _fw_pre_hook(self, mod: Any, input: Any) -> None:
            name = self._get_mod_name(mod)
            self._get_append_fn(None, name, False)()
            if self._user_pre_fw_hook is not None:
                self._user_pre_fw_hook(mod, input)

        def _fw_post_hook(self, mod: Any, input: Any, output: Any) -> None:
            name = self._get_mod_name(mod)
            if self._user_post_fw_hook is not None:
                self._user_post_fw_hook(mod, input, output)
            self._get_pop_fn(None, name, False)()

    if isinstance(tracker._mod_tracker, ModTracker):
        tracker._mod_tracker.__class__ = ForwardOnly


def build_stage(
    cfg: TrainingConfig,
    workload: WorkloadConfig,
    layout: Layout,
    stage: Stage,
    layers: int,
    mesh: DeviceMesh | None,
) -> Transformer:
    """The stage's module, built in the parameter dtype and parallelized (in the fake mode)."""
    from profiling.plans.parallelize import apply_ac, apply_fsdp, apply_tp, dp_mesh_of
    from profiling.plans.titan import Transformer

    previous = torch.get_default_dtype()
    torch.set_default_dtype(_DTYPES[cfg.param_dtype])
    try:
        model = Transformer(workload, layers, stage.embedding, stage.head, cfg.seq_or_default())
    finally:
        torch.set_default_dtype(previous)
    names = tuple(mesh.mesh_dim_names or ()) if mesh is not None else ()
    if cfg.float8 is not None:  # torchtitan converts before it parallelizes
        from profiling.plans.float8 import convert

        convert(model, cfg.float8, cfg.float8_all_gather)
    if mesh is not None and "tp" in names:
        apply_tp(model, mesh["tp"], float8_tp=cfg.float8 == "tensorwise")
    if mesh is not None and "ulysses" in names:
        from profiling.plans.ulysses import apply_ulysses

        apply_ulysses(model, mesh.get_group("ulysses"), layout.ulysses)
    if mesh is not None and "cp" in names:
        from profiling.plans.ring import apply_ring

        apply_ring(model, mesh["cp"])
    if cfg.checkpointing != "none":
        only = stage.checkpointed(cfg.checkpoint_every, layers)
        apply_ac(model, cfg.checkpointing, cfg.target, only, compiled=cfg.compile)
    if cfg.compile:  # torchtitan's order: checkpoint, compile each block, then FSDP
        from profiling.trace.compiled import CompiledBlock

        marks = stage.checkpointed(cfg.checkpoint_every, layers)
        # a checkpointed block's partition is not a plain one's: one cache for each, shared
        # by every probe of one trace (partitions.shared): a block's partition is made once
        caches = shared_partitions()
        for j, block in enumerate(model.layers.values()):
            held = cfg.checkpointing != "none" and (marks is None or marks[j])
            block.forward = CompiledBlock(block, caches[held], cfg.target)  # type: ignore[method-assign]
    dp = dp_mesh_of(mesh, names) if mesh is not None and cfg.fsdp else None
    if dp is not None:
        apply_fsdp(model, dp, cfg, pipelined=layout.pp > 1)
    return model


_SHARED: list[dict[bool, dict[Any, Any]]] = []


@contextlib.contextmanager
def partitions_shared() -> Iterator[None]:
    """While a plan is traced: every probe's compiled blocks take their partition from one
    cache (keyed by the block's structure and its inputs' shapes, checkpointed or not), so
    Inductor's partitioner runs once per kind of block, not once per probe (it was most of a
    compiled plan's trace: four partitions of each block's joint graph for one row). The
    probes share one fake world and mesh, which the graphs' process groups belong to."""
    _SHARED.append({True: {}, False: {}})
    try:
        yield
    finally:
        _SHARED.pop()


def shared_partitions() -> dict[bool, dict[Any, Any]]:
    """The trace's shared caches, or fresh ones outside ``partitions_shared``."""
    return _SHARED[-1] if _SHARED else {True: {}, False: {}}


def _partitioned(cfg: TrainingConfig, model: Any, x: torch.Tensor) -> None:
    """--compile: one forward before the tracker starts makes each block's partition (the
    tracker's module hooks must not see the partitioner's own trace), then FSDP2 reshards."""
    if not cfg.compile:
        return
    from torch.distributed.fsdp import FSDPModule

    model(x)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def _inputs(
    cfg: TrainingConfig, workload: WorkloadConfig, layout: Layout, stage: Stage
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(this stage's input, its output, the labels) for one microbatch, local to this rank:
    tokens to the first stage; hidden states, sequence-sharded under tensor parallelism, to
    the others; logits out of the last (vocabulary-sharded)."""
    mb, seq = layout.microbatch_size, cfg.seq_or_default() // layout.seq_shards
    dtype = torch.bfloat16 if cfg.precision in ("mixed", "bf16") else torch.float32
    if cfg.autocast:
        dtype = torch.float32
    tp_seq = seq // layout.tp if layout.tp > 1 else seq
    tokens = torch.randint(0, workload.vocab, (mb, seq))
    hidden_in = torch.empty(mb, tp_seq, workload.hidden, dtype=dtype, requires_grad=True)
    x = tokens if stage.embedding else hidden_in
    if stage.head:
        y = torch.empty(mb, seq, workload.vocab // layout.tp, dtype=dtype)
    else:
        y = torch.empty(mb, tp_seq, workload.hidden, dtype=dtype, requires_grad=True)
    return x, y, tokens


def _optimizer(cfg: TrainingConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    from profiling.trace.optimizers import make_optimizer

    params = [p for p in model.parameters() if p.requires_grad]
    foreach = cfg.foreach if cfg.foreach is not None else not cfg.fsdp
    if cfg.precision == "mixed" and not cfg.fsdp:
        from profiling.trace.master_weights import MasterWeightOptimizer

        return MasterWeightOptimizer(
            params, lambda masters: make_optimizer(cfg.optimizer, masters, foreach)
        )
    return make_optimizer(cfg.optimizer, params, foreach)


def _loss_context(layout: Layout) -> contextlib.AbstractContextManager[object]:
    if layout.tp > 1:
        from torch.distributed.tensor.parallel import loss_parallel

        return loss_parallel()
    return contextlib.nullcontext()


def _register(tracker: StepTracker, tensors: list[torch.Tensor], kind: str) -> None:
    """Count ``tensors`` (made before the tracker started) under ``kind``: buffers or inputs."""
    ref = tracker._ref_class
    reftype = ref.BUFFER if kind == "buffers" else getattr(ref, "INP", None) or ref.OTH
    for t in tensors:
        tracker._update_and_maybe_create_winfos(t, reftype)


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _recv_buffers(stage: Any, chunk: int) -> list[torch.Tensor]:
    infos = [*stage.args_recv_info.get(chunk, ()), *stage.grad_recv_info.get(chunk, ())]
    return [i.buffer for i in infos if isinstance(getattr(i, "buffer", None), torch.Tensor)]


def probe_pipelined(
    cfg: TrainingConfig,
    workload: WorkloadConfig,
    layout: Layout,
    stage: Stage,
    layers: int,
    mesh: DeviceMesh,
    say: Progress,
) -> StageProfile:
    """A pipeline stage through torch's PipelineStage (see the module)."""
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    from profiling.plans.titan import cross_entropy
    from profiling.trace.fake_world import static_shapes
    from profiling.trace.tracker import make_tracker

    model = build_stage(cfg, workload, layout, stage, layers, mesh)
    x, y, labels = _inputs(cfg, workload, layout, stage)
    _partitioned(cfg, model, x)
    n_stages = len(layout.stages)
    pp_stage = PipelineStage(model, stage.index, n_stages, torch.device("cpu"),
                             input_args=(x,), output_args=(y,),
                             group=mesh.get_group("pp"))  # fmt: skip
    probed = PROBED + int(regathers(cfg))
    schedule = ScheduleGPipe(pp_stage, probed, loss_fn=cross_entropy, scale_grads=False)
    static_shapes(schedule)
    pp_stage.has_backward = True  # as the schedule's step() sets it
    # The batch's tokens (first stage) and labels (last stage): one tensor each, a microbatch
    # a slice of it, as a data loader hands them over.
    mb = layout.microbatch_size
    tokens = torch.cat([x] * probed) if stage.embedding else None
    labels_all = torch.cat([labels] * probed) if stage.head else None
    xs = (
        [tokens[i * mb : (i + 1) * mb] for i in range(probed)]
        if tokens is not None
        else [x] * probed
    )
    targets = (
        [labels_all[i * mb : (i + 1) * mb] for i in range(probed)] if labels_all is not None else []
    )
    schedule._initialize_stage((xs[0],), {}, labels)
    optimizer = _optimizer(cfg, model)
    tracker = make_tracker(model, optimizer, (), mesh if cfg.fsdp else None, True)
    _forward_only(tracker)
    # Held for every microbatch all step: the receive buffers (activations in, gradients
    # back) and the batch's own tokens and labels.
    _register(tracker, [b for i in range(probed) for b in _recv_buffers(pp_stage, i)], "buffers")
    batch = [t for t in (tokens, labels_all) if t is not None]
    _register(tracker, batch, "inputs")
    split = layout.schedule == "zbv"
    with tracker, _loss_context(layout):
        _run_pipelined(pp_stage, schedule, optimizer, targets, xs, tracker, split, first=True)
        tracker.reset_mod_stats()
        # The step starts by letting go of the last step's input gradients (each receive
        # buffer is a leaf: backward leaves its gradient on it); the base is after.
        pp_stage.clear_runtime_states()
        rec = _Recorder(tracker)
        hook = _lowest_block_split(model, rec)
        base = _snap(tracker)
        _run_pipelined(pp_stage, schedule, optimizer, targets, xs, rec, split, first=False)
        if hook is not None:
            hook.remove()
    per_mb = {"buffers": _nbytes(_recv_buffers(pp_stage, 0)), "inputs": _nbytes(batch) // probed}
    per_mb["total"] = sum(per_mb.values())
    base = {k: base.get(k, 0) - probed * per_mb.get(k, 0) for k in base}
    return StageProfile(stage=stage.index, layers=layers, base=base, moves=rec.moves,
                        per_microbatch=per_mb, output_bytes=_nbytes([y]),
                        input_bytes=0 if stage.embedding else _nbytes([x]),
                        lower=rec.lower if layers > 1 else {})  # fmt: skip


def _lowest_block_split(model: Transformer, rec: _Recorder) -> Any:
    """A backward's peak split where the stage's lowest block's backward starts (a hook on the
    gradient of that block's output): a moment there holds the gradients of every block above
    it, made, and frees what they saved — it grows with the stage's blocks where a block's
    gradients outweigh what it saves (fp32 gradients beside a short microbatch), so a probe of
    a few blocks may not show it leading where the stage's own count would
    (``profiling.plans.trace`` fits it apart)."""
    blocks = list(model.layers.values())

    def hooked(module: Any, args: Any, out: Any) -> None:
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.register_hook(lambda grad: rec.split())

    return blocks[0].register_forward_hook(hooked) if blocks else None


PROBED = 2  # microbatches the traced step runs through each kind of action


def regathers(cfg: TrainingConfig) -> bool:
    """Whether a pipeline stage's forward and backward depend on what the one before left:
    under --reshard-always FSDP2 reshards every group after each forward, and a backward keeps
    them gathered (``backward_maybe_with_nosync``: ``set_reshard_after_backward(False)``)
    until the next forward or the reduction (``profiling.plans.always_pp``). A third
    microbatch is probed: its forward after a backward (``Fg``) and its backward after that
    forward (``Bs``)."""
    return cfg.fsdp and cfg.reshard_always and cfg.pp > 1


def _run_pipelined(
    stage: Any,
    schedule: Any,
    optimizer: torch.optim.Optimizer,
    targets: list[torch.Tensor],
    xs: list[torch.Tensor],
    rec: Any,
    split: bool,
    first: bool,
) -> None:
    """Each microbatch through each kind of action (one microbatch in the first step)."""
    act = rec.action if isinstance(rec, _Recorder) else (lambda name: contextlib.nullcontext())
    tracker = rec.tracker if isinstance(rec, _Recorder) else rec
    n = 1 if first else PROBED
    schedule._internal_losses.clear()
    b = ("I0", "I") if split else ("B0", "B")
    order = [("F", i, "F0" if i == 0 else "F") for i in range(n)]
    order += [("B", i, b[min(i, 1)]) for i in range(n)]
    if not first and len(xs) > PROBED:  # a forward after a backward, a backward after it
        order += [("F", n, "Fg"), ("B", n, "Bs")]
    last = order[-1][1]
    for kind, i, name in order:
        if kind == "F":
            with act(name), _microbatch(tracker):
                out = stage.forward_one_chunk(i, (xs[i],), {}, save_forward_output=False)
                schedule._maybe_compute_loss(stage, out, targets, i)
                del out
            continue
        with act(name):
            loss = schedule._maybe_get_loss(stage, i)
            stage.backward_one_chunk(i, loss=loss, full_backward=not split,
                                     last_backward=i == last)  # fmt: skip
            stage.get_bwd_send_ops(i)  # the gradient sent back: let go once sent
            del loss
    if split:
        for i in range(n):
            with act("W0" if i == 0 else "W"):
                stage.backward_weight_one_chunk(i, last_backward=i == n - 1)
    schedule._internal_losses.clear()
    with act("R"):
        stage.perform_reduce_grad(1)
    with act("step"):
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def probe_whole(
    cfg: TrainingConfig,
    workload: WorkloadConfig,
    layout: Layout,
    stage: Stage,
    layers: int,
    mesh: DeviceMesh | None,
    say: Progress,
    log: AllocationLog | None = None,
) -> StageProfile:
    """Without pipeline parallelism: a plain step (forward and loss, backward, step), with
    gradient accumulation a forward and backward per microbatch before the step (two probed:
    ``F0``/``B0`` and ``F``/``B``, the later ones alike). With ``log``, every allocation and
    free of both steps, in order (on its stream), every microbatch run."""
    from profiling.plans.ddp_replicate import replicate_buckets
    from profiling.plans.titan import cross_entropy
    from profiling.trace.tracker import make_tracker

    model = build_stage(cfg, workload, layout, stage, layers, mesh)
    x, _, labels = _inputs(cfg, workload, layout, stage)
    # the labels are a tensor of their own beside the tokens, as torchtitan's step moves its
    # data loader's input_ids and labels to the GPU one by one (the same tensor was counted
    # once: half the closed form's inputs)
    labels = labels.clone()
    _partitioned(cfg, model, x)
    optimizer = _optimizer(cfg, model)
    tracker = make_tracker(model, optimizer, (x, labels), None, True)
    reducer = replicate_buckets(cfg, model, tracker)  # DDP alone: made at the wrap
    if log is not None:
        log.attach(tracker)

    # accumulated microbatches (torchtitan's gradient_accumulation_steps: FSDP2 reduce-scatters
    # each backward into the sharded gradients): each in a scope of its own, not the root
    # called again in one step (which torch's tracker refuses)
    m = layout.microbatches if log is not None else min(2, layout.microbatches)
    scope = _microbatch if m > 1 else (lambda tracker: contextlib.nullcontext())

    def step(rec: Any) -> None:
        act = rec.action if isinstance(rec, _Recorder) else (lambda name: contextlib.nullcontext())
        for i in range(m):
            with act("F0" if i == 0 else "F"), scope(tracker):
                loss = cross_entropy(model(x), labels)
            with act("B0" if i == 0 else "B"):
                loss.backward()
                del loss
        with act("R"):
            pass  # FSDP reduced block by block inside backward
        with act("step"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    with tracker, _loss_context(layout):
        step(None)
        tracker.reset_mod_stats()
        if reducer is not None:  # the second forward rebuilds DDP's buckets
            reducer.rebuild(listed=False)
        rec = _Recorder(tracker)
        base = _snap(tracker)
        step(rec)
    return StageProfile(stage=stage.index, layers=layers, base=base, moves=rec.moves)


__all__ = ["build_stage", "probe_pipelined", "probe_whole"]
