"""The closed-form estimate against numbers worked out by hand (and DeepSpeed's formulas)."""

from __future__ import annotations

import pytest

from profiling.errors import ProfilingError
from profiling.estimate import step_scalars
from profiling.estimate.memory import (
    EstimateInput,
    deepspeed_zero2_gpu_bytes,
    deepspeed_zero3_gpu_bytes,
    estimate,
    render_text,
)

GiB = 2**30


def _by_name(est) -> dict[str, int]:
    return {c.name: c.bytes for c in est.components}


def _states(**kw) -> int:
    """Model-state bytes per GPU (no shape given, so no activations)."""
    est = estimate(EstimateInput(**{"precision": "mixed", **kw}))
    assert all(c.group != "activations" for c in est.components)
    return sum(c.bytes for c in est.components if c.group == "model states")


# ----------------------------------------------------------------- DeepSpeed's estimators


def test_deepspeed_reference_values() -> None:
    # DeepSpeed 0.19.8 prints these (its "GB" is GiB): 7B on 2 GPUs, 1B on 1 GPU, ZeRO-2.
    assert deepspeed_zero2_gpu_bytes(7_000_000_000, 2) / GiB == pytest.approx(71.71, abs=0.005)
    assert deepspeed_zero2_gpu_bytes(1_000_000_000, 1) / GiB == pytest.approx(18.63, abs=0.005)
    # Its formula, spelled out: 2Ψ + 18Ψ/N.
    assert deepspeed_zero2_gpu_bytes(7_000_000_000, 2) == 14_000_000_000 + 63_000_000_000
    assert deepspeed_zero2_gpu_bytes(7_000_000_000, 2, cpu_offload=True) == 14_000_000_000
    # ZeRO-3: 4 B per parameter of the largest layer + 18Ψ/N.
    assert deepspeed_zero3_gpu_bytes(7_000_000_000, 131_072_000, 8) == (
        4 * 131_072_000 + 18 * 7_000_000_000 // 8
    )
    assert deepspeed_zero3_gpu_bytes(7_000_000_000, 100, 8, cpu_offload=True) == 400 + (
        2 * 7_000_000_000 // 8
    )
    assert deepspeed_zero3_gpu_bytes(7e9, 100, 8, cpu_offload=True, cpu_offload_params=True) == 400


def test_fp32_grads_reproduces_deepspeed_zero2() -> None:
    for psi, n in ((7_000_000_000, 2), (1_000_000_000, 1), (1_300_000_000, 8)):
        ours = _states(params=psi, gpus=n, zero=2, fp32_grads=True)
        assert ours == pytest.approx(deepspeed_zero2_gpu_bytes(psi, n), abs=8)


def test_zero2_note_names_the_convention() -> None:
    est = estimate(EstimateInput(params=7_000_000_000, gpus=2, zero=2, precision="mixed"))
    (note,) = [n for n in est.notes if "DeepSpeed" in n]
    assert "71.71 GiB" in note and "18 B/param" in note
    assert est.deepspeed["zero2_gpu_bytes"] == 77_000_000_000


# ----------------------------------------------------------------- bytes per parameter


@pytest.mark.parametrize(
    ("precision", "optimizer", "bytes_per_param"),
    [
        ("fp32", "adamw", 4 + 4 + 8),
        ("fp32", "sgd", 4 + 4 + 4),
        ("fp32", "sgd-nomomentum", 4 + 4),
        ("fp32", "lion", 4 + 4 + 4),
        ("mixed", "adamw", 2 + 2 + 4 + 8),  # the ZeRO paper's 16
        ("mixed", "adam", 2 + 2 + 4 + 8),
        ("mixed", "sgd", 2 + 2 + 4 + 4),
        ("mixed", "adam8bit", 2 + 2 + 4 + 2 * (1 + 4 / 256)),  # bitsandbytes' block constants
        ("bf16", "adamw", 2 + 2 + 2 + 2),  # pure bf16: no master copy, bf16 moments
        ("bf16", "sgd-nomomentum", 2 + 2),
    ],
)
def test_bytes_per_param(precision: str, optimizer: str, bytes_per_param: float) -> None:
    psi = 1_000_000
    assert _states(params=psi, precision=precision, optimizer=optimizer) == psi * bytes_per_param


