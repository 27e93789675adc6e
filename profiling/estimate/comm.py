"""What a rank of many GPUs spends on communication: NCCL's buffers and the bytes it sends.

The one place for both (the counters, ``estimate``/``trace`` of a plan or of several GPUs and
``fit --plans`` read them here):

- **Communicators.** A rank joins one NCCL communicator per process group it communicates in.
  In torchtitan's mesh (``pp, dp_replicate, dp_shard, cp, tp``, outermost first) those are: FSDP
  over ``dp_shard × cp`` (its flattened ``dp_shard_cp``), the replicas' all-reduce over
  ``dp_replicate``, tensor parallelism over ``tp``, the context ring over ``cp`` and the
  pipeline's sends over ``pp`` (torch's schedules send with ``batch_isend_irecv``, which NCCL
  runs on the group's communicator, not a pair's). Without a plan: the data-parallel group
  (DDP, ZeRO, FSDP, DeepSpeed's engine) and tensor parallelism's.
- **Buffers.** Each communicator allocates, per channel, a buffer of ``NCCL_BUFFSIZE`` for each
  of the ring's two neighbours (send and receive): NCCL's documented default is 4 MiB
  (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html, NCCL_BUFFSIZE) and up to
  32 channels on NVLink/NVSwitch machines (NCCL_MAX_NCHANNELS): 2 × 32 × 4 MiB = 256 MiB per
  communicator, outside PyTorch's allocator — nvidia-smi counts it, ``max_memory_reserved()``
  does not. The upper end, so a fit is never called on the low side.
- **Volume.** The bytes one GPU sends per step, each collective ring-wise (an all-gather or a
  reduce-scatter of a tensor of X bytes over n ranks sends (n − 1)/n · X from each; an
  all-reduce twice that).
- **Time.** Each transfer over the link its group crosses: within a node (8 GPUs, the innermost
  mesh dimensions first) NVLink, between nodes the GPU's own InfiniBand NIC, at the datasheet
  rates in ``LINKS`` (one direction). FSDP's, the replicas' and the pipeline's transfers overlap
  the step's compute (prefetched gathers, reduce-scatters behind backward; torch's schedules post
  a microbatch's sends and receives asynchronously and compute another meanwhile): only what
  exceeds it shows. Tensor parallelism's collectives and the context ring's (torch's default
  all-gather rotation) are on the critical path: each block waits for them.

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from profiling._config_plan import dp_degrees
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.records import Quantity

MiB = 2**20
NCCL_BUFFSIZE = 4 * MiB  # NCCL's documented default (NCCL_BUFFSIZE)
NCCL_CHANNELS = 32  # NCCL_MAX_NCHANNELS on NVLink/NVSwitch machines
NCCL_PEERS = 2  # the ring's two neighbours: a send and a receive buffer per channel
PER_COMMUNICATOR = NCCL_PEERS * NCCL_CHANNELS * NCCL_BUFFSIZE
GPUS_PER_NODE = 8  # an HGX/DGX node; the innermost mesh dimensions fill it first


class Link(BaseModel):
    nvlink_gbs: float  # within a node, one direction, 10^9 B/s
    network_gbs: float  # between nodes: the GPU's own NIC, one direction
    source: str


_NV3 = "A100 datasheet: NVLink 600 GB/s (both directions); DGX A100: a 200 Gb/s HDR NIC per GPU"
_NV4 = "H100/H200 datasheets: NVLink 900 GB/s (both directions); DGX H100: a 400 Gb/s NIC per GPU"
_NV5 = "HGX B200 datasheet: NVLink 1.8 TB/s per GPU (both directions); a 400 Gb/s NIC per GPU"
_PCIE = "no NVLink: PCIe (the GPU table's host link); a 100 Gb/s Ethernet NIC per node assumed"
LINKS: dict[str, Link] = {
    "a100-40gb": Link(nvlink_gbs=300, network_gbs=25, source=_NV3),
    "a100-80gb": Link(nvlink_gbs=300, network_gbs=25, source=_NV3),
    "h100-sxm": Link(nvlink_gbs=450, network_gbs=50, source=_NV4),
    "h200": Link(nvlink_gbs=450, network_gbs=50, source=_NV4),
    "b200": Link(nvlink_gbs=900, network_gbs=50, source=_NV5),
}


def link(cfg: TrainingConfig) -> Link | None:
    """The GPU's links (``--gpu``), or None without one."""
    spec = cfg.gpu_spec()
    if spec is None:
        return None
    return LINKS.get(spec.key) or Link(nvlink_gbs=spec.pcie_gbs, network_gbs=12.5, source=_PCIE)


