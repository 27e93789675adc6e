"""LoRA and QLoRA traced with peft's own adapters: the estimate against the trace per category,
the frozen base (no gradients, no optimizer state), QLoRA's 4-bit base as it is represented,
and the real Hugging Face module under peft beside our blocks."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step

pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

LLAMA = {
    "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "tie_word_embeddings": True,
}  # fmt: skip
QWEN3 = {**LLAMA, "model_type": "qwen3", "head_dim": 32, "tie_word_embeddings": False}
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")


def _spec(tmp_path: Path, config: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


def _ratios(cfg: TrainingConfig, traced) -> dict[str, float]:
    est = estimate(cfg)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    out = {c: est.category_bytes(c) / seen[c] for c in CATEGORIES}
    out["peak"] = est.per_gpu_bytes / traced.peak_bytes
    return out


CASES = {
    "tiny-llama, LoRA, amp-bf16, cuda": ("tiny-llama", "amp-bf16", False, "cuda", "none"),
    "tiny-llama, QLoRA, mixed, cpu": ("tiny-llama", "mixed", True, "cpu", "none"),
    "llama config, LoRA, bf16, cpu": (LLAMA, "bf16", False, "cpu", "none"),
    "qwen3 config, QLoRA, mixed, cuda, full checkpointing": (QWEN3, "mixed", True, "cuda", "full"),
    # peft's prepare_model_for_kbit_training + the Trainer's bf16: fp32 embeddings, head, norms
    "llama config, QLoRA, amp-bf16, cuda": (LLAMA, "amp-bf16", True, "cuda", "none"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_estimate_agrees_with_the_lora_trace(tmp_path: Path, case: str) -> None:
    model, precision, qlora, target, checkpointing = CASES[case]
    spec = model if isinstance(model, str) else _spec(tmp_path, model)
    cfg = TrainingConfig(model=spec, seq=64, batch=2, precision=precision, lora_rank=8,
                         qlora=qlora, target=target, checkpointing=checkpointing)  # fmt: skip
    with project_blocks():  # the trace and the estimate of our blocks
        traced = trace_step(cfg)
        ratios = _ratios(cfg, traced)
        est = estimate(cfg)
    for name, ratio in ratios.items():
        assert ratio == pytest.approx(1.0, abs=0.02), (case, name, ratio)
    lora = traced.model_info["lora"]
    # peft put A and B on q, k, v, o of both blocks; only they train.
    assert lora["adapted_layers"] == 8 and lora["peft"]
    assert lora["adapter_params"] == est.trainable_params
    adapter_bytes = 2 if precision == "bf16" else 4
    assert traced.after_step["gradients"] == est.trainable_params * adapter_bytes
    assert traced.params == est.params + est.trainable_params  # the base, unpacked, + adapters
    if qlora:
        assert "represented" in lora["base"] and lora["quantized_layers"] == 14
        assert any("bitsandbytes needs CUDA" in n for n in traced.notes)
        # NF4: less than the base the plain LoRA trace keeps (16-bit; fp32 under autocast).
        unpacked = est.params * (4 if cfg.autocast else 2) + est.trainable_params * adapter_bytes
        assert traced.phases["after_forward"]["parameters"] < 0.8 * unpacked


@pytest.mark.parametrize("ffn", [160, 640])
def test_qlora_under_autocast_runs_its_mlp_in_fp32(tmp_path: Path, ffn: int) -> None:
    """bitsandbytes' Linear4bit hands back its input's dtype, fp32 under autocast once peft has
    cast the rest of the model to fp32: the SwiGLU keeps fp32 gate, up and SiLU outputs, and a
    recomputed block's MLP backward makes fp32 gradients of them. With a wide MLP that backward
    is the step's peak (the estimate was 0.67 of the trace at f = 640 before it counted them);
    the estimate bounds it from above, within 10 %."""
    spec = _spec(tmp_path, {**LLAMA, "intermediate_size": ffn, "tie_word_embeddings": False})
    cfg = TrainingConfig(model=spec, seq=64, batch=2, precision="amp-bf16", lora_rank=8,
                         qlora=True, checkpointing="full", attention="flash",
                         lora_targets=["q", "k", "v", "o", "gate", "up", "down"])  # fmt: skip
    traced = trace_step(cfg)
    ratios = _ratios(cfg, traced)
    for name in CATEGORIES:
        assert ratios[name] == pytest.approx(1.0, abs=0.02), (name, ratios[name])
    assert 1.0 <= ratios["peak"] <= 1.10, ratios["peak"]
    assert "fp32, as peft's prepare_model_for_kbit_training casts them" in " ".join(traced.notes)


@pytest.mark.parametrize(("hidden", "targets"), [(64, "q,v"), (128, "all-linear")])
def test_qlora_under_autocast_drops_no_weight_copy_in_the_first_block(
    tmp_path: Path, hidden: int, targets: str
) -> None:
    """No gradient reaches the first block's q, k, v input, so under autocast neither their A
    copies nor (on a 16-bit base) autocast's weight copies are kept. A 4-bit layer dequantizes
    in 16 bits itself: there is no weight copy to drop, and dropping one put the estimate
    h·(q + 2k)·2 B below the trace (16,384 B at h 64, 65,536 at h 128)."""
    heads = hidden // 16
    spec = _spec(tmp_path, {**LLAMA, "hidden_size": hidden, "num_attention_heads": heads,
                            "num_key_value_heads": heads // 2})  # fmt: skip
    cfg = TrainingConfig(model=spec, seq=32, batch=2, precision="amp-bf16", lora_rank=8,
                         qlora=True, lora_targets=targets)  # fmt: skip
    traced, est = trace_step(cfg), estimate(cfg)
    seen = traced.phases["after_forward"]["activations"]
    assert 0 <= seen - est.category_bytes("activations") <= 64, (seen, est)
    assert 0 <= traced.peak_bytes - est.per_gpu_bytes <= 128


def test_qlora_record_says_what_was_traced(tmp_path: Path) -> None:
    from profiling.records import RecordStore
    from profiling.trace.run import trace_and_record

    store = RecordStore(tmp_path / "m")
    cfg = TrainingConfig(model="tiny-llama", seq=32, batch=1, precision="bf16", lora_rank=4,
                         qlora=True)  # fmt: skip
    run = trace_and_record(cfg, store)
    info = store.load(run.payload["record_id"]).config["model_info"]
    assert info["lora"]["rank"] == 4 and "NF4" in info["lora"]["base"]
    assert "QLoRA: bitsandbytes needs CUDA" in run.text()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"model": "tiny-gpt2", "lora_rank": 8},
            "a Llama-family, GPT-NeoX-kind, encoder or encoder-decoder model for --lora-rank",
        ),
        (
            {"model": "tiny-llama", "lora_rank": 8, "qlora": True, "precision": "fp32"},
            "--precision mixed, bf16 or amp-bf16/amp-fp16 for --qlora",
        ),
    ],
)
def test_what_the_lora_trace_refuses_is_one_sentence(kwargs: dict, message: str) -> None:
    with pytest.raises(ProfilingError, match=message):
        trace_step(TrainingConfig(seq=16, batch=1, **kwargs))


@pytest.mark.parametrize(
    ("config", "precision", "qlora"), [(LLAMA, "amp-bf16", False), (QWEN3, "mixed", True)]
)
def test_real_module_under_peft(tmp_path: Path, config: dict, precision: str, qlora: bool) -> None:
    """transformers' own module with peft's adapters: the estimate of that module agrees per
    category; the model states equal our blocks' under the same adapters, to the byte."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(model=_spec(tmp_path, config), seq=64, batch=2, precision=precision,
                         lora_rank=8, qlora=qlora)  # fmt: skip
    real = trace_step(cfg)
    assert real.model_info["traced"] == "transformers"
    assert real.model_info["lora"]["adapted_layers"] == 8
    for name, ratio in _ratios(cfg, real).items():
        assert ratio == pytest.approx(1.0, abs=0.02), (name, ratio)
    with project_blocks():
        ours = trace_step(cfg)
    assert real.params == ours.params
    for category in ("parameters", "optimizer"):
        assert real.by_category[category] == ours.by_category[category]
    assert real.after_step["gradients"] == ours.after_step["gradients"]


