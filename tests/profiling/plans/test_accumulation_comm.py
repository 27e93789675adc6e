"""What a GPU sends per step under gradient accumulation on a plan (``--microbatches M`` without
a pipeline): torchtitan's train_step runs each microbatch's forward and backward with gradient
sync on, so FSDP2 gathers the parameters and reduce-scatters the gradients once per microbatch
— counted in a trace (torch's own FSDP2 collectives, called on a fake world) and by hand."""

from __future__ import annotations

import pytest

from profiling.config import parse_config
from profiling.estimate.comm import comm
from profiling.estimate.shape import shape_of

SHAPE = {"layers": 3, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 704, "vocab": 1024,
         "arch": "llama", "precision": "mixed", "seq": 64, "batch": 4}  # fmt: skip
GATHER = "FSDP all-gather of the parameters"
REDUCE = "FSDP reduce-scatter of the gradients"


def _sent(cfg, params: int | None = None) -> dict[str, int]:
    return {t.name.split(" (")[0]: t.bytes for t in comm(cfg, shape_of(cfg), params).transfers}


@pytest.mark.parametrize(
    ("over", "gathers"),
    [({}, 2 * (3 + 1) + 1), ({"microbatches": 2}, 2 * (2 * (3 + 1) + 1)),
     ({"microbatches": 2, "zero": 2}, 2 * (3 + 2))],
    ids=["one-microbatch", "two-microbatches", "two-never-resharded"],
)  # fmt: skip
def test_the_collectives_a_trace_calls_are_the_closed_forms_volume(monkeypatch, over, gathers):
    pytest.importorskip("torch")
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as group

    from profiling.plans.trace import trace_plan

    seen = {"gathers": 0, "gathered": 0, "reduces": 0, "reduced": 0}
    gather, reduce = group.foreach_all_gather, group.foreach_reduce

    def counted_gather(*args, **kwargs):
        out = gather(*args, **kwargs)
        seen["gathers"] += 1
        seen["gathered"] += out.all_gather_output.numel() * out.all_gather_output.element_size()
        return out

    def counted_reduce(params, grads, *args, **kwargs):
        seen["reduces"] += 1
        seen["reduced"] += sum(g.numel() for g in grads) * 4  # reduce dtype fp32 (mixed)
        return reduce(params, grads, *args, **kwargs)

    monkeypatch.setattr(group, "foreach_all_gather", counted_gather)
    monkeypatch.setattr(group, "foreach_reduce", counted_reduce)
    cfg = parse_config(**SHAPE, dp_shard=2, **over)
    res = trace_plan(cfg)  # 3 blocks: one probe of the stage, two steps (warm-up, recorded)
    steps, m = 2, cfg.microbatches or 1
    # groups: the embedding, 3 blocks, [norm, output]. torchtitan's default reshards all but
    # the last after forward (gathered again in backward); "never" (--zero 2) none
    assert seen["gathers"] == steps * gathers
    assert seen["reduces"] == steps * m * (3 + 2)
    ring = (2 - 1) / 2  # what a rank sends of an all-gather or reduce-scatter over 2
    sent = _sent(cfg, res.params)
    assert sent[GATHER] == int(seen["gathered"] / steps * ring)
    assert sent[REDUCE] == int(seen["reduced"] / steps * ring)


def test_llama_7b_fsdp_4_accumulating_4_microbatches_by_hand() -> None:
    one = parse_config(model="llama-7b", precision="mixed", seq=2048, batch=8, dp_shard=4)
    four = parse_config(model="llama-7b", precision="mixed", seq=2048, batch=8, dp_shard=4,
                        microbatches=4)  # fmt: skip
    psi = 6_738_415_616  # Llama 2 7B's parameters
    head = 32_000 * 4_096 + 4_096  # the output (vocab × h) and the final norm (h)
    ring = 3 / 4  # over 4 FSDP ranks
    # one microbatch: every group gathered for forward and again for backward but [norm,
    # output] (torchtitan keeps it gathered); gradients reduce-scattered in fp32
    gather_one = int((2 * psi - head) * 2 * ring)  # (13,476,831,232 − 131,076,096) × 1.5
    assert gather_one == 20_018_632_704
    reduce_one = int(psi * 4 * ring)
    assert reduce_one == 20_215_246_848
    assert _sent(one) == {GATHER: gather_one, REDUCE: reduce_one}
    # four microbatches of 2: four times each, the batch (and its tokens) unchanged
    assert _sent(four) == {GATHER: 4 * gather_one, REDUCE: 4 * reduce_one}
    lines = {t.name.split(" (")[0]: t for t in comm(four, shape_of(four)).transfers}
    assert lines[GATHER].substituted == "4 × (2 × 6,738,415,616 − 131,076,096) × 2 × 0.75"
    assert lines[REDUCE].formula == "4 microbatches × Ψ / (tp · pp) × 4 B × (4 − 1)/4"


def test_the_replicas_all_reduce_runs_each_microbatch_and_a_pipelines_once() -> None:
    base = {"model": "llama-7b", "precision": "mixed", "seq": 2048, "batch": 8, "dp_shard": 2,
            "dp_replicate": 2}  # fmt: skip
    one, two = (_sent(parse_config(**base, **over)) for over in ({}, {"microbatches": 2}))
    name = "DP-replicate all-reduce of the gradients"
    assert two[name] == 2 * one[name] == 2 * int(2 * 6_738_415_616 / 2 * 4 * 0.5)
    # a pipeline's microbatches reduce once, at the last (torch's stages defer it)
    piped = {**base, "pp": 2}
    assert _sent(parse_config(**piped, microbatches=8)) == _sent(parse_config(**piped))


def test_the_time_fsdp_takes_beyond_the_compute_grows_with_the_microbatches() -> None:
    """FSDP over 16 GPUs leaves the node (network, 50 GB/s on an H100): one microbatch's
    transfers hide behind the step's compute, four times them do not."""
    from profiling.fit_plans import compute_time

    base = {"model": "llama-7b", "precision": "mixed", "seq": 2048, "batch": 8,
            "dp_shard": 16, "gpu": "h100-sxm"}  # fmt: skip
    waits = []
    for m in (1, 4):
        cfg = parse_config(**base, **({"microbatches": m} if m > 1 else {}))
        sent = comm(cfg, shape_of(cfg))
        _, compute = compute_time(cfg, shape_of(cfg))
        assert compute is not None
        fsdp = sum(t.bytes for t in sent.transfers) / 50e9
        assert sent.exposed_seconds(compute) == pytest.approx(max(0.0, fsdp - compute))
        waits.append(sent.exposed_seconds(compute))
    assert waits[0] == 0.0 < waits[1]
