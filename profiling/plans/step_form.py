"""A plan's optimizer step in closed form: the temporaries it holds at its highest, as the
trace shows them (``tests/profiling/plans/test_closed_form.py``).

No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.estimate.states import _TEMP_LISTS, optimizer_states
from profiling.models.config import WorkloadConfig
from profiling.plans.layout import Stage
from profiling.plans.shapes import _shard, stage_tensors

# How many copies of a Partial gradient, reduce-scattered to the parameter's rows, one
# parameter's step holds at once (with foreach, one at a time): each op that reads the gradient
# redistributes it anew — Adam's and RMSprop's addcmul_(grad, grad) two, SGD's add_ one,
# Adagrad's addcmul_ two, and with foreach its numerator (grad × −lr stays Partial, every row)
# and its redistribution beside the root: four
_PARTIAL_READS = {"adam": (2, 2), "adamw": (2, 2), "rmsprop": (2, 2), "adagrad": (4, 2),
                  "sgd": (1, 1), "sgd-nomomentum": (1, 1)}  # fmt: skip


def step_counters(optimizer: str, tensors: int) -> int:
    """Bytes of the optimizer's step counters: a 0-d fp32 ``step`` per parameter in Adam's,
    RMSprop's (``_init_group``) and Adagrad's (made in ``__init__``) state; SGD keeps none
    (torch/optim/adam.py, rmsprop.py, adagrad.py, sgd.py). RMSprop's and Adagrad's were left
    out: a PP 2 x FSDP 2 plan's last rank 80 B below its trace."""
    return 4 * tensors if optimizer in ("adam", "adamw", "rmsprop", "adagrad") else 0


