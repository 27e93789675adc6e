"""DeepSpeed's ZeRO engine (``--deepspeed``) per rank: what its buffers add to the GPU, and the
host (CPU) memory its offload keeps, pinned or not, per rank and per node.

Read from DeepSpeed 0.19.6 (github.com/deepspeedai/DeepSpeed at edaa7221,
``deepspeed/runtime/zero/``); Ψ parameters, N data-parallel ranks, w bytes per 16-bit element
(4 for an fp32 engine), Ψ/N a rank's partition:

Stages 1 and 2 (``stage_1_and_2.py``, ``DeepSpeedZeroOptimizer``)
  - the model's 16-bit weights, one flat buffer on every rank: w·Ψ (``bit16_groups_flat``);
    after the step ``all_gather_dp_groups`` writes the partitions back into that buffer in
    place (``runtime/utils.py:1013``, ``all_gather_into_tensor``): ``allgather_bucket_size``
    allocates nothing;
  - stage 1 keeps every gradient (w·Ψ); stage 2 copies its partition's into one contiguous
    buffer, w·Ψ/N (``grads_in_partition``, line 1678);
  - the gradient buckets (``setup_buckets``, line 2493): ``reduce_bucket_size`` elements of w
    bytes, twice with ``overlap_comm`` (double buffering), whatever the model's size;
  - at the step the partition's gradients are flattened (a w-byte copy) and become one fp32
    tensor (line 2361, ``flat_grad_partition.to(fp32)``), group by group: (w + 4)·Ψ/N beside
    the fp32 master 4·Ψ/N and Adam's 8·Ψ/N — 2·Ψ/N above DeepSpeed's estimator's
    2Ψ + 18Ψ/N while ``.to`` runs (profiling.estimate.deepspeed_zero12; its
    ``BF16_Optimizer`` too);
  - ``offload_optimizer``: the fp32 master (pinned, line 497), Adam's states, the fp32
    gradient partition (pinned, line 843), a 16-bit copy of the partition for the upload
    (pinned, line 505) and a buffer of the largest parameter (pinned, line 585) live in host
    memory; the GPU keeps a buffer of the largest parameter (line 591) and no gradient
    partition.

Stage 3 (``stage3.py``, ``DeepSpeedZeroOptimizer_Stage3``; ``parameter_offload.py``)
  - the 16-bit weights partitioned, w·Ψ/N; parameters of at most
    ``stage3_param_persistence_threshold`` elements stay gathered on every rank
    (``mark_persistent_parameters``: the norms, GPT-2's biases), w·Ψ_persistent;
  - while a module runs its parameters are gathered, and up to ``stage3_prefetch_bucket_size``
    elements ahead of it are fetched: w·(largest module + prefetch bucket); with
    ``offload_param`` the host partitions are copied to the GPU beside the gathered buffer
    while the gather runs (``all_gather_coalesced``): that over N more;
  - ``stage3_max_reuse_distance`` (1e9): what forward's last modules hold stays gathered
    across the turn to backward, w·min(Ψ − largest module, 5e8) unless the head alone is 5e8;
  - the gradients' partitions, one flat buffer (``grad_partitions_flat_buffer``, line 742):
    w·Ψ/N; one gradient bucket of ``reduce_bucket_size`` elements (line 733);
  - the step converts one sub-group's gradients to fp32 at a time
    (``_prepare_fp32_grad_for_sub_group``, line 2398): 4·min(sub_group_size, Ψ/N);
  - ``offload_optimizer``: fp32 master, states, the fp32 gradients of each sub-group (pinned,
    line 1288) and the 16-bit gradient partitions (pinned, line 746) in host memory;
    ``offload_param``: the 16-bit partitions in pinned host memory (line 857);
  - NVMe: the optimizer's states go to NVMe through ``buffer_count`` (4) pinned buffers of the
    largest sub-group in fp32 (``swap_tensor/optimizer_utils.py:187``), the parameters through
    ``buffer_count`` (5) × ``buffer_size`` (1e8) pinned 16-bit buffers, at most ``max_in_cpu``
    (1e9) elements of them kept in host memory.

DeepSpeed's optimizer steps the flat fp32 partition with one multi-tensor kernel (FusedAdam,
DeepSpeedCPUAdam): torch's per-tensor step temporaries are not counted. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiling import _config_deepspeed as dsc
from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate import deepspeed_groups as dg
from profiling.estimate import deepspeed_lora as dl
from profiling.estimate import deepspeed_padding as dp
from profiling.estimate import deepspeed_zero12 as z12
from profiling.estimate.activations import offloaded_inputs
from profiling.estimate.fsdp_offload import HOST_KEY
from profiling.estimate.states import Ledger, weight_bytes
from profiling.units import fmt_bytes, fmt_count


@dataclass(frozen=True)
class Settings:
    """The engine's settings as DeepSpeed resolves them (its defaults where unset)."""

    w: int  # bytes of a 16-bit element (4 when the engine runs in fp32)
    reduce: int
    prefetch: int
    persistence: int
    overlap: bool
    per_node: int
    acc: int  # bytes of a gradient partition's element (data_types.grad_accum_dtype)
    comm: int  # bytes of a ZeRO-3 bucket's element (communication_data_type)
    reuse: int  # stage3_max_reuse_distance

    @classmethod
    def of(cls, cfg: TrainingConfig, shape: dict[str, Any]) -> Settings:
        h = int(shape.get("hidden") or 0)

        def given(value: int | str | None, default: int, auto: float) -> int:
            if value == "auto":  # the Hugging Face integration's trainer_config_finalize
                if not h:
                    raise ProfilingError(
                        "DeepSpeed's \"auto\" bucket sizes are filled from the model's hidden "
                        "size: give --model or --hidden"
                    )
                return int(auto)
            return default if value is None else int(value)

        return cls(
            w=weight_bytes(cfg.precision),
            reduce=given(cfg.reduce_bucket_size, dsc.REDUCE_BUCKET_DEFAULT, h * h),
            prefetch=given(cfg.prefetch_bucket_size, dsc.PREFETCH_BUCKET_DEFAULT, 0.9 * h * h),
            persistence=given(cfg.param_persistence_threshold, dsc.PERSISTENCE_DEFAULT, 10 * h),
            overlap=cfg.overlap_comm if cfg.overlap_comm is not None else cfg.zero == 3,
            per_node=gpus_per_node(cfg),
            acc=dg.accum_bytes(cfg, weight_bytes(cfg.precision)),
            comm=dg.comm_bytes(cfg, weight_bytes(cfg.precision)),
            reuse=dsc.REUSE_DISTANCE_DEFAULT
            if cfg.max_reuse_distance is None
            else cfg.max_reuse_distance,
        )


