"""Each stack's loss under LoRA (``--loss``), estimated as traced: the frozen LM head's input
and weight as the chunked, linear and fused losses and transformers' older losses hold them,
and the blocks' own moments where a small loss leaves the peak to them (#31).

Before (V 512, h 64, f 160, 64 × 2 tokens, r 8; estimate − trace): torchtune's chunked and
linear losses under autocast −460,848 B (0.77-0.83: each chunk's own copy of the frozen head's
weight); transformers-4.46/4.45 and linear-chunked −16,392 / −32,776 B (the head's input, held
by its caller); Liger/CCE all-linear −1,544 / −3,080 B (down's adapter going back), under
autocast −36,336 to −65,536 B (down's forward under LoRA); Liger under autocast +63,488 B (a
cached copy of a frozen weight); GPT-NeoX, Phi, Falcon with Liger/CCE 0.82-0.99 (their blocks'
moments gated to PyTorch's loss). Now within the losses' own scalars below the trace.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

# the scalars a chunked loss makes per chunk (torchtune's sums), uncounted as in full training
SCALARS = 48

LLAMA = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
    "model_type": "llama",
}  # fmt: skip

# (model kind: transformers' Llama, our blocks, or a tiny_neox kind; loss; targets; precision)
CASES = {
    "llama chunked amp q,v": ("llama", "chunked", "q,v", "amp-bf16"),
    "llama linear-chunked amp all-linear": ("llama", "linear-chunked", "all-linear", "amp-bf16"),
    "gpt_neox chunked amp v,down": ("gpt_neox", "chunked", "v,down", "amp-bf16"),
    "phi linear-chunked amp q,v": ("phi", "linear-chunked", "q,v", "amp-bf16"),
    "llama linear-chunked fp32 q,v": ("llama", "linear-chunked", "q,v", "fp32"),
    "llama 4.46 bf16 q,v": ("llama", "transformers-4.46", "q,v", "bf16"),
    "ours 4.45 mixed all-linear": ("ours", "transformers-4.45", "all-linear", "mixed"),
    "gpt_neox 4.46 fp32 all-linear": ("gpt_neox", "transformers-4.46", "all-linear", "fp32"),
    "llama liger fp32 v,down": ("llama", "liger", "v,down", "fp32"),
    "ours cce bf16 all-linear": ("ours", "cce", "all-linear", "bf16"),
    "ours liger mixed v,down": ("ours", "liger", "v,down", "mixed"),
    "llama liger amp all-linear": ("llama", "liger", "all-linear", "amp-bf16"),
    "llama liger amp q,v": ("llama", "liger", "q,v", "amp-bf16"),
    "ours cce amp v,down": ("ours", "cce", "v,down", "amp-bf16"),
    # GPT-NeoX's kind: the blocks' own moments (neox_moments, neox_qkv) read the loss's plan
    "gpt_neox liger bf16 q,v": ("gpt_neox", "liger", "q,v", "bf16"),
    "gpt_neox cce mixed q,v": ("gpt_neox", "cce", "q,v", "mixed"),
    "phi cce fp32 q,v": ("phi", "cce", "q,v", "fp32"),
    "phi liger amp q,v": ("phi", "liger", "q,v", "amp-bf16"),
    "falcon-7b liger amp all-linear": ("falcon-7b", "liger", "all-linear", "amp-bf16"),
}
# the q/k/v adapter's sum under ``mixed`` (neox_qkv): 24 B over, as under PyTorch's loss
OVER = 24


def _model(tmp_path: Path, kind: str) -> str:
    from tests.profiling.trace.tiny_neox import neox_spec

    if kind in ("llama", "ours"):
        path = tmp_path / "config.json"
        path.write_text(json.dumps(LLAMA), encoding="utf-8")
        return f"hf:{path}"
    return neox_spec(tmp_path, kind)


@pytest.mark.parametrize("case", list(CASES))
def test_a_loss_under_lora_is_estimated_as_traced(tmp_path: Path, case: str) -> None:
    pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    from profiling.models.implementation import project_blocks

    kind, loss, targets, precision = CASES[case]
    cfg = TrainingConfig(
        model=_model(tmp_path, kind), seq=64, batch=2, precision=precision, loss=loss,
        target="cuda", lora_rank=8, lora_targets=targets,
    )  # fmt: skip
    with project_blocks() if kind == "ours" else contextlib.nullcontext():
        est, traced = estimate(cfg), trace_step(cfg)
    gap = est.per_gpu_bytes - traced.peak_bytes
    assert -SCALARS <= gap <= OVER, (case, est.per_gpu_bytes, traced.peak_bytes, gap)
