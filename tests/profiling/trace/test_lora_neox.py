"""LoRA and QLoRA on GPT-NeoX's kind of decoder (GPT-NeoX/Pythia/StableLM-alpha, Phi, Falcon):
peft's adapters on the modules each role names, LitGPT's adapter on a fused q/k/v, the estimate
against the trace per category, LitGPT's recipes read with --from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step
from tests.profiling.trace.tiny_neox import KINDS, neox_spec

pytest.importorskip("peft", reason="the lora extra (peft) is not installed")

# the kinds every test here runs (BLOOM in those that name it)
FAMILIES = [k for k in KINDS if k != "bloom"]
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")
LITGPT_CONFIGS = Path(__file__).parents[3] / "benchmarks" / "peer" / "configs" / "litgpt"


def _agree(cfg: TrainingConfig, peak: float = 0.002) -> None:
    traced = trace_step(cfg)
    est = estimate(cfg)
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in ("parameters", "gradients", "optimizer"):
        assert est.category_bytes(category) == seen[category], category
    # within 80 B of 0.5-1.4 MB: the estimate leaves out a few scalars of the trace
    assert est.category_bytes("activations") == pytest.approx(seen["activations"], abs=80)
    assert est.per_gpu_bytes == pytest.approx(traced.peak_bytes, rel=peak)


CASES = [
    ("q,v", 0.05, "bf16"), ("q,k,v,o,up,down", 0.05, "mixed"), ("o,v,down", 0.05, "fp32"),
    ("q,down", 0.0, "bf16"), ("k,up,lm_head", 0.1, "bf16"),
]  # fmt: skip


@pytest.mark.parametrize(("targets", "dropout", "precision"), CASES)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_estimate_agrees_with_transformers_module_under_lora(
    tmp_path: Path, family: str, targets: str, dropout: float, precision: str
) -> None:
    """Each adapter's A output and input (its own where cast or dropped), one dropout for a
    fused q/k/v and LitGPT's zero_pad copy where a slice is off, frozen layers' inputs not kept,
    the first block's norms (and, in parallel blocks without up adapted, its MLP) keeping
    nothing: estimate = trace per category."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, family), seq=64, batch=2, precision=precision, lora_rank=8,
        lora_targets=targets, lora_dropout=dropout,
    )  # fmt: skip
    _agree(cfg)


AMP_CASES = [
    ("q,v", 0.05, "amp-bf16"), ("q,k,v,o,up,down", 0.05, "amp-bf16"), ("o,v,down", 0.0, "amp-fp16"),
    ("q,down", 0.0, "amp-bf16"), ("k,up,lm_head", 0.1, "amp-bf16"),
]  # fmt: skip


@pytest.mark.parametrize(("targets", "dropout", "precision"), AMP_CASES)
@pytest.mark.parametrize("family", [*FAMILIES, "bloom"])
def test_estimate_agrees_with_the_trace_under_autocast(
    tmp_path: Path, family: str, targets: str, dropout: float, precision: str
) -> None:
    """Autocast over fp32 LoRA: each adapter keeps a 16-bit copy of its own input, frozen layers
    none (nor the attention output's copy, nor GELU's output), the first block's frozen layers
    reading the embedding keep no weight copy nor their adapters' A copies, every other adapter
    weight its 16-bit copy. It was refused; counted as full training's autocast it read
    1.05-1.16 × the trace's peak."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, family), seq=64, batch=2, precision=precision, lora_rank=8,
        lora_targets=targets, lora_dropout=dropout,
    )  # fmt: skip
    _agree(cfg, peak=0.0002)


@pytest.mark.parametrize(
    ("targets", "dropout", "precision", "keeps"),
    [("q,v", 0.05, "amp-bf16", False), ("q,k,v,o,up,down", 0.05, "amp-fp16", True),
     ("k,up,lm_head", 0.1, "amp-bf16", True), ("o,v,down", 0.0, "amp-bf16", False)],
)  # fmt: skip
@pytest.mark.parametrize("family", [*FAMILIES, "bloom"])
def test_qlora_under_autocast(
    tmp_path: Path, family: str, targets: str, dropout: float, precision: str, keeps: bool
) -> None:
    """bitsandbytes' 4-bit layers under autocast return fp32 (their input's dtype): GELU keeps
    an fp32 input, a fused q/k/v output is fp32 so SDPA keeps its own 16-bit v, the frozen
    4-bit weights have no 16-bit copies (the first block loses only its adapters' A copies),
    and old bitsandbytes keeps each layer's own 16-bit cast of its input (three for Phi's q, k,
    v). It was refused; counted with 16-bit LoRA's autocast rules it read 0.90-0.98 of the
    trace's peak."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, family), seq=64, batch=2, precision=precision, lora_rank=8,
        lora_targets=targets, lora_dropout=dropout, qlora=True, bnb_keeps_inputs=keeps,
    )  # fmt: skip
    _agree(cfg, peak=0.0002)