def gpus_per_node(cfg: TrainingConfig) -> int:
    """The GPUs of one node: given, else the GPUs up to 8 (a DGX/HGX node)."""
    return min(cfg.gpus_per_node or min(cfg.gpus, 8), cfg.gpus)


def persistent_params(shape: dict[str, Any], threshold: int) -> tuple[int, str]:
    """The elements of the parameters of at most ``threshold`` elements (DeepSpeed keeps them
    gathered): the norms of a Llama, GPT-2's norms and biases; and how they were counted."""
    h, L = int(shape.get("hidden") or 0), int(shape.get("layers") or 0)
    if not (h and L):
        return 0, "the model's shape is unknown: none counted"
    if shape.get("arch") == "gpt2":
        f = int(shape.get("ffn") or 4 * h)
        # ln_1 (w, b), c_attn.b (3h), attn.c_proj.b, ln_2 (w, b), mlp.c_fc.b (ffn), c_proj.b
        block = [h, h, 3 * h, h, h, h, f, h]
        small = L * sum(n for n in block if n <= threshold) + 2 * h * (h <= threshold)
        return small, f"norms and biases of {L} blocks + the final norm (each ≤ {threshold:,})"
    count = (2 * L + 1) * h if h <= threshold else 0
    return count, f"(2·L + 1)·h = (2·{L} + 1)·{h} norm weights (each ≤ {threshold:,})"