class Group(BaseModel):
    name: str  # what it is for: "FSDP", "TP", "CP", "PP", "DP-replicate", "data parallel"
    ranks: int
    span: int  # consecutive global ranks it covers (its stride × its size)
    per_node: int = GPUS_PER_NODE  # --gpus-per-node (DeepSpeed's), else an HGX node's 8

    @property
    def intra_node(self) -> bool:
        return self.span <= self.per_node


def groups(cfg: TrainingConfig) -> list[Group]:
    """The process groups a rank communicates in (see the module), innermost first."""
    node = cfg.gpus_per_node or GPUS_PER_NODE
    return [g.model_copy(update={"per_node": node}) for g in _groups(cfg)]


def _groups(cfg: TrainingConfig) -> list[Group]:
    out: list[Group] = []
    tp, cp, pp = cfg.tp, cfg.cp, cfg.pp
    if tp > 1:
        out.append(Group(name="TP", ranks=tp, span=tp))
    if not cfg.is_plan:
        if cfg.gpus > 1:
            out.append(Group(name="data parallel", ranks=cfg.gpus, span=cfg.gpus * tp))
        return out
    shard, replicate = dp_degrees(cfg)
    if cp > 1:
        out.append(Group(name="CP", ranks=cp, span=cp * tp))
    if cfg.ulysses > 1:  # DeepSpeed's sequence-parallel group: consecutive ranks
        out.append(Group(name="Ulysses", ranks=cfg.ulysses, span=cfg.ulysses * tp))
    cp *= cfg.ulysses  # ZeRO/FSDP shards over the sequence ranks too
    if shard * cp > 1:
        out.append(Group(name="FSDP", ranks=shard * cp, span=shard * cp * tp))
    if replicate > 1:
        out.append(Group(name="DP-replicate", ranks=replicate, span=replicate * shard * cp * tp))
    if pp > 1:
        out.append(Group(name="PP", ranks=pp, span=cfg.gpus * cp * tp * pp))
    return out


def communicators(cfg: TrainingConfig) -> int:
    return len(groups(cfg))


def nccl_bytes(cfg: TrainingConfig) -> int:
    """NCCL's buffers on one GPU: its communicators' (see the module)."""
    return communicators(cfg) * PER_COMMUNICATOR


def nccl_text(cfg: TrainingConfig) -> str:
    names = ", ".join(f"{g.name} ({g.ranks})" for g in groups(cfg))
    return (
        f"NCCL {_mib(nccl_bytes(cfg))} ({communicators(cfg)} communicator(s): "
        f"{names}; each {NCCL_PEERS} neighbours × {NCCL_CHANNELS} channels × NCCL_BUFFSIZE "
        f"{NCCL_BUFFSIZE // MiB} MiB)"
    )


class Transfer(BaseModel):
    name: str
    group: str
    bytes: int  # sent by one GPU per step
    formula: str
    substituted: str
    overlapped: bool  # runs behind compute (FSDP, the replicas' all-reduce, the pipeline's sends)
    seconds: float | None = None  # with --gpu: over its group's link


class Comm(BaseModel):
    transfers: list[Transfer]
    groups: list[Group]
    nccl_bytes: int
    link: Link | None

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.transfers)

    def exposed_seconds(self, compute: float) -> float | None:
        """Communication the step waits for: the critical path's, and what of the overlapped
        transfers exceeds ``compute``."""
        if self.link is None:
            return None
        hidden = sum(t.seconds or 0.0 for t in self.transfers if t.overlapped)
        critical = sum(t.seconds or 0.0 for t in self.transfers if not t.overlapped)
        return critical + max(0.0, hidden - compute)


def _mib(n: int) -> str:
    return f"{n / MiB:,g} MiB"


def _ring(n: int) -> str:
    return f"({n} − 1)/{n}"


def _dtypes(cfg: TrainingConfig) -> tuple[int, int]:
    """(bytes of a gathered parameter or an activation, bytes of a reduced gradient)."""
    c = 4 if cfg.precision == "fp32" else 2
    # torchtitan's FSDP2 reduces in fp32 under mixed precision (mixed_precision_reduce);
    # DeepSpeed's engine communicates in the parameters' dtype (communication_data_type).
    reduce = 4 if cfg.precision == "mixed" and not cfg.deepspeed else c
    return c, reduce


