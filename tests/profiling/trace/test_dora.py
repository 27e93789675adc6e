"""DoRA (peft's use_dora) traced with peft's own DoRA layers and estimated in closed form: what
DoRA adds to LoRA, per category and at the peak, is the same both ways to the byte; the
magnitude vectors count as peft counts them; what is not modelled is one sentence."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError, ProfilingError
from profiling.estimate import recomputed_eager
from profiling.estimate.memory import estimate
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_llama import LLAMA, SMALL_VOCAB, WIDE, llama_spec

pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

CATEGORIES = ("parameters", "gradients", "optimizer", "activations")
FIXTURES = Path(__file__).parents[1] / "recipes" / "fixtures"

# (model, precision, QLoRA, targets, transformers' module): our blocks and transformers' Llama,
# the four precisions, a 16-bit and a 4-bit base, two adapters and all seven.
CASES = {
    "ours, bf16, q,v": ("tiny-llama", "bf16", False, "q,v", False),
    "ours, mixed, QLoRA, all-linear": ("tiny-llama", "mixed", True, "all-linear", False),
    "transformers, amp-bf16, all-linear": (LLAMA, "amp-bf16", False, "all-linear", True),
    "transformers, fp32, q,k,v,o": (LLAMA, "fp32", False, "q,k,v,o", True),
    # bitsandbytes returns its fp32 input's dtype under autocast: the base output kept is fp32
    "transformers, amp-bf16, QLoRA, q,v": (LLAMA, "amp-bf16", True, "q,v", True),
}


def _measure(cfg: TrainingConfig, hf: bool) -> tuple[dict[str, int], dict[str, int], object]:
    """(estimate's, trace's) bytes per category and at the peak, and the trace."""
    with contextlib.nullcontext() if hf else project_blocks():
        traced = trace_step(cfg)
        est = estimate(cfg)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    estimated = {c: est.category_bytes(c) for c in CATEGORIES}
    estimated["peak"], seen["peak"] = est.per_gpu_bytes, traced.peak_bytes
    return estimated, {c: seen[c] for c in estimated}, traced


# With lora_dropout peft reruns each base layer on the dropped input (F.linear(x_dropped,
# weight.to(x.dtype))): its output in the input's dtype and, where the weight is cast (mixed's
# fp32 adapters, a 4-bit base, autocast), that weight's copy kept for x's gradient.
DROPOUT_CASES = {
    "ours, mixed, q,v": ("tiny-llama", "mixed", False, "q,v", False),
    "ours, amp-bf16, all-linear": ("tiny-llama", "amp-bf16", False, "all-linear", False),
    "ours, mixed, QLoRA, q,k,v,o": ("tiny-llama", "mixed", True, "q,k,v,o", False),
    "ours, bf16, all-linear": ("tiny-llama", "bf16", False, "all-linear", False),
    "transformers, amp-bf16, all-linear": (LLAMA, "amp-bf16", False, "all-linear", True),
    "transformers, fp32, q,k,v,o": (LLAMA, "fp32", False, "q,k,v,o", True),
    # under autocast the rerun dequantizes the 4-bit weight in 16 bits and keeps it
    "transformers, amp-bf16, QLoRA, all-linear": (LLAMA, "amp-bf16", True, "all-linear", True),
    "ours, amp-bf16, QLoRA, q,v": ("tiny-llama", "amp-bf16", True, "q,v", False),
}


# Outside the Llama family: Phi (GPT-NeoX's kind with q, k, v apart; every layer biased, its
# first block's MLP reading the frozen embedding's norm in parallel with attention) and Qwen2
# (q, k, v biased). Without dropout peft keeps base_result − bias, fp32 under autocast.
PHI = {
    "model_type": "phi", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 512,
    "partial_rotary_factor": 0.5,
}  # fmt: skip
QWEN2 = {**LLAMA, "model_type": "qwen2", "tie_word_embeddings": False}
OUTSIDE_CASES = {
    "phi, bf16, q,v": (PHI, "bf16", False, "q,v", 0.0),
    "phi, mixed, all six": (PHI, "mixed", False, "q,k,v,o,up,down", 0.0),
    "phi, amp-bf16, q,v,down": (PHI, "amp-bf16", False, "q,v,down", 0.0),
    "phi, amp-bf16, all six, dropout": (PHI, "amp-bf16", False, "q,k,v,o,up,down", 0.1),
    "phi, fp32, o,v,down, dropout": (PHI, "fp32", False, "o,v,down", 0.05),
    "phi, mixed, QLoRA, q,v,up, dropout": (PHI, "mixed", True, "q,v,up", 0.1),
    "phi, amp-bf16, QLoRA, q,v,up": (PHI, "amp-bf16", True, "q,v,up", 0.0),
    "qwen2, amp-bf16, q,k,v,o": (QWEN2, "amp-bf16", False, "q,k,v,o", 0.0),
}


@pytest.mark.parametrize("case", list(OUTSIDE_CASES))
def test_dora_outside_the_llama_family_adds_the_same(tmp_path: Path, case: str) -> None:
    model, precision, qlora, targets, dropout = OUTSIDE_CASES[case]
    _same_increment(tmp_path, case, (model, precision, qlora, targets, True), dropout)


@pytest.mark.parametrize("case", list(CASES))
def test_what_dora_adds_is_the_same_in_estimate_and_trace(tmp_path: Path, case: str) -> None:
    _same_increment(tmp_path, case, CASES[case], 0.0)


@pytest.mark.parametrize("case", list(DROPOUT_CASES))
def test_dora_with_dropout_adds_the_same_in_estimate_and_trace(tmp_path: Path, case: str) -> None:
    _same_increment(tmp_path, case, DROPOUT_CASES[case], 0.1)


def _same_increment(tmp_path: Path, case: str, spec: tuple, dropout: float) -> None:
    model, precision, qlora, targets, hf = spec
    if isinstance(model, dict):
        model = llama_spec(tmp_path, model)
    base = dict(model=model, seq=32, batch=2, precision=precision, lora_rank=8, qlora=qlora,
                lora_targets=targets, lora_dropout=dropout)  # fmt: skip
    lora_est, lora_trace, _ = _measure(TrainingConfig(**base), hf)
    cfg = TrainingConfig(**base, dora=True)
    dora_est, dora_trace, traced = _measure(cfg, hf)
    for name in dora_est:
        added_est = dora_est[name] - lora_est[name]
        added_trace = dora_trace[name] - lora_trace[name]
        assert added_est == added_trace, (case, name, added_est, added_trace)
        assert added_trace > 0, (case, name)
        assert dora_est[name] == pytest.approx(dora_trace[name], rel=2e-3), (case, name)
    # peft's magnitude vectors: one value per output feature of every adapted layer, trained
    # in the adapters' dtype beside A and B.
    lora = traced.model_info["lora"]  # type: ignore[attr-defined]  # a TraceResult
    assert lora["dora"] is True
    assert lora["adapter_params"] == estimate(cfg).trainable_params
    assert any("DoRA by peft" in n for n in traced.notes)  # type: ignore[attr-defined]


def test_magnitudes_count_as_peft_counts_them() -> None:
    """Llama 3.2 3B with MetaMathQA's adapter (r 32 on q and v) built by transformers on the
    meta device and adapted by peft with use_dora: its trainable parameters are the
    estimate's."""
    transformers = pytest.importorskip("transformers")
    import torch

    from profiling._quiet_import import import_quietly

    peft = import_quietly("peft")
    config = transformers.AutoConfig.for_model(
        "llama", hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
        num_attention_heads=24, num_key_value_heads=8, vocab_size=128256, head_dim=128,
        tie_word_embeddings=True,
    )  # fmt: skip
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    lora = peft.LoraConfig(r=32, lora_alpha=64, target_modules=["q_proj", "v_proj"],
                           use_dora=True)  # fmt: skip
    model = peft.get_peft_model(model, lora)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    cfg = TrainingConfig(model="hf:llama-3.2-3b", seq=768, batch=4, precision="bf16",
                         lora_rank=32, lora_targets="q,v", dora=True)  # fmt: skip
    assert estimate(cfg).trainable_params == trained == 9_175_040 + 28 * (3072 + 1024)
    plain = TrainingConfig(**{**cfg.model_dump(exclude_defaults=True), "dora": False})
    assert estimate(plain).trainable_params == 9_175_040