def _drop_torch_step(ledger: Ledger) -> None:
    """DeepSpeed steps the flat partition with one kernel: no per-tensor scratch of torch's."""
    names = {ln.name for ln in ledger.lines if ln.name.startswith("Optimizer step temporaries")}
    ledger.lines = [ln for ln in ledger.lines if ln.name not in names]
    ledger.steps = [s for s in ledger.steps if s.name not in names]


def _to_host(ledger: Ledger, category: str, where: str) -> None:
    tag, place = ("NVMe", "NVMe") if where == "nvme" else ("CPU", "CPU memory")
    for ln in ledger.lines:
        if ln.category == category and ln.group == "model states" and ln.bytes:
            ln.name += f" ({tag})"
            ln.bytes = 0
            ln.substituted += f" → {place}"


def _optimizer_to_nvme(ledger: Ledger) -> None:
    """``offload``'s CPU lines and note, said of NVMe (the states swap through host buffers)."""
    for ln in ledger.lines:
        if ln.category == "optimizer" and ln.name.endswith(" (CPU)"):
            ln.name = ln.name.removesuffix(" (CPU)") + " (NVMe)"
            ln.substituted = ln.substituted.replace("→ CPU memory", "→ NVMe")
    ledger.notes = [
        n.replace("moved to CPU memory (ZeRO-Offload)", "moved to NVMe (ZeRO-Infinity)")
        for n in ledger.notes
    ]


def engine(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any]) -> None:
    """The engine's GPU bytes beside the model states the ledger holds (``--deepspeed``)."""
    if not cfg.deepspeed or cfg.zero == 0:
        return
    s = Settings.of(cfg, shape)
    psi, w = dl.trainable(cfg, shape), s.w  # the optimizer's side: what trains
    dl.sixteen_bit_adapters(ledger, cfg, shape)
    dp.pad(ledger, cfg, shape)
    _drop_torch_step(ledger)
    if z12.bf16_optimizer_runs(cfg):  # no reduce buckets, no fp32 gradient made at the step
        z12.bf16_optimizer(ledger, cfg, shape, psi)
        return
    buffers = 2 if s.overlap and cfg.zero < 3 else 1
    b = w if cfg.zero < 3 else s.comm  # stage 3: communication_data_type
    # Stages 1-2: made at the first backward hook, released after the step (a gradient);
    # stage 3: made with the optimizer, alive all step (counted with the optimizer's memory).
    dg.add_line(
        ledger,
        f"DeepSpeed gradient bucket{'s' if buffers > 1 else ''} (reduce_bucket_size)",
        s.reduce * b * buffers,
        "reduce_bucket_size · "
        + ("w" if cfg.zero < 3 else "b(communication_data_type)")
        + (" · 2 (overlap_comm)" if buffers > 1 else ""),
        f"{fmt_count(s.reduce)} · {b}" + (" · 2" if buffers > 1 else ""),
        group="temporaries" if cfg.zero < 3 else "model states",
        category="gradients" if cfg.zero < 3 else "optimizer",
    )
    if cfg.offload_optimizer and cfg.offload_to == "nvme":
        _optimizer_to_nvme(ledger)
    big = int(shape.get("largest_tensor") or 0)
    if cfg.offload_optimizer:
        if cfg.zero >= 2:
            _to_host(ledger, "gradients", "cpu")  # pinned host memory, NVMe or not
        if cfg.zero < 3:  # no fp32 partition on the GPU at the step: the reduction's copy
            z12.reduction(ledger, cfg, psi, s.reduce)
        if cfg.zero < 3 and big:
            dg.add_line(
                ledger,
                "DeepSpeed offload: GPU buffer of the largest parameter",
                big * w,
                "largest tensor · w",
                f"{fmt_count(big)} · {w}",
                group="temporaries",
            )
    elif cfg.zero == 3 and cfg.precision in ("mixed", "fp32") and not cfg.fp32_grads:
        dg.fp32_sub_group(ledger, cfg, shape, s.acc, psi)
    elif cfg.precision in ("mixed", "fp32") and not cfg.fp32_grads:
        z12.step_partition(ledger, cfg, shape, w, psi, s.reduce)
    if z12.accum_attribute_runs(cfg):  # ZeRO-1's fp32 grad_accum (offloaded, or fp16)
        z12.accum_attribute(ledger, cfg, shape, psi)
    if cfg.offload_optimizer and cfg.zero == 3 and cfg.offload_ratio is not None:
        dg.kept_on_gpu(ledger, cfg, shape, psi)
    if cfg.zero == 3:
        _stage3(ledger, cfg, shape, s)


