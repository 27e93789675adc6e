"""What a rank of a plan keeps, in closed form: its model states (the ZeRO paper's table, and a
stage's sharded weights and optimizer state) and what one block and the last stage's head save
for backward per microbatch (``profiling.plans.closed_form`` composes them into a stage's
actions; its module docstring says what each term is).

No torch here.
"""

from __future__ import annotations

from profiling._config_plan import ddp_alone
from profiling.config import TrainingConfig
from profiling.estimate.states import optimizer_states
from profiling.models.config import WorkloadConfig
from profiling.plans.compiled_form import lse_rows
from profiling.plans.profile import Vec, vec
from profiling.plans.ring_form import fused as _fused_sdpa
from profiling.plans.ring_form import sdpa_seed
from profiling.plans.shapes import Sizes, _shard, sdpa_kv
from profiling.plans.step_form import step_counters


def model_states(params: int, n: int, precision: str, fsdp: bool) -> dict[str, float]:
    """Bytes per rank of weights, gradients and Adam's state for ``params`` parameters over
    ``n`` data-parallel ranks: the ZeRO paper's table (K = 12 under mixed precision) for DDP
    (nothing sharded) and FSDP (ZeRO-3: everything over n), padding aside."""
    if precision == "mixed":
        per = (4, 4, 8) if fsdp else (2, 2, 12)
    elif precision == "bf16":
        per = (2, 2, 4)
    else:
        per = (4, 4, 8)
    div = n if fsdp else 1
    return {
        k: params * b / div for k, b in zip(("weights", "gradients", "optimizer"), per, strict=True)
    }


def block_activations(
    w: WorkloadConfig, tokens: int, t: int, c: int, seq: int, u: int = 1, ring: bool = False
) -> int:
    """Bytes one block saves for backward for ``tokens`` of this rank (see the module), ``seq``
    of them per sequence; under Ulysses (``u`` ranks) the attention's tensors are the whole
    sequence's for 1/u of the heads: the same bytes, but the logsumexp's padding is the whole
    sequence's. Around context parallelism's ring (``ring``) wo copies the merged output
    (``profiling.plans.ring_form``)."""
    h, f, a = w.hidden, w.ffn, w.heads
    q = a * w.head_dim
    lse_s = lse_rows(seq * u, c)
    norms = 2 * (h * c + 4) * tokens // t
    inputs = 2 * h * c * tokens  # gathered to the whole sequence under tensor parallelism
    # q, the keys and values repeated; the output; and wo's contiguous copy of it only under
    # the math kernel: flash and memory-efficient attention allocate their output as (b, s,
    # heads, d) and return it transposed (torch/_meta_registrations.py: the flash kernel's
    # empty_like of the transposed query, the efficient one's res.transpose(1, 2)), so
    # torchtitan's out.transpose(1, 2).contiguous() before wo copies nothing
    copy = 0 if _fused_sdpa(w.head_dim, c) and not ring else q
    kv = sdpa_kv(w, t) * t  # one key/value head a rank stays un-repeated (sdpa_kv)
    if u > 1:  # Ulysses: wo keeps to_sequence's copy beside the kernel's output, and the keys
        # and values of one head per rank (kv ≤ N, replicated or not) stay un-repeated: the
        # grouped-query repeat of a single head is an expand, a view of the received head
        copy = q
        kv = 2 * q if w.n_kv_heads > u else 2 * u * w.head_dim
    attention = (q + kv + q + copy) * c * tokens // t
    lse = 4 * (a // t // u) * lse_s * (tokens // seq)
    mlp = 4 * (f // t) * c * tokens
    return norms + inputs + attention + lse + mlp + sdpa_seed(w.head_dim, c)


def op_sac_activations(w: WorkloadConfig, tokens: int, t: int, c: int, seq: int, u: int = 1) -> int:
    """Bytes one block keeps under torchtitan's op-level selective checkpointing
    (``profiling.plans.op_sac``): its input (sequence-parallel under TP), the outputs of the
    1st, 3rd, 5th and 7th matmul (q, v, ``w1``'s and ``w2``'s; under TP ``w2``'s local partial
    sum over the whole sequence), the fused SDPA kernel's outputs (its output, fp32 logsumexp,
    seed and offset; the math kernel is not on torchtitan's list, so nothing of it), and under
    TP the outputs of both reduce-scatters (``wo``'s and ``w2``'s, sequence-sharded)."""
    h, f, a, hd = w.hidden, w.ffn, w.heads, w.head_dim
    q, kv = a * hd // t, w.n_kv_heads * hd // t
    x = tokens // t * h * c
    mms = (q + kv + f // t + h) * c * tokens
    attention = 0
    if _fused_sdpa(hd, c):
        lse_s = lse_rows(seq * u, c)
        attention = q * c * tokens + 4 * (a // t // u) * lse_s * (tokens // seq) + sdpa_seed(hd, c)
    scattered = 2 * x if t > 1 else 0
    return x + mms + attention + scattered


def head_activations(w: WorkloadConfig, tokens: int, t: int, c: int, pipelined: bool = True) -> int:
    """What the last stage keeps per microbatch beyond its blocks, as its trace shows: the
    loss's fp32 log-probabilities, the logits (the stage's output, which ``PipelineStage``
    keeps for the backward), the final norm's rstd and the loss; under tensor parallelism also
    the output's input, all-gathered to the whole sequence (torchtitan's ``ColwiseParallel(
    input_layouts=Shard(1))``: the matmul keeps the gathered copy for its weight gradient).

    Without a pipeline the step is ``cross_entropy(model(x), labels)``: nothing keeps the
    logits (``log_softmax`` saves its output only), and the final norm's input (``nn.RMSNorm``
    saves it) and the output's input (the norm's output, which ``nn.Linear`` saves for its
    weight gradient) are the head's own."""
    v, h = w.vocab, w.hidden
    gathered = tokens * h * c if t > 1 else 0
    own = tokens // t * h * c + (0 if t > 1 else tokens * h * c)
    if not pipelined:
        return (4 + 4 * v) * tokens // t + 8 + gathered + own
    return (4 + 4 * v + c * v) * tokens // t + 8 + gathered + own


def stage_states(cfg: TrainingConfig, tensors: list[tuple[int, int]], n: int) -> tuple[Vec, int]:
    """(the stage's base: sharded weights, optimizer state, step counters; gathered elements)."""
    s = Sizes.of(cfg)
    shards = [_shard(d, r, n) if cfg.fsdp else d * r for d, r in tensors]
    local = sum(shards)
    per_state = sum(b for _, b, _ in optimizer_states(cfg.optimizer, cfg.precision, None))
    counters = step_counters(cfg.optimizer, len(tensors))
    optimizer = int(local * (per_state + s.master)) + counters
    gathered = local * n if cfg.fsdp else local
    weights, alone = local * s.shard, ddp_alone(cfg)  # DDP alone: its buckets copy the gradients
    return vec(parameters=weights, optimizer=optimizer, buckets=weights * alone), gathered


__all__ = [
    "block_activations", "head_activations", "model_states", "op_sac_activations", "stage_states",
]  # fmt: skip
