"""LoRA under FSDP2, as torchtune's ``lora_finetune_distributed`` shards it: traced now (the
trace refused every LoRA under ZeRO/FSDP), and the estimate's gathered parameters at the loss —
the root and the last block's all-gather output, its frozen weights and adapters — which it
left out: a tiny Llama read 0.866-0.909 of the trace (profiling.estimate.fsdp_lora)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step
from tests.profiling.trace.test_fsdp_block_gather import llama_toy  # the same toy

pytest.importorskip("peft", reason="the lora extra is not installed")


QV = ["q", "v"]


@pytest.mark.parametrize(
    ("layers", "tied", "precision", "gpus", "targets", "extra"),
    [
        (2, True, "bf16", 2, QV, {}),  # 0.9067 (−2,244,096 B: (root + block)·2)
        (2, False, "fp32", 2, QV, {}),  # 0.8655 tied
        (2, True, "bf16", 4, ["q", "k", "v", "o", "gate", "up", "down"], {}),
        (4, False, "bf16", 2, [*QV, "lm_head"], {}),  # the head's adapter in the root's group
        (2, True, "bf16", 2, QV, {"checkpointing": "full"}),
    ],
)
def test_lora_under_fsdp2_is_the_trace_at_the_loss(
    tmp_path: Path, layers: int, tied: bool, precision: str, gpus: int, targets: list[str],
    extra: dict[str, object],
) -> None:  # fmt: skip
    cfg = TrainingConfig.model_validate({
        "model": llama_toy(tmp_path, layers, tied), "seq": 256, "batch": 2, "precision": precision,
        "fsdp": True, "gpus": gpus, "target": "cpu", "lora_rank": 8, "lora_targets": targets,
        **extra,
    })  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.per_gpu_bytes == traced.peak_bytes, (est.peak_moment, traced.by_category)


@pytest.mark.parametrize("extra", [{"qlora": True, "torchao_nf4": True}, {"fsdp_flat": True}])
def test_what_the_trace_does_not_shard_under_lora_is_one_sentence(
    tmp_path: Path, extra: dict[str, object]
) -> None:
    cfg = TrainingConfig.model_validate({
        "model": llama_toy(tmp_path, 2, True), "seq": 16, "batch": 1, "precision": "bf16",
        "fsdp": True, "gpus": 2, "target": "cpu", "lora_rank": 8, "lora_targets": QV, **extra,
    })  # fmt: skip
    with pytest.raises(ProfilingError, match="FSDP2"):
        trace_step(cfg)


def _toy(tmp_path: Path, layers: int, tied: bool, vocab: int = 512, hidden: int = 64) -> str:
    config = {
        "model_type": "llama", "vocab_size": vocab, "hidden_size": hidden,
        "intermediate_size": 160, "num_hidden_layers": layers, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 512, "tie_word_embeddings": tied,
    }  # fmt: skip
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


@pytest.mark.parametrize(
    ("layers", "tied", "vocab", "extra"),
    [
        # the last block's copy-out: (root + 3·block)·g and block 0's saved tensors;
        # 0.7954 of the trace before (−204,200 B), fp32 on 16 tokens
        (2, True, 512, {"precision": "fp32"}),
        (3, True, 512, {"precision": "mixed"}),  # fp32 shards, bf16 gathers
        (4, True, 512, {"precision": "bf16", "gpus": 4, "lora_targets": ["all-linear"]}),
        (3, False, 512, {"precision": "bf16", "lora_targets": [*QV, "lm_head"]}),
        # autocast's 16-bit copies of the blocks' weights and adapters: 0.926 before
        (2, True, 512, {"precision": "amp-bf16"}),
        (3, True, 512, {"precision": "amp-bf16", "lora_targets": ["all-linear"]}),
        (2, True, 512, {"precision": "fp32", "checkpointing": "full"}),
        # one block, a large vocabulary: the root gathered again at backward's start (0.936)
        (1, False, 8192, {"precision": "bf16"}),
    ],
)
def test_lora_under_fsdp2_on_few_tokens_is_the_trace(
    tmp_path: Path, layers: int, tied: bool, vocab: int, extra: dict[str, object]
) -> None:
    cfg = TrainingConfig.model_validate({
        "model": _toy(tmp_path, layers, tied, vocab), "seq": 16, "batch": 1, "fsdp": True,
        "gpus": 2, "target": "cuda", "lora_rank": 8, "lora_targets": QV, **extra,
    })  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.per_gpu_bytes == traced.peak_bytes, (est.peak_moment, traced.by_category)


@pytest.mark.parametrize("tied", [True, False])
def test_mixed_lora_under_fsdp2_shards_fp32_and_gathers_bf16(tmp_path: Path, tied: bool) -> None:
    """FSDP2's mixed keeps the frozen base's shards in fp32 and gathers every parameter, the
    adapters too, in bf16 (so peft casts nothing): 0.9961 tied, 0.9776 untied before."""
    cfg = TrainingConfig.model_validate({
        "model": llama_toy(tmp_path, 2, tied), "seq": 256, "batch": 2, "precision": "mixed",
        "fsdp": True, "gpus": 2, "target": "cuda", "lora_rank": 8, "lora_targets": QV,
    })  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.per_gpu_bytes == traced.peak_bytes, (est.peak_moment, traced.by_category)


@pytest.mark.parametrize(
    ("precision", "checkpointing", "bound"),
    [
        ("mixed", "full", 1.0),  # 0.817 before (−2,358,304 B), audit7 D72
        ("bf16", "full", 1.0),
        ("amp-bf16", "full", 1.05),  # 0.902 before: a bound, 1.041
    ],
)
def test_the_top_block_going_back_under_lora_and_fsdp2_is_counted(
    tmp_path: Path, precision: str, checkpointing: str, bound: float
) -> None:
    """Blocks heavy beside the root (h 256, f 1024, V 256) on 256 tokens: the trace peaks as the
    top block goes back through its SwiGLU, gathered again (its all-gather output beside its
    parameters), which no estimate moment held (fsdp_lora_moments._top_back)."""
    cfg = TrainingConfig.model_validate({
        "model": _wide(tmp_path, "llama", tied=True), "seq": 256, "batch": 1,
        "precision": precision, "fsdp": True, "gpus": 2, "target": "cuda", "lora_rank": 8,
        "lora_targets": QV, "optimizer": "sgd", "checkpointing": checkpointing,
    })  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert traced.peak_bytes <= est.per_gpu_bytes <= bound * traced.peak_bytes, (
        est.peak_moment,
        traced.peak_bytes,
    )


def _wide(tmp_path: Path, model_type: str, tied: bool) -> str:
    """Blocks heavy beside the root (h 256, f 1024, V 256): the top block's moments lead."""
    config = {
        "model_type": model_type, "vocab_size": 256, "hidden_size": 256,
        "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 512, "tie_word_embeddings": tied,
    }  # fmt: skip
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


