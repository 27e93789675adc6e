"""Float8 training on a plan (torchao's Float8Linear, converted as torchtitan converts it) and
asynchronous TP's symmetric-memory workspace: torchao's own modules traced under fake tensors,
the closed form held to them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from profiling.config import parse_config
from profiling.errors import ConfigError, ProfilingError
from profiling.plans.closed_form import estimate_plan
from profiling.plans.float8_form import linear_backward, linear_forward

# A Llama-shaped model small enough to trace in seconds, its tokens (512) unlike its hidden size
# (1024) so a formula mixing them up fails
SHAPE = {"layers": 6, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 8192,
         "arch": "llama", "precision": "mixed", "seq": 512}  # fmt: skip
RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")


def _one_linear(tokens: int, i: int, o: int, recipe: str) -> tuple[int, int]:
    """(forward peak, step peak) of one torchao Float8Linear under torch's MemTracker."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    from profiling.plans.float8 import convert

    with FakeTensorMode():
        model = torch.nn.Sequential(torch.nn.Linear(i, o, bias=False, dtype=torch.bfloat16))
        assert convert(model, recipe, all_gather=False) == 1
        x = torch.empty(tokens, i, dtype=torch.bfloat16, requires_grad=True)
        tracker = MemTracker()
        tracker.track_external(model, x)
        with tracker:
            y = model(x)
            forward = tracker.get_tracker_snapshot("peak")
            y.backward(torch.ones_like(y))
            step = tracker.get_tracker_snapshot("peak")

    def total(snap: dict[Any, dict[Any, int]]) -> int:
        return sum(v for d in snap.values() for k, v in d.items() if str(k) == "Total")

    return total(forward), total(step)


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("shape", [(1024, 512, 2048), (2048, 512, 2048), (512, 1024, 4096)])
def test_one_float8_linear_is_its_casts_nine_bytes_per_element(
    recipe: str, shape: tuple[int, int, int]
) -> None:
    # above the bf16 input and weight: the forward's casts; above them, the output and its
    # gradient: the backward's (torchao 0.18, op by op); a few scales aside (rowwise: 4 B a row)
    tokens, i, o = shape
    x, wt, g = tokens * i, i * o, tokens * o
    forward, step = _one_linear(tokens, i, o, recipe)
    scales = 4 * (tokens + o + i) + 64
    assert 0 <= forward - (2 * x + 2 * wt + linear_forward(x, wt, False)) <= scales
    expected = 2 * x + 2 * wt + 4 * g + linear_backward(x, wt, g, False, recipe)
    assert 0 <= step - expected <= scales


def _traced(cfg: Any) -> Any:
    pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from profiling.plans.trace import trace_plan

    return trace_plan(cfg)


def _agree(cfg: Any, rel: float, per_category: bool) -> None:
    traced, estimated = _traced(cfg), estimate_plan(cfg)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=rel)
        if per_category:
            for category, bytes_ in t.by_category.items():
                if bytes_ > t.peak_bytes // 1000:  # a category of a few scalars aside
                    assert e.by_category[category] == pytest.approx(bytes_, rel=0.01), category


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise_with_gw_hp"])
def test_a_pipeline_under_float8_is_its_trace_category_by_category(recipe: str) -> None:
    _agree(parse_config(**SHAPE, pp=2, batch=2, microbatches=2, float8=recipe), 0.001, True)


@pytest.mark.parametrize("gather", [False, True])
def test_fsdp_under_float8_agrees_in_total(gather: bool) -> None:
    # without a pipeline the peak is inside a late block's backward: the closed form's block
    # may be the trace's neighbour (one block's gradient shard for one block's saved tensors)
    cfg = parse_config(**SHAPE, dp_shard=2, float8="tensorwise", float8_all_gather=gather)
    _agree(cfg, 0.005, False)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_tensor_parallel_pipeline_under_float8_is_its_trace(recipe: str) -> None:
    # the first rank peaks in its optimizer step (the embedding's whole-vocabulary gradient);
    # tensorwise runs torchao's Float8 TP styles, rowwise torch's
    cfg = parse_config(**SHAPE, pp=2, tp=2, batch=2, microbatches=2, float8=recipe)
    _agree(cfg, 0.001, True)


