"""The loss a causal LM's step ends with, as each training stack computes it.

What a loss keeps of the logits (V values per token: the largest tensors of a small model) is
the stack's, not the model's, so each is written here as its source runs it, op for op, from
the final norm's output and the LM head:

- ``transformers-4.46`` — transformers 4.46-4.48's ``ForCausalLMLoss`` (loss/loss_utils.py):
  ``logits.float()``, then ``logits[..., :-1, :].contiguous()``, the model's 16-bit logits held
  by its output meanwhile. ``transformers-4.45`` — 4.45 and earlier (``LlamaForCausalLM.forward``):
  ``self.lm_head(...).float()`` (the 16-bit logits freed at once), then the same shifted copy.
  4.49 on pads the labels instead (PR #35646): ``cross-entropy``, the blocks' own loss.
- ``litgpt`` — LitGPT's finetune scripts: ``model(input_ids, lm_head_chunk_size=128)`` (the head
  in 128-token chunks), the chunks cast to fp32 by Lightning Fabric's precision plugin as the
  model returns them, the last chunk shortened by one, ``chunked_cross_entropy`` on them with
  ``reduction="none"`` (litgpt/utils.py).
- ``litgpt-full`` — LitGPT's full.py: ``model(input_ids)`` (the whole head), the logits cast to
  fp32 by Fabric, then ``chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])``: the
  rows reshaped (a copy of the strided slice when b > 1) and split into chunks of 128 rows.
- ``chunked`` — torchtune's ``TransformerDecoder.chunked_output`` and
  ``CEWithChunkedOutputLoss``: the head on ``tensor_split(n, dim=1)`` chunks, each chunk
  ``.float()`` and ``cross_entropy(reduction="sum")`` in turn.
- ``linear-chunked`` — torchtune's ``LinearCrossEntropyLoss`` (mask_ignored_tokens): the
  hidden states of the labelled tokens ``index_select``-ed, then per chunk the head,
  ``.float()`` and the summed cross-entropy.
- ``liger`` — Liger Kernel's ``LigerFusedLinearCrossEntropyFunction``
  (ops/fused_linear_cross_entropy.py) called as its transformers patch calls it
  (``LigerForCausalLMLoss``): in forward, per chunk of tokens, the logits, the softmax's
  gradient written over them in place (its Triton kernel), the hidden states' gradient rows
  and the head's gradient accumulated; both gradients are what it saves for backward.
- ``cce`` — Apple's Cut Cross-Entropy (cut_cross_entropy/cce.py) as its transformers patch
  calls it (``shift=True``, ``filter_eps="auto"``): a fp32 log-sum-exp per token and the
  vocabulary's average logit in forward, the two gradients block by block in backward, no
  logits ever. Its Triton kernels are custom ops here whose fake implementations allocate
  what the kernels' wrappers allocate, with their matmul FLOPs (``KERNEL_FLOPS``).

Triton kernels do not run on the CPU (nor under fake tensors): where one writes in place, an
in-place op stands for it (it allocates nothing, as the kernel does not). Imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from profiling.models.kd_loss import TEACHER, distilled, forward_kl_chunked
from profiling.models.loss_sizes import LITGPT_CHUNK, liger_chunking

IGNORE = -100
COMPILED_CACHE = "_compiled_loss"  # where the LM head holds torchtune's compiled loss's graphs
HELD_LOGITS = "_litgpt_logits"  # where the LM head holds LitGPT's previous logits (``_litgpt``)


def capped(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """Gemma 2's soft cap, as transformers and LitGPT apply it: cap · tanh(logits / cap)."""
    return logits if not cap else torch.tanh(logits / cap) * cap


Hidden = Callable[[], torch.Tensor]


def lm_loss(
    kind: str,
    head: nn.Module,
    hidden_of: Hidden,
    targets: torch.Tensor,
    chunks: int = 8,
    softcap: float | None = None,
    cuda: bool = True,
    compiled: bool = False,
) -> torch.Tensor:
    """The loss ``kind`` computes from the final norm's output (B, T, h), the LM head and the
    next-token ``targets`` (B, T); ``cuda``: as on a GPU of compute capability 8 or more (where
    Liger accumulates 16-bit products into an fp32 head gradient in place).

    ``hidden_of`` makes the final norm's output, so each loss holds it exactly as long as its
    stack does: to the loss's end where the model hands it over (transformers' patches,
    torchtune's LinearCrossEntropyLoss), only through the LM head where the model returns
    logits (LitGPT, torchtune's chunked output). ``compiled``: torchtune's compile_loss, which
    compiles its chunked losses' ``compute_cross_entropy`` (``profiling.trace.compiled_loss``)."""
    if kind == "liger":
        return _liger(head, hidden_of(), targets, cuda)
    if compiled and kind in _TORCHTUNE:
        return _TORCHTUNE[kind](head, hidden_of, targets, chunks, _compiled_ce(head, kind))
    return _LOSSES[kind](head, hidden_of, targets, chunks, softcap)


