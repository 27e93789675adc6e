"""The fake-tensor trace against a real CPU step, FSDP sharding, user factories and errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from profiling.errors import ProfilingError  # noqa: E402
from profiling.models.workloads import build_model  # noqa: E402
from profiling.trace.optimizers import make_optimizer  # noqa: E402
from profiling.trace.step import TraceConfig, trace_step  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _nbytes(tensors) -> int:
    """Bytes of distinct storages (tied weights count once, as an allocator sees them)."""
    seen: dict[int, int] = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def _real_step(cfg: TraceConfig) -> dict[str, int]:
    """The same step with real tensors on the CPU; what stays allocated afterwards."""
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(DTYPES[cfg.param_dtype])
    try:
        model = build_model(cfg.model)
    finally:
        torch.set_default_dtype(previous)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(cfg.optimizer, params, bool(cfg.foreach))
    inputs = model.example_inputs(cfg.batch, cfg.seq)
    if cfg.dtype != "fp32":
        with torch.autocast("cpu", dtype=DTYPES[cfg.dtype]):
            loss = model(*inputs)
    else:
        loss = model(*inputs)
    loss.backward()
    optimizer.step()
    states = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
    return {
        "parameters": _nbytes(model.parameters()),
        "gradients": _nbytes(p.grad for p in model.parameters() if p.grad is not None),
        "optimizer": _nbytes(states),
    }


@pytest.mark.parametrize(
    "cfg",
    [
        TraceConfig(model="tiny-llama", batch=2, seq=16, optimizer="adamw", foreach=False),
        TraceConfig(model="tiny-gpt2", batch=2, seq=16, optimizer="sgd", foreach=True),
        TraceConfig(model="tiny-llama", batch=1, seq=32, dtype="bf16", optimizer="adam"),
        TraceConfig(model="tiny-gpt2", batch=1, seq=8, param_dtype="bf16", optimizer="adamw"),
    ],
    ids=["llama-adamw-fp32", "gpt2-tied-sgd", "llama-bf16-autocast", "gpt2-pure-bf16"],
)
def test_trace_agrees_with_real_step_to_the_byte(cfg: TraceConfig) -> None:
    traced = trace_step(cfg)
    real = _real_step(cfg)
    for category in ("parameters", "gradients", "optimizer"):
        assert traced.after_step[category] == real[category], category
    assert traced.params == sum(p.numel() for p in build_model(cfg.model).parameters())


def test_phases_and_peak_are_consistent() -> None:
    r = trace_step(TraceConfig(model="tiny-llama", batch=2, seq=32))
    fwd, bwd, end = (
        r.phases[k] for k in ("after_forward", "after_backward", "after_optimizer_step")
    )
    assert fwd["activations"] > 0 and fwd["gradients"] == 0
    assert bwd["activations"] == 0 and bwd["gradients"] == end["gradients"] > 0
    assert end["optimizer"] == 2 * end["parameters"] + 4 * len(
        list(build_model("tiny-llama").parameters())
    )
    assert r.peak_bytes == sum(r.by_category.values())
    assert r.peak_bytes >= max(p["total"] for p in r.phases.values())
    root = next(name for name in r.by_module if "." not in name)
    assert r.by_module[root].peak_forward > 0 and r.by_module[root].peak_backward > 0
    assert "Llama.layers.0" in r.by_module


@pytest.mark.parametrize("checkpointing", [False, True])
def test_fast_tracker_matches_upstream(checkpointing: bool) -> None:
    cfg = TraceConfig(model="tiny-gpt2", batch=2, seq=16, checkpointing=checkpointing)
    fast, upstream = trace_step(cfg), trace_step(cfg, upstream_tracker=True)
    assert fast.peak_bytes == upstream.peak_bytes
    assert fast.by_category == upstream.by_category
    assert fast.by_module == upstream.by_module


def test_checkpointing_keeps_fewer_activations() -> None:
    base = TraceConfig(model="tiny-llama", batch=4, seq=64)
    plain = trace_step(base)
    ckpt = trace_step(base.model_copy(update={"checkpointing": "full"}))
    assert ckpt.after_step == plain.after_step  # same model states
    assert (
        ckpt.phases["after_forward"]["activations"] < plain.phases["after_forward"]["activations"]
    )


# ----------------------------------------------------------------- FSDP over a fake process group


def test_fsdp_per_rank_sharding() -> None:
    full = trace_step(TraceConfig(model="tiny-llama", batch=2, seq=16))
    n_params = len(list(build_model("tiny-llama").parameters()))
    results = {
        ws: trace_step(TraceConfig(model="tiny-llama", batch=2, seq=16, fsdp=True, world_size=ws))
        for ws in (1, 2, 8)
    }
    for ws, r in results.items():
        assert r.config.world_size == ws and r.params == full.params
        shard = r.after_step["parameters"]
        # Each rank holds 1/ws of every parameter, padded on dim 0 to equal shards.
        assert shard * ws >= full.after_step["parameters"]
        assert shard <= full.after_step["parameters"] / ws + 4 * 64 * n_params
        assert r.after_step["gradients"] == shard  # fp32 gradients, sharded like the params
        # AdamW: two fp32 moments per element + one step counter per parameter.
        assert r.after_step["optimizer"] == 2 * shard + 4 * n_params
    assert results[1].after_step["parameters"] == full.after_step["parameters"]
    assert results[1].peak_bytes > results[2].peak_bytes > results[8].peak_bytes, (
        "more ranks, smaller per-rank peak"
    )


def test_world_size_without_fsdp_is_ddp() -> None:
    # it was refused ("--world-size > 1 needs --fsdp"): DDP's buckets (trace.ddp, issue #32)
    r = trace_step(TraceConfig(model="tiny-llama", world_size=2))
    assert r.after_step["buckets"] == r.after_step["parameters"]  # fp32: Ψ·4 each


# ----------------------------------------------------------------- user models and errors


def test_user_factory_by_module_function(user_models) -> None:
    r = trace_step(TraceConfig(model="user_models:make_mlp", batch=4))
    # 3 × Linear(32, 32) + Linear(32, 10): 3·(1024 + 32) + 320 + 10 parameters, fp32
    n = 3 * (1024 + 32) + 330
    assert r.params == n
    assert r.after_step["parameters"] == r.after_step["gradients"] == 4 * n
    assert "MLP.blocks.0" in r.by_module


def test_failing_factory_is_a_clear_error(user_models) -> None:
    with pytest.raises(ProfilingError) as info:
        trace_step(TraceConfig(model="user_models:broken"))
    message = str(info.value)
    assert "model factory 'user_models:broken' failed" in message
    assert "RuntimeError: no checkpoint at /data/ckpt.pt" in message


def test_model_reading_values_cannot_run_under_fake_tensors(user_models) -> None:
    with pytest.raises(ProfilingError) as info:
        trace_step(TraceConfig(model="user_models:make_peeks"))
    message = str(info.value)
    assert "cannot run under fake tensors" in message
    assert ".item()" in message


def test_model_built_outside_the_trace_is_a_clear_error(user_models) -> None:
    import user_models as module

    module.BUILT_AT_IMPORT = torch.nn.Linear(8, 8)  # real tensors, made before tracing
    with pytest.raises(ProfilingError, match="returned a model with real tensors"):
        trace_step(TraceConfig(model="user_models:cached"))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_xyz:make", "cannot import 'no_such_module_xyz'"),
        ("user_models:missing", "has no attribute 'missing'"),
        ("user_models:", "must look like 'package.module:function'"),
        ("gpt5", "unknown model 'gpt5'"),
    ],
)
def test_bad_model_specs(user_models, spec: str, message: str) -> None:
    with pytest.raises(ProfilingError, match=message):
        trace_step(TraceConfig(model=spec))


def test_unknown_optimizer_and_long_sequence() -> None:
    with pytest.raises(ProfilingError, match="cannot be traced"):
        trace_step(TraceConfig(model="tiny-gpt2", optimizer="lion"))
    with pytest.raises(ProfilingError, match="exceeds tiny-gpt2's maximum of 128"):
        trace_step(TraceConfig(model="tiny-gpt2", seq=4096))