def test_adafactor_factored_state_uses_hidden() -> None:
    # Ψ = 1e6, h = 100: factored second moment ≈ Ψ·(2/h)·4 B = 80 000 B.
    est = estimate(
        EstimateInput(params=1_000_000, hidden=100, precision="fp32", optimizer="adafactor")
    )
    assert _by_name(est)["Optimizer: factored variance"] == 80_000


@pytest.mark.parametrize(
    ("zero", "expected"),
    [
        (0, 18_000_000_000),  # everything replicated, and torch DDP's 16-bit buckets 2Ψ
        (1, 2e9 + 2e9 + 12e9 / 4),  # optimizer states sharded
        (2, 2e9 + (2e9 + 12e9) / 4),  # + gradients
        (3, 16e9 / 4),  # + weights
    ],
)
def test_zero_stages(zero: int, expected: float) -> None:
    assert _states(params=1_000_000_000, gpus=4, zero=zero) == int(expected)


def test_seed_case_7b_zero2_two_gpus() -> None:
    est = estimate(
        EstimateInput(params=7_000_000_000, gpus=2, zero=2, gpu_mem_gb=40, precision="mixed")
    )
    assert _by_name(est) == {
        "Weights (fp16/bf16)": 14_000_000_000,  # 7B × 2 B
        "Gradients (fp16/bf16)": 7_000_000_000,  # 7B × 2 B / 2
        "Optimizer: fp32 master weights": 14_000_000_000,  # 7B × 4 B / 2
        "Optimizer: momentum": 14_000_000_000,
        "Optimizer: variance": 14_000_000_000,
    }
    assert est.per_gpu_bytes == 63_000_000_000
    assert est.unsharded_bytes == 112_000_000_000  # 16 B/param, nothing sharded
    assert est.total_bytes == 126_000_000_000
    assert est.fits is False and est.status == "❌"


def test_seed_case_prints_whole_table() -> None:
    est = estimate(
        EstimateInput(model="llama-7b", precision="mixed", gpus=2, zero=2, gpu_mem_gb=40)
    )
    text = render_text(est)
    for c in est.components:
        assert c.name in text and c.calculation in text
    assert "Total per GPU" in text and "❌ Exceeds 40.00 GB" in text
    assert "6.74B · 4 B / 2" in text


# ----------------------------------------------------------------- activations and logits

# A toy shape small enough to do by hand: GPT-2 blocks (the default for a hand-given shape),
# s=4, b=1, h=8, a=2, f=4h=32, L=2 → s·b = 4 tokens. Mixed precision: 16-bit everywhere (r = c = 2).
# The CPU target's kernels; what CUDA's keep differently is worked out by hand further down.
TOY = dict(
    params=1000, layers=2, hidden=8, heads=2, seq=4, batch=1, precision="mixed", target="cpu"
)


def _acts(**kw) -> int:
    est = estimate(EstimateInput(**{**TOY, **kw}))
    # the blocks' and the model's tensors by hand: the step's few scalars (the loss's, SDPA's
    # seeds) are checked against the trace in test_step_scalars.py
    return sum(
        c.bytes
        for c in est.components
        if c.group == "activations" and not c.name.startswith(step_scalars.PREFIX)
    )


# Per layer, by hand (bytes): LayerNorm inputs + mean/rstd s·b·(2h + 4)·2 = 4·20·2 = 160;
# their outputs the matmuls keep s·b·2h·2 = 128; qkv + attention output + fp32 logsumexp
# s·b·(4h·2 + 4a) = 4·72 = 288; fc output and GELU output s·b·2f·2 = 512. Layer: 1088.
# Once: final LayerNorm s·b·((h + 2)·2 + h·2) + int64 positions 8·s = 4·36 + 32 = 176.
LAYER, FINAL = 160 + 128 + 288 + 512, 176