def _ce_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """CEWithChunkedOutputLoss.compute_cross_entropy."""
    return F.cross_entropy(logits.float(), labels, ignore_index=IGNORE, reduction="sum")


def _compiled_ce(head: nn.Module, kind: str) -> Callable[..., torch.Tensor]:
    """``compute_cross_entropy`` as torchtune's ``apply_compile_strategy`` compiles it: one
    chunk's (head and) cross-entropy, partitioned once per shape and held by the head (the
    model's own cache: the untracked forward before the trace makes it, the step finds it)."""
    from profiling.trace.compiled_loss import compiled

    cache = head.__dict__.setdefault(COMPILED_CACHE, {})
    if kind == "chunked":
        return compiled(_ce_sum, cache)
    named = list(head.named_parameters())

    def linear_ce(*args: torch.Tensor) -> torch.Tensor:  # LinearCrossEntropyLoss's
        params = {n: a for (n, _), a in zip(named, args[:-2], strict=True)}
        logits = torch.func.functional_call(head, params, (args[-2],))
        return _ce_sum(logits, args[-1])

    run = compiled(linear_ce, cache)
    return lambda h, t: run(*(p for _, p in named), h, t)


def _transformers_446(
    head: nn.Module, hidden_of: Hidden, targets: torch.Tensor, _: int, softcap: float | None
) -> torch.Tensor:
    hidden = hidden_of()  # the model's forward holds hidden_states to its end
    logits = capped(head(hidden), softcap)  # the model's output holds it through the loss
    upcast = logits.float()
    shifted = upcast[..., :-1, :].contiguous()
    labels = targets[..., 1:].contiguous()
    return F.cross_entropy(shifted.view(-1, shifted.size(-1)), labels.view(-1))


def _transformers_445(
    head: nn.Module, hidden_of: Hidden, targets: torch.Tensor, _: int, softcap: float | None
) -> torch.Tensor:
    hidden = hidden_of()
    logits = capped(head(hidden), softcap).float()  # 16-bit logits freed as soon as upcast
    shifted = logits[..., :-1, :].contiguous()
    labels = targets[..., 1:].contiguous()
    return F.cross_entropy(shifted.view(-1, shifted.size(-1)), labels.view(-1))


def _litgpt(
    head: nn.Module, hidden_of: Hidden, targets: torch.Tensor, _: int, softcap: float | None
) -> torch.Tensor:
    hidden = hidden_of()
    logits = [capped(head(x), softcap) for x in hidden.split(LITGPT_CHUNK, dim=1)]
    del hidden  # GPT.forward returns the chunks: its x goes
    # The scripts call the model through Lightning Fabric, whose _FabricModule.forward returns
    # ``precision.convert_output(output)``: every floating output ``.to(torch.get_default_
    # dtype())``, fp32 in LitGPT's scripts, under bf16-true, bf16-mixed and bitsandbytes alike
    # (lightning/fabric/wrappers.py; plugins/precision/half.py, amp.py, bitsandbytes.py at
    # 438f29f, lightning 2.3.0.dev20240328 as LitGPT 43c44323 pins it). apply_to_collection
    # makes the new list while the model's 16-bit chunks are alive; those go with the old list.
    logits = [chunk.to(torch.float32) for chunk in logits]
    # The script's loop (litgpt/finetune/lora.py, fit()) binds ``logits = model(input_ids,
    # lm_head_chunk_size=128)`` and never deletes it, so the previous micro-batch's chunks —
    # and through their graph whatever an autograd Function keeps as a ctx attribute, which
    # backward never releases (bitsandbytes <= 0.43.1's 4-bit inputs) — live until this
    # forward has returned its own. The head holds them between the steps of the trace.
    head.__dict__.pop(HELD_LOGITS, None)
    logits[-1] = logits[-1][..., :-1, :]  # "shift the targets such that output n predicts n+1"
    head.__dict__[HELD_LOGITS] = (logits, _held_by_graph(logits))
    targets = targets[..., 1:]
    rows = [chunk.reshape(-1, chunk.size(-1)) for chunk in logits]
    labels = [t.reshape(-1) for t in targets.split(logits[0].size(1), dim=1)]
    losses = [
        F.cross_entropy(r, t, ignore_index=IGNORE, reduction="none")
        for r, t in zip(rows, labels, strict=True)
    ]
    counted = (targets != IGNORE).sum()
    return torch.cat(losses).sum() / counted.maximum(torch.ones_like(counted))