MOE = {
    "model_type": "mixtral", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "num_local_experts": 4, "num_experts_per_tok": 2,
}  # fmt: skip

# Which layers LoRA adapts, with lora_dropout, on every precision the adapters see differently:
# no cast (bf16, fp32), peft's fp32 cast (mixed), autocast's copies (amp-bf16).
TARGET_CASES = {
    "q,v (peft's default), bf16, cuda": ("q,v", 0.0, "bf16", "cuda"),
    "all-linear, dropout, mixed, cpu": ("all-linear", 0.1, "mixed", "cpu"),
    "all-linear + lm_head, amp-bf16, cuda": ("all-linear,lm_head", 0.0, "amp-bf16", "cuda"),
    "q, k, v, o, lm_head, dropout, fp32, cpu": ("q,k,v,o,lm_head", 0.05, "fp32", "cpu"),
    "gate, up, down, q, dropout, bf16, cpu": ("q,mlp", 0.1, "bf16", "cpu"),
}


@pytest.mark.parametrize("case", list(TARGET_CASES))
def test_lora_targets_and_dropout_agree_per_category(case: str) -> None:
    """peft adapts exactly the named layers, with its dropout; the estimate of what each adapter
    keeps (its own input copy, its mask, the shared inputs frozen layers no longer keep) agrees
    with the trace per category."""
    targets, dropout, precision, target = TARGET_CASES[case]
    cfg = TrainingConfig(model="tiny-llama", seq=64, batch=2, precision=precision, lora_rank=8,
                         lora_targets=targets, lora_dropout=dropout, target=target)  # fmt: skip
    with project_blocks():
        traced = trace_step(cfg)
        ratios = _ratios(cfg, traced)
        est = estimate(cfg)
    for name in CATEGORIES:
        assert ratios[name] == pytest.approx(1.0, abs=0.001), (case, name, ratios[name])
    assert ratios["peak"] == pytest.approx(1.0, abs=0.015), (case, ratios["peak"])
    lora = traced.model_info["lora"]
    blocks = len([t for t in cfg.lora_targets if t != "lm_head"])
    assert lora["adapted_layers"] == 2 * blocks + ("lm_head" in cfg.lora_targets)
    assert lora["dropout"] == dropout
    assert lora["adapter_params"] == est.trainable_params