def test_gpt2_block_by_hand() -> None:
    assert _acts() == 2 * LAYER + FINAL


def test_eager_attention_keeps_the_probabilities_and_selective_drops_them() -> None:
    # softmax probabilities a·s²·b, 16-bit: 2·16·1·2 = 64 per layer; our blocks' causal mask,
    # s² bools: 16; no logsumexp (SDPA's, 4·a·s·b = 32), nor under selective (the core
    # recomputed: profiling.trace.selective)
    assert _acts(attention="eager") == 2 * (LAYER + 64 + 16 - 32) + FINAL
    assert _acts(attention="eager", checkpointing="selective") == 2 * (LAYER - 32) + FINAL
    assert _acts(attention="flash") == _acts(attention="sdpa") == 2 * LAYER + FINAL


def test_dropout_masks() -> None:
    # CUDA: one byte per element after attention and after the MLP: s·b·2h = 64 per layer;
    # the CPU keeps its noise in the output's dtype (2 B here): 128 per layer; and once the
    # embeddings' dropout, drop(wte + wpe): s·b·h = 32 on CUDA, 64 on the CPU
    assert _acts(dropout=0.1, target="cuda") - _acts(target="cuda") == 2 * 64 + 32
    assert _acts(dropout=0.1) == 2 * (LAYER + 128) + FINAL + 64


def test_cuda_norms_by_hand() -> None:
    # GPT-2 on CUDA: LayerNorm keeps its 16-bit input and fp32 mean and rstd,
    # s·b·2·(h·2 + 8) = 4·2·24 = 192 per layer (CPU: 160); the final LayerNorm
    # s·b·(h·2 + 8 + h·2) + 8·s = 4·40 + 32 = 192 (CPU: 176).
    assert _acts(target="cuda") == 2 * (LAYER - 160 + 192) + 192
    # Llama on CUDA: the fused RMSNorm keeps its 16-bit input and one fp32 rstd per row,
    # s·b·2·(h·2 + 4) = 4·2·20 = 160 per layer (CPU: 544); the final one
    # s·b·(h·2 + 4 + h·2) + RoPE 64 = 4·36 + 64 = 208 (CPU: 400).
    llama = dict(TOY, arch="llama", kv_heads=1, ffn=16, target="cuda")
    assert _acts(**llama) == 2 * (1408 - 544 + 160) + 208


def test_tensor_and_sequence_parallel() -> None:
    # t=2 splits attention and MLP; norms, their outputs and the final norm only with SP.
    assert _acts(tp=2) == 2 * (160 + 128 + 144 + 256) + FINAL
    assert _acts(tp=2, sequence_parallel=True) == (2 * LAYER + FINAL) // 2


def test_full_checkpointing_keeps_block_inputs_and_recomputes_one_layer() -> None:
    # checkpoints L·s·b·h·2 = 2·32·2 = 128; backward rebuilds one layer (1088) on top
    assert _acts(checkpointing="full") == 128 + FINAL
    est = estimate(EstimateInput(**{**TOY, "checkpointing": "full"}))
    moments = {m.name: m.bytes for m in est.moments}
    assert moments["backward, a block recomputed"] - moments["end of forward"] == LAYER


def test_fp32_and_autocast_and_the_loss_log_probs() -> None:
    # fp32: everything 4 B: layer 4·20·4 + 4·16·4 + 4·(32·4 + 8) + 4·64·4 = 2144;
    # final 4·(10·4 + 8·4) + 32 = 320
    assert _acts(precision="fp32") == 2 * 2144 + 320
    # the loss keeps fp32 log-probabilities: s·b·V·4 = 4·10·4 = 160
    assert _acts(vocab=10) == 2 * LAYER + FINAL + 160
    # autocast: fp32 residual (r = 4), 16-bit matmul inputs (c = 2), and the 16-bit copies of
    # every matmul weight, 2 B each: L·(4h² + 2hf) + V·h = 2·(256 + 512) + 80 = 1616 weights
    amp = 2 * (4 * 20 * 4 + 128 + 288 + 512) + 4 * (10 * 4 + 16) + 32 + 160 + 1616 * 2
    assert _acts(vocab=10, precision="amp-bf16") == amp