def _litgpt_full(
    head: nn.Module, hidden_of: Hidden, targets: torch.Tensor, _: int, softcap: float | None
) -> torch.Tensor:
    """litgpt/finetune/full.py's fit() (Lightning-AI/litgpt 00af8b0 and 43c44323, as at
    2685705): ``logits = model(input_ids)``, through Fabric's _FabricModule as in ``_litgpt``
    (its output cast to fp32), then ``chunked_cross_entropy(logits[..., :-1, :],
    targets[..., 1:])`` (litgpt/utils.py): no head chunks, so the logits' rows are reshaped and
    split into chunks of 128 rows, each one's cross-entropy with ``reduction="none"``."""
    hidden = hidden_of()
    logits = capped(head(hidden), softcap)
    del hidden  # GPT.forward returns the logits: its x goes
    logits = logits.to(torch.float32)  # Fabric's convert_output; the 16-bit logits go
    # fit() binds ``logits`` until the next forward has returned (as in ``_litgpt``)
    head.__dict__.pop(HELD_LOGITS, None)
    head.__dict__[HELD_LOGITS] = ([logits], _held_by_graph([logits]))
    rows = logits[..., :-1, :].reshape(-1, logits.size(-1))  # strided when b > 1: a copy
    labels = targets[..., 1:].reshape(-1)
    losses = [
        F.cross_entropy(r, t, ignore_index=IGNORE, reduction="none")
        for r, t in zip(rows.split(LITGPT_CHUNK), labels.split(LITGPT_CHUNK), strict=True)
    ]
    counted = (labels != IGNORE).sum()
    return torch.cat(losses).sum() / counted.maximum(torch.ones_like(counted))


def _held_by_graph(outputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """What the graph of ``outputs`` keeps as ctx attributes, which backward never releases
    (the 4-bit layers' inputs of bitsandbytes <= 0.43.1, marked ``held_by_graph`` by the
    trace's stand-in): holding them here keeps them as long as the logits are held."""
    held: list[torch.Tensor] = []
    seen: set[object] = set()
    todo = [t.grad_fn for t in outputs]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if getattr(node, "held_by_graph", False):  # a custom Function's ctx: it has them
            held.extend(getattr(node, "saved_tensors", ()))
        todo.extend(fn for fn, _ in node.next_functions)
    return held


def _torchtune_chunked(
    head: nn.Module, hidden_of: Hidden, targets: torch.Tensor, chunks: int,
    ce: Callable[..., torch.Tensor] | None = None,
) -> torch.Tensor:  # fmt: skip
    hidden = hidden_of()
    logits = [head(chunk) for chunk in hidden.tensor_split(chunks, dim=1)]  # the model's output
    del hidden  # TransformerDecoder.forward returns the chunks: its h goes
    teacher = TEACHER.get()  # torchtune's KD recipe: the teacher, then its loss, before this
    if teacher is not None:
        teacher_logits = teacher(chunks)
        kd_loss = forward_kl_chunked(logits, teacher_logits, targets, chunks)
    total_elements = (targets != IGNORE).sum()
    labels = [t.reshape(-1) for t in targets.tensor_split(chunks, dim=1)]
    rows = [chunk.reshape(-1, chunk.size(-1)) for chunk in logits]
    total: Any = 0.0
    for r, t in zip(rows, labels, strict=True):
        total += (ce or _ce_sum)(r, t)
    loss = total / total_elements
    if teacher is None:
        return loss
    del logits, rows, teacher_logits  # _loss_step's del, before the loop's sum
    return distilled(loss, kd_loss)


def _torchtune_linear(
    head: nn.Module, hidden_of: Hidden, targets: torch.Tensor, chunks: int,
    ce: Callable[..., torch.Tensor] | None = None,
) -> torch.Tensor:  # fmt: skip
    hidden = hidden_of()  # the model's output, held by the recipe until the loss is computed
    valid = _every_token(targets.reshape(-1))  # torch.where(targets != ignore_index)[0]
    total_valid = valid.numel()
    del valid
    flat_targets = targets.reshape(-1)
    flat = hidden.reshape(-1, hidden.shape[-1])
    indices = _every_token(flat_targets)
    flat, flat_targets = flat.index_select(0, indices), flat_targets.index_select(0, indices)
    total = torch.tensor(0.0, device=targets.device)
    for h, t in zip(
        flat.tensor_split(chunks, dim=0), flat_targets.tensor_split(chunks, dim=0), strict=True
    ):
        if ce is not None:
            total += ce(h, t)
            continue
        logits = head(h)
        total += _ce_sum(logits, t)
    return total / total_valid


def _every_token(targets: torch.Tensor) -> torch.Tensor:
    """``torch.where(targets != IGNORE)[0]`` on a batch whose every token is labelled: the mask
    and the int64 indices it allocates (fake tensors cannot run ``nonzero``)."""
    mask = targets != IGNORE
    del mask
    return torch.arange(targets.numel(), device=targets.device)


# ---------------------------------------------------------------- Liger's fused linear CE


class _LigerFusedLinearCE(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]  # autograd.Function's own signature
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, cuda: bool
    ) -> torch.Tensor:
        tokens, h = x.shape
        size, count = liger_chunking(tokens, h, weight.shape[0])
        grad_input = torch.zeros_like(x)
        grad_weight = torch.zeros_like(weight) if weight.requires_grad else None
        loss_1d = torch.zeros(tokens, dtype=torch.float32, device=x.device)
        mask = target != IGNORE  # its .item() count is a number on the host
        mask.sum()
        del mask
        grad_logits = None
        for i in range(count):
            rows = x[i * size : (i + 1) * size]
            logits = rows @ weight.t()
            logits = logits.contiguous()
            logits.exp_()  # the Triton kernel: loss into loss_1d, the gradient over the logits
            grad_logits = logits
            grad_input[i * size : (i + 1) * size] = grad_logits @ weight
            if grad_weight is None:
                continue
            fused = (
                cuda and grad_weight.dtype == torch.float32 and grad_logits.dtype != torch.float32
            )
            if fused:  # sm80+: addmm accumulates 16-bit products into fp32 in place
                if rows.dtype != grad_logits.dtype:
                    rows = rows.to(grad_logits.dtype)
                torch.addmm(grad_weight, grad_logits.t(), rows, out_dtype=torch.float32,
                            out=grad_weight)  # fmt: skip
            else:
                grad_weight += torch.mm(grad_logits.t(), rows).float()
        del grad_logits
        loss = torch.sum(loss_1d)
        if grad_weight is not None:
            grad_weight = grad_weight.to(weight.dtype)
        ctx.save_for_backward(grad_input.detach(), grad_weight.detach() if grad_weight is not None
                              else None)  # fmt: skip
        return loss

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        # grad_output is 1.0 for the step's loss: Liger skips its multiply then.
        grad_input, grad_weight = ctx.saved_tensors
        return grad_input, grad_weight, None, None


