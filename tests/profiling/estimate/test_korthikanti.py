"""Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
arXiv 2205.05198), Table 2: activation memory per transformer layer of a GPT block in 16 bits
with dropout — held by the estimate's own per-layer lines (what ``estimate`` prints), with and
without tensor parallelism t and sequence parallelism, with no, selective and full
recomputation. The paper leaves out small buffers (§4.1); ours counts two of them, each said:
LayerNorm's fp32 mean and rstd (2 × 8 B per token) and, where the s² tensors are kept, the
causal mask our blocks' eager attention builds (s² bools, whole on every tensor-parallel rank),
else the attention's fp32 logsumexp (4 B per head and token) — none under selective
recomputation, which recomputes the core that makes it (as the trace runs it since #32)."""

from __future__ import annotations

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate

S, B, H, A, L = 2048, 2, 2048, 16, 4  # a GPT block of GPT-3 XL's width, micro-batch 2
# once per model, not per layer (the embeddings' dropout mask: estimate.gpt2_dropout, 9421334)
ONCE = ("final", "loss", "logits", "embedding", "head", "lm head", "rope", "the step's scalars",
        "dropout mask of the embeddings")  # fmt: skip


def _per_layer(tp: int, sp: bool, checkpointing: str) -> float:
    cfg = TrainingConfig(
        layers=L, hidden=H, heads=A, vocab=50257, arch="gpt2", seq=S, batch=B,
        precision="bf16", dropout=0.1, attention="eager",
        tp=tp, gpus=tp, sequence_parallel=sp, checkpointing=checkpointing,
    )  # fmt: skip
    est = estimate(cfg)
    lines = [c for c in est.components if c.category == "activations"]
    block = [c for c in lines if not c.name.removeprefix("Activations: ").lower().startswith(ONCE)]
    total = sum(c.bytes for c in block)
    return total if checkpointing == "full" else total / L


def _small(tp: int, sp: bool, mask: bool = False, lse: bool = True) -> float:
    stats = 2 * 8 * S * B / (tp if sp else 1)  # LayerNorm ×2: fp32 mean and rstd per token
    if not lse:
        return stats
    if mask:  # masked_fill keeps the causal mask, s² bools; softmax keeps no logsumexp
        return stats + S * S
    lse = 4 * A * S * B / tp  # the attention's fp32 logsumexp, split over the heads
    return stats + lse


PLANS = [(1, False), (2, False), (8, False), (2, True), (8, True)]


@pytest.mark.parametrize(("tp", "sp"), PLANS)
def test_no_recomputation(tp: int, sp: bool) -> None:
    sbh, attn = S * B * H, 5 * A * S / H
    paper = sbh / tp * (34 + attn) if sp else sbh * (10 + 24 / tp + attn / tp)
    assert _per_layer(tp, sp, "none") - _small(tp, sp, mask=True) == pytest.approx(paper, rel=1e-12)


@pytest.mark.parametrize(("tp", "sp"), PLANS)
def test_selective_recomputation(tp: int, sp: bool) -> None:
    # Megatron's selective recomputation: the s² parts (scores, softmax, its dropout) redone
    sbh = S * B * H
    paper = sbh * 34 / tp if sp else sbh * (10 + 24 / tp)
    kept = _per_layer(tp, sp, "selective") - _small(tp, sp, lse=False)
    assert kept == pytest.approx(paper, rel=1e-12)


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_full_recomputation_keeps_each_layers_input(tp: int) -> None:
    # 2·s·b·h per layer, L layers (the table's "full activation recomputation" row)
    assert _per_layer(tp, False, "full") == pytest.approx(2 * S * B * H * L, rel=1e-12)
