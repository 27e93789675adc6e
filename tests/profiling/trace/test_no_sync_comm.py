"""What a GPU sends per step under FSDP's accumulation without gradient sync
(``--accumulate-unsharded N``): FSDP2's ``set_requires_gradient_sync(False)`` skips the
reduce-scatter alone, and each group is still resharded after every micro-batch's backward
(``reshard_after_backward`` left True), so every micro-batch gathers the parameters again and
only the last one reduce-scatters — counted in a trace (torch's own FSDP2 collectives on a fake
world) and in closed form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.comm import comm
from profiling.estimate.shape import shape_of

GATHER = "data parallel all-gather of the parameters"
REDUCE = "data parallel reduce-scatter of the gradients"


def _cfg(tmp_path: Path, n: int | None, **over: object) -> TrainingConfig:
    config = {"model_type": "llama", "vocab_size": 2048, "hidden_size": 64,
              "intermediate_size": 160, "num_hidden_layers": 3, "num_attention_heads": 4,
              "num_key_value_heads": 2, "max_position_embeddings": 512,
              "tie_word_embeddings": False}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return TrainingConfig(model=f"hf:{path}", seq=16, batch=1, precision="bf16", fsdp=True,
                          gpus=2, target="cpu", accumulate_unsharded=n, **over)  # fmt: skip


def _sent(cfg: TrainingConfig, params: int) -> dict[str, int]:
    return {t.name.split(" (")[0]: t.bytes for t in comm(cfg, shape_of(cfg), params).transfers}


@pytest.mark.parametrize("zero", [0, 2], ids=["fsdp", "zero2"])
def test_every_micro_batch_gathers_and_the_last_alone_reduces(monkeypatch, tmp_path, zero) -> None:
    """FSDP2 (``--zero 2``: ``reshard_after_forward=False``, gathered in forward alone, kept to
    the backward, still resharded after it)."""
    pytest.importorskip("torch")
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as group
    from torch.distributed.fsdp import FSDPModule

    from profiling.models.hf_module import project_blocks
    from profiling.trace.step import trace_step

    seen = {"gathered": 0, "reduced": 0, "steps": 0}
    gather, reduce = group.foreach_all_gather, group.foreach_reduce
    sync = FSDPModule.set_requires_gradient_sync

    def counted_gather(*args, **kwargs):
        out = gather(*args, **kwargs)
        seen["gathered"] += out.all_gather_output.numel() * out.all_gather_output.element_size()
        return out

    def counted_reduce(params, grads, *args, **kwargs):
        seen["reduced"] += sum(g.numel() * g.element_size() for g in grads)
        return reduce(params, grads, *args, **kwargs)

    def counted_sync(self, requires_gradient_sync, **kwargs):
        seen["steps"] += not requires_gradient_sync  # an accumulating step's first micro-batch
        return sync(self, requires_gradient_sync, **kwargs)

    monkeypatch.setattr(group, "foreach_all_gather", counted_gather)
    monkeypatch.setattr(group, "foreach_reduce", counted_reduce)
    monkeypatch.setattr(FSDPModule, "set_requires_gradient_sync", counted_sync)
    traced: dict[int, dict[str, int]] = {}
    for n in (1, 2, 3):  # 3: the trace runs two micro-batches without sync, then the last
        seen.update(gathered=0, reduced=0, steps=0)
        with project_blocks():
            res = trace_step(_cfg(tmp_path, n if n > 1 else None, zero=zero))
        traced[n] = {**seen, "params": res.params}
    steps = traced[3]["steps"]
    assert steps == traced[2]["steps"] > 0
    # each micro-batch without sync gathers what one with sync does; none reduces
    one = (traced[3]["gathered"] - traced[2]["gathered"]) // steps
    assert traced[2]["gathered"] - traced[1]["gathered"] == steps * one
    assert traced[3]["reduced"] == traced[2]["reduced"] == traced[1]["reduced"]
    ring = (2 - 1) / 2  # what a rank sends of a collective over 2
    psi = traced[1]["params"]
    assert one == (1 if zero else 2) * psi * 2  # forward (and backward), bf16
    for n in (1, 2, 3):
        sent = _sent(_cfg(tmp_path, n if n > 1 else None, zero=zero), psi)
        assert sent[GATHER] == int(n * one * ring)
        assert sent[REDUCE] == int(psi * 2 * ring)  # once per step, whatever N


def test_a_hundred_micro_batches_send_a_hundred_gathers_by_hand() -> None:
    base = {"model": "llama-7b", "precision": "bf16", "seq": 2048, "batch": 1, "fsdp": True,
            "gpus": 8}  # fmt: skip
    psi, ring = 6_738_415_616, 7 / 8
    plain = _sent(TrainingConfig(**base), psi)
    kept = comm(TrainingConfig(**base, accumulate_unsharded=100), shape_of(TrainingConfig(**base)))
    sent = {t.name.split(" (")[0]: t for t in kept.transfers}
    assert plain[GATHER] == int(2 * psi * 2 * ring)  # 23.58 GB
    assert sent[GATHER].bytes == int(100 * 2 * psi * 2 * ring)
    assert sent[GATHER].substituted.startswith("100 × 2 × 6,738,415,616")
    assert sent[REDUCE].bytes == plain[REDUCE] == int(psi * 2 * ring)


def test_fsdp1_shard_grad_op_gathers_once_per_step() -> None:
    """``--fsdp-flat --zero 2``: FSDP1's SHARD_GRAD_OP under ``no_sync`` keeps each flat
    parameter gathered through the micro-batches (``_should_free_in_backward`` is False without
    sync for a strategy that does not reshard after forward, and ``needs_unshard`` skips the
    all-gather of a handle still gathered): one gather and one reduce-scatter a step, whatever
    N; FSDP2's ``--zero 2`` gathers once per micro-batch."""
    base = {"model": "llama-7b", "precision": "bf16", "seq": 2048, "batch": 1, "fsdp": True,
            "gpus": 8, "zero": 2}  # fmt: skip
    psi, ring = 6_738_415_616, 7 / 8
    once = _sent(TrainingConfig(**base, fsdp_flat=True), psi)
    assert once[GATHER] == int(psi * 2 * ring)  # forward alone, as FSDP2's --zero 2
    flat = _sent(TrainingConfig(**base, fsdp_flat=True, accumulate_unsharded=8), psi)
    assert flat == once
    fsdp2 = _sent(TrainingConfig(**base, accumulate_unsharded=8), psi)
    assert fsdp2[GATHER] == int(8 * psi * 2 * ring) and fsdp2[REDUCE] == once[REDUCE]