def accumulated(cfg: TrainingConfig) -> int:
    """Microbatches a plan without a pipeline runs per optimizer step (``--microbatches M``:
    torchtitan's gradient_accumulation_steps), 1 otherwise. Each runs its own forward and
    backward with gradient sync left on (pytorch/torchtitan torchtitan/trainer.py at b5bcd76:
    ``forward_backward_step`` per microbatch, no ``set_requires_gradient_sync(False)``), so FSDP2
    gathers the parameters and reduce-scatters the gradients once per microbatch, and HSDP
    all-reduces them (``foreach_reduce``'s all-reduce runs whenever gradients sync). A
    pipeline's microbatches are not this: torch's stages defer the reduction to the last one."""
    return (cfg.microbatches or 1) if cfg.is_plan and cfg.pp == 1 else 1


def reshard_policy(cfg: TrainingConfig) -> str:
    """torchtitan's ``fsdp_reshard_after_forward`` a plan runs: "never" under ``--zero 2``
    (FSDP2's ``reshard_after_forward=False`` for every group), "always" under
    ``--reshard-always`` (the final norm and output too), else "default"."""
    return "never" if cfg.zero == 2 else "always" if cfg.reshard_always else "default"


def _plan_gathers(cfg: TrainingConfig, share: float, head: float) -> tuple[float, str, str, str]:
    """What a plan's FSDP gathers per microbatch without a pipeline, in parameters, with its
    formula, substitution and reason. A group resharded after forward is gathered again for
    its backward; torchtitan's "default" policy keeps [norm, output] gathered from its forward
    to its backward (``reshard_after_forward=policy == "always"``) and "never" keeps every
    group (pytorch/torchtitan torchtitan/distributed/fsdp.py at b5bcd76, apply_fsdp_to_decoder
    and get_fsdp_reshard_after_forward_policy): FSDP2's pre-backward unshard of a group still
    gathered sends nothing."""
    policy = reshard_policy(cfg)
    if cfg.titan_root_group and policy == "default":  # torchtitan's 2024 groups (root_group)
        return (2 * share - head, "(2 × Ψ / (tp · pp) − Ψ_root − Ψ_last block)",
                f"(2 × {share:,.0f} − {head:,.0f})",
                "forward and backward; the root (embedding, norm, output) and the last block "
                "once")  # fmt: skip
    if policy == "never":
        return share, "Ψ / (tp · pp)", f"{share:,.0f}", "forward only: never resharded"
    if policy == "always":
        return 2 * share, "2 × Ψ / (tp · pp)", f"2 × {share:,.0f}", "forward and backward"
    return (2 * share - head, "(2 × Ψ / (tp · pp) − Ψ_norm+output)",
            f"(2 × {share:,.0f} − {head:,.0f})",
            "forward and backward; the final norm and output once")  # fmt: skip