def test_adapter_config_use_dora_is_read_and_torchtunes_is_listed(tmp_path: Path) -> None:
    from profiling.recipes import read_recipe, with_recipe

    adapter = json.loads((FIXTURES / "peft" / "adapter_config.json").read_text(encoding="utf-8"))
    path = tmp_path / "adapter_config.json"
    path.write_text(json.dumps({**adapter, "use_dora": True}), encoding="utf-8")
    recipe = read_recipe([path])
    assert recipe.values["dora"] is True
    values = with_recipe(recipe, {"model": "hf:llama-3.2-3b", "seq": 768, "batch": 4})
    with_dora = estimate(TrainingConfig.parse(**values))
    without = estimate(TrainingConfig.parse(**{**values, "dora": False}))
    assert with_dora.per_gpu_bytes > without.per_gpu_bytes
    assert any("DoRA" in c.name for c in with_dora.components)

    yaml_path = tmp_path / "lora.yaml"
    yaml_path.write_text(
        "model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n"
        "  lora_attn_modules: ['q_proj', 'v_proj']\n  lora_rank: 8\n  lora_alpha: 16\n"
        "  use_dora: True\n",
        encoding="utf-8",
    )
    tune = read_recipe([yaml_path])  # torchtune's DoRALinear: --dora in torchtune's order
    assert tune.values["dora"] is True and tune.values["torchtune_dora"] is True
    assert not [s for s in tune.ignored if s.key == "model.use_dora"]