def test_llama_block_by_hand() -> None:
    # s=4, b=1, h=8, a=2, kv heads 1 → k = 4, f = 16, mixed. Per layer: RMSNorm ×2 in fp32
    # s·b·(4h + 2)·4 = 4·34·4 = 544; outputs s·b·2h·2 = 128; q, k, v, output, logsumexp
    # s·b·((2h + 2k)·2 + 4a) = 4·(48 + 8) = 224; SwiGLU s·b·4f·2 = 512 → 1408.
    # Once: final RMSNorm s·b·((2h + 1)·4 + h·2) + RoPE cos/sin 2·s·(h/a)·2 = 4·84 + 64 = 400.
    llama = dict(TOY, arch="llama", kv_heads=1, ffn=16)
    assert _acts(**llama) == 2 * 1408 + 400


def test_no_shape_means_no_activations_and_a_note() -> None:
    est = estimate(EstimateInput(params=7e9, precision="mixed"))
    assert not [c for c in est.components if c.group == "activations"]
    assert any("activations not counted" in n for n in est.notes)


# ----------------------------------------------------------------- LoRA / QLoRA


def test_lora() -> None:
    # adapters on q, k, v, o: 8·L·h·r = 8·2·8·2 = 256 trainable parameters (fp32)
    est = estimate(
        EstimateInput(params=10_000, layers=2, hidden=8, heads=2, lora_rank=2, precision="mixed")
    )
    c = _by_name(est)
    assert est.trainable_params == 256
    assert c["Base weights (fp16/bf16, frozen)"] == 10_000 * 2
    assert c["LoRA adapter weights"] == 256 * 4
    assert c["LoRA adapter gradients"] == 256 * 4
    assert c["Optimizer: momentum"] == c["Optimizer: variance"] == 256 * 4
    assert not any(name.startswith("Gradients") for name in c)  # the base gets none


def test_qlora_base_is_nf4_with_double_quant() -> None:
    est = estimate(
        EstimateInput(
            params=8_000_000,
            layers=2,
            hidden=8,
            heads=2,
            lora_rank=2,
            qlora=True,
            precision="mixed",
        )
    )
    assert _by_name(est)["Base weights (NF4, frozen)"] == 8_000_000 * 4.127 / 8


# ----------------------------------------------------------------- verdicts and errors


def test_status_thresholds() -> None:
    need = _states(params=1_000_000_000)  # 16 GB
    assert (
        estimate(EstimateInput(params=1e9, gpu_mem_gb=need / 1e9 / 0.85, precision="mixed")).status
        == "✅"
    )
    tight = estimate(EstimateInput(params=1e9, gpu_mem_gb=need / 1e9 / 0.95, precision="mixed"))
    assert (tight.status, tight.fits) == ("⚠️", True)
    over = estimate(EstimateInput(params=1e9, gpu_mem_gb=15, precision="mixed"))
    assert (over.status, over.fits) == ("❌", False)
    assert estimate(EstimateInput(params=1e9, precision="mixed")).fits is None


def test_reference_model_shapes() -> None:
    est = estimate(EstimateInput(model="llama-7b", precision="mixed"))
    assert est.params == 6_738_415_616
    assert est.shape["layers"] == 32 and est.shape["hidden"] == 4096 and est.shape["vocab"] == 32000
    assert estimate(EstimateInput(model="gpt2-small", precision="mixed")).params == 124_439_808


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give --model NAME, --params N"),
        ({"model": "gpt5"}, "unknown model 'gpt5'"),
        ({"params": 10, "optimizer": "adamax"}, "unknown optimizer 'adamax'"),
        ({"params": 10, "qlora": True}, "--qlora needs --lora-rank"),
        ({"params": 10, "gpus": 0}, "gpus"),
    ],
)
def test_clear_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ProfilingError, match=message):
        EstimateInput.parse(**kwargs)