def _sharded(
    cfg: TrainingConfig, share: float, n: int, label: str, psi: str = "Ψ", head: float = 0.0
) -> list[Transfer]:
    """FSDP / ZeRO-3: gathers in forward (and backward, unless the pipeline keeps them) and a
    reduce-scatter of the gradients; ZeRO-1/2: a reduce-scatter and the step's gather. A plan
    without a pipeline does both once per microbatch accumulated (:func:`accumulated`);
    ``head``: the final norm's and output's parameters (a plan's: torchtitan keeps them).
    ``--accumulate-unsharded N`` gathers N times and reduces once: FSDP2's
    ``set_requires_gradient_sync(False)`` skips the reduce-scatter alone, and its
    ``reshard_after_backward`` (left True; ``set_reshard_after_backward`` would change it)
    reshards each group after every micro-batch's backward, so the next forward gathers it
    again (torch 2.13 torch/distributed/fsdp/_fully_shard/_fully_shard.py and
    _fsdp_param_group.py ``post_backward``); FSDP1's FULL_SHARD frees in backward under
    ``no_sync`` too (_runtime_utils.py ``_should_free_in_backward``)."""
    c, r = _dtypes(cfg)
    ring = (n - 1) / n
    m = accumulated(cfg)
    # --accumulate-unsharded N (FSDP without a plan): every micro-batch gathers, one reduces
    # (but FSDP1's SHARD_GRAD_OP, which keeps the gathered parameters through them: _kept_once)
    mg = m * (cfg.accumulate_unsharded or 1) if not _kept_once(cfg) else m
    if cfg.is_plan and cfg.pp == 1:
        gathered, form, sub, why = _plan_gathers(cfg, share, head)
    else:
        gathers = 1 if cfg.pp > 1 or (cfg.zero in (1, 2) and not cfg.fsdp) else 2
        why = {1: "once per step", 2: "forward and backward"}[gathers]
        if cfg.fsdp and cfg.zero == 2:  # kept from forward to backward: gathered in forward
            gathers, why = 1, "forward only: kept to the backward"
        if _kept_once(cfg):
            why = "once per step: FSDP1's SHARD_GRAD_OP keeps them through the micro-batches"
        if cfg.fsdp and cfg.reshard_always and cfg.pp > 1:  # (plans.always_pp)
            from profiling.plans.schedule import regathers

            gathers = regathers(cfg.pp_schedule, cfg.pp, cfg.virtual_stages or 1,
                                cfg.microbatches or 1)  # fmt: skip
            why = "--reshard-always: each forward, and each backward after a forward"
        gathered, form, sub = gathers * share, f"{gathers:g} × {psi}", f"{gathers:g} × {share:,.0f}"
    times, each = (f"{m} microbatches × ", f"{m} × ") if m > 1 else ("", "")
    g_times, g_each = (f"{mg} microbatches × ", f"{mg} × ") if mg > 1 else ("", "")
    why += ", each microbatch" if mg > 1 else ""
    if mg > m:
        why += " (gradient sync off but the last: reduced once)"
    return [
        Transfer(
            name=f"{label} all-gather of the parameters ({why})", group=label,
            bytes=int(mg * gathered * c * ring),
            formula=f"{g_times}{form} × {c} B × {_ring(n)}",
            substituted=f"{g_each}{sub} × {c} × {ring:.4g}", overlapped=True,
        ),
        Transfer(
            name=f"{label} reduce-scatter of the gradients", group=label,
            bytes=int(m * share * r * ring), formula=f"{times}{psi} × {r} B × {_ring(n)}",
            substituted=f"{each}{share:,.0f} × {r} × {ring:.4g}", overlapped=True,
        ),
    ]  # fmt: skip


def _kept_once(cfg: TrainingConfig) -> bool:
    """FSDP1's SHARD_GRAD_OP (``--fsdp-flat --zero 2``) accumulating without sync: its
    post-backward frees the gathered flat parameter only when gradients sync or the strategy
    reshards after forward (``_should_free_in_backward``), and a handle still gathered is not
    gathered again (``FlatParamHandle.needs_unshard``), so the first micro-batch's forward
    gathers and the rest, the last's backward included, reuse it; its reduce-scatter runs in
    the last alone (pytorch/pytorch torch/distributed/fsdp/_runtime_utils.py and _flat_param.py,
    torch 2.13)."""
    return cfg.fsdp_flat and cfg.zero == 2 and (cfg.accumulate_unsharded or 1) > 1


def _allreduce(share: float, r: int, n: int, label: str, psi: str, m: int = 1) -> Transfer:
    ring = (n - 1) / n
    times, each = (f"{m} microbatches × ", f"{m} × ") if m > 1 else ("", "")
    return Transfer(
        name=f"{label} all-reduce of the gradients", group=label,
        bytes=int(m * 2 * share * r * ring), formula=f"{times}2 × {psi} × {r} B × {_ring(n)}",
        substituted=f"{each}2 × {share:,.0f} × {r} × {ring:.4g}", overlapped=True,
    )  # fmt: skip


def _data(cfg: TrainingConfig, params: int, head: float) -> list[Transfer]:
    _, r = _dtypes(cfg)
    if not cfg.is_plan:
        n, share = cfg.gpus, params / cfg.tp
        psi = "Ψ / tp" if cfg.tp > 1 else "Ψ"
        if n == 1:
            return []
        if cfg.fsdp or cfg.zero:
            return _sharded(cfg, share, n, "data parallel", psi)
        from profiling.estimate.ddp import bucket_bytes

        # DDP all-reduces its buckets, in the trainable parameters' dtype: fp32 under autocast
        # (was 2 B, the compute dtype), 16-bit under mixed (was FSDP's fp32 reduce dtype)
        return [_allreduce(share, bucket_bytes(cfg), n, "data parallel", psi)]
    shard, rep = dp_degrees(cfg)
    n = shard * cfg.cp * cfg.ulysses
    share = params / (cfg.tp * cfg.pp)
    psi = "Ψ / (tp · pp)"
    out = _sharded(cfg, share, n, "FSDP", psi, head) if n > 1 else []
    if rep > 1:
        psi_n = f"Ψ / (tp · pp · {n})"
        out.append(_allreduce(share / n, r, rep, "DP-replicate", psi_n, accumulated(cfg)))
    return out


