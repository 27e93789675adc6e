"""peft's fp32 adapters on a model loaded in bf16, under the Hugging Face Trainer's autocast:
get_peft_model upcasts the adapters (``autocast_adapter_dtype``), so their weights, gradients
and AdamW moments are fp32 beside a bf16 base, and autocast keeps 16-bit copies of them for
backward. The trace runs exactly that (transformers' module, peft's layers); the estimate agrees
per category; and on the H200's Trainer run (benchmarks/hf_peft) the prediction from the same
files is the measured allocated peak, at most 0.2 % under it (it read 0.5-0.7 % low when the
adapters were counted in bf16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.trace.step import trace_step

pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
pytest.importorskip("transformers", reason="the trace runs transformers' own Llama")

REPO = Path(__file__).resolve().parents[3]
LLAMA = {
    "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "tie_word_embeddings": True,
}  # fmt: skip
STATES = ("parameters", "gradients", "optimizer")


def _config(tmp_path: Path, **kw) -> TrainingConfig:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA), encoding="utf-8")
    base = dict(model=f"hf:{path}", seq=64, batch=2, precision="bf16", lora_rank=8,
                lora_targets="all-linear", lora_dropout=0.05, autocast_adapters=True)  # fmt: skip
    return TrainingConfig(**{**base, **kw})


@pytest.mark.parametrize("checkpointing", ["none", "full"])
def test_fp32_adapters_on_a_bf16_model_agree_with_the_trace(
    tmp_path: Path, checkpointing: str
) -> None:
    cfg = _config(tmp_path, checkpointing=checkpointing)
    traced, est = trace_step(cfg), estimate(cfg)
    assert traced.model_info["traced"] == "transformers"
    trained = est.trainable_params
    # peft's cast, traced: each adapter value's gradient is 4 B, and AdamW's two moments 8 B
    assert traced.after_step["gradients"] == trained * 4
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in STATES:
        assert est.category_bytes(category) == seen[category], category
    # what forward keeps, autocast's 16-bit copies of the adapters included (the last few
    # bytes are the module's, as without the cast: 8 + 24 per layer under bf16 and amp-bf16)
    kept = est.category_bytes("activations") / seen["activations"]
    assert kept == pytest.approx(1.0, abs=1e-4), kept
    assert est.per_gpu_bytes / traced.peak_bytes == pytest.approx(1.0, abs=1e-4)
    pure = trace_step(cfg.model_copy(update={"autocast_adapters": False}))
    after = "after_forward"
    copies = traced.phases[after]["activations"] - pure.phases[after]["activations"]
    if checkpointing == "none":  # every adapter's bf16 copy but the first block's A for q, k, v
        assert copies == (trained - 3 * 8 * 64) * 2
    else:  # the blocks keep only their inputs: the copies are made again in backward
        assert copies == 0


def _h200_rows() -> dict[str, dict]:
    path = REPO / "benchmarks" / "results" / "hf-peft-nvidia-h200-2026-11-30.json"
    return {row["case"]: row for row in json.loads(path.read_text(encoding="utf-8"))["rows"]}


@pytest.mark.parametrize("case", ["lora-amp", "lora-bf16", "lora-bf16-ckpt", "qlora-ckpt"])
def test_the_trainers_measured_peak_is_predicted_from_its_files(case: str) -> None:
    """``estimate --from`` on each case's files (and its run.json's flags: --precision bf16 for
    the model loaded in bf16) against max_memory_allocated of the Trainer's steady-state step
    on an H200 (benchmarks/hf_peft_gpu.py)."""
    from profiling.recipes import read_recipe, with_recipe

    folder = REPO / "benchmarks" / "hf_peft" / case
    run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    files = sorted(p for p in folder.glob("*.json") if p.name != "run.json")
    flags = run["flags"]
    given = {"seq": run["seq"], "gpu": "h200", "counter": "reserved"}
    if flags:
        assert flags == ["--precision", "bf16"]
        given["precision"] = "bf16"
    cfg = TrainingConfig.parse(**with_recipe(read_recipe(files), given))
    assert cfg.autocast_adapters  # peft's adapter_config.json beside the Trainer's bf16
    counters = estimate(cfg).counters
    assert counters is not None
    predicted = counters.allocated.bytes
    measured = _h200_rows()[case]["steady_max_allocated"]
    # never more than 0.2 % under (the unsafe side; 1.0051 and 1.0074 with 16-bit adapters), and
    # at most 0.5 % over: the allocated counter bounds the caching allocator's unsplit rests
    assert 0.995 <= measured / predicted <= 1.002, (case, measured / predicted)


def test_other_kinds_say_what_is_not_modelled(tmp_path: Path) -> None:
    """The estimate of this cast is read on the Llama family and GPT-NeoX's kind
    (tests/profiling/trace/test_lora_neox.py); an encoder's is refused in one sentence rather
    than counted with 16-bit adapters, and so is QLoRA on GPT-NeoX's kind (0.975-1.04 of the
    trace's peak as counted)."""
    with pytest.raises(ProfilingError, match="modelled on the Llama family and GPT-NeoX"):
        estimate(
            _config(
                tmp_path, model="hf:bert-base-uncased", lora_targets="q,k,v,o", lora_dropout=0.0
            )
        )
    with pytest.raises(ProfilingError, match="GPT-NeoX's kind of model with --qlora, --check"):
        estimate(_config(tmp_path, model="hf:pythia-1b", lora_targets="q,k,v,o", qlora=True))