@pytest.mark.parametrize(
    ("family", "target"),
    [("gpt_neox sequential", "cpu"), ("phi", "cuda"),
     ("falcon-7b", "cpu")],
)  # fmt: skip
def test_our_blocks_under_autocast(tmp_path: Path, family: str, target: str) -> None:
    """Our blocks (LitGPT's fused q/k/v adapter where fused) under autocast, on either target."""
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, family), seq=64, batch=2, precision="amp-fp16", lora_rank=8,
        lora_targets="q,v,o,down", lora_dropout=0.05, target=target,
    )  # fmt: skip
    with project_blocks():
        _agree(cfg, peak=0.0002)


@pytest.mark.parametrize(
    ("family", "target", "precision"),
    [("gpt_neox", "cpu", "mixed"), ("phi", "cpu", "bf16"),
     ("falcon-40b", "cuda", "fp32"),
     ("gpt_neox sequential", "cuda", "bf16")],
)  # fmt: skip
def test_estimate_agrees_with_our_blocks_under_lora(
    tmp_path: Path, family: str, target: str, precision: str
) -> None:
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, family), seq=64, batch=2, precision=precision, lora_rank=8,
        lora_targets="q,v,o,down", lora_dropout=0.05, target=target,
    )  # fmt: skip
    with project_blocks():
        _agree(cfg)


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize(
    "extra",
    [{"bnb_keeps_inputs": False}, {"bnb_keeps_inputs": True},
     {"bnb_keeps_inputs": True, "fabric_bnb": True, "loss": "litgpt", "tied_head": False}],
)  # fmt: skip
def test_qlora_agrees(tmp_path: Path, family: str, extra: dict) -> None:
    """QLoRA: every Linear of the blocks 4-bit (Falcon's FalconLinear too), old bitsandbytes
    keeping each layer's input when it needs a gradient (not the first block's reads of the
    embedding), LitGPT's loop holding them, Lightning's 4-bit LM head."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, family), seq=64, batch=2, precision="bf16", lora_rank=8,
        lora_targets="q,v", lora_dropout=0.05, qlora=True, **extra,
    )  # fmt: skip
    _agree(cfg, peak=0.004)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_qlora_on_our_blocks_keeps_the_head_16_bit(tmp_path: Path, family: str) -> None:
    """Our blocks name their head embed_out (as GPT-NeoX's own module does): it stays 16-bit
    as transformers keeps any output embedding, tied or not. Quantized, the trace's parameters
    read 17,996 B above the estimate's on Falcon's tied kinds (a 4-bit copy beside the
    embedding) and 47,540 B under on the untied ones."""
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, family), seq=64, batch=2, precision="bf16", lora_rank=8,
        lora_targets="q,v", qlora=True,
    )  # fmt: skip
    with project_blocks():
        _agree(cfg)


def test_fused_qkv_adapter_is_litgpts(tmp_path: Path) -> None:
    """A fused q/k/v gets one adapter over the enabled slices, shaped as LitGPT's
    LoRAQKVLinear: A of (n·r, h), B of (Σ slice widths, r); the head and the MLP peft's."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, "falcon-7b"), seq=16,
        batch=1, lora_rank=8, lora_targets="q,v,up,lm_head", lora_dropout=0.05,
    )  # fmt: skip
    traced = trace_step(cfg)
    lora = traced.model_info["lora"]
    assert lora["targets"][0].startswith("query_key_value (q, v slices")
    assert lora["targets"][1:] == ["dense_h_to_4h", "lm_head"]
    # per block: A 2·8·64 + B (64 + 16)·8; up 8·(64 + 256); the head 8·(64 + 512), once
    assert lora["adapter_params"] == 2 * (2 * 8 * 64 + 80 * 8 + 8 * (64 + 256)) + 8 * 576
    assert lora["adapted_layers"] == 2 * 2 + 1


