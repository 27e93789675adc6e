"""What one pipeline stage adds to its rank's memory, action by action, and a rank's memory over
its schedule composed from them.

A stage's :class:`StageProfile` holds what stays allocated all step (its sharded parameters,
optimizer state, buffers) and, for each kind of action it runs, what the action leaves behind
and its highest moment above where it started, by category: the first forward of a step
(``F0``: FSDP gathers the stage's parameters there and, under pipeline parallelism, keeps them
until the reduction) and a later one (``F``); the first full backward (``B0``: the unsharded
gradients appear) and a later one (``B``: they accumulate); the zero-bubble split into input
(``I0``, ``I``) and weight (``W0``, ``W``) backwards; the reduction (``R``: reduce-scatter and
reshard) and the optimizer step (``step``). A trace measures each once (two microbatches run
through torch's own ``PipelineStage``); the closed form computes them.

:func:`compose` walks a rank's actions in the schedule's order (``profiling.plans.schedule``):
the memory after each action is the sum of what its stages hold, and the rank's peak is the
highest of (memory at an action's start + that action's peak). Microbatches do not share
tensors (each has its own autograd graph), so the sum is exact, as the tests check against
torch's schedules run whole.

No torch here.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from profiling.plans.schedule import Action

Vec = dict[str, int]  # category -> bytes, "total" included
CATEGORIES = (
    "parameters", "gradients", "optimizer", "activations", "temporaries", "buffers", "inputs",
    "other", "buckets",  # DDP's Reducer buckets (--dp-replicate alone: profiling.trace.ddp)
)  # fmt: skip


def vec(**parts: int) -> Vec:
    out: Vec = dict.fromkeys(CATEGORIES, 0)
    out.update(parts)
    out["total"] = sum(out[c] for c in CATEGORIES)
    return out


def add(a: Vec, b: Vec, times: int = 1) -> Vec:
    return {k: a.get(k, 0) + times * b.get(k, 0) for k in {*a, *b}}


def sub(a: Vec, b: Vec) -> Vec:
    return add(a, b, -1)


class Move(BaseModel):
    """One action of a stage: what it leaves allocated and its highest moment (above its start)."""

    delta: Vec
    peak: Vec


class StageProfile(BaseModel):
    stage: int
    layers: int
    base: Vec  # allocated before the step's first action
    moves: dict[str, Move]  # F0 F B0 B I0 I W0 W R step
    # Held for each microbatch of the step all step long: the pipeline's receive buffers
    # (activations in, gradients back) and the batch's tokens and labels; ``base`` has none.
    per_microbatch: Vec = Field(default_factory=dict)
    output_bytes: int = 0  # one microbatch's output (hidden states, or the last stage's logits)
    input_bytes: int = 0  # one microbatch's input gradient, sent back (not on the first stage)
    notes: list[str] = Field(default_factory=list)
    # a probe's backward peaks from its lowest block's backward on (``probe``): fitted apart
    lower: dict[str, Vec] = Field(default_factory=dict, exclude=True)


class RankMemory(BaseModel):
    """One pipeline rank: every rank of it (data, context, tensor parallel) holds the same."""

    pp_rank: int
    stages: list[int]
    global_ranks: str  # e.g. "64-127"
    peak_bytes: int
    peak_at: str  # the action at whose moment the peak is: "F mb 3 of stage 0", "optimizer step"
    by_category: Vec  # at the peak
    after_step: Vec  # allocated when the step is over
    in_flight: int  # the most microbatches whose activations were alive at once
    per_microbatch_bytes: int  # receive buffers, tokens and labels: all its microbatches


def _key(a: Action, seen: set[tuple[int, str]]) -> str:
    first = (a.stage, a.kind) not in seen
    seen.add((a.stage, a.kind))
    if a.kind == "R":
        return "R"
    return a.kind + ("0" if first else "")


def _keys(actions: list[Action], by_stage: dict[int, StageProfile]) -> list[str]:
    """Each action's move; a stage whose moves tell a forward after a backward (``Fg``) from one
    after a forward (``F``), and a backward after a forward (``Bs``) from one after a backward
    (``B``), has them told by what it ran last (--reshard-always under a pipeline:
    ``profiling.plans.always_pp``)."""
    seen: set[tuple[int, str]] = set()
    gathered: set[int] = set()  # stages a backward left gathered
    out = []
    for a in actions:
        key = _key(a, seen)
        if "Fg" in by_stage[a.stage].moves:
            if key == "F" and a.stage in gathered:
                key = "Fg"
            elif key == "B" and a.stage not in gathered:
                key = "Bs"
            (gathered.add if a.kind == "B" else gathered.discard)(a.stage)
        out.append(key)
    return out


class LocalHandOver:
    """What a V-schedule's hand-over between two stages of one rank counts twice, action by
    action (:func:`compose`'s receive buffers are held all step, each microbatch's, and a
    stage's output and its input's gradient are its own until it lets them go):

    - forward: after stage ``s`` runs microbatch ``i``, stage ``s + 1``'s receive buffer for
      ``i`` is ``s``'s output (stage.py's ``set_local_fwd_input``: detached, the buffer it
      replaces let go) until ``s``'s own reference goes — its weight backward (``W``, which
      pops ``backward_state``) or its full backward — after which the buffer holds it alone
      (with ``keeps``, torch 2.6's ``output_chunks``, the stage's reference stays all step);
    - backward: after stage ``s + 1``'s input backward of ``i``, stage ``s``'s gradient buffer
      for ``i`` is that input gradient (``get_local_bwd_output`` / ``set_local_bwd_input``),
      which ``s + 1``'s input keeps as its ``.grad`` (``_backward.py``'s
      ``stage_backward_input``: ``inp.grad = dinput``) until the next step's
      ``clear_runtime_states``.

    PP 2 ZBV on the 4-layer hidden-1024 toy (``tests/profiling/plans/test_pipe_replay.py``):
    rank 1's composed peak was 10 MiB (five 2 MiB buffers) above torch's schedule run whole."""

    def __init__(self, by_stage: dict[int, StageProfile], keeps: bool) -> None:
        # stage -> its output's bytes, where the next stage is on this rank
        self.out = {s: p.output_bytes for s, p in by_stage.items() if s + 1 in by_stage}
        self.keeps = keeps
        self.shared: set[tuple[int, int]] = set()  # (stage, microbatch): output is a buffer

    def after(self, a: Action) -> int:
        """Bytes to add to the level after ``a`` (negative: no longer counted twice)."""
        if a.kind == "F" and a.stage in self.out:
            self.shared.add((a.stage, a.microbatch))
            return -self.out[a.stage]
        change = 0
        if a.kind in ("I", "B") and a.stage - 1 in self.out:
            change -= self.out[a.stage - 1]
        if a.kind in ("W", "B") and (a.stage, a.microbatch) in self.shared:
            self.shared.discard((a.stage, a.microbatch))
            change += 0 if self.keeps else self.out[a.stage]
        return change


def _label(a: Action) -> str:
    names = {"F": "forward", "B": "backward", "I": "input backward", "W": "weight backward"}
    if a.kind == "R":
        return f"gradient reduction of stage {a.stage}"
    return f"{names[a.kind]} of microbatch {a.microbatch}, stage {a.stage}"


def compose(
    pp_rank: int,
    global_ranks: str,
    profiles: list[StageProfile],
    actions: list[Action],
    microbatches: int,
    holds: bool = False,
    keeps: bool = False,
    head: int = -1,
) -> RankMemory:
    """The rank's memory over its actions and the optimizer step (see the module).

    ``holds``: the schedule keeps references of its own (torch's Schedule1F1B: the latest
    forward's output until the next forward, the input gradient it sends back until the next
    backward's is ready, both until the step returns). ``keeps``: every stage keeps each
    microbatch's output past its backward until the next step, and the step merges the last
    stage's (torch 2.6 and earlier); ``head``: the last
    stage's index."""
    by_stage = {p.stage: p for p in profiles}
    level = vec()
    for p in profiles:
        level = add(add(level, p.base), p.per_microbatch, microbatches)
    held = sum(p.per_microbatch.get("total", 0) for p in profiles) * microbatches
    best, at = dict(level), "the step's start"
    alive: set[tuple[int, int]] = set()
    most = 0
    output: tuple[int, int] | None = None  # (stage, microbatch) of the schedule's last output
    sending: int | None = None  # the stage whose input gradient the schedule still holds
    # keeps: torch 2.6 (the release of torchtitan's 2024 benchmarks' nightly 1963fc8):
    # torch/distributed/pipelining/stage.py's forward_one_chunk appends every stage's output to
    # output_chunks (its get_fwd_send_ops sends from there), cleared by clear_runtime_states at
    # the next step's start; schedules.py's step returns _merge_outputs(output_chunks) of the
    # last stage. pytorch/pytorch#165822 (torch 2.10) added step(return_outputs=False), which
    # pytorch/torchtitan passes since e5ef99a ("Update PP to release memory earlier").
    extra = kept = 0
    # V-schedules: a stage whose neighbour is on this rank hands it its output and takes back
    # its input gradient in place of that neighbour's receive buffer (torch 2.13.0
    # pipelining/schedules.py's _PipelineScheduleRuntime: set_local_fwd_input after FORWARD,
    # set_local_bwd_input after BACKWARD_INPUT or FULL_BACKWARD; stage.py sets ``info.buffer``,
    # the buffer made at the stage's set-up let go): one tensor, counted once
    local = LocalHandOver(by_stage, keeps)
    keys = _keys(actions, by_stage)
    steps: list[tuple[Action | None, str]] = list(zip(actions, keys, strict=True))
    # the step concatenates the last stage's outputs into one (torch 2.6's _merge_outputs)
    merged = microbatches * by_stage[head].output_bytes if keeps and head in by_stage else None
    steps += [(None, "merge")] if merged is not None else []
    steps += [(None, "step") for _ in profiles]
    stepped = iter(profiles)
    for a, key in steps:
        if key == "merge":
            moment = add(level, vec(temporaries=extra + (merged or 0), activations=kept))
            if moment["total"] > best["total"]:
                best, at = moment, f"the schedule's merged outputs of stage {head}"
            continue
        profile = by_stage[a.stage] if a is not None else next(stepped)
        move = profile.moves[key]
        moment = add(level, move.peak)
        moment = add(moment, vec(temporaries=extra, activations=kept))
        if moment["total"] > best["total"]:
            best = moment
            at = _label(a) if a is not None else f"optimizer step of stage {profile.stage}"
        level = add(level, move.delta)
        if a is not None:
            level = add(level, vec(buffers=local.after(a)))
        if a is not None and a.kind == "F":
            alive.add((a.stage, a.microbatch))
            most = max(most, len(alive))
            if holds and output is not None and output not in alive:
                extra -= by_stage[output[0]].output_bytes  # replaced by this forward's
            output = (a.stage, a.microbatch) if holds and not keeps else None
        elif a is not None and a.kind in ("B", "I"):
            alive.discard((a.stage, a.microbatch))
            kept += profile.output_bytes if keeps else 0  # its cache entry gone, the stage's stays
            if holds and output == (a.stage, a.microbatch):
                extra += profile.output_bytes  # its cache entry gone, the schedule's stays
            if holds and profile.input_bytes:
                if sending is not None:
                    extra -= by_stage[sending].input_bytes
                extra += profile.input_bytes
                sending = a.stage
        elif a is not None and a.kind == "R" and holds:
            extra = 0  # the step's loop returned: its references went with it
            output = sending = None
    level = add(level, vec(activations=kept))  # until the next step's start
    return RankMemory(
        pp_rank=pp_rank,
        stages=[p.stage for p in profiles],
        global_ranks=global_ranks,
        peak_bytes=best["total"],
        peak_at=at,
        by_category={c: best.get(c, 0) for c in CATEGORIES},
        after_step={c: level.get(c, 0) for c in CATEGORIES},
        in_flight=most,
        per_microbatch_bytes=held,
    )


__all__ = [
    "CATEGORIES",
    "Move",
    "RankMemory",
    "StageProfile",
    "Vec",
    "add",
    "compose",
    "sub",
    "vec",
]