def _activations(cfg: TrainingConfig, shape: dict[str, Any]) -> list[Transfer]:
    c, _ = _dtypes(cfg)
    h, layers = int(shape.get("hidden") or 0), int(shape.get("layers") or 0) // cfg.pp
    kv = int(shape.get("kv_dim") or h)
    # per step, per data-parallel rank
    tokens = cfg.batch * cfg.seq_or_default() // (cfg.cp * cfg.ulysses)
    again = 1 if cfg.checkpointing == "full" else 0  # full checkpointing runs forward twice
    out: list[Transfer] = []
    t = cfg.tp
    if t > 1:
        k = 8 + 4 * again
        ring = (t - 1) / t
        out.append(Transfer(
            name="TP all-gathers and reduce-scatters of each block's activations "
            f"({'sequence parallel: ' if cfg.sequence_parallel else 'all-reduces: '}"
            f"attention and MLP, forward 4, backward 4{', recomputed 4' if again else ''})",
            group="TP", bytes=int(k * tokens * h * c * ring * layers),
            formula=f"{k} × tokens × h × {c} B × {_ring(t)} × layers",
            substituted=f"{k} × {tokens:,} × {h:,} × {c} × {ring:.4g} × {layers}",
            overlapped=False,
        ))  # fmt: skip
    p = cfg.cp
    if p > 1:
        k = 3 + again
        out.append(Transfer(
            name="CP ring of each block's keys and values (forward K,V; backward K,V and "
            f"their gradients{'; recomputed K,V' if again else ''})",
            group="CP", bytes=int(k * (p - 1) * 2 * tokens * kv * c / t * layers),
            formula=f"{k} × (cp − 1) × 2 × tokens_rank × kv_dim × {c} B / tp × layers",
            substituted=f"{k} × {p - 1} × 2 × {tokens:,} × {kv:,} × {c} / {t} × {layers}",
            overlapped=False,
        ))  # fmt: skip
    u = cfg.ulysses
    if u > 1:  # q, k, v to heads and the output back: forward, backward (and recomputed)
        k = 2 + again
        # fewer key/value heads than ranks: DeepSpeed sends each replicated to one per rank
        d = h // int(shape.get("heads") or 1)
        sent = "kv_dim" if kv >= u * d else "u·head_dim"
        width = 2 * h + 2 * max(kv, u * d)
        out.append(Transfer(
            name="Ulysses all-to-alls of each block's q, k, v and attention output (forward; "
            f"backward their gradients{'; recomputed q, k, v, output' if again else ''})",
            group="Ulysses", bytes=int(k * tokens * width * c * (u - 1) / u * layers),
            formula=f"{k} × tokens_rank × (2·h + 2·{sent}) × {c} B × (u − 1)/u × layers",
            substituted=f"{k} × {tokens:,} × {width:,} × {c} × {u - 1}/{u} × {layers}",
            overlapped=False,
        ))  # fmt: skip
    if cfg.pp > 1:
        v = cfg.virtual_stages or (2 if cfg.pp_schedule == "zbv" else 1)
        out.append(Transfer(
            name="PP sends of each microbatch's activations (forward) and their gradients "
            "(backward), per stage held", group="PP",
            bytes=int(2 * v * tokens * h * c / t),
            formula=f"2 × stages {v} × tokens × h × {c} B / tp",
            substituted=f"2 × {v} × {tokens:,} × {h:,} × {c} / {t}", overlapped=True,
        ))  # fmt: skip
    return out


def comm(cfg: TrainingConfig, shape: dict[str, Any], params: int | None = None) -> Comm:
    """What one GPU sends per step and NCCL's buffers on it (see the module)."""
    gs = groups(cfg)
    # the final norm and output, one FSDP group (TP shards the output over the vocabulary)
    # torchtitan keeps gathered; DeepSpeed's ZeRO-3 beside Ulysses gathers it twice as any
    h = int(shape.get("hidden") or 0)
    head = (int(shape.get("head_params") or 0) / cfg.tp + h) * (cfg.ulysses == 1)
    if cfg.titan_root_group and cfg.ulysses == 1:  # the root group and the last block, once
        block, total = int(shape.get("block_params") or 0), int(params or shape.get("params") or 0)
        root = int(shape.get("root_params") or total - int(shape.get("layers") or 0) * block)
        head = (root + block) / cfg.tp
    transfers = _data(cfg, int(params or shape.get("params") or 0), head)
    transfers += _activations(cfg, shape)
    ln = link(cfg)
    if ln is not None:
        inside = {g.name: g.intra_node for g in gs}
        for t in transfers:
            gbs = ln.nvlink_gbs if inside.get(t.group, True) else ln.network_gbs
            t.seconds = t.bytes / (gbs * 1e9)
    return Comm(transfers=transfers, groups=gs, nccl_bytes=nccl_bytes(cfg), link=ln)