def test_lora_without_shape_is_a_clear_error() -> None:
    with pytest.raises(ProfilingError, match="LoRA needs the model's shape"):
        estimate(EstimateInput(params=1e9, lora_rank=8, precision="mixed"))


@pytest.mark.parametrize("name", ["gpt2-small", "gpt2-xl", "llama-1b", "llama-7b"])
def test_deepspeed_largest_layer_is_its_definition_on_the_real_model(name: str) -> None:
    # DeepSpeed's model_to_params: the most parameters one module holds directly
    # (recurse=False) — a Linear or Embedding, not a block. Counted on the built model.
    torch = pytest.importorskip("torch")
    from profiling.models.workloads import WORKLOADS, build_model

    model = build_model(name, device=torch.device("meta"))
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    assert WORKLOADS[name].largest_module_params() == largest
    est = estimate(EstimateInput(model=name, gpus=8, zero=3, precision="mixed"))
    psi = est.params
    assert est.deepspeed["zero3_gpu_bytes"] == 4 * largest + 18 * psi // 8


def test_deepspeed_zero3_for_llama_7b_by_hand() -> None:
    # The embedding (and the untied lm_head), 32000 × 4096, is Llama-7B's largest module.
    est = estimate(EstimateInput(model="llama-7b", gpus=8, zero=3, precision="mixed"))
    assert est.deepspeed["zero3_gpu_bytes"] == 4 * 32000 * 4096 + 18 * 6_738_415_616 // 8


def test_qlora_keeps_embeddings_and_lm_head_in_16_bit() -> None:
    # bitsandbytes quantizes the blocks' Linear layers only, each of n values as n/2 packed
    # bytes, n/64 uint8 absmax, 4 B per 256 absmax blocks, a 16-value fp32 code, an fp32
    # offset and the nested state's copy of the 256-value map (bitsandbytes 0.46 on), plus the
    # map once. Llama-7B per block: four 4096² (16,777,216 values: 8,388,608 + 262,144 + 4,096
    # + 68 + 1,024 = 8,655,940 B) and three 4096 × 11008 (45,088,768: 22,544,384 + 704,512 +
    # 11,008 + 68 + 1,024 = 23,260,996 B).
    est = estimate(EstimateInput(model="llama-7b", lora_rank=16, qlora=True, precision="mixed"))
    c = _by_name(est)
    assert c["Base weights (NF4, frozen)"] == 32 * (4 * 8_655_940 + 3 * 23_260_996) + 1024
    # The rest: embedding and untied LM head 2 × 32000 × 4096, 65 norms of 4096, in bf16.
    rest = 2 * 32000 * 4096 + 65 * 4096
    assert c["Embeddings, LM head, norms (16-bit, frozen)"] == rest * 2
    # adapters: 8·L·h·r = 8·32·4096·16 (q, k, v, o are all 4096 × 4096), fp32
    assert est.trainable_params == 16_777_216
    assert c["LoRA adapter weights"] == 16_777_216 * 4


def test_lora_adapters_follow_grouped_query_attention() -> None:
    # llama-1b: h = 2048, 4 KV heads × 64 = 256 wide k and v. Per layer r·(in + out) each:
    # q, o: 2·r·(2048 + 2048); k, v: 2·r·(2048 + 256) → 22 layers · 8 · 12800 = 2,252,800.
    est = estimate(EstimateInput(model="llama-1b", lora_rank=8, precision="mixed"))
    assert est.trainable_params == 2_252_800


def test_total_counts_every_tensor_parallel_rank() -> None:
    # 4 data-parallel × 2 tensor-parallel = 8 GPUs, each with Ψ·16 B / (4·2) under ZeRO-3.
    est = estimate(EstimateInput(params=1_000_000_000, gpus=4, tp=2, zero=3, precision="mixed"))
    assert est.per_gpu_bytes == 16_000_000_000 // 8
    assert est.total_bytes == 16_000_000_000