@pytest.mark.parametrize(
    ("targets", "dropout"), [("q,k,v,o,up,down", 0.05), ("o,v,down,lm_head", 0.0)]
)
@pytest.mark.parametrize("checkpointing", ["none", "full"])
@pytest.mark.parametrize("family", [*FAMILIES, "bloom"])
def test_peft_fp32_adapters_on_a_bf16_model_under_autocast(
    tmp_path: Path, family: str, checkpointing: str, targets: str, dropout: float
) -> None:
    """--autocast-adapters (peft's fp32 adapters on a bf16 model, the Trainer's autocast): each
    LayerNorm keeps an fp32 copy of its input and weights (autocast's fp32 list), each adapter a
    16-bit copy of its input, every adapter weight but the first block's A on the embedding's
    norm its 16-bit copy; Phi's gelu_new is fp32 from pow on. It was refused ("modelled on the
    Llama family only"); counted as bf16 with fp32 casts it read 0.90-1.09 of the trace's
    peak. With checkpointing it stays refused (a few KB of activations under the trace's)."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    cfg = TrainingConfig(
        model=neox_spec(tmp_path, family), seq=64, batch=2, precision="bf16", lora_rank=8,
        lora_targets=targets, lora_dropout=dropout, autocast_adapters=True,
    )  # fmt: skip
    _agree(cfg, peak=0.0002)
    with pytest.raises(ProfilingError, match="GPT-NeoX's kind of model with --qlora, --checkpoint"):
        estimate(cfg.model_copy(update={"checkpointing": "full"}))


def test_autocast_with_selective_checkpointing_or_qlora_is_one_sentence(tmp_path: Path) -> None:
    """Not modelled: selective checkpointing of eager attention, or QLoRA with full, under
    autocast (full checkpointing with LoRA is: tests/profiling/trace/test_neox_moments.py;
    selective under SDPA recomputes nothing: tests/profiling/estimate/test_selective.py)."""
    spec = neox_spec(tmp_path, "phi")
    cfg = TrainingConfig(
        model=spec, seq=16, batch=1, precision="amp-bf16", lora_rank=8, checkpointing="full"
    )
    for refused in ({"checkpointing": "selective", "attention": "eager"}, {"qlora": True}):
        with pytest.raises(ProfilingError, match="under autocast with selective checkpointing"):
            estimate(cfg.model_copy(update=refused))


def test_without_q_k_or_v_is_one_sentence(tmp_path: Path) -> None:
    """The first block's attention would keep nothing (not modelled): both refuse."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    spec = neox_spec(tmp_path, "phi")
    with pytest.raises(ProfilingError, match="at least one of q, k, v") as err:
        trace_step(TrainingConfig(model=spec, seq=16, batch=1, lora_rank=8, lora_targets="up"))
    assert "\n" not in str(err.value)
    with pytest.raises(ProfilingError, match="adapt at least one of q, k, v"):
        estimate(TrainingConfig(model=spec, seq=16, batch=1, lora_rank=8, lora_targets="o,up"))


@pytest.mark.parametrize(
    ("name", "slices"),
    [("falcon-7b__lora", "q, v"), ("stablelm-base-alpha-3b__qlora", "q, v")],
)
def test_litgpt_recipes_of_these_models(name: str, slices: str) -> None:
    """--from LitGPT's lora/qlora yaml of Falcon-7B and StableLM-alpha estimates (no refusal)
    with the fused projection's slices and LitGPT's loss."""
    from profiling.recipes import read_recipe, with_recipe

    recipe = read_recipe([LITGPT_CONFIGS / f"{name}.yaml"])
    cfg = TrainingConfig.parse(**with_recipe(recipe, {"seq": 512, "batch": 1}))
    est = estimate(cfg)
    assert est.per_gpu_bytes > 0
    assert cfg.loss == "litgpt" and cfg.lora_dropout == 0.05
    assert {"q", "v"} <= set(cfg.lora_targets)
    assert slices.replace(" ", "").split(",") == [t for t in cfg.lora_targets if t in "qkv"]


def test_peft_adapter_config_names_these_modules(tmp_path: Path) -> None:
    """peft's target_modules on a GPT-NeoX model: the fused projection is q, k and v."""
    from profiling.recipes import read_recipe, with_recipe

    adapter = tmp_path / "adapter_config.json"
    names = ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"]
    adapter.write_text(json.dumps({"peft_type": "LORA", "r": 16, "target_modules": names}))
    values = with_recipe(read_recipe([adapter]), {"model": "hf:pythia-1b", "seq": 256})
    cfg = TrainingConfig.parse(**values)
    assert cfg.lora_targets == ["q", "k", "v", "o", "up", "down"]
    assert estimate(cfg).per_gpu_bytes > 0
