"""The KD teacher's states (``--kd-teacher``, ``profiling.estimate.distill``): its weights in
the student's dtype and transformers' rotary buffers of its own, beside the student's all step
(recipes/knowledge_distillation_single_device.py ``_setup_teacher_model`` at bd2a0fc). Apart
from ``estimate.distill`` (which the losses import): ``step_scalars`` imports the losses. No
torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.distill import teacher_dims, teacher_shape

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.ledger import Ledger


def teacher_lines(ledger: Ledger, cfg: TrainingConfig) -> None:
    """``_setup_teacher_model``: the teacher's weights in the student's dtype (``set_default_
    dtype(self._dtype)``), all step; transformers' rotary buffers of its own."""
    if cfg.kd_teacher is None:
        return
    from profiling.estimate.ledger import Line
    from profiling.estimate.step_scalars import rotary_buffers

    psi = int(teacher_shape(cfg)["params"])
    w = 4 if cfg.precision == "fp32" else 2
    ledger.add(Line("Teacher model: weights (frozen, knowledge distillation)", psi * w, psi * w,
                    f"Ψ_t · {w} B", f"{psi} · {w}", "model states", "parameters"))  # fmt: skip
    if bufs := rotary_buffers(teacher_dims(cfg)):
        ledger.add(Line("Buffers: the KD teacher's rotary inv_freq and original_inv_freq (fp32)",
                        bufs, bufs, "2·⌈r_t/2⌉·4 B", str(bufs), "inputs", "buffers"))  # fmt: skip


def teacher_buffers(cfg: TrainingConfig) -> int:
    """The teacher's rotary buffers (held the whole step, in every moment)."""
    if cfg.kd_teacher is None:
        return 0
    from profiling.estimate.step_scalars import rotary_buffers

    return rotary_buffers(teacher_dims(cfg))


__all__ = ["teacher_buffers", "teacher_lines"]