# torchtune's DoRALinear (torchtune 00a080a6 torchtune/modules/peft/dora.py; was listed as not
# modelled): the base output from the undropped input, nothing rerun under dropout, B's output
# made before the norm is rebuilt. In torchtune's dtypes (bf16, fp32) it keeps what peft's
# DoRA keeps; only the forward's order differs, inside the estimate's norm moment.
TORCHTUNE_CASES = {
    "ours, bf16, q,v": ("tiny-llama", "bf16", "q,v", 0.0, False),
    "ours, bf16, all-linear, dropout": ("tiny-llama", "bf16", "all-linear", 0.1, False),
    "transformers, fp32, q,k,v,o, dropout": (LLAMA, "fp32", "q,k,v,o", 0.05, True),
    "transformers, bf16, all-linear": (LLAMA, "bf16", "all-linear", 0.0, True),
}


@pytest.mark.parametrize("case", list(TORCHTUNE_CASES))
def test_torchtunes_dora_keeps_what_the_estimate_counts(tmp_path: Path, case: str) -> None:
    model, precision, targets, dropout, hf = TORCHTUNE_CASES[case]
    if isinstance(model, dict):
        model = llama_spec(tmp_path, model)
    base = dict(model=model, seq=32, batch=2, precision=precision, lora_rank=8,
                lora_targets=targets, lora_dropout=dropout)  # fmt: skip
    lora_est, lora_trace, _ = _measure(TrainingConfig(**base), hf)
    cfg = TrainingConfig(**base, dora=True, torchtune_dora=True)
    est, seen, traced = _measure(cfg, hf)
    for name in est:
        added = est[name] - lora_est[name], seen[name] - lora_trace[name]
        assert added[0] == added[1] > 0, (case, name, added)
    assert est["peak"] == pytest.approx(seen["peak"], rel=2e-3)
    assert any("torchtune's DoRALinear" in n for n in traced.notes)  # type: ignore[attr-defined]


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_torchtunes_dora_order_stays_under_the_norm_moment(
    tmp_path: Path, precision: str, dropout: float
) -> None:
    """Wide and few tokens, the norm rebuild leads: torchtune's B output (made first) lifts the
    trace's forward peak by s·b·(o + r)·c over peft's order, still under the estimate's moment
    (the end of forward already holds that kept output)."""
    model = llama_spec(tmp_path, {**WIDE, "tie_word_embeddings": True})
    base = dict(model=model, seq=16, batch=1, precision=precision, lora_rank=8,
                lora_targets="q,v", lora_dropout=dropout, dora=True)  # fmt: skip
    _, peft_seen, _ = _measure(TrainingConfig(**base), True)
    est, seen, traced = _measure(TrainingConfig(**base, torchtune_dora=True), True)
    assert traced.peak_phase == "forward"  # type: ignore[attr-defined]
    c = 2 if precision == "bf16" else 4
    assert seen["peak"] - peft_seen["peak"] == 16 * (256 + 8) * c  # q's B and A outputs
    assert seen["peak"] <= est["peak"] <= 1.06 * seen["peak"], est["peak"] / seen["peak"]


def test_torchtunes_dora_refuses_what_it_does_not_model() -> None:
    with pytest.raises(ConfigError, match="torchtune_dora describes dora"):
        TrainingConfig(model="tiny-llama", lora_rank=8, torchtune_dora=True)
    mixed = ({"precision": "mixed"}, "bf16 or fp32 for torchtune's DoRA")
    nf4 = ({"qlora": True, "precision": "bf16"}, "torchtune's DoRA on torchao's NF4 base \\(QDoRA")
    for extra, words in (mixed, nf4):
        cfg = TrainingConfig(model="tiny-llama", lora_rank=8, dora=True, torchtune_dora=True,
                             **extra)  # fmt: skip
        with pytest.raises(ProfilingError, match=words):
            trace_step(cfg)
        with pytest.raises(ProfilingError, match=words):
            estimate(cfg)


