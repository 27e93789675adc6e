"""LitGPT's own attention under its finetune scripts (a Llama, Mistral, Qwen2, Phi-3 or Gemma
shape): one fused q/k/v Linear, keys and values expanded to every head, q and k rotated after the
transpose and concatenated, v read by SDPA as a view of the fused output (a copy under grouped
heads), the output projection reading a copy; LoRA on the fused q/k/v as LitGPT's
LoRAQKVLinear (one input, one dropout, zero_pad's index_copy keeping the B output when a slice
is off). Traced as that module runs and estimated to the same bytes; the estimate counted
transformers' attention before, 7.5 % under LitGPT's Llama 2 7B QLoRA row (0.925)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate
from profiling.models.implementation import transformers_installed
from profiling.trace.step import trace_step

pytestmark = pytest.mark.skipif(not transformers_installed(), reason="transformers' modules")

H, L, S, B, HEADS, HD = 64, 3, 64, 2, 4, 16


def _model(tmp_path: Path, kind: str, kv: int) -> str:
    config = {
        "model_type": kind, "vocab_size": 512, "hidden_size": H, "intermediate_size": 160,
        "num_hidden_layers": L, "num_attention_heads": HEADS, "num_key_value_heads": kv,
        "head_dim": HD, "max_position_embeddings": 512, "tie_word_embeddings": False,
    }  # fmt: skip
    if kind == "phi3":  # its default pad id (32000) is past this vocabulary
        config["pad_token_id"] = 0
    if kind == "gemma2":  # soft-capped scores and logits; a window shorter than the sequence
        config.update(attn_logit_softcapping=50.0, final_logit_softcapping=30.0, sliding_window=32)
    path = tmp_path / f"{kind}{kv}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


QLORA = {"qlora": True, "fabric_bnb": True, "bnb_keeps_inputs": True}
ALL = ["q", "k", "v", "o", "gate", "up", "down", "lm_head"]
CASES = [
    ("full training, one query a group (v a view of the fused output)", "llama", 4, {}),
    ("full training, grouped heads (v a copy)", "llama", 2, {}),
    ("full training, Phi-3 (transformers' qkv_proj, fused already)", "phi3", 4, {}),
    ("LoRA q, v with dropout: zero_pad", "llama", 2, {"lora_targets": ["q", "v"]}),
    ("LoRA q, v, multi-query Gemma", "gemma", 1, {"lora_targets": ["q", "v"]}),
    ("LoRA on everything, Mistral", "mistral", 2, {"lora_targets": ALL}),
    ("LoRA q, k, v without dropout", "qwen2", 2, {"lora_targets": ["q", "k", "v"], "drop": 0}),
    ("LoRA q, o without dropout: o keeps the copy", "llama", 4,
     {"lora_targets": ["q", "o"], "drop": 0}),
    ("full training, Gemma 2 (soft-capped scores: LitGPT's explicit path)", "gemma2", 2, {}),
    ("LoRA on everything, Gemma 2", "gemma2", 2, {"lora_targets": ALL}),
    ("LoRA q, v, Gemma 2, one query a group", "gemma2", 4, {"lora_targets": ["q", "v"]}),
    ("LoRA on everything, Gemma 2, LitGPT before v0.5.5 (head chunks not capped)", "gemma2", 2,
     {"lora_targets": ALL, "litgpt_uncapped": True}),
]  # fmt: skip


def _config(model: str, extra: dict) -> TrainingConfig:
    extra = dict(extra)
    if "lora_targets" in extra:
        extra.update(lora_rank=8, lora_dropout=extra.pop("drop", 0.1))
    return TrainingConfig(
        model=model, seq=S, batch=B, precision="bf16", target="cuda", loss="litgpt", **extra
    )


@pytest.mark.parametrize(("what", "kind", "kv", "extra"), CASES)
def test_litgpt_s_attention_is_traced_as_it_runs_and_estimated_to_the_same_bytes(
    tmp_path: Path, what: str, kind: str, kv: int, extra: dict
) -> None:
    cfg = _config(_model(tmp_path, kind, kv), extra)
    traced, est = trace_step(cfg), estimate(cfg)
    assert f"LitGPT's attention, q/k/v fused ({L})" in traced.model_info["implementation"]
    acts = traced.phases["after_forward"]["activations"]
    assert 0 <= acts - est.category_bytes("activations") <= 128  # the trace's scalars
    assert abs(traced.peak_bytes - est.per_gpu_bytes) <= 4096
    names = [c.name for c in est.components]
    # Gemma 2's explicit path keeps what transformers' eager attention keeps: its RoPE tables
    # (and, under LoRA, its one q/k/v adapter input) are what is LitGPT's there
    mark = "RoPE cos/sin: LitGPT's" if kind == "gemma2" else "Activations: attention: LitGPT's"
    assert any(mark in n for n in names), names


def test_what_litgpt_s_attention_changes_is_the_same_in_trace_and_estimate_under_qlora(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LitGPT's QLoRA (bitsandbytes 0.42 keeping each 4-bit layer's input) on q and v: against
    transformers' attention, the trace and the estimate move by the same bytes — the fused
    output kept through v, the keys expanded, zero_pad's copy, one dropout, the output's copy
    (kept by the 4-bit output projection), LitGPT's fp32 RoPE tables."""
    import profiling.models.workloads as workloads

    cfg = _config(_model(tmp_path, "llama", 4), {"lora_targets": ["q", "v"], **QLORA})
    ours = trace_step(cfg), estimate(cfg)
    monkeypatch.setattr(workloads, "LITGPT_QKV", frozenset())
    theirs = trace_step(cfg), estimate(cfg)
    assert "LitGPT's attention" not in theirs[0].model_info["implementation"]
    traced = [t.phases["after_forward"]["activations"] for t in (ours[0], theirs[0])]
    estimated = [e.category_bytes("activations") for e in (ours[1], theirs[1])]
    assert traced[0] - traced[1] == estimated[0] - estimated[1]
    # A token of a block, in 16-bit elements: the fused output kept through v (3·64) where
    # transformers keeps v (64), the output's copy (64), zero_pad's B output (q and v: 128); one
    # dropout's output and bool mask less (64·3 B). A block: zero_pad's int64 index (128). Once:
    # LitGPT's fp32 RoPE tables (2·s·16·(4 − 2)), the first block's one mask not kept (64 a
    # token) where transformers' two are.
    token = (128 + 64 + 128) * 2 - 64 * 3
    block = S * B * token + 128 * 8
    assert estimated[0] - estimated[1] == L * block + 2 * S * HD * 2 + S * B * 64