def test_more_targets_and_dropout_keep_more() -> None:
    """all-linear with dropout keeps more than q, v alone: the estimate says by how much, as the
    trace does."""
    small = TrainingConfig(model="tiny-llama", seq=64, batch=2, precision="bf16", lora_rank=8,
                           lora_targets="q,v")  # fmt: skip
    big = small.model_copy(update={"lora_targets": ["q", "k", "v", "o", "gate", "up", "down"],
                                   "lora_dropout": 0.1})  # fmt: skip
    with project_blocks():
        traced = {n: trace_step(c).phases["after_forward"]["activations"]
                  for n, c in (("small", small), ("big", big))}  # fmt: skip
        estimated = {n: estimate(c).category_bytes("activations")
                     for n, c in (("small", small), ("big", big))}  # fmt: skip
    assert traced["big"] > 1.2 * traced["small"]
    assert estimated["big"] - estimated["small"] == traced["big"] - traced["small"]


@pytest.mark.parametrize("precision", ["bf16", "mixed"])
def test_qlora_of_experts_quantizes_every_expert(tmp_path: Path, precision: str) -> None:
    """QLoRA of a mixture of experts: each expert's gate, up and down is a 4-bit weight, as
    bitsandbytes quantizes transformers' per-expert Linear layers; estimate and trace agree to
    the byte on the parameters and per category on the rest."""
    cfg = TrainingConfig(model=_spec(tmp_path, MOE), seq=64, batch=2, precision=precision,
                         lora_rank=8, qlora=True)  # fmt: skip
    with project_blocks():
        traced = trace_step(cfg)
        ratios = _ratios(cfg, traced)
        est = estimate(cfg)
    for name in CATEGORIES:
        assert ratios[name] == pytest.approx(1.0, abs=0.001), (name, ratios[name])
    assert est.category_bytes("parameters") == traced.phases["after_forward"]["parameters"]
    # 2 blocks × (q, k, v, o, router + 4 experts × gate, up, down)
    assert traced.model_info["lora"]["quantized_layers"] == 2 * (5 + 12)


def test_mixtral_qlora_keeps_its_experts_in_four_bits() -> None:
    """Mixtral 8x7B's QLoRA base is about 24 GB of NF4 weights (the experts included), not
    90 GB of 16-bit experts filed under 'Embeddings, LM head, norms'."""
    est = estimate(TrainingConfig(model="hf:mixtral-8x7b", seq=2048, precision="bf16",
                                  lora_rank=16, qlora=True))  # fmt: skip
    rows = {c.name: c.bytes for c in est.components}
    assert 23e9 < rows["Base weights (NF4, frozen) (experts included)"] < 25.5e9
    rest = next(b for n, b in rows.items() if n.startswith("Embeddings, LM head, norms"))
    assert rest < 1e9  # the embedding, the LM head and the norms: 2·32000·4096·2 B and a little
    assert est.per_gpu_bytes < 48e9