def test_what_is_not_modelled_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="dora needs lora_rank"):
        TrainingConfig(model="tiny-llama", dora=True)
    with pytest.raises(ProfilingError, match="peft's DoRA on a Llama-family model"):
        trace_step(TrainingConfig(model="hf:bert-base-uncased", lora_rank=8, dora=True))
    # peft adapts a fused query_key_value whole: a slice of it cannot be named
    pythia = TrainingConfig(model="hf:pythia-1b", lora_rank=8, dora=True, seq=64,
                            lora_targets="q,v")  # fmt: skip
    with pytest.raises(ProfilingError, match="all of q, k, v for DoRA on a fused"):
        trace_step(pythia)
    with pytest.raises(ProfilingError, match="all of q, k, v for DoRA on a fused"):
        estimate(pythia)


# DoRA on a fused query_key_value (GPT-NeoX, Falcon, BLOOM; was refused by both): peft adapts
# the whole layer (one A of r rows, one input, one dropout, one magnitude q + 2k wide), where
# LoRA alone gets LitGPT's LoRAQKVLinear (A of 3r rows).
NEOX = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "max_position_embeddings": 512,
}  # fmt: skip
FUSED_KINDS = {
    "gpt_neox": {**NEOX, "model_type": "gpt_neox", "rotary_pct": 0.25},
    "gpt_neox sequential": {**NEOX, "model_type": "gpt_neox", "use_parallel_residual": False},
    "falcon-7b's kind": {**NEOX, "model_type": "falcon"},
    "falcon-40b's kind": {**NEOX, "model_type": "falcon", "new_decoder_architecture": True,
                          "num_kv_heads": 2},
    "bloom": {**NEOX, "model_type": "bloom", "n_layer": 2, "n_head": 4, "n_embd": 64},
}  # fmt: skip
FUSED_CASES = {
    "bf16, q,k,v": ("bf16", False, "q,k,v", 0.0),
    "mixed, all six, dropout": ("mixed", False, "q,k,v,o,up,down", 0.1),
    "fp32, q,k,v,o": ("fp32", False, "q,k,v,o", 0.0),
    "amp-bf16, all six, dropout": ("amp-bf16", False, "q,k,v,o,up,down", 0.1),
    "mixed, QLoRA, q,k,v,o, dropout": ("mixed", True, "q,k,v,o", 0.1),
    "amp-bf16, QLoRA, q,k,v": ("amp-bf16", True, "q,k,v", 0.0),
}