def test_litgpt_s_llama_configs_count_its_attention(tmp_path: Path) -> None:
    """The rows of LitGPT's config hub read with --from: its attention where a Llama, Mistral or
    Gemma config is built; where Gemma 2's soft-capped scores take LitGPT's explicit path, the
    bytes of transformers' eager attention, and its one fused q/k/v adapter input all the same
    (counted one per q, k, v before: Gemma 2 2B LoRA 1.075 of LitGPT's measurement)."""
    from profiling.recipes import read_recipe

    here = Path(__file__).resolve().parents[3] / "benchmarks" / "peer" / "configs" / "litgpt"
    for name, expect in (("llama-2-7b__qlora", True), ("gemma-2b__lora", True),
                         ("mistral-7b__lora", True), ("phi-3__lora", True),
                         ("gemma2-2b__lora", False), ("gemma2-9b__qlora", False)):  # fmt: skip
        values = read_recipe([here / f"{name}.yaml"]).values
        est = estimate(TrainingConfig.parse(**values))
        names = [c.name for c in est.components]
        assert any("attention: LitGPT's" in n for n in names) is expect, name
        # LitGPT builds Phi-3 as a Llama: its LoRAQKVLinear has one input and one dropout
        # (litgpt/lora.py at 00af8b0), where transformers' qkv_proj was counted as one per slice
        fused = any("LitGPT's fused q/k/v: one adapter" in n for n in names)
        assert fused, name
    values = read_recipe([here / "llama-2-7b__lora.yaml"]).values
    est = estimate(TrainingConfig.parse(**values))
    zero_pad = next(c for c in est.components if "LitGPT's zero_pad (q, v" in c.name)
    assert zero_pad.bytes == 32 * (512 * 2 * 8192 * 2 + 8192 * 8)  # q and v's B output, index


