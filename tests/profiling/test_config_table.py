"""``profiling/config_table.json`` (the configuration's fields as plain data, which the CLI's
flags are built from without pydantic) says exactly what ``profiling.config`` says."""

from __future__ import annotations

import json

from profiling import config_table
from profiling._config_table_gen import generated
from profiling.config import FIT_FIELDS, PROFILE_FIELDS, TrainingConfig


def test_the_table_is_what_the_model_says():
    on_disk = json.loads(config_table.TABLE.read_text(encoding="utf-8"))
    assert on_disk == generated(), (
        "profiling/config_table.json is stale: run `python -m profiling._config_table_gen`"
    )


def test_the_table_reads_back_as_the_model_defines_it():
    fields = config_table.fields()
    assert list(fields) == list(TrainingConfig.model_fields)
    for name, info in TrainingConfig.model_fields.items():
        assert fields[name]["default"] == info.default, name
        assert fields[name]["description"] == info.description, name
    assert fields["precision"]["kind"] == "choice"
    assert "amp-bf16" in fields["precision"]["choices"]
    assert fields["foreach"] == {**fields["foreach"], "kind": "bool", "default": None}
    assert fields["gpu_mem"]["kind"] == "float"
    assert fields["batch"]["kind"] == "int"
    assert config_table.fit_fields() == FIT_FIELDS
    assert config_table.profile_fields() == PROFILE_FIELDS


def test_every_field_is_a_flag_of_estimate(cli):
    """The flags come from the table: each field shows in `estimate --help`, with its choices."""
    done = cli("estimate", "--help", env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    # The help as one line of words: a description wraps where the column ends.
    text = " ".join(done.stdout.replace("│", " ").split())
    for name, spec in config_table.fields().items():
        assert config_table.flag_name(name) in text, name
        if spec["choices"]:
            assert f"One of: {', '.join(spec['choices'])}." in text, name
