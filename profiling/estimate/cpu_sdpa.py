"""SDPA with ``--dropout`` on the CPU target, refused in one sentence.

torch's CPU flash kernel refuses dropout (aten/src/ATen/native/transformers/sdp_utils_cpp.cpp,
``use_flash_attention_cpp``: ``check_for_dropout``), so a transformers module's SDPA runs its
math path (attention.cpp ``_scaled_dot_product_attention_math``: 16-bit q, k, v upcast to fp32,
the s² scores, probabilities and dropout's noise kept for backward), which the estimate does
not count: it counts what the CPU's flash kernel (or a GPU's kernel, which drops inside) keeps.
It read 0.73-0.84 of the trace on the V 512 toys at 64 × 2 tokens (gpt2 fp32 0.838, amp-bf16
0.80, bf16 0.734; llama amp-bf16 0.788; gpt_neox amp-bf16 0.812). Eager attention (the
s² tensors counted op by op) and the CUDA target are estimated; T5's math path is its own
(``estimate.t5``). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.errors import ProfilingError
from profiling.estimate.activations import Dims, _cuda

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def refuse_dropout(d: Dims, cfg: TrainingConfig) -> None:
    """Raise where a transformers module's SDPA would run its math path for dropout's sake."""
    from profiling.estimate.hf_ops import eager

    if cfg.dropout and not _cuda(cfg) and not eager(d, cfg) and d.arch != "t5":
        raise ProfilingError(
            "the estimate cannot model --dropout with SDPA on the CPU target (torch's CPU flash "
            "kernel refuses dropout and its math path keeps the s² scores and probabilities): "
            "use --attention eager or --target cuda, or trace the step"
        )


__all__ = ["refuse_dropout"]
