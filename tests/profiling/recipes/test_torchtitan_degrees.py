"""torchtitan's ``data_parallel_shard_degree = -1`` (every GPU the other degrees leave) read
with and without the launch's size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.recipes import read_recipe, with_recipe

TOML = Path(__file__).parent / "fixtures" / "torchtitan" / "llama3_8b.toml"


def test_every_gpu_left_needs_the_launchs_size_said_of_the_files_field() -> None:
    recipe = read_recipe([TOML])
    with pytest.raises(ProfilingError) as caught:
        with_recipe(recipe, {})
    said = str(caught.value)
    assert "data_parallel_shard_degree = -1" in said and "--gpus N" in said
    assert "--dp-shard 1" not in said  # not the plan check's sentence about flags never given
    with pytest.raises(ProfilingError, match="data_parallel_shard_degree = -1"):
        with_recipe(read_recipe([TOML]), {"gpus": "1"})  # the command line's text


@pytest.mark.parametrize(
    ("given", "shard", "cp"),
    [({"gpus": "8"}, 8, 1), ({"dp_shard": 4}, 4, 1), ({"cp": "2"}, None, 2)],
)
def test_the_launchs_size_shards_the_rest(given: dict, shard: int | None, cp: int) -> None:
    cfg = TrainingConfig.parse(**with_recipe(read_recipe([TOML]), given))
    assert cfg.fsdp is True and cfg.cp == cp
    assert cfg.dp_shard == shard or (shard is None and cfg.gpus == 1)


def test_the_command_line_says_it_in_one_sentence(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "journal_agent", "estimate", "--from", str(TOML)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "data_parallel_shard_degree = -1" in done.stderr + done.stdout