def _stage3(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], s: Settings) -> None:
    psi, w = dl.partitioned(cfg, shape), s.w
    for ln in ledger.lines:  # grad_partitions_flat_buffer: zeros made with the optimizer
        if ln.category == "gradients" and ln.group == "model states" and ln.bytes:
            ln.name += " (one flat buffer made with the optimizer: alive all step)"
            ln.category = "optimizer"
            if s.acc != w:  # made in grad_accum_dtype
                ln.bytes, ln.unsharded = ln.bytes * s.acc / w, ln.unsharded * s.acc / w
                ln.substituted += f" → {s.acc} B each (grad_accum_dtype)"
    if cfg.offload_param:
        _to_host(ledger, "parameters", dsc.param_device(cfg))
    small, how = persistent_params(shape, s.persistence)
    if adapters := dl.persistent_adapters(cfg, shape, s.persistence):
        small, how = small + adapters, f"{how} + {fmt_count(adapters)} of LoRA's A and B"
    if small:
        dg.add_line(
            ledger,
            "DeepSpeed persistent parameters (gathered on every rank)",
            small * w,
            "Ψ_persistent · w",
            f"{fmt_count(small)} · {w}: {how}",
            group="model states",
            category="parameters",
        )
    module = int(shape.get("largest_module_params") or shape.get("largest_tensor") or 0)
    ahead = min(s.prefetch, psi)
    if not module:
        ledger.note("DeepSpeed ZeRO-3's gathered module not counted: give the model's shape")
    dg.add_line(
        ledger,
        "DeepSpeed ZeRO-3 gathered parameters (a module + the prefetch bucket)",
        (module + ahead) * w,
        "(largest module + stage3_prefetch_bucket_size) · w",
        f"({fmt_count(module)} + {fmt_count(ahead)}) · {w}",
        category="parameters",
    )
    _kept_at_turn(ledger, shape, psi - module, w, s.reuse)
    if cfg.offload_param:
        # A gather copies each host partition to the GPU (``ds_tensor.to(device)``) beside the
        # gathered buffer — one copy handed to the all-gather, or a list of them concatenated
        # into the flat buffer's own partition — and frees the copies once the gather is done
        # (partition_parameters.py all_gather_coalesced at bf6b9802c, the #2653 PEFT's README
        # names, and _all_gather_dtype / _all_gather_sequential at edaa7221): the largest
        # gather's partitions twice while it runs. Measured: PEFT's mt0-xxl row, whose
        # 1.02e9-element head is gathered at the end of forward (0.806 without it).
        n = cfg.gpus
        dg.add_line(
            ledger,
            "DeepSpeed ZeRO-3 offload_param: the gathered partitions' GPU copies (during a gather)",
            (module + ahead) * w / n,
            "(largest module + stage3_prefetch_bucket_size) · w / N",
            f"({fmt_count(module)} + {fmt_count(ahead)}) · {w} / {n}",
            category="parameters",
        )