def test_float8_keeps_for_backward_what_bf16_keeps_and_gathers_half() -> None:
    # torchao keeps the high-precision input and weight: a forward leaves what bf16's leaves
    plan = {**SHAPE, "pp": 2, "batch": 2, "microbatches": 2, "dp_shard": 2}
    plain = _traced(parse_config(**plan))
    f8 = _traced(parse_config(**plan, float8="tensorwise"))
    gathered = _traced(parse_config(**plan, float8="tensorwise", float8_all_gather=True))
    for a, b in zip(plain.stages, f8.stages, strict=True):
        assert abs(b.moves["F"].delta["activations"] - a.moves["F"].delta["activations"]) < 64
    # under a pipeline FSDP keeps a stage's weights gathered from its first forward: in fp8
    # the blocks' Linears hold one byte per element, not two
    h, f, kv = SHAPE["hidden"], SHAPE["ffn"], SHAPE["hidden"] // 2
    linears = 2 * h * h + 2 * h * kv + 3 * h * f
    first = f8.stages[0]
    saved = (
        first.moves["F0"].delta["parameters"] - gathered.stages[0].moves["F0"].delta["parameters"]
    )
    assert saved == first.layers * linears


def test_what_float8_cannot_run_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="run on a parallel plan"):
        parse_config(model="llama-7b", float8="tensorwise", precision="mixed")
    with pytest.raises(ConfigError, match="give --precision mixed or bf16"):
        parse_config(model="llama-7b", dp_shard=2, float8="rowwise")
    with pytest.raises(ConfigError, match="needs --float8 tensorwise"):
        parse_config(model="llama-7b", dp_shard=2, precision="mixed", float8="rowwise",
                     float8_all_gather=True)  # fmt: skip
    with pytest.raises(ConfigError, match="give --dp-shard N > 1"):
        parse_config(model="llama-7b", pp=2, batch=2, precision="mixed", float8="tensorwise",
                     float8_all_gather=True)  # fmt: skip
    # FSDP over N GPUs is torchtitan's plan FSDP N
    cfg = parse_config(model="llama-7b", fsdp=True, gpus=8, precision="mixed", float8="rowwise")
    assert cfg.is_plan and cfg.dp_shard == 8


def test_a_trace_without_torchao_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    monkeypatch.setitem(sys.modules, "torchao.float8", None)  # import fails as if absent
    with pytest.raises(ProfilingError, match=r"pip install 'journal-agent\[float8\]'"):
        trace_plan(parse_config(**SHAPE, dp_shard=2, float8="tensorwise"))