def test_litgpt_before_0_5_5_returns_gemma_2_s_head_chunks_uncapped(tmp_path: Path) -> None:
    """litgpt/lora.py's GPT.forward at 00af8b0 (the Gemma 2 rows' commit) returns
    ``[self.lm_head(x_i) for x_i in x.split(lm_head_chunk_size, dim=1)]`` before its
    ``final_logit_softcapping`` line: the chunks are never capped (from 17a58dfa, v0.5.5, every
    chunk is). --litgpt-uncapped drops the cap's tanh outputs from the trace and the estimate
    alike; without it (the default, the newer LitGPT) the cap stays, the larger count."""
    model = _model(tmp_path, "gemma2", 2)
    capped, uncapped = (
        _config(model, {"lora_targets": ALL, "litgpt_uncapped": flag}) for flag in (False, True)
    )
    traced = [trace_step(c).peak_bytes for c in (capped, uncapped)]
    est = [estimate(c) for c in (capped, uncapped)]
    tanh = [[c for c in e.components if "soft cap's tanh" in c.name] for e in est]
    assert tanh[0] and not tanh[1]
    assert traced[0] - traced[1] == est[0].per_gpu_bytes - est[1].per_gpu_bytes > 0
    with pytest.raises(ValueError, match=r"describes the LM head.s chunks of LitGPT"):
        TrainingConfig(model=model, lora_rank=8, litgpt_uncapped=True)  # not LitGPT's loss


def test_a_paged_optimizer_pages_the_fused_adapter_as_one_tensor(tmp_path: Path) -> None:
    """LitGPT's LoRAQKVLinear has one A of 3r rows (litgpt/lora.py), so bitsandbytes' paged
    optimizer pages it where it reaches 10⁵ values though each slice's r rows would not (r 600
    on h 64: 115,200 values against 38,400): the estimate had counted three A tensors, their
    states allocated (Gemma 2 2B QLoRA's optimizer line 74.4 MB against the trace's 51.4)."""
    cfg = TrainingConfig(model=_model(tmp_path, "gemma2", 2), seq=S, batch=B, precision="bf16",
                         loss="litgpt", lora_rank=600, lora_targets=["q", "k", "v"],
                         paged_optimizer=True, **QLORA)  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    assert est.category_bytes("optimizer") == traced.phases["after_forward"]["optimizer"]
    assert est.category_bytes("paged") == traced.paged_bytes > 0


@pytest.mark.parametrize(
    "litgpt", [{"loss": "litgpt"}, {"loss": "litgpt-full"}, {"litgpt_norm": True}]
)
def test_dora_under_litgpt_s_scripts_is_refused_by_the_estimate_and_the_trace(
    tmp_path: Path, litgpt: dict
) -> None:
    """LitGPT has no DoRA (Lightning-AI/litgpt at 26857050: litgpt/lora.py's LoRALinear and
    LoRAQKVLinear carry A and B only; no script reads a DoRA key). The trace had adapted its
    fused q/k/v as plain LoRA while the estimate counted peft's DoRA on q, k, v apart (2,523,812
    B against the trace's 2,322,984 on this model): neither is a run of LitGPT, so both refuse."""
    from profiling.api import estimate_memory, trace_memory
    from profiling.errors import ConfigError

    options = {"seq": S, "batch": B, "precision": "bf16", "target": "cuda", "lora_rank": 8,
               "lora_targets": ["q", "k", "v"], "dora": True, **litgpt}  # fmt: skip
    model = _model(tmp_path, "llama", 2)
    for run in (estimate_memory, lambda **o: trace_memory(o.pop("model"), **o)):
        with pytest.raises(ConfigError, match=r"LitGPT's finetune scripts .* have no DoRA") as e:
            run(model=model, **options)
        assert e.value.field == "dora" and str(e.value).count(". ") == 0  # one sentence
    without = {k: v for k, v in options.items() if k != "dora"}
    assert estimate_memory(model=model, **without).per_gpu_bytes > 0  # LitGPT's LoRA stays
