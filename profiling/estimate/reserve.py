"""The caching allocator's reserve in closed form: what ``max_memory_reserved()`` holds beyond
the allocated peak, term by term, when no trace of the step's allocations can be replayed.

Reserved exceeds allocated because freed blocks stay cached and a later request can use a cached
block only when it fits (``profiling.estimate.allocator`` has the rules). The terms, each an
upper bound checked against the allocator replay of traced steps (``benchmarks/
bench_reserve.py``: tiny to 8B models, one GPU and FSDP2 plans, 512 to 16,384 tokens, no and
full checkpointing, LoRA and QLoRA; tests/profiling/estimate/test_reserve.py):

- **cached blocks between sizes**: a fraction of the allocated peak — activations of one block
  are carved by best fit out of blocks cached by another of a different size, and the rest
  left over is too small for the next one;
- **the loss's logits**: the logits come in sizes one row apart (16-bit, their fp32 copy, the
  shifted rows' fp32 log-probabilities), each larger than any block cached before the loss, so
  each takes a segment of its own: up to three fp32 logits (b·s·V·4, of this rank's share of
  the sequence and the vocabulary) on top of the reserve of the step's peak outside the loss;
  where the loss is the peak, those segments are cached and reused from the next step on;
- **gradients between 1 and 10 MiB**: the large pool serves them from 20 MiB segments; made in
  backward between activations' frees, each can end up alone in one (20 MiB − its size each;
  only with default segments: expandable ones grow by pages, no segment per request);
- **FSDP2's streams**: blocks freed on one stream are never reused by another; the all-gather
  streams hold the unsharded parameters of two blocks (the one computing, the one prefetched),
  the reduce-scatter stream every gradient shard until the optimizer has stepped — both
  outside what the compute stream can reuse;
- **a partly empty segment of each pool**: 20 MiB large + 2 MiB small per stream (a 20 MiB and
  a 2 MiB page with expandable segments);
- **the activations' segments, once backward has freed them** (full fine-tuning on one GPU,
  ``activation_cache``): every gradient, optimizer state and step temporary is a parameter's
  size, and where the widest per-token activation (s·b·h) is smaller than the smallest
  parameter, none of them fits a freed activation's segment — the activations' segments stay
  cached beside the model states through the end of backward and the optimizer step.

What a step needs to run (``need_bound``) is less: on a GPU near full the allocator hands every
cached segment with no live block back to CUDA and retries before it runs out of memory
(``profiling.estimate.allocator``), so the loss's logits' cached segments one row apart give way;
what stays is the cached blocks between sizes inside segments that hold a live block, the
logits' segments a live block still holds, and the other terms — checked against the least
memory each traced step replays in (``benchmarks/bench_reserve.py``'s ``need`` columns).

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling._config_behaviours import LOSS_CHUNKS_DEFAULT
from profiling._config_plan import dp_degrees

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

MiB = 2**20
SMALL_SIZE = 1 * MiB  # the allocator's kSmallSize: larger requests come from the large pool
MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc: smaller large requests share 20 MiB segments
LARGE_BUFFER = 20 * MiB
SEGMENT_SLACK = 22 * MiB  # one partly empty 20 MiB large and 2 MiB small segment (or page)

# The fractions, default segments / expandable segments: the smallest that keep the closed form
# at or above every replay of benchmarks/bench_reserve.py's grid (its summary says by how much).
BETWEEN_SIZES = {False: 0.05, True: 0.05}
# A pipeline rank interleaves its microbatches: one's activations are carved out of blocks
# another's backward freed, and FSDP2 keeps the stage's gathered parameters from the first
# forward to the reduction. The smallest fractions that keep the closed form at or above the
# replay of every rank's whole step (profiling.plans.pipe_replay) on tests/profiling/plans/
# test_pipe_replay.py's tiny plans — 1F1B, interleaved and ZBV, PP 2 and 4, FSDP or none, TP,
# full checkpointing: 13.7 % (PP 2 without FSDP, rank 0, default segments: its 2-6 MiB
# activations each in a 20 MiB segment) and 12.2 % with expandable segments (ZBV × FSDP 2's
# rank 1: 8.9 % while the closed form put that rank's allocated peak 8.9 % above its trace,
# before profiling.plans.zbv_form followed FSDP; 13.2 % once ZBV's same-rank hand-over is
# counted once, profile.LocalHandOver: the peak 10 MiB lower, the replay unchanged)
BETWEEN_SIZES_PIPELINED = {False: 0.14, True: 0.14}
# fp32 logits' worth of segments the loss makes past what is cached: 16-bit logits, their fp32
# copy, the shifted rows' log-probabilities (3); transformers before 4.49 also copies the
# shifted logits in fp32, and its gradient finds only blocks one row short (18 s·V units
# reserved for 12 alive, benchmarks/peer/README.md): Llama 3.1 8B's replay at 12,264 tokens
# needs 3.44 fp32 logits above the reserve outside the loss; 4 are counted
LOSS_COPIES = {"transformers-4.46": 4, "transformers-4.45": 4}
LOSS_COPIES_DEFAULT = 3
MID_GRADIENTS = 0.5
# What the step needs on a GPU near full, default / expandable segments: cached blocks between
# sizes inside segments that a live block holds, and fp32 logits' worth of segments a live block
# holds at the peak (one row apart: the loss's copies are carved out of each other's segments)
# — the smallest that keep the bound at or above every replay's need in benchmarks/
# bench_reserve.py's grid (gpt2-small 8 × 1024: 0.94 fp32 logits above allocated × 1.03).
NEED_BETWEEN = {False: 0.03, True: 0.03}
# A pipeline rank's need, default / expandable segments: the smallest that keep the bound at or
# above the least memory each rank's whole step replays in (profiling.plans.pipe_replay, its
# need searched as on a GPU near full) on tests/profiling/plans/test_pipe_replay.py's tiny
# plans — 1F1B, interleaved and ZBV, FSDP or none, TP, full checkpointing: 4.9 % (1F1B without
# FSDP, rank 0, default segments: 3 % read 0.982 of its replay's need; ZBV's rank 1 4.4 %, 5.6 %
# once its same-rank hand-over is counted once, profile.LocalHandOver) and
# 0.9 % with expandable segments. Less than the reserve's (BETWEEN_SIZES_PIPELINED): a GPU near
# full hands back the segments no live block holds.
NEED_BETWEEN_PIPELINED = {False: 0.06, True: 0.03}
NEED_LOGITS_DEFAULT = 1.0
# transformers before 4.49 copies the shifted logits in fp32 too: Llama 3.1 8B QLoRA (amp-bf16,
# FA2, full checkpointing) replays in allocated + 0.0, 0.48, 1.016, 0.24 fp32 logits above
# allocated × 1.03 at 932, 2,551, 12,264 and 28,454 tokens
NEED_LOGITS = {"transformers-4.46": 1.1, "transformers-4.45": 1.1}
# A loss that works a chunk at a time (CHUNKING), in units of its largest request
# (loss_segments): the smallest whole number that keeps the bound at or above the least memory
# every replay of benchmarks/bench_reserve_losses.py's 86 steps runs in (the most one needed:
# 1.45 units above allocated × 1.03 + the segment terms, Cut Cross-Entropy, mixed, full
# checkpointing, 4 × 4,096 on its V 32,000 model, whose allocated estimate reads 0.94 of the
# trace; 1.19 where the estimate equals it)
NEED_CHUNKED = 2.0
# The activations' segments cached once backward frees them, in units of the activations at the
# end of forward (``activation_cache``): the smallest that keeps the closed form at or above the
# replay of full fine-tuning on llama-7b and gpt2-medium (fp32, bf16, mixed, amp-bf16; AdamW,
# SGD; 256-16,384 tokens): 1.146 on llama-7b bf16 AdamW 2 × 512 (6.0 GB cached beside 5.2 GB of
# activations: backward's own temporaries and the embedding-sized step temporary on top)
ACTIVATION_CACHE = 1.2


def _grad_bytes(cfg: TrainingConfig) -> int:
    """Bytes per element of a gradient: the trainable parameters' dtype."""
    return 2 if cfg.precision in ("bf16", "fp16") else 4


