"""A global batch held, gradient accumulation searched: ``fit --plans --global-batch N`` and a
torchtitan TOML's ``global_batch_size`` (torchtitan's gradient_accumulation_steps = global /
(local_batch_size × dp_replicate × dp_shard), pytorch/torchtitan torchtitan/train.py v0.2.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.fit_plans import fit_plans
from profiling.recipes import read_recipe, with_recipe


def _base(**values: object) -> TrainingConfig:
    return TrainingConfig.parse(model="llama-7b", seq=2048, gpu="h100-sxm", **values)


def test_fit_holds_the_global_batch_and_searches_the_microbatches() -> None:
    res = fit_plans(_base(tp=1, pp=1, checkpointing="none"), 16, global_batch=256)
    assert res.fitting
    accumulated = [c for c in res.fitting if (c.config.microbatches or 1) > 1]
    assert accumulated, "the whole batch of 16 per rank does not fit: accumulation does"
    for c in res.fitting:  # every plan steps on 256 sequences: 16 ranks × 16
        assert c.config.batch * c.config.dp_shard == 256
    # fewer, larger microbatches first: each gathers and reduce-scatters once (faster), and more
    # of them hold less
    ms = [c.config.microbatches or 1 for c in res.fitting]
    assert ms == sorted(ms)
    peaks = [c.nvml_bytes for c in res.fitting]
    assert peaks == sorted(peaks, reverse=True)
    one, two = res.fitting[0], res.fitting[1]
    assert two.comm_bytes == pytest.approx(one.comm_bytes * ms[1] / ms[0], rel=1e-6)
    assert "accumulated microbatches of" in one.label()
    assert any("global batch 256 sequences per step" in n for n in res.notes)


def test_a_global_batch_and_a_batch_together_are_refused() -> None:
    with pytest.raises(ProfilingError, match="--global-batch or --batch, not both"):
        fit_plans(_base(batch=4), 16, global_batch=256)


def test_fit_plans_global_batch_on_the_command_line(tmp_path, run_cli) -> None:
    args = ("fit", "--plans", "--model", "llama-7b", "--seq", "2048", "--gpus", "16", "--gpu",
            "h100-sxm", "--tp", "1", "--pp", "1", "--checkpointing", "none", "--global-batch",
            "256", "--root", str(tmp_path))  # fmt: skip
    out = run_cli(*args, cwd=tmp_path).stdout
    assert "batch 16 in 4 accumulated microbatches of 4" in out
    assert "--dp-shard 16 --batch 16 --microbatches 4" in out  # the flags to trace it


def _toml(tmp_path: Path, training: str, parallelism: str) -> Path:
    path = tmp_path / "titan.toml"
    path.write_text(
        '[model]\nname = "llama3"\nflavor = "8B"\n\n'
        f"[training]\nseq_len = 2048\n{training}\n\n"
        f"[parallelism]\n{parallelism}\n",
        encoding="utf-8",
    )
    return path


def test_torchtitan_global_batch_size_is_the_plans_accumulation(tmp_path: Path) -> None:
    # 64 sequences per step over FSDP 4 × HSDP 2: 8 per rank, in microbatches of 2 → 4
    path = _toml(tmp_path, "local_batch_size = 2\nglobal_batch_size = 64",
                 "data_parallel_shard_degree = 4\ndata_parallel_replicate_degree = 2")  # fmt: skip
    recipe = read_recipe([path])
    assert (recipe.values["batch"], recipe.values["microbatches"]) == (8, 4)
    assert all(s.key != "training.global_batch_size" for s in recipe.ignored)
    lines = "\n".join(recipe.lines())
    assert "global_batch_size = 64 → --microbatches 4" in lines
    config = TrainingConfig.parse(**with_recipe(recipe, {}))
    assert config.is_plan and config.microbatches == 4 and config.batch == 8
    assert "gradient accumulation over 4 microbatches" in config.describe()


@pytest.mark.parametrize(
    ("training", "parallelism", "said"),
    [("local_batch_size = 2\nglobal_batch_size = 64", "data_parallel_shard_degree = -1",
      "give --microbatches M"),
     ("local_batch_size = 2\nglobal_batch_size = 64",
      "data_parallel_shard_degree = 4\npipeline_parallel_degree = 2", "not modelled"),
     ("local_batch_size = 2\nglobal_batch_size = 8", "data_parallel_shard_degree = 4",
      "one microbatch per step"),
     ("local_batch_size = 2\nglobal_batch_size = 12", "data_parallel_shard_degree = 4",
      "torchtitan refuses it")],
    ids=["launch-decides", "pipeline", "one", "not-a-multiple"],
)  # fmt: skip
def test_torchtitan_global_batch_size_not_accumulated_is_said(
    tmp_path: Path, training: str, parallelism: str, said: str
) -> None:
    recipe = read_recipe([_toml(tmp_path, training, parallelism)])
    assert "microbatches" not in recipe.values or recipe.values.get("pp")
    assert recipe.values["batch"] == 2
    why = next(s.why for s in recipe.ignored if s.key == "training.global_batch_size")
    assert said in why


def test_torchtitan_global_batch_size_on_one_gpu_keeps_the_gradients(tmp_path: Path) -> None:
    recipe = read_recipe([_toml(tmp_path, "local_batch_size = 2\nglobal_batch_size = 8",
                                "data_parallel_shard_degree = 1")])  # fmt: skip
    assert recipe.values["grads_kept"] is True and recipe.values["batch"] == 2
