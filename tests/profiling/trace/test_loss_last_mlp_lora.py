"""The last block's MLP going back after another stack's loss under LoRA (``--loss``), estimated
as traced (#31).

Causes: (1) BLOOM's own moments (``neox_moments``) were gated to PyTorch's loss and the fallback
(``losses.moments`` with ``last_mlp``) left out BLOOM's frozen down's unsaved input and adapted
down's gradients: bloom_gelu_back's five f-wide temporaries sit beside down's input gradient.
(2) ``losses.after_loss`` freed the frozen LM head's input copy the loss's tape keeps (the
final norm's output, or matmul's copy of a strided chunk) though the LoRA lines had taken it off
the end of forward (nothing saves it): one s·b·h tensor short, wherever the MLP, not the loss,
leads (V 128 beside h 128, f 512).

Before (estimate − trace, 64 × 2 tokens, r 8): BLOOM (V 512, h 64) chunked fp32 q,v −163,848 B
(0.933), Liger fp32 q,v −131,080 B (0.946), linear-chunked bf16 q,v −46,088 B (0.969); on the
small shape Llama chunked fp32 q,v −65,544 B (0.988), GPT-NeoX litgpt fp32 q,v −65,544 B (0.984),
BLOOM litgpt fp32 q,v −327,688 B (0.938); LitGPT's loss with an adapted down on GPT-NeoX, Phi,
Falcon (neox_moments left LitGPT's loss out) fp32 −262,152 B (0.942), bf16 0.967, under
autocast 0.918-0.93. Now within the losses' own scalars below the trace
(torchtune's chunks' 48 B), or above it by neox_moments' bound for an adapted down (its
adapter's gradients, as under PyTorch's loss).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.test_losses_lora import LLAMA, SCALARS  # the same toy and allowance

SMALL = {"vocab_size": 128, "hidden_size": 128, "intermediate_size": 512}

# (kind, small shape, loss, targets, precision, most over the trace)
CASES = {
    "bloom chunked fp32 q,v": ("bloom", False, "chunked", "q,v", "fp32", 8),
    "bloom linear-chunked bf16 q,v": ("bloom", False, "linear-chunked", "q,v", "bf16", 8),
    "bloom liger fp32 q,v": ("bloom", False, "liger", "q,v", "fp32", 8),
    "bloom cce mixed q,v": ("bloom", False, "cce", "q,v", "mixed", 8),
    "bloom liger amp q,v": ("bloom", False, "liger", "q,v", "amp-bf16", 8),
    "bloom chunked fp32 v,down": ("bloom", False, "chunked", "v,down", "fp32", 4_096),
    "small bloom litgpt fp32 q,v": ("bloom", True, "litgpt", "q,v", "fp32", 8),
    "small bloom litgpt bf16 v,down": ("bloom", True, "litgpt", "v,down", "bf16", 8),
    "small llama chunked fp32 q,v": ("llama", True, "chunked", "q,v", "fp32", 8),
    "small llama chunked bf16 q,v": ("llama", True, "chunked", "q,v", "bf16", 8),
    "small llama litgpt fp32 v,down": ("llama", True, "litgpt", "v,down", "fp32", 8),
    "small gpt_neox litgpt bf16 q,v": ("gpt_neox", True, "litgpt", "q,v", "bf16", 8),
    # neighbours: under autocast the head's input is autocast's copy, freed at once
    "small bloom chunked amp q,v": ("bloom", True, "chunked", "q,v", "amp-bf16", 8),
    # LitGPT's loss on GPT-NeoX's kind (neox_moments read it not): an adapted down going back
    # (neox_moments' bound, as under PyTorch's loss), and under autocast the MLP going forward
    "small gpt_neox litgpt fp32 v,down": ("gpt_neox", True, "litgpt", "v,down", "fp32", 4_096),
    "small phi litgpt bf16 v,down": ("phi", True, "litgpt", "v,down", "bf16", 2_048),  # 0.967
    "small falcon-7b litgpt amp v,down": ("falcon-7b", True, "litgpt", "v,down", "amp-bf16", 8),
    "small gpt_neox litgpt amp v,down": ("gpt_neox", True, "litgpt", "v,down", "amp-bf16", 8),
    # LitGPT's own Phi (our blocks) under autocast: neox_amp_moments read it not (0.908, −4,352)
    "small phi litgpt amp v,down": ("phi", True, "litgpt", "v,down", "amp-bf16", 8),
    "small phi litgpt amp q,v": ("phi", True, "litgpt", "q,v", "amp-bf16", 8),
    "small falcon-40b litgpt amp q,v": ("falcon-40b", True, "litgpt", "q,v", "amp-bf16", 8),
}


def _model(tmp_path: Path, kind: str, small: bool) -> str:
    from tests.profiling.trace.tiny_neox import BASE, neox_spec

    if kind == "llama":
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**LLAMA, **(SMALL if small else {})}), encoding="utf-8")
        return f"hf:{path}"
    return neox_spec(tmp_path, kind, {**BASE, **SMALL} if small else None)


@pytest.mark.parametrize("case", list(CASES))
def test_the_last_mlp_after_another_loss_is_estimated_as_traced(tmp_path: Path, case: str) -> None:
    pytest.importorskip("transformers", reason="the models are traced as transformers' modules")
    pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    kind, small, loss, targets, precision, over = CASES[case]
    cfg = TrainingConfig(
        model=_model(tmp_path, kind, small), seq=64, batch=2, precision=precision, loss=loss,
        target="cuda", lora_rank=8, lora_targets=targets,
    )  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    gap = est.per_gpu_bytes - traced.peak_bytes
    assert -SCALARS <= gap <= over, (case, est.per_gpu_bytes, traced.peak_bytes, gap)
