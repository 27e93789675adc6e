"""torchtune's knowledge distillation step in the traced loop (``--kd-teacher``): the student
as built, the teacher frozen beside it, the teacher's chunked logits handed to the student's
chunked loss (``profiling.models.kd_loss.TEACHER``) when the recipe computes them.

Read from torchtune at bd2a0fc: recipes/knowledge_distillation_single_device.py
(``_setup_teacher_model``: built under ``training.set_default_dtype(self._dtype)``, then
``model.eval()``; ``_loss_step``: ``logits = self._model(tokens)``, then ``with torch.no_grad():
teacher_logits = self._teacher_model(tokens)``, both chunked by ``set_num_output_chunks``),
torchtune/modules/transformer.py (``unembed``: the final norm, then ``chunked_output``:
``[self.output(chunk) for chunk in h.tensor_split(n, dim=1)]``, no upcast). Imports torch.
"""

from __future__ import annotations

import torch
from torch import nn

from profiling.models.kd_loss import TEACHER


def teacher_chunks(teacher: nn.Module, ids: torch.Tensor, chunks: int) -> list[torch.Tensor]:
    """The teacher's chunked logits under no_grad: transformers' decoder's final hidden state,
    then its LM head chunk by chunk (``chunked_output``); our blocks' whole logits split."""
    from profiling.models.hf_module import HFCausalLM

    with torch.no_grad():
        if isinstance(teacher, HFCausalLM):
            hidden, head = teacher.final_hidden(ids), teacher.head()
            return [head(chunk) for chunk in hidden.tensor_split(chunks, dim=1)]
        # our reference blocks return the whole logits: chunks of one tensor, freed together
        return list(teacher(ids).tensor_split(chunks, dim=1))


class KDStep(nn.Module):
    """``model(ids, labels)``: the student's loss, the teacher's forward inside it."""

    def __init__(self, student: nn.Module, teacher: nn.Module) -> None:
        super().__init__()
        self.student = student
        self.teacher = teacher

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        token = TEACHER.set(lambda chunks: teacher_chunks(self.teacher, ids, chunks))
        try:
            return self.student(ids, labels)
        finally:
            TEACHER.reset(token)


def kd_step(student: nn.Module, teacher: nn.Module) -> KDStep:
    """The student wrapped as the recipe's step; the teacher frozen (no_grad: nothing saved,
    no gradient), in eval mode as ``_setup_teacher_model`` leaves it."""
    teacher.requires_grad_(False)
    teacher.eval()
    return KDStep(student, teacher)


__all__ = ["KDStep", "kd_step", "teacher_chunks"]
