"""``fit --gpus N``: where the ranking's best is a plan (traced per rank, not by fit), a note says
it is estimated, not traced — ``fit --help`` had said the best is traced to confirm (audit4's
D42: "FSDP 2 × PP 2 … batch 64" ranked first with "—" in the traced column)."""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.fit import Candidate, confirm_best


def _candidate(**flags: object) -> Candidate:
    cfg = TrainingConfig(model="llama-1b", seq=1024, gpu_mem=20, **{"batch": 1, **flags})
    return Candidate(
        config=cfg, trains="full", peak_bytes=1, peak_moment="optimizer step", nvml_bytes=1,
        tokens_per_second=None, tokens_per_step_flop=1.0, world=cfg.gpus,
    )  # fmt: skip


def test_a_plan_ranked_best_is_said_to_be_untraced() -> None:
    plan = _candidate(gpus=2, fsdp=True, dp_shard=2, pp=2, microbatches=2, batch=2)
    assert plan.config.is_plan
    notes: list[str] = []
    kept = confirm_best([plan], 2, 20 * 10**9, None, notes)
    assert kept == [plan] and plan.traced_peak_bytes is None
    said = [n for n in notes if "is estimated, not traced" in n]
    assert len(said) == 1 and plan.label() in said[0]


def test_no_note_where_the_best_is_not_a_plan() -> None:
    notes: list[str] = []
    confirm_best([], 2, 20 * 10**9, None, notes)
    assert not [n for n in notes if "is estimated, not traced" in n]
