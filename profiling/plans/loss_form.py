"""The loss's own bytes on a pipeline's last stage (or a plan's head), in closed form:
what ``cross_entropy`` holds above what it keeps, per logit and per token
(``profiling.plans.closed_form`` counts them; here so that module stays within its lines).

No torch here.
"""

from __future__ import annotations


def loss_transients(t: int, c: int) -> tuple[int, int]:
    """Bytes per local logit the loss holds above what it keeps, in its forward and backward.
    Under tensor parallelism the loss is torch's ``loss_parallel``
    (torch/distributed/tensor/parallel/loss.py): ``_log_softmax`` holds the fp32 logits
    (``.float()``'s copy of 16-bit ones), ``shifted`` and the result at once (8 bytes above the
    log-probabilities it keeps, 4 of fp32 logits: the tensor itself) and
    ``_nll_loss_and_log_softmax_backward`` ``grad_input``, ``exp(x)`` and their sum, then the
    product (12 bytes); without it, ``.float()``'s fp32 copy of 16-bit logits (none of fp32
    ones) and 8 bytes back."""
    return (8 if c == 2 else 4, 12) if t > 1 else (4 if c == 2 else 0, 8)


def loss_rows(t: int, tokens: int) -> tuple[int, int]:
    """``loss_parallel``'s bytes beside its logits in forward (per token the fp32 all-reduced
    maximum, sum of exponentials and its log; the loss's two scalars not yet made) and backward
    (int64 targets, masked targets, mask index, fp32 gathered values, a bool mask; the loss's
    fp32 gradient it is handed); none without tensor parallelism."""
    return (12 * tokens - 8, 33 * tokens + 4) if t > 1 else (0, 0)


__all__ = ["loss_rows", "loss_transients"]
