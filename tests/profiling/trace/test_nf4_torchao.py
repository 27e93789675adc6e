"""QLoRA as torchtune runs it (--torchao-nf4): torchao's NF4Tensor storage, and LinearNF4's eager
dequantization in forward and backward, traced op for op (without torchao) and estimated.

torchao asserts every weight a multiple of 16,384 values, so the model here is a small Llama of
its own (hidden 128, MLP 256, four heads of 32): every Linear of its blocks quantizes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ConfigError, ProfilingError
from profiling.estimate.memory import estimate
from profiling.estimate.nf4_torchao import dequant_peak, nf4_bytes
from profiling.recipes import read_recipe
from profiling.trace.step import trace_step

REPO = Path(__file__).resolve().parents[3]
TARGETS = ["q", "v", "o", "gate", "up", "down"]  # torchtune's 3B_qlora_single_device


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    path = tmp_path_factory.mktemp("nf4") / "config.json"
    config = {
        "model_type": "llama", "vocab_size": 512, "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
        "max_position_embeddings": 512, "tie_word_embeddings": False,
    }  # fmt: skip
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


def _cfg(model: str, **extra: object) -> TrainingConfig:
    values: dict[str, object] = {
        "model": model, "seq": 64, "batch": 2, "precision": "bf16", "target": "cuda",
        "lora_rank": 8, "lora_targets": TARGETS, "qlora": True, "torchao_nf4": True,
    }  # fmt: skip
    return TrainingConfig.model_validate({**values, **extra})


def test_one_weight_s_bytes_as_torchao_lays_them_out() -> None:
    # 4096 × 4096 in bf16: 8,388,608 packed + 262,144 int8 scalers + 1,024 bf16 factors + the
    # bf16 mean + the 16-value bf16 code — about 0.516 B a value (bitsandbytes' double-quantized
    # NF4 keeps 0.516 too, with fp32 constants of its own).
    assert nf4_bytes(4096 * 4096, 2) == 8_388_608 + 262_144 + 2 * 1_024 + 2 + 32
    # get_original_weight holds two int64 code halves, both looked-up halves, both scaled
    # halves and the stacked weight at once: seven bf16 weights and a bit.
    assert dequant_peak(4096 * 4096, 2) == 14 * 4096 * 4096 + 4096 * 4096 // 32


@pytest.mark.parametrize("checkpointing", ["none", "full"])
@pytest.mark.parametrize("loss", ["cross-entropy", "chunked"])
def test_estimate_agrees_with_the_trace(model: str, checkpointing: str, loss: str) -> None:
    cfg = _cfg(model, checkpointing=checkpointing, loss=loss)
    est, traced = estimate(cfg), trace_step(cfg)
    after = traced.phases["after_forward"]
    # The NF4 storage of every block's Linear, the rest in bf16: to the byte.
    assert est.category_bytes("parameters") == after["parameters"]
    # LinearNF4 saves the NF4 weight only: nothing of its input, as the estimate counts.
    assert est.category_bytes("activations") == pytest.approx(after["activations"], abs=1024)
    # The peak: at the largest weight's dequantization in the last block's forward or a
    # recomputed block's backward but with the reference loss; within 3 % of the trace on this
    # small model (a recomputed block with the chunked loss: 33 KB low; the forward 65 KB high).
    assert est.per_gpu_bytes == pytest.approx(traced.peak_bytes, rel=0.03)
    assert any("torchao's NF4Tensor" in n for n in traced.notes)


def test_the_eager_dequantization_is_what_torchao_costs_over_bitsandbytes(model: str) -> None:
    # Same storage role, same kept tensors: torchao's eager get_original_weight (int64 code
    # halves and all) makes the step's peak higher than bitsandbytes' one-kernel dequantization.
    ao = trace_step(_cfg(model, checkpointing="full"))
    bnb = trace_step(_cfg(model, checkpointing="full", torchao_nf4=False))
    assert ao.phases["after_forward"]["activations"] == bnb.phases["after_forward"]["activations"]
    largest = 128 * 256
    assert ao.peak_bytes - bnb.peak_bytes > 6 * largest


def test_compiled_blocks_save_the_dequantized_weight_not_the_nf4_storage() -> None:
    # torchtune compiles each layer with torchao's NF4 base (compile: True with a qlora_*
    # builder): AOTAutograd traces LinearNF4 whole, and Inductor's partitioner (with Inductor's
    # decompositions or without) saves the bf16 weight get_original_weight made in forward for
    # backward's matmul, rather than the NF4 storage: n·2 bytes a weight kept where eager keeps
    # nothing new. Refused before (--compile with --qlora).
    import torch
    from torch._functorch.aot_autograd import aot_function
    from torch._inductor.compile_fx import partition_fn
    from torch._subclasses.fake_tensor import FakeTensorMode

    from profiling.trace.compiled import _boxed
    from profiling.trace.nf4_torchao import TorchaoNF4Linear, _LinearNF4

    got: dict[str, object] = {}

    def split(joint: Any, inputs: Any, **kwargs: Any) -> Any:
        fw, bw = partition_fn(joint, inputs, **kwargs)
        got.update(fw=fw, n=kwargs["num_fwd_outputs"])
        return fw, bw

    with FakeTensorMode():
        layer = TorchaoNF4Linear(torch.nn.Linear(128, 256, bias=False, dtype=torch.bfloat16))
        x = torch.empty(64, 128, dtype=torch.bfloat16, requires_grad=True)
        storage = [layer.weight, layer.quantized_scalers, layer.quantization_factor,
                   layer.scaler_mean, layer.nf4]  # fmt: skip

        def linear(x: torch.Tensor, *storage: torch.Tensor) -> torch.Tensor:
            return _LinearNF4.apply(x, layer.nf4_shape, *storage)

        aot_function(linear, fw_compiler=_boxed, bw_compiler=_boxed,
                     partition_fn=split)(x, *storage)  # fmt: skip
    fw: Any = got["fw"]
    out = next(n for n in fw.graph.nodes if n.op == "output")
    saved = [n.meta["val"] for n in out.args[0][int(got["n"]) :]]  # type: ignore[call-overload]
    assert [(tuple(v.shape), v.dtype) for v in saved] == [((256, 128), torch.bfloat16)]


def test_compile_with_nf4_moves_estimate_and_trace_by_the_same_bytes(model: str) -> None:
    # The compiled blocks' saved tensors come from the partitioner on both sides (the
    # dequantized weights among them); the NF4 storage and LinearNF4's forward dequantization
    # are the eager terms. Against compiled LoRA in bf16 on the same model, NF4 moves the
    # estimate and the trace alike to the byte.
    for loss in ("cross-entropy",):
        nf4 = _cfg(model, compile=True, loss=loss)
        bf16 = nf4.model_copy(update={"qlora": False, "torchao_nf4": False})
        moved_est = estimate(nf4).per_gpu_bytes - estimate(bf16).per_gpu_bytes
        moved_trace = trace_step(nf4).peak_bytes - trace_step(bf16).peak_bytes
        assert moved_est == moved_trace, (moved_est, moved_trace)


def test_refusals(model: str) -> None:
    with pytest.raises(ConfigError, match="add --qlora"):
        TrainingConfig.parse(model="tiny-llama", lora_rank=8, torchao_nf4=True)
    with pytest.raises(ConfigError, match="--precision bf16"):
        TrainingConfig.parse(
            model="tiny-llama", lora_rank=8, qlora=True, torchao_nf4=True, precision="mixed"
        )
    with pytest.raises(ConfigError, match="not bitsandbytes'"):
        TrainingConfig.parse(
            model="tiny-llama", lora_rank=8, qlora=True, torchao_nf4=True, precision="bf16",
            double_quant=False,
        )  # fmt: skip
    # tiny-llama's 64 × 160 weights are no multiple of 16,384: torchao would assert.
    with pytest.raises(ProfilingError, match="multiple of 16,384"):
        estimate(_cfg("tiny-llama"))


def test_a_torchtune_qlora_config_reads_as_torchao_s_nf4() -> None:
    yaml = REPO / "benchmarks/peer/configs/torchtune/llama3_2__3B_qlora_single_device.yaml"
    recipe = read_recipe([yaml])
    assert recipe.values["qlora"] is True and recipe.values["torchao_nf4"] is True
    assert recipe.values["lora_targets"] == TARGETS and recipe.values["lora_rank"] == 64
    est = estimate(TrainingConfig.parse(style="field", **{**recipe.values, "seq": 512}))
    base = next(c for c in est.components if c.name.startswith("Base weights (torchao NF4"))
    # Llama 3.2 3B's 28 blocks of 7 Linear weights, each as nf4_bytes counts it
    h, f, kv = 3072, 8192, 1024
    block = [h * h, h * kv, h * kv, h * h, h * f, h * f, f * h]
    assert base.bytes == 28 * sum(nf4_bytes(n, 2) for n in block)