def _shards(cfg: TrainingConfig) -> int:
    """How many ways each parameter's gradient is split on this GPU."""
    shards = max(1, cfg.tp)
    # a plan's FSDP shards over dp_shard × cp × ulysses (torchtitan's dp_shard_cp mesh; the
    # sequence-data-parallel group of DeepSpeed-Ulysses), as plans/layout.py's shard_ranks
    if cfg.is_plan:
        fsdp_ranks = dp_degrees(cfg)[0] * max(1, cfg.cp) * max(1, cfg.ulysses)
        if cfg.fsdp and fsdp_ranks > 1:
            return shards * fsdp_ranks
    if cfg.fsdp or (cfg.zero or 0) >= 2:
        return shards * max(1, cfg.gpus)
    return shards


def fsdp2_streams(cfg: TrainingConfig) -> bool:
    """Whether the step runs its parameters' gathers and its gradients' reductions on streams
    of their own: FSDP2's, and ZeRO-3's — DeepSpeed gathers on the parameter coordinator's
    ``__allgather_stream`` and reduces on stage 3's ``__reduce_and_partition_stream``, each
    ``Stream()`` under ``overlap_comm``, on by default for stage 3
    (deepspeed/runtime/zero/partitioned_param_coordinator.py, stage3.py), and the trace runs
    ZeRO-3 as FSDP2, whose root group's unsharded gradients (the embeddings and an untied
    head, fp32 under mixed precision) are larger than any block cached at the end of
    backward: a segment of their own on top of the forward's."""
    zero3 = (cfg.zero or 0) == 3 and cfg.gpus > 1
    return (cfg.dp_shard or 1) > 1 or bool(cfg.fsdp) or zero3


