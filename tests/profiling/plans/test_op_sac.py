"""torchtitan's op-level selective activation checkpointing (``--checkpointing selective-op``):
the policy as torchtitan writes it, run by torch's own checkpoint in the trace, and the closed
form held to that trace category by category."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from profiling.config import parse_config
from profiling.errors import ConfigError
from profiling.models.workloads import find_workload
from profiling.plans.closed_form import block_activations, estimate_plan, op_sac_activations

# A Llama-shaped model whose blocks outweigh its head (as at 8B), small enough to trace in
# seconds: grouped-query attention, SwiGLU, flash attention in bf16.
SHAPE = {"layers": 6, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 8192,
         "arch": "llama", "precision": "mixed", "seq": 1024}  # fmt: skip


def test_the_policy_is_torchtitans_every_second_matmul_recomputed() -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import CheckpointPolicy

    from profiling.plans.op_sac import policy

    class Ctx:
        is_recompute = False

    aten = torch.ops.aten
    decide = policy({"forward_mm_count": 0, "recompute_mm_count": 0})
    # a block's ops in torchtitan's order: wq wk wv, SDPA, wo, w1 w3, w2
    order = [aten.mm.default] * 3 + [aten._scaled_dot_product_flash_attention.default]
    order += [aten.mm.default] * 4 + [aten.add.Tensor, aten.max.default]
    saved = [decide(Ctx(), op) == CheckpointPolicy.MUST_SAVE for op in order]
    assert saved == [True, False, True, True, False, True, False, True, False, True]
    # the recomputation counts its matmuls apart (torchtitan's "recompute_mm_count")
    Ctx.is_recompute = True
    assert decide(Ctx(), aten.mm.default) == CheckpointPolicy.MUST_SAVE
    collective = torch.ops._c10d_functional.reduce_scatter_tensor.default
    assert decide(Ctx(), collective) == CheckpointPolicy.MUST_SAVE


def test_the_closed_form_keeps_between_full_and_no_checkpointing() -> None:
    # Korthikanti et al.: full recomputation keeps 2·s·b·h bytes per layer (the block's 16-bit
    # input); torchtitan's per-op policy adds q, v, SDPA's output and logsumexp, w1's and w2's
    # outputs: 2·s·b·(h + q + kv + h + f + h) + 4·a·s·b and SDPA's seed and offset (the flash
    # kernel's (2,) and () uint64: 24 B)
    w = find_workload("llama-7b")
    assert w is not None
    s, h, f, a = 2048, w.hidden, w.ffn, w.heads
    kept = op_sac_activations(w, s, 1, 2, s)
    assert kept == 2 * s * (4 * h + w.n_kv_heads * w.head_dim + f) + 4 * a * s + 24
    assert 2 * s * h < kept < block_activations(w, s, 1, 2, s)


def test_a_plan_is_cheaper_with_the_policy_and_says_so() -> None:
    plain = estimate_plan(parse_config(**SHAPE, pp=2, batch=2, microbatches=2))
    op = estimate_plan(parse_config(**SHAPE, pp=2, batch=2, microbatches=2,
                                    checkpointing="selective-op"))  # fmt: skip
    full = estimate_plan(parse_config(**SHAPE, pp=2, batch=2, microbatches=2,
                                      checkpointing="full"))  # fmt: skip
    assert full.highest.peak_bytes < op.highest.peak_bytes < plain.highest.peak_bytes


@pytest.mark.parametrize(
    "plan",
    [
        {"pp": 4, "batch": 4, "microbatches": 4},  # every stage kind of a 1F1B pipeline
        {"pp": 2, "batch": 4, "microbatches": 4, "pp_schedule": "interleaved"},
        {"dp_shard": 2},  # FSDP2 without a pipeline: the peak inside a late block's backward
        {"dp_shard": 2, "tp": 2},  # with TP: collectives' outputs kept, wo's partial remade
    ],
)
@pytest.mark.parametrize("checkpointing", ["selective-op", "full"])
def test_the_closed_form_is_the_trace_category_by_category(
    plan: dict[str, Any], checkpointing: str
) -> None:
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**SHAPE, **plan, checkpointing=checkpointing)
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.001)
        for category, bytes_ in t.by_category.items():
            if bytes_ > t.peak_bytes // 1000:  # a category of a few scalars aside
                assert e.by_category[category] == pytest.approx(bytes_, rel=0.01), category


def test_pipelined_fsdp_with_tensor_parallelism_agrees_in_total() -> None:
    # Under a pipeline FSDP2's unsharded gradients are torch's tracker's temporaries until the
    # reduction (the closed form calls them gradients): the total is held, not the split.
    pytest.importorskip("torch")
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**SHAPE, pp=2, batch=2, microbatches=2, dp_shard=2, tp=2,
                       checkpointing="selective-op")  # fmt: skip
    traced, estimated = trace_plan(cfg), estimate_plan(cfg)
    for t, e in zip(traced.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.005)


def test_what_the_policy_cannot_run_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="per-op policy, run on a parallel plan"):
        parse_config(model="llama-7b", checkpointing="selective-op")
    with pytest.raises(ConfigError, match="one backward per selectively checkpointed region"):
        parse_config(model="llama-7b", pp=2, batch=2, pp_schedule="zbv",
                     checkpointing="selective-op")  # fmt: skip
    # FSDP over N GPUs is the plan FSDP 8 (torchtitan's step)
    cfg = parse_config(model="llama-7b", fsdp=True, gpus=8, checkpointing="selective-op")
    assert cfg.is_plan and cfg.dp_shard == 8


def test_torchtitans_op_option_reads_as_the_policy(tmp_path: Path) -> None:
    from profiling.recipes import read_recipe

    path = tmp_path / "op.toml"
    head = '[model]\nname = "llama3"\nflavor = "8B"\n\n[activation_checkpoint]\n'
    path.write_text(head + 'mode = "selective"\nselective_ac_option = "op"\n', encoding="utf-8")
    assert read_recipe([path]).values["checkpointing"] == "selective-op"
    path.write_text(head + 'mode = "selective"\nselective_ac_option = "x"\n', encoding="utf-8")
    recipe = read_recipe([path])
    assert "checkpointing" not in recipe.values  # an integer is every N-th block: test_every_n
    assert "'x' is neither 'op' nor a block count" in "\n".join(recipe.lines())


def _titans_save_ops_at_114151ad4() -> set[Any]:
    """torchtitan 114151ad4's ``_get_save_ops`` (torchtitan/distributed/activation_checkpoint.py):
    torch's compute-intensive ops (``get_default_op_list``: ``_scaled_mm``, ``bmm``, ``addmm``
    among them) and its own compute and communication ops, besides ``aten.mm``."""
    torch = pytest.importorskip("torch")
    from torch._functorch.partitioners import get_default_op_list

    aten = torch.ops.aten
    ops = {op.default for op in get_default_op_list().compute_intensive_ops}
    ops |= {aten._scaled_dot_product_cudnn_attention.default, aten.max.default,
            aten._scaled_dot_product_attention_math.default, aten.linear.default,
            aten._scaled_dot_product_fused_attention_overrideable.default,
            torch.ops._c10d_functional.reduce_scatter_tensor.default,
            torch.ops._c10d_functional.all_to_all_single.default}  # fmt: skip
    assert aten._scaled_mm.default in ops
    return ops


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_float8s_matmuls_reach_the_policy_as_mm_so_titans_newer_list_keeps_the_same(
    recipe: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torchtitan 114151ad4 saves every _scaled_mm output, but torchao's Float8Linear calls
    # torch.mm on its Float8TrainingTensor: SAC's dispatch mode sees aten.mm (modes dispatch
    # before subclasses), counted every second as any matmul, and the _scaled_mm runs inside
    # the subclass's __torch_dispatch__, below the mode. Under the newer list a Float8 block
    # keeps what it keeps under v0.2.2's, to the byte.
    pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from profiling.plans import op_sac
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHAPE, "layers": 2, "seq": 512}, pp=2, batch=2, microbatches=2,
                       float8=recipe, checkpointing="selective-op")  # fmt: skip
    before = trace_plan(cfg)
    seen: list[str] = []
    policy = op_sac.policy

    def watched(meta: dict[str, int]) -> Any:
        decide = policy(meta)

        def _decide(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(str(func))
            return decide(ctx, func, *args, **kwargs)

        return _decide

    monkeypatch.setattr(op_sac, "save_list", _titans_save_ops_at_114151ad4)
    monkeypatch.setattr(op_sac, "policy", watched)
    after = trace_plan(cfg)
    assert "aten.mm.default" in seen and "aten._scaled_mm.default" not in seen
    assert [r.peak_bytes for r in after.ranks] == [r.peak_bytes for r in before.ranks]
    for a, b in zip(before.stages, after.stages, strict=True):
        assert a.moves == b.moves
    estimated = estimate_plan(cfg)
    for t, e in zip(after.ranks, estimated.ranks, strict=True):
        assert e.peak_bytes == pytest.approx(t.peak_bytes, rel=0.001)