@pytest.mark.parametrize(
    ("model_type", "tied", "precision", "seq", "extra"),
    [
        # the top block's MLP going back: 0.9324 before (−1,546,272 B), audit7 D72
        ("llama", True, "amp-bf16", 256, {}),
        ("llama", True, "mixed", 256, {"lora_targets": ["all-linear"]}),  # 0.8734
        # down's adapter's sum going forward, the top block gathered: 0.8693 (−3,680,280 B)
        ("qwen2", False, "amp-bf16", 256, {"lora_targets": ["all-linear"]}),
        # the top block's pre_backward prefetching block 0, its shards cast to bf16 beside
        # its all-gather output: 0.9686 (−388,640 B; the MLP going back alone: −211,456)
        ("mistral", False, "mixed", 128, {"lora_dropout": 0.1}),
    ],
)
def test_the_top_block_without_checkpointing_under_lora_and_fsdp2_is_the_trace(
    tmp_path: Path, model_type: str, tied: bool, precision: str, seq: int,
    extra: dict[str, object],
) -> None:  # fmt: skip
    """Without checkpointing the blocks keep their saved tensors; the trace peaks at the top
    block (its MLP going forward or back, or its pre_backward's prefetch), where FSDP2 holds
    the root's and the top block's parameters and a block's all-gather output
    (profiling.estimate.fsdp_lora_top)."""
    cfg = TrainingConfig.model_validate({
        "model": _wide(tmp_path, model_type, tied), "seq": seq, "batch": 1,
        "precision": precision, "fsdp": True, "gpus": 2, "target": "cuda", "lora_rank": 16,
        "lora_targets": QV, "optimizer": "sgd", **extra,
    })  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.per_gpu_bytes == traced.peak_bytes, (est.peak_moment, traced.by_category)