def _liger(
    head: nn.Module, hidden: torch.Tensor, targets: torch.Tensor, cuda: bool
) -> torch.Tensor:
    # LigerForCausalLMLoss: the labels padded and shifted (no copy of the hidden states); the
    # soft cap, if any, is applied inside the kernel.
    labels = F.pad(targets, (0, 1), value=IGNORE)
    shift_labels = labels[..., 1:].contiguous()
    weight = _head_weight(head)
    rows = hidden.view(-1, hidden.shape[-1])
    return _LigerFusedLinearCE.apply(rows, weight, shift_labels.view(-1), cuda)


# ---------------------------------------------------------------- Apple's Cut Cross-Entropy


@torch.library.custom_op("profiling_losses::cce_lse_forward", mutates_args=())
def cce_lse_forward(
    e: torch.Tensor, c: torch.Tensor, rows: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``cce_lse_forward_kernel``: the log-sum-exp per row (fp32), its locks, the average logit
    per vocabulary entry (fp32, for the backward's filter)."""
    raise RuntimeError("Cut Cross-Entropy's Triton kernel is represented, not run")


@cce_lse_forward.register_fake
def _(e: torch.Tensor, c: torch.Tensor, rows: int) -> tuple[torch.Tensor, ...]:
    lse = e.new_empty((rows,), dtype=torch.float32)
    locks = e.new_empty((-(-rows // 128),), dtype=torch.int32)
    return lse, locks, e.new_empty((c.shape[0],), dtype=torch.float32)


@torch.library.custom_op("profiling_losses::cce_backward", mutates_args=())
def cce_backward(
    e: torch.Tensor, c: torch.Tensor, lse: torch.Tensor, c_grad: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``cce_backward_kernel``: the two gradients (zeroed, then accumulated block by block from
    recomputed logits) and their locks."""
    raise RuntimeError("Cut Cross-Entropy's Triton kernel is represented, not run")


@cce_backward.register_fake
def _(
    e: torch.Tensor, c: torch.Tensor, lse: torch.Tensor, c_grad: bool
) -> tuple[torch.Tensor, ...]:
    blocks = -(-c.shape[1] // 64)
    de = torch.empty_like(e)
    de_locks = e.new_empty((-(-lse.shape[0] // 128), blocks), dtype=torch.int32)
    if not c_grad:  # a frozen head: no gradient, no locks (empty stand-ins)
        return de, de_locks, c.new_empty((0,)), c.new_empty((0,), dtype=torch.int32)
    dc = torch.empty_like(c)
    return de, de_locks, dc, c.new_empty((-(-c.shape[0] // 128), blocks), dtype=torch.int32)


def _cce_forward_flops(e: Any, c: Any, rows: int, **_: Any) -> int:  # out_val=
    return 2 * rows * int(c.shape[0]) * int(c.shape[1])


def _cce_backward_flops(e: Any, c: Any, lse: Any, c_grad: bool, **_: Any) -> int:
    # The logits recomputed block by block, then the gradients of e (and of c).
    return (3 if c_grad else 2) * 2 * int(lse.shape[0]) * int(c.shape[0]) * int(c.shape[1])


class _CutCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]  # autograd.Function's own signature
        ctx: Any, e: torch.Tensor, c: torch.Tensor, targets: torch.Tensor
    ) -> torch.Tensor:
        ctx.dtypes, ctx.c_grad = (e.dtype, c.dtype), c.requires_grad
        dtype = _autocast_dtype()
        if dtype is not None:  # cast outside autocast's cache: copies it saves
            e, c = e.to(dtype=dtype), c.to(dtype=dtype)
        rows = targets.numel()
        lse, locks, logit_avg = cce_lse_forward(e, c, rows)
        del locks
        neg_dot = e.new_zeros((rows,), dtype=torch.float32)  # indexed_neg_dot_forward_kernel
        nll = neg_dot.add_(lse)
        ctx.save_for_backward(e, c, lse, targets, logit_avg)
        return nll.mean()

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        e, c, lse, _targets, logit_avg = ctx.saved_tensors
        order = torch.argsort(logit_avg).to(torch.int32)  # sort_logit_avg (compiled)
        de, de_locks, dc, dc_locks = cce_backward(e, c, lse, ctx.c_grad)
        del order, de_locks, dc_locks
        de = de.to(dtype=ctx.dtypes[0])
        return de, dc.to(dtype=ctx.dtypes[1]) if ctx.c_grad else None, None


def _cce(
    head: nn.Module, hidden_of: Hidden, targets: torch.Tensor, _: int, softcap: float | None
) -> torch.Tensor:
    hidden = hidden_of()  # the patched forward's hidden_states
    # linear_cross_entropy(hidden, lm_head.weight, labels, shift=True): the valid rows are
    # (labels[..., 1:] != ignore).nonzero(), as int32 offsets summed to int64 per row.
    e = hidden.contiguous()
    shifted = targets[..., 1:]
    pairs = torch.empty((shifted.numel(), shifted.dim()), dtype=torch.int64, device=e.device)
    pairs = pairs.to(torch.int32)  # (targets != ignore).nonzero().to(torch.int32)
    valids = pairs.sum(1)
    del pairs
    return _CutCrossEntropy.apply(e.flatten(0, -2), _head_weight(head), valids)


def _head_weight(head: nn.Module) -> torch.Tensor:
    weight = getattr(head, "weight", None)
    assert isinstance(weight, torch.Tensor), "the config refuses a fused loss on an adapted head"
    return weight


def _autocast_dtype() -> torch.dtype | None:
    """The autocast dtype in force (the trace's autocast is the cpu device's), else None."""
    for device in ("cuda", "cpu"):
        if torch.is_autocast_enabled(device):
            return torch.get_autocast_dtype(device)
    return None


KERNEL_FLOPS: dict[object, Callable[..., int]] = {
    torch.ops.profiling_losses.cce_lse_forward: _cce_forward_flops,
    torch.ops.profiling_losses.cce_backward: _cce_backward_flops,
}

_LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "transformers-4.46": _transformers_446,
    "transformers-4.45": _transformers_445,
    "litgpt": _litgpt,
    "litgpt-full": _litgpt_full,
    "chunked": lambda head, hidden, targets, chunks, _: _torchtune_chunked(
        head, hidden, targets, chunks
    ),
    "linear-chunked": lambda head, hidden, targets, chunks, _: _torchtune_linear(
        head, hidden, targets, chunks
    ),
    "cce": _cce,
}
_TORCHTUNE = {"chunked": _torchtune_chunked, "linear-chunked": _torchtune_linear}

__all__ = ["KERNEL_FLOPS", "capped", "lm_loss"]
