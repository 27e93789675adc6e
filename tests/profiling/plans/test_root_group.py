"""torchtitan's FSDP groups before July 2025 (``--titan-root-group``, the groups of its December
2024 tables): the embedding, norm and output in the root's group, gathered from forward's start
to backward's end, and the last block not resharded after forward — traced (torch's own FSDP2
on a fake world, as torchtitan 9dec370 wrapped the model) and in closed form
(``profiling.plans.root_group``), what a GPU sends, and the late-2024 TOML that implies it."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import parse_config
from profiling.errors import ConfigError
from profiling.estimate.comm import comm
from profiling.estimate.shape import shape_of
from tests.profiling.plans.first_rank import SHAPE, traced_and_estimated

REPO = Path(__file__).resolve().parents[3]
BLOCK = 4 * 1024 * 1024 - 2 * 1024 * 512 + 3 * 1024 * 2816 + 2 * 1024  # wq wk wv wo, FFN, norms


@pytest.mark.parametrize(
    "plan",
    [{"dp_shard": 2}, {"dp_shard": 2, "tp": 2}, {"dp_shard": 2, "microbatches": 2}],
    ids=["fsdp", "fsdp-tp", "fsdp-accumulating"],
)
def test_the_loss_holds_the_embedding_and_the_last_block_as_the_trace_does(plan) -> None:
    later_t, later_e = traced_and_estimated(**plan)
    root_t, root_e = traced_and_estimated(**plan, titan_root_group=True)
    t = plan.get("tp", 1)
    # the loss's backward leads either way; the root keeps the embedding gathered (bf16) and
    # the last block stays gathered from its forward (TP shards all but the block's norms)
    norms = 2 * 1024
    assert (
        root_t.peak_bytes - later_t.peak_bytes
        == (8192 * 1024 // t + (BLOCK - norms) // t + norms) * 2
    )
    assert root_e.peak_bytes == pytest.approx(root_t.peak_bytes, rel=1e-6)
    for cat, b in root_t.by_category.items():
        assert root_e.by_category[cat] == pytest.approx(b, rel=0.01, abs=2**16), cat
    assert later_e.peak_bytes < root_e.peak_bytes


def test_the_roots_reduction_at_backwards_end_agrees_with_the_trace() -> None:
    """A large vocabulary and few tokens: the root's post-backward leads (its bf16 gradients
    beside the fp32 reduce-scatter input), and forward's start (the root's all-gather result
    beside its copied-out parameters, then the first block's) leads the forward."""
    pytest.importorskip("torch")
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHAPE, "vocab": 65536, "seq": 256, "batch": 1}, dp_shard=2,
                       titan_root_group=True)  # fmt: skip
    t_res, e_res = trace_plan(cfg), estimate_plan(cfg)
    traced, closed = t_res.ranks[0], e_res.ranks[0]
    root = 2 * 65536 * 1024 + 1024  # the embedding, the output, the norm
    assert traced.by_category["temporaries"] == root * (2 + 4)
    assert traced.by_category["activations"] < 2**10  # every saved tensor freed by then
    # (8 B below: not SDPA's seed and offset, counted as the trace keeps them, 24 B a block)
    assert closed.peak_bytes == pytest.approx(traced.peak_bytes, rel=1e-6)
    for cat, b in traced.by_category.items():
        assert closed.by_category[cat] == pytest.approx(b, rel=0.01, abs=2**16), cat
    forward = (t_res.stages[0].moves["F0"].peak, e_res.stages[0].moves["F0"].peak)
    assert forward[1]["total"] == pytest.approx(forward[0]["total"], rel=1e-6)


def _sent(cfg) -> dict[str, int]:
    return {t.name.split(" (")[0]: t.bytes for t in comm(cfg, shape_of(cfg)).transfers}


def test_the_root_and_the_last_block_are_gathered_once(monkeypatch) -> None:
    pytest.importorskip("torch")
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as group

    from profiling.plans.trace import trace_plan

    seen = {"gathers": 0, "gathered": 0}
    gather = group.foreach_all_gather

    def counted(*args, **kwargs):
        out = gather(*args, **kwargs)
        seen["gathers"] += 1
        seen["gathered"] += out.all_gather_output.numel() * out.all_gather_output.element_size()
        return out

    monkeypatch.setattr(group, "foreach_all_gather", counted)
    cfg = parse_config(**{**SHAPE, "layers": 3}, dp_shard=2, titan_root_group=True)
    res = trace_plan(cfg)  # two steps: the warm-up and the recorded
    # the root and 3 blocks in forward, the first 2 blocks again in backward
    assert seen["gathers"] == 2 * (4 + 2)
    sent = _sent(parse_config(**{**SHAPE, "layers": 3}, dp_shard=2, titan_root_group=True))
    assert res.params == shape_of(cfg)["params"]
    assert sent["FSDP all-gather of the parameters"] == int(seen["gathered"] / 2 * 0.5)


def test_a_late_2024_toml_implies_the_root_group(tmp_path: Path) -> None:
    from profiling.recipes import read_recipe

    old = read_recipe([REPO / "benchmarks/peer/configs/torchtitan/llama3_8b@9dec370.toml"])
    assert old.values["titan_root_group"] is True
    path = tmp_path / "v02.toml"
    text = '[model]\nname = "llama3"\nflavor = "8B"\n\n[training]\nlocal_batch_size = 2\n\n'
    path.write_text(text + "[parallelism]\ndata_parallel_shard_degree = 8\n", encoding="utf-8")
    assert "titan_root_group" not in read_recipe([path]).values


def test_the_root_group_is_refused_with_the_later_policies() -> None:
    for over in ({"zero": 2}, {"reshard_always": True}):
        with pytest.raises(ConfigError, match="--titan-root-group"):
            parse_config(**SHAPE, dp_shard=2, titan_root_group=True, **over)
