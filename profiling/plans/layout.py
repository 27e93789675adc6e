"""A plan's layout: its mesh, its pipeline stages and which stages each pipeline rank holds.

The mesh is torchtitan's: dimensions ``pp, dp_replicate, dp_shard, cp, tp`` (outermost first),
those of degree 1 left out; DeepSpeed-Ulysses' ranks (``ulysses``, which torchtitan has not) sit
where context parallelism's do, inside the data-parallel ones as DeepSpeed's sequence-parallel
groups are consecutive ranks, and ZeRO/FSDP shards over them too (DeepSpeed's sequence-data-
parallel group). Every rank of one pipeline rank holds the same memory (data, context
and tensor parallelism split the work evenly: FSDP pads every shard to the same size), so a plan
has at most ``pp`` distinct ranks, whatever its world size; each stands for ``world / pp`` GPUs.

The layers are split into stages as torchtitan's ``generate_llm_fqn_per_model_part`` splits them
(``torchtitan/distributed/pipeline_parallel.py``): the embedding counts as one layer on the first
stage and the final norm with the output as one layer on the last, the extra layers of an uneven
split going to the first stages. A looped schedule (1F1B, interleaved) gives rank r the stages
r, r + pp, r + 2·pp …; the V schedule (ZBV) gives it r and 2·pp − 1 − r.

No torch here.
"""

from __future__ import annotations

from pydantic import BaseModel

from profiling._config_plan import dp_degrees
from profiling.config import TrainingConfig
from profiling.errors import ProfilingError

MESH_ORDER = ("pp", "dp_replicate", "dp_shard", "cp", "ulysses", "tp")


class Stage(BaseModel):
    """One pipeline stage: its blocks and whether it holds the embedding or the head."""

    index: int
    first_layer: int
    layers: int
    embedding: bool
    head: bool  # the final norm, the output projection and the loss
    before: int = 0  # blocks of the stages its pipeline rank builds before it

    def checkpointed(self, every: int | None, layers: int | None = None) -> list[bool] | None:
        """Which blocks torchtitan's ``selective_ac_option = "N"`` wraps, first to last, or
        None when every block is treated alike. torchtitan counts the blocks a process wraps
        (``ptd_checkpoint_wrapper._count``, over every stage it builds, in order) and wraps the
        N-th, 2N-th…; ``layers`` fewer than the stage's (a probe) keep the stage's last blocks'
        pattern (whole periods of N dropped from the front)."""
        if not every or every == 1:
            return None
        n = self.layers if layers is None else layers
        end = self.before + self.layers  # the count of the stage's last block
        return [(end - (n - 1 - j)) % every == 0 for j in range(n)]

    @property
    def kind(self) -> str:
        """first | middle | last | whole (one stage holding everything)."""
        if self.embedding and self.head:
            return "whole"
        return "first" if self.embedding else "last" if self.head else "middle"


class Layout(BaseModel):
    mesh: dict[str, int]  # torchtitan's dimension order, degrees above 1
    world: int
    dp_replicate: int
    dp_shard: int  # FSDP shards over dp_shard × cp × ulysses ranks
    cp: int
    ulysses: int = 1
    tp: int
    pp: int
    schedule: str
    microbatches: int  # per step and data-parallel rank (1 without pipeline parallelism)
    microbatch_size: int
    stages: list[Stage]
    rank_stages: list[list[int]]  # pp rank -> its stages' indices, in the order it holds them
    keeps_outputs: bool = False  # torch 2.6's stages keep every output (--pp-keeps-outputs)

    @property
    def ranks_each(self) -> int:
        """How many GPUs share each pipeline rank's memory: world / pp."""
        return self.world // self.pp

    @property
    def shard_ranks(self) -> int:
        """The ranks FSDP shards one parameter over: dp_shard × cp (torchtitan's dp_shard_cp),
        × ulysses (DeepSpeed's sequence-data-parallel group)."""
        return self.dp_shard * self.cp * self.ulysses

    @property
    def seq_shards(self) -> int:
        """The pieces the sequence is cut into outside attention: cp × ulysses."""
        return self.cp * self.ulysses

    def global_ranks(self, pp_rank: int) -> str:
        """The global ranks of one pipeline rank, as a range: ``64-127`` (pp is outermost)."""
        each = self.ranks_each
        first = pp_rank * each
        return str(first) if each == 1 else f"{first}-{first + each - 1}"