def logits_bytes(cfg: TrainingConfig, shape: dict[str, Any]) -> int:
    """The fp32 logits of this rank's share: b · (s / (cp · ulysses)) · (V / tp) · 4 (a
    Ulysses rank holds its 1/N of the tokens outside attention, the loss's too)."""
    seq = cfg.seq_or_default() // (max(1, cfg.cp) * max(1, cfg.ulysses))
    vocab = int(shape.get("vocab") or 0) // max(1, cfg.tp)
    return cfg.batch * seq * vocab * 4


# The losses that never make the whole sequence's logits at once (``loss_rows``).
CHUNKING = ("chunked", "linear-chunked", "liger", "cce")
CHUNK_UNIT = "the LM head's gradient or its 16-bit copy where larger"


def loss_rows(cfg: TrainingConfig, shape: dict[str, Any]) -> int:
    """The most rows of logits the loss makes at once (of this rank's share): every
    token's, but where the loss works a chunk at a time — torchtune's CEWithChunkedOutputLoss
    (``logits.chunk``: each sequence's tokens in ``num_output_chunks``, ``tensor_split``'s
    sizes), its LinearCrossEntropyLoss (the labelled tokens of the whole batch split
    likewise), Liger's fused linear cross-entropy (``chunk_size`` of
    ``fused_linear_cross_entropy_forward``) — and none for Cut Cross-Entropy, which never
    makes logits (profiling.estimate.loss_tapes writes each loss's tensors)."""
    from profiling.models.loss_sizes import liger_chunking, tensor_split

    seq = cfg.seq_or_default() // (max(1, cfg.cp) * max(1, cfg.ulysses))
    tokens = cfg.batch * seq
    chunks = cfg.loss_chunks or LOSS_CHUNKS_DEFAULT
    if cfg.loss == "chunked":
        return cfg.batch * max(tensor_split(seq, chunks))
    if cfg.loss == "linear-chunked":
        return max(tensor_split(tokens, chunks))
    if cfg.loss == "liger":
        hidden, vocab = int(shape.get("hidden") or 1), int(shape.get("vocab") or 0)
        return min(tokens, liger_chunking(tokens, hidden, vocab)[0])
    if cfg.loss == "cce":
        return 0
    return tokens