@pytest.mark.parametrize("case", list(FUSED_CASES))
@pytest.mark.parametrize("kind", list(FUSED_KINDS))
def test_dora_on_a_fused_query_key_value(tmp_path: Path, kind: str, case: str) -> None:
    """Estimate = trace per category (activations as LoRA's on these kinds: within 80 B), and
    what DoRA changes against LoRA the same both ways to the byte, at the peak too."""
    precision, qlora, targets, dropout = FUSED_CASES[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(FUSED_KINDS[kind]), encoding="utf-8")
    base = dict(model=f"hf:{path}", seq=64, batch=2, precision=precision, lora_rank=8,
                qlora=qlora, lora_targets=targets, lora_dropout=dropout)  # fmt: skip
    lora_est, lora_trace, _ = _measure(TrainingConfig(**base), True)
    dora_est, dora_trace, traced = _measure(TrainingConfig(**base, dora=True), True)
    for name in CATEGORIES[:3]:
        assert dora_est[name] == dora_trace[name], (kind, case, name)
    assert dora_est["activations"] == pytest.approx(dora_trace["activations"], abs=80)
    for name in dora_est:
        added = dora_est[name] - lora_est[name], dora_trace[name] - lora_trace[name]
        assert added[0] == added[1], (kind, case, name, added)
    assert dora_est["peak"] == pytest.approx(dora_trace["peak"], rel=1e-4)
    assert "query_key_value" in traced.model_info["lora"]["targets"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("precision", ["bf16", "fp32", "amp-bf16"])
@pytest.mark.parametrize("kind", ["gpt_neox", "falcon-7b's kind", "bloom"])
def test_a_fused_layers_weight_norm_bounds_the_forward(
    tmp_path: Path, kind: str, precision: str
) -> None:
    """Wide and few tokens: the fused layer's norm rebuilt (h × (q + 2k)) leads the step; the
    estimate's moment (the end of forward plus that rebuild) is never below the trace."""
    path = tmp_path / "config.json"
    wide = {"hidden_size": 256, "intermediate_size": 1024, "vocab_size": 256, "n_embd": 256}
    path.write_text(json.dumps({**FUSED_KINDS[kind], **wide}), encoding="utf-8")
    cfg = TrainingConfig(model=f"hf:{path}", seq=16, batch=1, precision=precision, lora_rank=8,
                         lora_targets="q,k,v", dora=True)  # fmt: skip
    est, seen, traced = _measure(cfg, True)
    assert traced.peak_phase == "forward"  # type: ignore[attr-defined]
    assert seen["peak"] <= est["peak"] <= 1.2 * seen["peak"], est["peak"] / seen["peak"]


def test_fused_magnitudes_count_as_peft_counts_them() -> None:
    """Pythia 1B built by transformers on the meta device, peft's use_dora on query_key_value
    and dense: its trainable parameters are the estimate's (A r × h, B (q + 2k) × r, the
    magnitude q + 2k wide per block)."""
    transformers = pytest.importorskip("transformers")
    import torch

    from profiling._quiet_import import import_quietly
    from profiling.models.workloads import find_workload

    peft = import_quietly("peft")
    w = find_workload("hf:pythia-1b")
    assert w is not None
    config = transformers.AutoConfig.for_model(
        "gpt_neox", hidden_size=w.hidden, intermediate_size=w.ffn, num_hidden_layers=w.layers,
        num_attention_heads=w.heads, vocab_size=w.vocab, rotary_pct=0.25,
    )  # fmt: skip
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    lora = peft.LoraConfig(r=16, lora_alpha=32, target_modules=["query_key_value", "dense"],
                           use_dora=True)  # fmt: skip
    trained = sum(p.numel() for p in peft.get_peft_model(model, lora).parameters()
                  if p.requires_grad)  # fmt: skip
    cfg = TrainingConfig(model="hf:pythia-1b", seq=512, batch=1, precision="bf16", lora_rank=16,
                         lora_targets="q,k,v,o", dora=True)  # fmt: skip
    h, L = w.hidden, w.layers
    assert (
        estimate(cfg).trainable_params == trained == L * (16 * (h + 3 * h) + 3 * h + 16 * 2 * h + h)
    )


# DoRA with full checkpointing (was refused): the recomputed block's backward bound
# (profiling.estimate.recomputed_eager) with its largest weight norm rebuilt. The earlier bound
# (the end of forward and one block's kept tensors) was below the trace on these.
# a vocabulary small next to h: the recomputed block's backward, not the loss, is the peak
SMALL_VOCAB_TIED = {**SMALL_VOCAB, "intermediate_size": 256, "tie_word_embeddings": True}
FULL_CASES = {
    "ours, bf16, all-linear, dropout": ("bf16", "all-linear", 0.1, False),
    "ours, mixed, q,v": ("mixed", "q,v", 0.0, False),
    "transformers, fp32, q,k,v,o, dropout": ("fp32", "q,k,v,o", 0.1, True),
    "transformers, bf16, all-linear": ("bf16", "all-linear", 0.0, True),
}


@pytest.mark.parametrize("case", list(FULL_CASES))
def test_dora_with_full_checkpointing_is_never_below_the_trace(tmp_path: Path, case: str) -> None:
    precision, targets, dropout, hf = FULL_CASES[case]
    cfg = TrainingConfig(model=llama_spec(tmp_path, SMALL_VOCAB_TIED), seq=64, batch=2,
                         precision=precision, lora_rank=8, lora_targets=targets,
                         lora_dropout=dropout, dora=True, checkpointing="full")  # fmt: skip
    est, seen, _ = _measure(cfg, hf)
    with contextlib.nullcontext() if hf else project_blocks():
        moments = estimate(cfg).moments
    assert max(moments, key=lambda m: m.bytes).name == recomputed_eager.NAME
    for name in CATEGORIES[:1] + CATEGORIES[2:]:  # what the step keeps: ids apart (≤ 520 B)
        assert 0 <= seen[name] - est[name] <= 520, (case, name)
    # safe, and not far: the bound counts the largest weight norm beside the whole block
    assert seen["peak"] <= est["peak"] <= 1.2 * seen["peak"], (case, est["peak"] / seen["peak"])