def split_layers(
    layers: int, stages: int, input_weight: int = 1, output_weight: int = 1
) -> list[int]:
    """Blocks per stage, as torchtitan's ``generate_llm_fqn_per_model_part`` splits them."""
    if stages == 1:
        return [layers]
    effective = layers + input_weight + output_weight
    if stages > effective:
        raise ProfilingError(
            f"{stages} pipeline stages need at least {stages - 2} layers; the model has "
            f"{layers}: use fewer stages (--pp or --virtual-stages)"
        )
    per, extra = divmod(effective, stages)
    if per == 0 or input_weight > per or output_weight > per:
        raise ProfilingError(
            f"{layers} layers over {stages} stages leave a stage without a layer; use fewer "
            "stages (--pp or --virtual-stages)"
        )
    out, done = [], 0
    for i in range(stages):
        n = per + (1 if i < extra else 0)
        n -= input_weight if i == 0 else output_weight if i == stages - 1 else 0
        n = max(0, min(n, layers - done))
        out.append(n)
        done += n
    if done != layers:
        raise ProfilingError(
            f"{layers} layers do not split over {stages} stages as torchtitan splits them; use "
            "another --pp or --virtual-stages"
        )
    return out


def rank_stages(pp: int, per_rank: int, style: str) -> list[list[int]]:
    """Stage indices per pipeline rank: looped (r, r + pp, …) or V (r, 2·pp − 1 − r)."""
    if style == "v":
        return [[r, 2 * pp - 1 - r] for r in range(pp)]
    return [[r + s * pp for s in range(per_rank)] for r in range(pp)]


def layout_of(cfg: TrainingConfig, layers: int) -> Layout:
    """The layout of ``cfg``'s plan over a model of ``layers`` blocks."""
    shard, replicate = dp_degrees(cfg)
    degrees = {"pp": cfg.pp, "dp_replicate": replicate, "dp_shard": shard, "cp": cfg.cp,
               "ulysses": cfg.ulysses, "tp": cfg.tp}  # fmt: skip
    per_rank = cfg.virtual_stages or 1
    n_stages = cfg.pp * per_rank
    counts = split_layers(layers, n_stages)
    stages, first = [], 0
    for i, n in enumerate(counts):
        stages.append(Stage(index=i, first_layer=first, layers=n, embedding=i == 0,
                            head=i == n_stages - 1))  # fmt: skip
        first += n
    style = "v" if cfg.pp_schedule == "zbv" else "loop"
    held = rank_stages(cfg.pp, per_rank, style)
    for indices in held:  # a rank builds its stages in this order (torchtitan's stage ids)
        done = 0
        for i in indices:
            stages[i].before, done = done, done + stages[i].layers
    m = cfg.microbatches or 1
    world = cfg.gpus * cfg.cp * cfg.ulysses * cfg.tp * cfg.pp
    return Layout(
        mesh={k: v for k in MESH_ORDER if (v := degrees[k]) > 1},
        world=world,
        dp_replicate=replicate,
        dp_shard=shard,
        cp=cfg.cp,
        ulysses=cfg.ulysses,
        tp=cfg.tp,
        pp=cfg.pp,
        schedule=cfg.pp_schedule if cfg.pp > 1 else "none",
        microbatches=m,
        microbatch_size=cfg.batch // m,
        stages=stages,
        rank_stages=held,
        keeps_outputs=cfg.pp_keeps_outputs and cfg.pp > 1,
    )


__all__ = ["MESH_ORDER", "Layout", "Stage", "layout_of", "rank_stages", "split_layers"]
