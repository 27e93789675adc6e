"""bitsandbytes as it runs: NF4 weights with and without double quantization, 8-bit optimizer
states tensor by tensor, paged states outside PyTorch's allocator — the estimate's closed form
against the trace's stand-ins, the verdict a paged state gets, and the readers that set them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError, ProfilingError
from profiling.estimate.bnb import nf4_bytes, state_bytes_8bit
from profiling.estimate.memory import estimate
from profiling.models.hf_module import project_blocks
from profiling.trace.step import trace_step

# A small Llama whose embedding and LM head (2048 × 64 = 131,072 values) are over bitsandbytes'
# paging threshold (10⁵ values) and whose blocks' tensors are under it.
WIDE_VOCAB = {
    "model_type": "llama", "vocab_size": 2048, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 512, "tie_word_embeddings": False,
}  # fmt: skip


def _spec(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(WIDE_VOCAB), encoding="utf-8")
    return f"hf:{path}"


def _both(**kwargs):
    cfg = TrainingConfig(seq=64, batch=2, **kwargs)
    with project_blocks():
        return cfg, estimate(cfg), trace_step(cfg)


def _agree(est, traced) -> None:
    """The model states to the byte; activations and the peak within the few bytes the
    estimate leaves out whatever the optimizer (a scalar or two; the token ids are counted)."""
    seen = {**traced.phases["after_forward"], "gradients": traced.after_step["gradients"]}
    for category in ("parameters", "gradients", "optimizer"):
        assert est.category_bytes(category) == seen[category], category
    assert abs(est.category_bytes("activations") - seen["activations"]) <= 64
    assert abs(est.per_gpu_bytes - traced.peak_bytes) <= 2200


def test_a_4bit_weight_holds_what_quantize_4bit_makes() -> None:
    n = 4096 * 14336  # Llama 3.1 8B's gate_proj
    blocks = n // 64
    # packed codes + the NF4 code; an fp32 absmax per 64 values without double quantization
    assert nf4_bytes(n, double_quant=False) == n // 2 + 64 + 4 * blocks
    # uint8 absmax, the offset, the nested fp32 absmax per 256 blocks, the nested map's copy
    assert nf4_bytes(n, double_quant=True) == n // 2 + 64 + blocks + 4 + 4 * (blocks // 256) + 1024


@pytest.mark.parametrize("precision", ["bf16", "mixed"])
@pytest.mark.parametrize("dq", [True, False])
def test_double_quantization_estimate_equals_trace(precision: str, dq: bool) -> None:
    pytest.importorskip("peft", reason="the lora extra (peft) is not installed")
    _, est, traced = _both(
        model="tiny-llama", precision=precision, lora_rank=8, qlora=True, double_quant=dq
    )
    _agree(est, traced)
    base = next(c for c in est.components if c.name == "Base weights (NF4, frozen)")
    assert ("(double-quantized)" in base.calculation) is dq
    assert any(("double-quantized" in n) is dq for n in traced.notes if n.startswith("QLoRA"))


def test_double_quantization_saves_what_the_fp32_absmax_costs() -> None:
    """Llama 3.1 8B: without double quantization each weight's absmax is 4 B per 64 values;
    with it 1 B, plus its nested constants and map copy: the difference, weight by weight."""

    def base(dq: bool) -> int:
        cfg = TrainingConfig(model="hf:llama-3.1-8b", precision="bf16", lora_rank=16,
                             qlora=True, double_quant=dq)  # fmt: skip
        return estimate(cfg).category_bytes("parameters")

    weights = [4096 * 4096, 4096 * 1024, 4096 * 1024, 4096 * 4096, *[4096 * 14336] * 3]
    saved = 32 * sum(nf4_bytes(n, False) - nf4_bytes(n, True) for n in weights) - 1024
    assert base(False) - base(True) == saved
    assert 0.32e9 < saved < 0.34e9  # about 3 B per 64 values of 7 billion


@pytest.mark.parametrize(
    ("model", "precision"), [("tiny-llama", "bf16"), ("tiny-gpt2", "fp32"), ("tiny-llama", "mixed")]
)
def test_eight_bit_states_estimate_equals_trace(model: str, precision: str) -> None:
    _, est, traced = _both(model=model, precision=precision, optimizer="adam8bit")
    _agree(est, traced)
    if precision == "mixed":
        return
    # One fused kernel per parameter, in place: the step allocates nothing beyond what it keeps.
    step = traced.phase_peaks["optimizer_step"]
    assert step == traced.phases["after_optimizer_step"]["total"]
    # Full 8-bit states: 1 B and a block constant per 256 values, fp32 below 4,096 values.
    numels = est.shape["param_numels"]
    states = sum(state_bytes_8bit(n) * c for n, c in numels)
    assert any(n < 4096 for n, _ in numels) and any(n >= 4096 for n, _ in numels)
    assert est.category_bytes("optimizer") == 2 * states + 2048


def test_eight_bit_optimizer_in_backward_keeps_a_pair_of_maps_per_parameter() -> None:
    """torchtune's optimizer_in_bwd makes one bitsandbytes optimizer per parameter, and each
    makes its own two quantile maps with its first 8-bit state."""
    _, est, traced = _both(
        model="tiny-llama", precision="bf16", optimizer="adam8bit", optimizer_in_bwd=True
    )
    _agree(est, traced)
    big = sum(c for n, c in est.shape["param_numels"] if n >= 4096)
    maps = next(c for c in est.components if "quantile maps" in c.name)
    assert maps.bytes == 2048 * big


def test_param_numels_are_the_model_tensors() -> None:
    from profiling.estimate.shape import workload_shape
    from profiling.models.workloads import find_workload

    for name in ("gpt2-small", "llama-7b", "hf:gemma-2-2b", "hf:llama-3.1-8b", "hf:qwen3-30b-a3b"):
        w = find_workload(name)
        assert w is not None
        shape = workload_shape(w)
        numels = shape["param_numels"]
        assert sum(n * c for n, c in numels) == w.param_count(), name
        assert sum(c for _, c in numels) == shape["param_tensors"], name


@pytest.mark.parametrize("optimizer", ["adam8bit", "adamw"])
def test_paged_states_are_outside_the_allocated_peak(tmp_path: Path, optimizer: str) -> None:
    spec = _spec(tmp_path)
    _, plain_est, plain = _both(model=spec, precision="bf16", optimizer=optimizer, counter="nvml")
    _, est, traced = _both(
        model=spec, precision="bf16", optimizer=optimizer, paged_optimizer=True, counter="nvml"
    )
    _agree(est, traced)
    # The embedding's and the LM head's two states, in managed memory: uint8 for the 8-bit
    # optimizer, fp32 for bitsandbytes' 32-bit one (whatever the parameters' dtype).
    per = 1 if optimizer == "adam8bit" else 4
    paged = 2 * 2 * 2048 * 64 * per
    assert traced.paged_bytes == est.category_bytes("paged") == paged
    if optimizer == "adam8bit":  # the same optimizer unpaged: the allocated peak lost them
        assert plain.peak_bytes - traced.peak_bytes == paged
        assert plain_est.per_gpu_bytes - est.per_gpu_bytes == paged
    for counters in (est.counters, traced.counters):
        assert counters is not None and counters.paged == paged
        # what must stay: what the allocator keeps near full and the context, not the paged
        held = counters.held()
        assert counters.must_fit() == counters.nvml.bytes - counters.reserved.bytes + held - paged
        assert counters.reserved.bytes + 500 * 2**20 + paged == counters.nvml.bytes


def test_a_paged_state_pages_out_rather_than_failing_the_verdict() -> None:
    from profiling.estimate.render import nvml_verdict

    gb = 10**9
    # 20 GB shown, 19 GB usable: 1 GB of the 2 GB paged state goes to the host.
    assert "fits by paging: 1.00 GB" in nvml_verdict(20 * gb, 20 * gb, paged=2 * gb)
    assert "does not fit" in nvml_verdict(20 * gb, 20 * gb, paged=gb // 2)  # too little to page
    assert "does not fit" in nvml_verdict(20 * gb, 20 * gb)
    # On the CLI: a step whose paged state overflows the GPU is still called a fit, by paging.
    cfg = TrainingConfig(model="gpt2-small", precision="bf16", optimizer="adam8bit",
                         paged_optimizer=True, seq=1024, counter="nvml")  # fmt: skip
    est = estimate(cfg)
    assert est.counters is not None
    between = (est.counters.must_fit() + est.counters.nvml.bytes) / 2 / 0.95
    text = estimate(cfg.model_copy(update={"gpu_mem": between / 1e9})).counters
    assert text is not None
    assert "fits by paging" in nvml_verdict(text.nvml.bytes, int(between), text.paged)


def test_bitsandbytes_stand_in_refuses_real_tensors() -> None:
    import torch

    from profiling.trace.bnb import BnbOptimizer

    p = torch.nn.Parameter(torch.zeros(8))
    p.grad = torch.zeros(8)
    with pytest.raises(ProfilingError, match="fake tensors only"):
        BnbOptimizer([p], bits=8, is_paged=False).step()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"double_quant": False}, "double.quant describes .*qlora"),
        ({"optimizer": "sgd", "paged_optimizer": True}, "not of sgd"),
        ({"paged_optimizer": True, "offload_optimizer": True}, "give one"),
    ],
)
def test_contradictions_are_one_sentence(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainingConfig(model="tiny-llama", **kwargs)


def test_readers_set_double_quantization_and_paging(tmp_path: Path) -> None:
    from profiling.recipes import read_recipe

    fixtures = Path(__file__).parents[1] / "recipes" / "fixtures"
    litgpt = read_recipe([fixtures / "litgpt" / "llama-3.1-8b-qlora.yaml"])
    assert litgpt.values["double_quant"] is False  # quantize: bnb.nf4
    dq = tmp_path / "qlora-dq.yaml"
    text = (fixtures / "litgpt" / "llama-3.1-8b-qlora.yaml").read_text(encoding="utf-8")
    dq.write_text(text.replace("quantize: bnb.nf4", "quantize: bnb.nf4-dq"), encoding="utf-8")
    assert read_recipe([dq]).values["double_quant"] is True
    # A bitsandbytes config without the key: BitsAndBytesConfig's default, off.
    bnb = tmp_path / "config.json"
    bnb.write_text(json.dumps({"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}))
    recipe = read_recipe([bnb])
    assert recipe.values["double_quant"] is False
    assert any(s.key.endswith("bnb_4bit_use_double_quant") for s in recipe.used)
    # torchtune's paged optimizer (its 1B full recipe's PagedAdamW8bit), and the Trainer's.
    values = read_recipe([fixtures / "torchtune" / "1B_full_single_device.yaml"]).values
    assert values["optimizer"] == "adam8bit" and values["paged_optimizer"] is True
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"optim": "paged_adamw_32bit", "per_device_train_batch_size": 1}))
    values = read_recipe([args]).values
    assert values["optimizer"] == "adamw" and values["paged_optimizer"] is True
    assert not [s for s in read_recipe([args]).ignored if "not modelled yet" in s.why]