def test_async_tp_adds_torchs_workspace_to_nvidia_smi_only() -> None:
    from profiling.estimate.symm_mem import SIGNAL_PAD, symm_mem_bytes
    from profiling.plans.report import rank_nvml

    plan = {"model": "llama-7b", "dp_shard": 2, "tp": 4, "precision": "mixed", "batch": 2,
            "seq": 2048}  # fmt: skip
    plain, overlapped = parse_config(**plan), parse_config(**plan, async_tp=True)
    # fused_matmul_reduce_scatter's two output chunks of b·s/t tokens × h in bf16
    expected = 2 * (2 * 2048 // 4) * 4096 * 2 + SIGNAL_PAD
    assert symm_mem_bytes(overlapped) == expected and symm_mem_bytes(plain) == 0
    a, b = estimate_plan(plain), estimate_plan(overlapped)
    assert b.highest.peak_bytes == a.highest.peak_bytes  # outside the caching allocator
    assert rank_nvml(b, b.highest) - rank_nvml(a, a.highest) == expected
    # at most 2048 rows NVLS multicast gathers the whole input into the workspace
    small = parse_config(**{**plan, "batch": 1, "seq": 1024}, async_tp=True)
    assert symm_mem_bytes(small) == 1024 * 4096 * 2 + SIGNAL_PAD
    with pytest.raises(ConfigError, match="needs --tp 2 or more"):
        parse_config(model="llama-7b", dp_shard=2, async_tp=True)


def test_torchtitans_float8_and_async_tp_settings_read_as_ours(tmp_path: Path) -> None:
    from profiling.recipes import read_recipe

    path = tmp_path / "titan.toml"
    head = '[model]\nname = "llama3"\nflavor = "8B"\n\n'
    path.write_text(
        head + "[parallelism]\ntensor_parallel_degree = 2\nenable_async_tensor_parallel = true\n"
        "\n[float8]\nenable_float8_linear = true\nenable_fsdp_float8_all_gather = true\n"
        "precompute_float8_dynamic_scale_for_fsdp = true\n",
        encoding="utf-8",
    )
    values = read_recipe([path]).values
    assert values["float8"] == "tensorwise" and values["float8_all_gather"] is True
    assert values["async_tp"] is True
    # v0.2: the converter and its recipe by name
    path.write_text(
        '[model]\nname = "llama3"\nflavor = "8B"\nconverters = ["float8"]\n\n'
        '[float8]\nrecipe_name = "rowwise_with_gw_hp"\n',
        encoding="utf-8",
    )
    recipe = read_recipe([path])
    assert recipe.values["float8"] == "rowwise_with_gw_hp"
    assert "async_tp" not in recipe.values and "float8_all_gather" not in recipe.values


@pytest.mark.parametrize("gather", [False, True])
def test_float8_tp_styles_are_their_trace_category_by_category(gather: bool) -> None:
    # torchtitan's enable_float8_tensorwise_tp: torchao's Float8 TP styles gather the blocks'
    # inputs in fp8 and keep them (and wo's and w2's inputs) at one byte
    cfg = parse_config(**SHAPE, dp_shard=2, tp=2, batch=2, float8="tensorwise",
                       float8_all_gather=gather)  # fmt: skip
    _agree(cfg, 0.001, True)
    said = estimate_plan(cfg).notes
    assert any("torchao's TP styles" in n and "before their all-gather" in n for n in said)


def test_float8_tp_styles_keep_one_byte_where_torchs_styles_keep_two() -> None:
    # rowwise keeps torch's styles (bf16 all-gathers): a tensorwise block keeps its two
    # gathered inputs and w2's input at one byte, and an fp8 copy of wo's input beside the
    # attention's output, the same in the trace and the closed form, the same in every run
    plan = {**SHAPE, "layers": 2, "pp": 2, "tp": 2, "batch": 2, "microbatches": 2}
    bf16_styles = _traced(parse_config(**plan, float8="rowwise"))
    fp8_styles = [_traced(parse_config(**plan, float8="tensorwise")) for _ in range(2)]
    assert fp8_styles[0].stages == fp8_styles[1].stages  # the fp8 gathers counted every time
    h, f, q, tokens = SHAPE["hidden"], SHAPE["ffn"] // 2, SHAPE["hidden"] // 2, SHAPE["seq"]
    less = (2 * h + f - q) * tokens
    for a, b in zip(bf16_styles.stages, fp8_styles[0].stages, strict=True):
        kept = a.moves["F"].delta["activations"] - b.moves["F"].delta["activations"]
        assert abs(kept - less * b.layers) < 64  # torchao's fp32 scales aside
    for cfg in (parse_config(**plan, float8="rowwise"),
                parse_config(**{**plan, "tp": 1}, float8="tensorwise")):  # fmt: skip
        assert not any("TP styles" in n for n in estimate_plan(cfg).notes)


@pytest.mark.parametrize(
    "plan",
    [
        {"dp_shard": 2, "tp": 2, "batch": 2, "checkpointing": "full"},
        {"dp_shard": 2, "tp": 2, "batch": 1, "checkpointing": "selective-op"},
        {"dp_shard": 2, "tp": 2, "batch": 3, "checkpointing": "full", "float8_all_gather": True},
        {
            "dp_shard": 4,
            "tp": 2,
            "batch": 2,
            "checkpointing": "selective-op",
            "float8_all_gather": True,
        },
    ],
)
def test_float8_tp_styles_with_checkpointing_are_their_trace_category_by_category(
    plan: dict[str, Any],
) -> None:
    # a checkpointed block's backward peaks as its recomputation casts w2's weight, with wo's
    # output and the SwiGLU product in bf16 still held (the product is kept in fp8): the
    # estimate said 0.52x the trace's activations and 1.5x its temporaries at the same total
    cfg = parse_config(**{**SHAPE, "layers": 3}, float8="tensorwise", **plan)
    _agree(cfg, 0.001, True)