def _kept_at_turn(ledger: Ledger, shape: dict[str, Any], rest: int, w: int, reuse: int) -> None:
    """Once a step's module trace is recorded (every step after the first), a module's
    parameters are not released while any module within ``stage3_max_reuse_distance`` (1e9)
    elements of the trace ahead uses them (partitioned_param_coordinator.py
    ``__params_to_release``, at bf6b9802c and edaa7221). Forward's last modules come back
    first in backward, 2·S later (S: the elements after them in forward), so every module
    with S < 1e9 / 2 stays gathered across the turn — none when the head alone reaches that
    (mt5-xxl's, BLOOM's 250k-piece heads), about 5e8 elements otherwise (T5-XL: the head and
    the last 7 decoder blocks); a smaller distance keeps less, 0 none."""
    if 2 * int(shape.get("head_params") or 0) >= reuse or rest <= 0:
        return
    kept = min(rest, reuse // 2)  # beyond the largest module the gathered line counts
    dg.add_line(
        ledger,
        "DeepSpeed ZeRO-3 parameters kept across forward's end (stage3_max_reuse_distance)",
        kept * w,
        f"min(Ψ − largest module, stage3_max_reuse_distance {fmt_count(reuse)} / 2) · w",
        f"{fmt_count(kept)} · {w}",
        category="parameters",
    )


# --------------------------------------------------------------------- host memory


@dataclass(frozen=True)
class HostLine:
    name: str
    bytes: float  # per rank
    formula: str
    pinned: bool


def host_lines(cfg: TrainingConfig, shape: dict[str, Any]) -> list[HostLine]:
    """What one rank keeps in host memory, in bytes: DeepSpeed's offload (``--deepspeed``),
    torchtune's activation offloading (``--activation-offload``)."""
    act = offloaded_inputs(cfg, shape)
    out = [HostLine(act.name, act.bytes, act.substituted + " B", True)] if act else []
    out += [HostLine(*x) for x in shape.get(HOST_KEY, [])]  # FSDP2's CPU offload (fsdp_offload)
    if not cfg.deepspeed or not cfg.zero or not (cfg.offload_optimizer or cfg.offload_param):
        return out
    s = Settings.of(cfg, shape)
    psi, n, w = dl.trainable(cfg, shape), cfg.gpus, s.w  # the optimizer's side: what trains
    part = dp.partition(cfg, shape, psi)[0]  # DeepSpeed's padded partition
    P = f"{fmt_count(psi)}/{n}"
    every = dl.partitioned(cfg, shape)  # the parameter partitions: frozen ones too
    nvme = cfg.offload_to == "nvme"  # the optimizer's device
    groups = dg.sub_groups(cfg, shape, psi)
    if cfg.offload_optimizer and not nvme:
        per, labels = dg.optimizer_per_param(cfg, shape)
        on_gpu = sum(groups.on_gpu(cfg.offload_ratio))  # offload_optimizer.ratio's GPU share
        cpu, P = (part - on_gpu, f"({P} − {fmt_count(on_gpu)} on the GPU)") if on_gpu else (part, P)
        out += [
            HostLine("fp32 master weights", 4 * cpu, f"4 B · {P}", cfg.zero < 3),
            HostLine(f"optimizer states ({labels})", per * cpu, f"{per:g} B · {P}", False),
            HostLine("fp32 gradient partition", 4 * cpu, f"4 B · {P}", True),
        ]
        P = f"{fmt_count(psi)}/{n}"
    if cfg.offload_optimizer and nvme:
        out += [HostLine(*x) for x in dg.nvme_host(cfg, shape, psi)]
        sub = groups.largest
        out.append(
            HostLine(
                "NVMe swap buffers of the optimizer (buffer_count 4 × largest sub-group, fp32)",
                dsc.OPTIMIZER_BUFFER_COUNT * sub * 4,
                f"4 · {fmt_count(sub)} · 4 B",
                True,
            )
        )
    if cfg.offload_optimizer and cfg.zero < 3:
        big = int(shape.get("largest_tensor") or 0)
        out += [
            HostLine(f"{8 * w}-bit partition for the upload", w * part, f"{w} B · {P}", True),
            HostLine(
                "largest parameter's gradient buffer", w * big, f"{w} B · {fmt_count(big)}", True
            ),
        ]
        if cfg.grads_kept:
            out.append(
                HostLine("gradients accumulated in host memory", w * part, f"{w} B · {P}", True)
            )
    if cfg.offload_optimizer and cfg.zero == 3:
        a = s.acc  # grad_partitions_flat_buffer: grad_accum_dtype, pinned in host memory
        out.append(HostLine(f"{8 * a}-bit gradient partitions", a * part, f"{a} B · {P}", True))
    if cfg.offload_param:
        nvme = dsc.param_device(cfg) == "nvme"  # its own device (offload_param.device)
        mine = dp.sixteen_bit(cfg, shape)[0]  # each tensor padded to N
        kept = min(mine, dsc.PARAM_MAX_IN_CPU) if nvme else mine
        E = f"{fmt_count(every)}/{n}"
        out.append(
            HostLine(
                f"{8 * w}-bit parameter partitions",
                w * kept,
                f"{w} B · " + (f"min({E}, max_in_cpu 1e9)" if nvme else E),
                True,
            )
        )
        if nvme:
            b = dsc.PARAM_BUFFER_COUNT * dsc.PARAM_BUFFER_SIZE
            out.append(
                HostLine(
                    "NVMe swap buffers of the parameters (5 × buffer_size 1e8)",
                    w * b,
                    f"{w} B · 5 · 1e8",
                    True,
                )
            )
    return out


_TORCHTUNE = "torchtune's activation offloading"


def host_summary(cfg: TrainingConfig, shape: dict[str, Any]) -> dict[str, Any] | None:
    """Host memory per rank and per node, pinned apart, and the verdict against ``cpu_mem``."""
    lines = host_lines(cfg, shape)
    if not lines:
        return None
    per_node = gpus_per_node(cfg)
    rank = sum(x.bytes for x in lines)
    pinned = sum(x.bytes for x in lines if x.pinned)
    node = rank * per_node
    cpu = int(cfg.cpu_mem * 1e9) if cfg.cpu_mem is not None else None
    by = [x for x, on in (("DeepSpeed", cfg.deepspeed), ("FSDP2's CPU offload", HOST_KEY in shape),
                          (_TORCHTUNE, cfg.activation_offload)) if on]  # fmt: skip
    return {
        "by": " and ".join(by),
        "lines": [
            {"name": x.name, "bytes": round(x.bytes), "calculation": x.formula, "pinned": x.pinned}
            for x in lines
        ],
        "per_rank_bytes": round(rank),
        "pinned_per_rank_bytes": round(pinned),
        "gpus_per_node": per_node,
        "per_node_bytes": round(node),
        "cpu_mem_bytes": cpu,
        "fits": None if cpu is None else node <= cpu,
    }


def host_text(host: dict[str, Any] | None) -> list[str]:
    """The host block the estimate prints."""
    if not host:
        return []
    k = host["gpus_per_node"]
    by = host.get("by") or "DeepSpeed"
    out = [f"Host (CPU) memory per rank, offloaded by {by} ({k} rank(s) per node):"]
    for x in host["lines"]:
        pin = ", pinned" if x["pinned"] else ""
        out.append(f"  {x['name']}: {fmt_bytes(x['bytes'], 'GB')} = {x['calculation']}{pin}")
    out.append(
        f"  per rank {fmt_bytes(host['per_rank_bytes'], 'GB')} (pinned "
        f"{fmt_bytes(host['pinned_per_rank_bytes'], 'GB')}); per node × {k}: "
        f"{fmt_bytes(host['per_node_bytes'], 'GB')}"
    )
    if host["cpu_mem_bytes"] is not None:
        word = "fits" if host["fits"] else "does not fit"
        out.append(
            f"  {'✅' if host['fits'] else '❌'} host memory {word}: "
            f"{fmt_bytes(host['per_node_bytes'], 'GB')} of {fmt_bytes(host['cpu_mem_bytes'], 'GB')}"
            " per node"
        )
    return out


__all__ = [
    "HostLine",
    "Settings",
    "engine",
    "gpus_per_node",
    "host_lines",
    "host_summary",
    "host_text",
    "persistent_params",
]