def loss_segments(cfg: TrainingConfig, shape: dict[str, Any]) -> tuple[int, int]:
    """(unit, live): the loss's segments above the reserve outside it are ``live`` (what its own
    tensors hold beyond the end of forward at its peak: 0 where the unit's copies cover it) +
    a few ``unit``: the fp32 logits of the most rows it makes at once (``loss_rows``, this
    rank's share of the vocabulary) — and where it works a chunk at a time, the largest tensor
    its tapes make if larger (the LM head's weight gradient and its 16-bit copies, V·h each,
    which a chunk's logits of fewer than h rows are not: each takes a segment of its own)."""
    vocab = int(shape.get("vocab") or 0) // max(1, cfg.tp)
    rows = loss_rows(cfg, shape)
    if cfg.loss not in CHUNKING:
        return rows * vocab * 4, 0
    from profiling.errors import ProfilingError
    from profiling.estimate.losses import loss_plan

    try:
        plan = loss_plan(cfg, shape)
    except ProfilingError:  # not modelled: the whole sequence's logits, as before
        return logits_bytes(cfg, shape), 0
    if plan is None:
        return rows * vocab * 4, 0
    live = round(max(plan.forward_extra, plan.backward_extra, 0.0))
    # the LM head's gradient in its own dtype, made by the loss's backward where it trains
    head = 0 if cfg.lora_rank else vocab * int(shape.get("hidden") or 0) * _grad_bytes(cfg)
    return max(rows * vocab * 4, round(plan.largest), head), live


