"""`--from` a torchtitan TOML of the [experimental] era (pipeline settings there, until
pytorch/torchtitan 785c34c): the microbatches a pipeline ran when the file leaves them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.recipes import read_recipe


def _experimental_toml(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "late_2024.toml"
    path.write_text(
        '[model]\nname = "llama3"\nflavor = "70B"\n\n'
        "[training]\nbatch_size = 32\nseq_len = 8192\n\n"
        "[experimental]\npipeline_parallel_degree = 4\npipeline_parallel_schedule = "
        f'"Interleaved1F1B"\n{extra}',
        encoding="utf-8",
    )
    return path


def test_an_experimental_era_pipeline_runs_its_degree_in_microbatches(tmp_path: Path) -> None:
    # torchtitan at 9dec370 (the December 2024 tables' commit): build_pipeline_schedule takes
    # pipeline_parallel_degree microbatches when pipeline_parallel_microbatches is unset — not
    # the batch in microbatches of one (microbatch sizes came with 5e2033c, April 2025): the
    # batch of 32 was read as 32 microbatches of one sequence
    recipe = read_recipe([_experimental_toml(tmp_path)])
    assert recipe.values["pp"] == 4 and recipe.values["pp_schedule"] == "interleaved"
    assert recipe.values["microbatches"] == 4
    said = next(s for s in recipe.used if s.field == "microbatches")
    assert said.key == "experimental.pipeline_parallel_microbatches" and "90567fc" in said.why


@pytest.mark.parametrize("given", [2, 16])
def test_an_experimental_era_files_own_microbatches_win(tmp_path: Path, given: int) -> None:
    path = _experimental_toml(tmp_path, f"pipeline_parallel_microbatches = {given}\n")
    assert read_recipe([path]).values["microbatches"] == given
