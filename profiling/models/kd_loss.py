"""torchtune's knowledge distillation loss on chunked logits, op for op, for the trace.

``ForwardKLWithChunkedOutputLoss`` and ``ForwardKLLoss`` (torchtune/modules/loss/kd_losses.py
at bd2a0fc), as recipes/knowledge_distillation_single_device.py's ``_loss_step`` calls them:
the student's chunked logits (``TransformerDecoder.chunked_output``), then the teacher's under
``torch.no_grad()``, the KL loss, then ``CEWithChunkedOutputLoss`` on the student's chunks; both
logits ``del``-ed after. ``TEACHER`` is how the traced step hands the teacher's forward to the
chunked loss (``profiling.models.losses``): set by ``profiling.trace.distill.KDStep`` around the
student's forward. Imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import torch
import torch.nn.functional as F

IGNORE = -100
KD_RATIO = 0.5  # the shipped configs' kd_ratio (a scalar: no memory)

# the teacher's chunked logits for the step's token ids (None: no distillation)
TEACHER: ContextVar[Callable[[int], list[torch.Tensor]] | None] = ContextVar(
    "kd_teacher", default=None
)


def _forward_kl(student: torch.Tensor, teacher: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``ForwardKLLoss.forward(..., normalize=False)``."""
    teacher_prob = F.softmax(teacher, dim=-1, dtype=torch.float32)
    inf_mask = torch.isinf(student)
    student_logprob = F.log_softmax(student, dim=-1, dtype=torch.float32)
    prod_probs = torch.masked_fill(teacher_prob * student_logprob, inf_mask, 0)
    x = torch.sum(prod_probs, dim=-1).view(-1)
    mask = (labels != IGNORE).int()
    return -torch.sum(x * mask.view(-1), dim=0)


def forward_kl_chunked(
    student_logits: list[torch.Tensor],
    teacher_logits: list[torch.Tensor],
    labels: torch.Tensor,
    chunks: int,
) -> torch.Tensor:
    """``ForwardKLWithChunkedOutputLoss.forward``."""
    teacher = [t.reshape(-1, t.size(-1)) for t in teacher_logits]
    student = [s.reshape(-1, s.size(-1)) for s in student_logits]
    mask = (labels != IGNORE).int()
    targets = [t.reshape(-1) for t in labels.tensor_split(chunks, dim=1)]
    total: torch.Tensor | float = 0.0
    for s, t, target in zip(student, teacher, targets, strict=True):
        total = total + _forward_kl(s, t, target)
    # ``if sum_masks == 0`` reads the sum on the host (fake tensors cannot branch on it): the
    # sum is made and held to the return, every token labelled here
    sum_masks = torch.sum(mask.view(-1), dim=0)
    loss = total / torch.sum(mask.view(-1), dim=0)
    del sum_masks
    assert isinstance(loss, torch.Tensor)
    return loss


def distilled(class_loss: torch.Tensor, kd_loss: torch.Tensor) -> torch.Tensor:
    """The recipe's loop: ``(1 − kd_ratio)·class_loss + kd_ratio·kd_loss``, backwarded."""
    return (1 - KD_RATIO) * class_loss + KD_RATIO * kd_loss


__all__ = ["TEACHER", "distilled", "forward_kl_chunked"]