@pytest.mark.parametrize("model", ["tiny-llama", "moe"])
def test_old_bitsandbytes_keeps_each_4bit_layers_input(tmp_path: Path, model: str) -> None:
    """bitsandbytes 0.43.1 and earlier kept each 4-bit matmul's input whenever it needed a
    gradient: the trace of that MatMul4Bit keeps more, by the frozen layers' inputs, and the
    estimate follows it per category."""
    spec = model if model == "tiny-llama" else _spec(tmp_path, MOE)
    now = TrainingConfig(model=spec, seq=64, batch=2, precision="mixed", lora_rank=8, qlora=True)
    old = now.model_copy(update={"bnb_keeps_inputs": True})
    with project_blocks():
        traced = {n: trace_step(c) for n, c in (("now", now), ("old", old))}
        for name, cfg in (("now", now), ("old", old)):
            ratios = _ratios(cfg, traced[name])
            for cat in CATEGORIES:
                assert ratios[cat] == pytest.approx(1.0, abs=0.001), (name, cat, ratios[cat])
    acts = {n: t.phases["after_forward"]["activations"] for n, t in traced.items()}
    assert acts["old"] > 1.05 * acts["now"]
    assert traced["old"].model_info["lora"]["bnb_keeps_inputs"] is True


def test_lora_targets_the_estimate_cannot_model_are_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ProfilingError, match="without q, k or v"):
        estimate(TrainingConfig(model="tiny-llama", lora_rank=8, lora_targets="mlp"))
    with pytest.raises(ProfilingError, match="mixture of experts"):
        estimate(TrainingConfig(model=_spec(tmp_path, MOE), lora_rank=8, lora_targets="all-linear"))


@pytest.mark.parametrize(
    "step",
    [["--lora-rank", "4"], [], ["--fsdp", "--gpus", "2"]],
    ids=["lora", "full-training", "fsdp"],
)
def test_a_trace_with_torchao_installed_writes_nothing_to_stderr(tmp_path, step) -> None:
    # peft imports torchao whenever it is installed, and torchao's import logs that it cannot
    # load its CUDA kernels (and torch's pytree warns of its Enums): on a CPU, or before the
    # first CUDA call, every LoRA run printed those lines before its own output. Without peft,
    # transformers' modeling_utils imports torchao (its quantizer) when the model class loads:
    # full training and FSDP (D52) printed the pytree lines.
    import subprocess
    import sys

    pytest.importorskip("torchao", reason="the float8 extra (torchao) is not installed")
    done = subprocess.run(
        [sys.executable, "-m", "journal_agent", "trace", "--model", _spec(tmp_path, LLAMA),
         "--precision", "mixed", "--batch", "1", "--seq", "64", *step],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "record: trace-" in done.stdout
    assert done.stderr == "", done.stderr


UNTIED_LLAMA = {
    "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "tie_word_embeddings": False,
}  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "ours"),
    [({"precision": "amp-bf16"}, False), ({"precision": "amp-bf16"}, True),
     ({"precision": "bf16", "autocast_adapters": True}, False)],
)  # fmt: skip
def test_adapted_head_under_autocast_and_checkpointing(
    tmp_path: Path, extra: dict, ours: bool
) -> None:
    """Full checkpointing drops the blocks' autocast copies with their regions, but the LM head
    runs outside them: its adapter's 16-bit copies of A and B stay kept ((r·h + V·r)·2 B, which
    the estimate had left out: 9,224 B and 0.9945 of the trace's peak here); our blocks and
    transformers' Llama, under amp-bf16 and peft's fp32 adapters on a bf16 model."""
    if not ours:
        pytest.importorskip("transformers", reason="the hf extra is not installed")
    model = "tiny-llama" if ours else _spec(tmp_path, UNTIED_LLAMA)
    cfg = TrainingConfig(model=model, seq=64, batch=2, lora_rank=8, lora_targets="q,v,lm_head",
                         checkpointing="full", **extra)  # fmt: skip
    with project_blocks() if ours else contextlib.nullcontext():
        traced, est = trace_step(cfg), estimate(cfg)
    kept = traced.phases["after_forward"]["activations"]
    assert est.category_bytes("activations") == pytest.approx(kept, abs=64)
    assert est.per_gpu_bytes == pytest.approx(traced.peak_bytes, rel=2e-4)