def step_comm(cfg: TrainingConfig, shape: dict[str, Any] | None = None) -> Comm | None:
    """What a GPU of a job over several GPUs sends per step (None on one GPU, or for a model
    whose shape the catalogue lacks): the step's time waits for what compute does not hide."""
    if cfg.gpus == 1 and cfg.tp == 1:
        return None
    if shape is None:
        from profiling.errors import ProfilingError
        from profiling.estimate.shape import shape_of

        try:
            shape = shape_of(cfg)
        except ProfilingError:
            return None
    return comm(cfg, shape)


def comm_quantities(c: Comm, compute: float | None = None) -> list[Quantity]:
    """Every number ``comm_lines`` prints, as the record's values (so each can be cited)."""
    from profiling.records import Quantity

    out = [Quantity(name="NCCL buffers", value=c.nccl_bytes, unit="B"),
           Quantity(name="NCCL_BUFFSIZE (default)", value=NCCL_BUFFSIZE, unit="B"),
           Quantity(name="sent per GPU per step", value=c.bytes, unit="B")]  # fmt: skip
    for t in c.transfers:
        out.append(Quantity(name=f"sent: {t.name}", value=t.bytes, unit="B"))
        if t.seconds is not None:
            out.append(Quantity(name=f"time: {t.name}", value=t.seconds, unit="s"))
    if c.link is not None and compute is not None:
        out.append(Quantity(name="compute per step", value=compute, unit="s"))
        exposed = c.exposed_seconds(compute) or 0.0
        out.append(Quantity(name="communication not hidden", value=exposed, unit="s"))
    return out


def comm_lines(c: Comm, compute: float | None = None) -> list[str]:
    """The communication block of a plan's output: buffers, then the volume step by step."""
    if not c.groups:
        return []
    lines = ["Communication per GPU per step:"]
    lines.append(
        f"  NCCL buffers: {_mib(c.nccl_bytes)} in nvidia-smi's count = "
        f"{len(c.groups)} communicator(s) ("
        + ", ".join(f"{g.name} over {g.ranks} GPUs" for g in c.groups)
        + f") × {NCCL_PEERS} neighbours × {NCCL_CHANNELS} channels × NCCL_BUFFSIZE "
        f"{NCCL_BUFFSIZE // MiB} MiB"
    )
    for t in c.transfers:
        when = f", {t.seconds * 1e3:,.1f} ms" if t.seconds is not None else ""
        lines.append(f"  {t.name}: {t.formula} = {t.substituted} = {fmt_bytes(t.bytes)}{when}")
    lines.append(f"  sent per step: {fmt_bytes(c.bytes)}")
    if c.link is not None:
        where = ", ".join(f"{g.name} {'NVLink' if g.intra_node else 'network'}" for g in c.groups)
        lines.append(
            f"  links: {where} (NVLink {c.link.nvlink_gbs:g} GB/s, network "
            f"{c.link.network_gbs:g} GB/s per GPU, one direction; {c.link.source}; "
            f"{c.groups[0].per_node} GPUs per node)"
        )
        if compute is not None:
            exposed = c.exposed_seconds(compute) or 0.0
            wait = sorted({t.group for t in c.transfers if not t.overlapped})
            behind = sorted({t.group for t in c.transfers if t.overlapped})
            how = [f"{', '.join(wait)} wait{'s' * (len(wait) == 1)}"] if wait else []
            how += [f"{', '.join(behind)} overlap the step's {compute * 1e3:,.1f} ms of "
                    "compute"] if behind else []  # fmt: skip
            lines.append(f"  not hidden by compute: {exposed * 1e3:,.1f} ms ({'; '.join(how)})")
    return lines


__all__ = [
    "GPUS_PER_NODE", "LINKS", "NCCL_BUFFSIZE", "NCCL_CHANNELS", "PER_COMMUNICATOR", "Comm",
    "Group", "Link", "Transfer", "accumulated", "comm", "comm_lines", "comm_quantities",
    "communicators", "groups", "link", "nccl_bytes", "nccl_text", "reshard_policy",
    "step_comm",
]  # fmt: skip