def mid_gradient_slack(cfg: TrainingConfig, shape: dict[str, Any]) -> int:
    """20 MiB − size for each trainable gradient of 1–10 MiB (full fine-tuning's; a LoRA
    adapter's gradients are in the small pool at the ranks people use)."""
    if cfg.lora_rank or cfg.expandable_segments:
        return 0
    each, shards, out = _grad_bytes(cfg), _shards(cfg), 0
    for numel, count in shape.get("param_numels") or []:
        size = -(-int(numel) // shards) * each
        if SMALL_SIZE < size < MIN_LARGE_ALLOC:
            out += (LARGE_BUFFER - size) * int(count)
    return out


def stream_pools(cfg: TrainingConfig, shape: dict[str, Any]) -> tuple[int, int]:
    """(all-gather, reduce-scatter) streams' pools under FSDP2: two blocks' unsharded
    parameters in the compute dtype; every gradient shard, in the gradients' dtype — FSDP2
    reduce-scatters in ``reduce_dtype or grad_dtype`` and casts the shard to the parameters'
    ``orig_dtype`` on that stream (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:
    foreach_reduce), so 16-bit shards where the parameters are 16-bit (the replay of a bf16
    FSDP 4 toy: 40 MiB of pages for 32 MB of shards, where fp32's 4 bytes said 64 MB)."""
    if not fsdp2_streams(cfg):
        return 0, 0
    block = int(shape.get("block_params") or 0) // max(1, cfg.tp)
    compute = 4 if cfg.precision == "fp32" else 2
    params = int(shape.get("params") or 0) // max(1, cfg.tp) // max(1, cfg.pp)
    trainable = 0 if cfg.lora_rank else params
    return 2 * block * compute, -(-trainable // _shards(cfg)) * _grad_bytes(cfg)


def outside_loss(moments: list[Any]) -> int | None:
    """The largest of the estimate's moments outside the loss ("loss forward", "loss
    backward"); None when there are none."""
    outside = [int(m.bytes) for m in moments if not str(m.name).startswith("loss ")]
    return max(outside, default=None)


def _segment_terms(cfg: TrainingConfig, shape: dict[str, Any]) -> list[tuple[str, int]]:
    """The terms the reserve and the need share: segments that QLoRA's dequantized weights'
    rests (``profiling.estimate.dequant_rests``), mid-sized gradients, FSDP2's streams and each
    pool's partly empty segment hold whether or not the GPU is near full."""
    from profiling.estimate.dequant_rests import NAME, WEIGHTS, dequant_rests, weight_rests

    gather, scatter = stream_pools(cfg, shape)
    streams = 3 if fsdp2_streams(cfg) else 1
    rests, rests_how = dequant_rests(cfg)
    weights, weights_how = weight_rests(cfg)
    return [
        (f"{NAME} ({rests_how})", rests),
        (f"{WEIGHTS} ({weights_how})", weights),
        # no sizes in the name: a printed size must be a value of the record it is cited with
        ("mid-sized gradients alone in large-pool segments",
         round(mid_gradient_slack(cfg, shape) * MID_GRADIENTS)),
        ("FSDP2's all-gather streams (two blocks unsharded)", gather),
        ("FSDP2's reduce-scatter stream (the gradient shards)", scatter),
        (f"a partly empty segment of each pool{' per stream' if streams > 1 else ''}",
         SEGMENT_SLACK * streams),
    ]  # fmt: skip


def _smallest_parameter(cfg: TrainingConfig, shape: dict[str, Any]) -> int:
    """The smallest large-pool request a parameter's gradient, optimizer state or step
    temporary makes (bytes): its numel in the step's narrowest per-parameter dtype (16-bit
    gradients under bf16 and mixed); 0 where no parameter is larger than 1 MiB."""
    each = 2 if cfg.precision in ("bf16", "fp16", "mixed") else 4
    sizes = [int(numel) * each for numel, _ in shape.get("param_numels") or []]
    return min((n for n in sizes if n > SMALL_SIZE), default=0)


def activation_cache(cfg: TrainingConfig, shape: dict[str, Any], activations: int | None) -> int:
    """The activations' segments cached from backward on (bytes; 0: not this case): in full
    fine-tuning on one GPU, backward frees the activations as it makes the gradients, and the
    gradients, the optimizer's states and its step temporaries (parameter-sized, each in a
    segment of its own past 10 MiB) fit none of the freed blocks when the widest activation
    every block keeps for each token, s·b·h in the activations' dtype, is smaller than the
    smallest parameter's request — best fit then reserves new segments for all of them, and the
    activations' stay cached (``profiling.estimate.allocator``: ``get_free_block`` takes only a
    cached block at least the request's size; a freed block merges only within its segment).
    llama-7b bf16 AdamW 2 × 512 replays 6.0 GB above its allocated peak in the optimizer step
    for 5.2 GB of activations, where 5 % of allocated said 3.4 GB. A bound: where some
    activations are wider (the MLP's s·b·f) and are reused, fewer stay cached. Not under LoRA
    (no parameter-sized requests), a sharded or pipelined step (its shards and stages are
    other sizes: the fractions above were fitted to them) or an optimizer in backward."""
    if not activations or cfg.lora_rank or cfg.optimizer_in_bwd or cfg.pp > 1:
        return 0
    if _shards(cfg) > 1 or cfg.expandable_segments:  # expandable: one segment, pages reused
        return 0
    smallest = _smallest_parameter(cfg, shape)
    act = 4 if cfg.precision == "fp32" else 2
    widest = cfg.batch * cfg.seq_or_default() * int(shape.get("hidden") or 0) * act
    if not smallest or widest >= smallest:
        return 0
    return round(activations * ACTIVATION_CACHE)


def reserve_terms(
    cfg: TrainingConfig, allocated: int, outside_loss: int | None = None, loss: bool = True,
    activations: int | None = None,
) -> list[tuple[str, int]]:  # fmt: skip
    """What the reserve adds to ``allocated`` (the allocated peak), named, in bytes;
    ``outside_loss``: the allocated peak of the step's moments outside the loss (None: not
    known, the peak); ``loss``: whether this GPU computes the loss (a pipeline's last stage);
    ``activations``: the estimate's activations at the end of forward (None: not known)."""
    from profiling.estimate.shape import shape_of

    shape = shape_of(cfg)
    expandable = cfg.expandable_segments
    pipelined = cfg.pp > 1
    between = (BETWEEN_SIZES_PIPELINED if pipelined else BETWEEN_SIZES)[expandable]
    pre = allocated if outside_loss is None else min(allocated, outside_loss)
    # the larger of: the peak with its cached blocks; the reserve outside the loss with the
    # loss's own segments on top
    copies = LOSS_COPIES.get(cfg.loss, LOSS_COPIES_DEFAULT) if loss else 0
    unit, live = loss_segments(cfg, shape)
    # never more than the whole sequence's fp32 logits' copies (a short sequence's chunks
    # under a head whose V·h is the larger request: those copies held every replay then too)
    own = min(live + copies * unit, copies * logits_bytes(cfg, shape))
    logits = max(0, round(pre * (1 + between) + own) - round(allocated * (1 + between)))
    what = (f"its tensors at its peak and up to {copies:g} segments of its largest request (a "
            f"chunk's fp32 logits, {CHUNK_UNIT})" if live or cfg.loss in CHUNKING
            else f"up to {copies:g} fp32 logits' segments")  # fmt: skip
    cached = activation_cache(cfg, shape, activations)
    terms = [
        (f"cached blocks between sizes ({between:.0%} of allocated)", round(allocated * between))
        if cached <= allocated * between
        else (f"the activations' segments, cached from backward on: no parameter-sized gradient "
              f"or optimizer request fits them ({ACTIVATION_CACHE:g} × the activations)", cached),
        (f"the loss's logits in sizes one row apart ({what} above the reserve outside the loss)",
         logits),
    ]  # fmt: skip
    return [(name, n) for name, n in terms + _segment_terms(cfg, shape) if n > 0]


def need_terms(cfg: TrainingConfig, allocated: int, loss: bool = True) -> list[tuple[str, int]]:
    """What the allocator must hold beyond ``allocated`` for the step to run on a GPU near full
    (its cached segments with no live block handed back), named, in bytes."""
    from profiling.estimate.shape import shape_of

    shape = shape_of(cfg)
    expandable = cfg.expandable_segments
    between = (NEED_BETWEEN_PIPELINED if cfg.pp > 1 else NEED_BETWEEN)[expandable]
    copies = NEED_LOGITS.get(cfg.loss, NEED_LOGITS_DEFAULT) if loss else 0.0
    copies = NEED_CHUNKED if loss and cfg.loss in CHUNKING else copies
    logits = round(copies * loss_segments(cfg, shape)[0])
    what = (f"{copies:g} × its largest request, a chunk's fp32 logits, {CHUNK_UNIT}"
            if cfg.loss in CHUNKING else f"{copies:g} fp32 logits")  # fmt: skip
    terms = [
        (f"cached blocks between sizes in segments a live block holds ({between:.0%} of "
         "allocated)", round(allocated * between)),
        (f"the loss's logits in segments one row apart ({what})", logits),
    ]  # fmt: skip
    return [(name, n) for name, n in terms + _segment_terms(cfg, shape) if n > 0]


def need_bound(cfg: TrainingConfig, allocated: int, loss: bool = True) -> tuple[int, str]:
    """The least the allocator must be allowed to reserve for the step to run, bounded, and
    how (one line, its terms)."""
    from profiling.units import fmt_bytes

    terms = need_terms(cfg, allocated, loss)
    how = " + ".join(f"{name} {fmt_bytes(n)}" for name, n in terms)
    how = f"allocated + {how}, the cached segments with no live block handed back and retried"
    return allocated + sum(n for _, n in terms), how


def reserved_bound(
    cfg: TrainingConfig, allocated: int, outside_loss: int | None = None, loss: bool = True,
    activations: int | None = None,
) -> tuple[int, str]:  # fmt: skip
    """The reserve's bound and how it is made (one line, its terms)."""
    from profiling.units import fmt_bytes

    terms = reserve_terms(cfg, allocated, outside_loss, loss, activations)
    how = " + ".join(f"{name} {fmt_bytes(n)}" for name, n in terms)
    return allocated + sum(n for _, n in terms), f"allocated + {how}"


__all__ = [
    "SEGMENT_SLACK",
    "activation_cache",
    "logits_bytes",
    "need_bound",
    "need_terms",
    "outside_loss",
    "reserve_terms",
    "reserved_bound",
]