def step_order(w: WorkloadConfig, stage: Stage, t: int, n: int, fsdp: bool) -> list[int]:
    """Elements of each parameter of ``stage`` on this rank, in the order the optimizer steps
    them (the module's: the embedding, the blocks, the final norm and the output); FSDP's
    padded shards over ``n`` ranks."""
    blocks = stage_tensors(w, stage, stage.layers, t)[: 9 * stage.layers]
    emb = [(w.vocab // t, w.hidden)] if stage.embedding else []
    head = [(w.hidden, 1), (w.vocab // t, w.hidden)] if stage.head else []
    return [_shard(d, r, n) if fsdp else d * r for d, r in emb + blocks + head]


def _loop(sizes: list[int], k: int) -> int:
    """Elements a for-loop step holds at its highest: ``k`` scratch tensors of the parameter
    it steps beside the one it made for the parameter before, which its Python variable
    (Adam's ``denom``, RMSprop's ``avg``, Adagrad's ``std``: torch/optim/adam.py, rmsprop.py,
    adagrad.py, _single_tensor_*) keeps until the new one is assigned: the trace's step on
    PP 2 x FSDP 2, an FFN weight after its equal (3 x 360,448 B where 2 x were counted) or the
    output after the final norm (+512 B)."""
    if not k:
        return 0
    return max(k * n + (sizes[i - 1] if i else 0) for i, n in enumerate(sizes))


def step_scratch(
    cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, local: int, sizes: list[int]
) -> int:
    """The optimizer step's temporaries: foreach's lists over the ``local`` elements or a
    for-loop's over each tensor of ``sizes`` (``step_order``) in turn, or foreach's copies of
    the ``Partial`` gradients (``_partial_copies``); under mixed precision without FSDP one
    fp32 gradient at a time (``MasterWeightOptimizer``), the TP embedding's the largest
    (``_embedding_step``)."""
    k = _TEMP_LISTS.get(cfg.optimizer, (0, 0))
    foreach = cfg.foreach if cfg.foreach is not None else not cfg.fsdp
    m = 2 if cfg.precision == "bf16" else 4
    tp_embedding = stage.embedding and cfg.tp > 1
    if cfg.precision != "mixed" or cfg.fsdp:
        if not foreach:
            return _loop(sizes, k[1]) * m
        return _partial_copies(cfg, w, stage, k[0] * local) * m
    largest = max(sizes)
    scratch = largest * 4 * (1 + (k[0] if foreach else k[1]))  # one fp32 gradient at a time
    if tp_embedding:
        scratch = max(scratch, _embedding_step(w, cfg.tp, cfg.optimizer, foreach))
    return scratch


def partial_momentum(cfg: TrainingConfig, w: WorkloadConfig, tp_embedding: bool) -> int:
    """The bytes SGD's momentum of the first stage's TP embedding holds beyond its V/t rows:
    without FSDP its gradient reaches the optimizer ``Partial`` with every row of the
    vocabulary (``embedding_grad_rows``), and SGD's first step makes the buffer as
    ``torch.clone(grad)`` (torch/optim/sgd.py), a ``Partial`` DTensor of the whole table that
    every later ``mul_``/``add_`` keeps so (adding it to the row-wise weight reduce-scatters a
    copy: ``_PARTIAL_READS``). Adam's, RMSprop's and Adagrad's states start as ``zeros_like``
    of the weight: its rows only. FSDP hands the optimizer the reduced shard."""
    if not tp_embedding or cfg.fsdp or cfg.optimizer != "sgd":
        return 0
    per = sum(b for _, b, _ in optimizer_states(cfg.optimizer, cfg.precision, None))
    return int((w.vocab - w.vocab // cfg.tp) * w.hidden * per)


def _partial_copies(cfg: TrainingConfig, w: WorkloadConfig, stage: Stage, lists: int) -> int:
    """Elements a foreach step holds at its highest beside its ``lists``, under tensor
    parallelism without FSDP: the norms' gradients and the first stage's embedding's (every row
    of the vocabulary: ``embedding_grad_rows``) reach it ``Partial``, and each foreach op that
    reads them redistributes every one to its parameter's placement first, a copy of the local
    size per read, all alive until the op returns (``_PARTIAL_READS``). Adam's
    ``_foreach_addcmul_(exp_avg_sqs, grads, grads)`` two before its list (torch/optim/adam.py
    ``_multi_tensor_adam``): on a stage of few blocks above the list — ZBV's first stage of one
    block at TP 2 (fp32, Adam) 624,640 B below its trace before, 1F1B's stage of two blocks
    not. RMSprop's ``_foreach_addcdiv_(params, grads, avg)`` one beside its ``avg``; Adagrad's
    ``_foreach_addcdiv_(params, numerator, std)`` one beside ``std`` and ``numerator`` (grads ×
    −lr: a ``Partial`` embedding's every row), torch/optim/rmsprop.py, adagrad.py at torch
    2.13 — SHORT's ZBV TP 2 fp32 stage 0 (one block) 2,099,200 B (RMSprop) and 4,196,352 B
    (Adagrad, rank 0's peak: 0.972 of its trace) below before, a norm's 1,024 B on the
    others. SGD's ``_foreach_add_(params, grads)``: one (2,097,152 B below on that stage)."""
    if cfg.tp == 1 or cfg.fsdp or cfg.optimizer not in _PARTIAL_READS:
        return lists
    h = w.hidden
    el = (2 * stage.layers + stage.head) * h + (w.vocab // cfg.tp * h if stage.embedding else 0)
    reads = _PARTIAL_READS[cfg.optimizer][0]
    if cfg.optimizer == "rmsprop":
        return max(reads * el, lists + el)
    if cfg.optimizer == "adagrad":
        rows = (w.vocab - w.vocab // cfg.tp) * h if stage.embedding else 0
        return max(2 * el, lists + rows + el)
    if cfg.optimizer == "sgd":
        # with momentum the buffers are Replicate: SGD's first step makes each as
        # ``device_grads[i].detach().clone()`` (torch/optim/sgd.py ``_multi_tensor_sgd``) and
        # DTensor's clone of a Partial gradient reduces it first. A later step's
        # ``_foreach_add_(bufs, grads)`` copies the norms' Partial gradients to the buffers'
        # placement and ``_foreach_add_(params, bufs)`` the embedding's whole-vocabulary buffer
        # to the weight's V/t rows: two ops, each with its own copies — the larger, not their
        # sum (SHORT's ZBV TP 2 fp32 first stage: 2,048 B over its trace before)
        norms = (2 * stage.layers + stage.head) * h
        return max(lists, norms, el - norms)
    # Adam's before its list; SGD's without momentum one read by
    # ``_foreach_add_(params, grads)``: the norms' and the embedding's copies together
    return max(lists, reads * el)


def _embedding_step(w: WorkloadConfig, t: int, optimizer: str, foreach: bool) -> int:
    """The first stage's embedding stepped under TP with fp32 master weights, one parameter
    at a time: its gradient is ``Partial`` with every row of the vocabulary
    (``embedding_grad_rows``), so its fp32 copy is the whole table, and each op of the step
    that reads it reduce-scatters it to the parameter's V/t rows (``_PARTIAL_READS``)."""
    reads = _PARTIAL_READS.get(optimizer, (2, 2))[0 if foreach else 1]
    return w.vocab * w.hidden * 4 + reads * (w.vocab // t) * w.hidden * 4


__all__ = ["partial_momentum", "step_counters", "step_order", "step_scratch"]