@pytest.mark.parametrize(
    ("layers", "seq", "extra"),
    [
        # the loss forward: the shards, every group gathered, the last block's all-gather output
        # and the final norm's output the frozen head did not save; 0.6902 before (−2,685,704 B:
        # the weights counted whole, as ZeRO-2 replicates them, none gathered)
        (2, 64, {"precision": "bf16"}),
        (3, 64, {"precision": "amp-bf16"}),
        # the last block's copy-out: blocks 0..L − 2 kept gathered beside ZeRO-3's (L − 1)·block·g
        (2, 64, {"precision": "fp32"}),  # 0.9658 (−549,104 B) with the loss's moments alone
        (4, 16, {"precision": "fp32", "gpus": 4}),  # 0.9037 (−1,929,776 B)
        (2, 16, {"precision": "mixed"}),  # fp32 shards, bf16 gathers: 0.9213
        (3, 16, {"precision": "bf16", "checkpointing": "full"}),
        (3, 64, {"precision": "bf16", "lora_targets": [*QV, "lm_head"], "tied": False}),
    ],
)
def test_lora_under_fsdp2_without_resharding_is_the_trace(
    tmp_path: Path, layers: int, seq: int, extra: dict[str, object]
) -> None:
    """``--fsdp --zero 2`` with LoRA (``fully_shard(reshard_after_forward=False)``: torchtune's
    ``fsdp_reshard_after_forward: False``): the trace refused it and the estimate, unchecked,
    counted the frozen weights whole (profiling.estimate.fsdp_no_reshard)."""
    extra = {"lora_targets": QV, "gpus": 2, **extra}
    tied = bool(extra.pop("tied", True))
    cfg = TrainingConfig.model_validate({
        "model": llama_toy(tmp_path, layers, tied), "seq": seq, "batch": 1, "fsdp": True,
        "zero": 2, "target": "cpu", "lora_rank": 8, **extra,
    })  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.per_gpu_bytes == traced.peak_bytes, (est.peak_moment, traced.peak_phase)
    assert not [n for n in est.notes if n.startswith("unchecked:")]


@pytest.mark.parametrize(
    ("seq", "precision"),
    [
        (64, "bf16"),  # 0.7115 before (−1,376,876 B: nothing gathered counted), the loss backward
        (64, "mixed"),  # the embeddings' and norms' shards fp32: 0.9016 with 2 B
        (64, "amp-bf16"),  # backward's start: the root gathered again
        (16, "bf16"),  # block 0's copy-out
        (64, "bf16-zero2"),  # --zero 2: every group's packed storage kept gathered
    ],
)
def test_qlora_under_fsdp2_shards_the_packed_storage_and_is_the_trace(
    tmp_path: Path, seq: int, precision: str
) -> None:
    """QLoRA under ``--fsdp`` (the FSDP-QLoRA recipe): bitsandbytes' packed uint8 storage sharded
    and gathered by FSDP2, each QuantState whole on every rank, the adapters sharded and trained.
    The trace refused it and the estimate, unchecked, gathered nothing."""
    cfg = TrainingConfig.model_validate({
        "model": llama_toy(tmp_path, 2, True), "seq": seq, "batch": 1, "precision": precision,
        "fsdp": True, "gpus": 2, "target": "cpu", "lora_rank": 8, "lora_targets": QV,
        "qlora": True, "zero": 2 if precision.endswith("zero2") else 3,
    } | ({"precision": "bf16"} if precision.endswith("zero2") else {}))  # fmt: skip
    est, traced = estimate(cfg), trace_step(cfg)
    assert est.per_gpu_bytes == traced.peak_bytes, (est.peak_moment, traced.peak_phase)
    assert not [n for n in est.notes if n.startswith("unchecked:")]
    assert traced.by_category["buffers"] > 0  # the QuantStates, not sharded
