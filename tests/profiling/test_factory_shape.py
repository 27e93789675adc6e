"""Shape flags beside a model factory (#31): ``--model my_models:build --layers 4`` traced and
measured the factory's own model without a word. Each flag is now passed to the factory as its
parameter of that name, and refused in one sentence when the factory has none; the estimate's
refusal of a factory no longer reads as if --params would do beside it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

FACTORIES = """
import torch
from torch import nn


class Stack(nn.Module):
    def __init__(self, layers, hidden, vocab=100):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x):
        h = self.emb(x)
        for block in self.blocks:
            h = torch.relu(block(h))
        return self.head(h).float().logsumexp(-1).mean()

    def example_inputs(self, batch, seq):
        return (torch.randint(0, 100, (batch, seq)),)


def shaped(batch=1, seq=16, layers=2, hidden=32):
    return Stack(layers, hidden)


def fixed(batch=1, seq=16, **options):
    return Stack(2, 32)
"""


def _params(layers: int, hidden: int, vocab: int = 100) -> int:
    """Stack's parameters: the table, each block's weight and bias, the head's."""
    return vocab * hidden + layers * (hidden * hidden + hidden) + hidden * vocab + vocab


@pytest.fixture
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "shape_factories.py").write_text(FACTORIES, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("shape_factories", None)
    return tmp_path


def test_trace_passes_the_shape_flags_to_a_factory_that_takes_them(cli, factories) -> None:
    args = ("--model", "shape_factories:shaped", "--root", str(factories))
    plain = cli.json("trace", *args)
    traced = cli.json("trace", *args, "--layers", "4", "--hidden", "48")
    assert plain["params"] == _params(2, 32)
    assert traced["params"] == _params(4, 48)  # was the factory's own 2 × 32
    assert "the factory shape_factories:shaped was called with layers=4, hidden=48" in "".join(
        traced["notes"]
    )


def test_profile_passes_the_shape_flags_to_the_factory(cli, factories) -> None:
    run = ("--steps", "1", "--warmup", "0", "--device", "cpu", "--root", str(factories))
    measured = cli.json("profile", "--model", "shape_factories:shaped", "--layers", "3", *run)
    assert measured["params"] == _params(3, 32)


@pytest.mark.parametrize("command", ["trace", "profile"])
def test_a_flag_the_factory_cannot_take_is_one_sentence(cli, factories, command) -> None:
    run = ("--steps", "1", "--warmup", "0", "--device", "cpu") if command == "profile" else ()
    # **options is no parameter of that name: it could drop --layers as silently
    result = cli(
        command, "--model", "shape_factories:fixed", "--layers", "4", *run,
        "--root", str(factories), "--no-save",
    )  # fmt: skip
    assert result.returncode != 0
    assert (
        "--layers 4 cannot change the model factory 'shape_factories:fixed': it has no "
        "'layers' parameter; add one" in result.stderr
    )


def test_the_estimate_of_a_factory_does_not_ask_for_params_beside_it(cli, factories) -> None:
    result = cli(
        "estimate", "--model", "shape_factories:shaped", "--params", "1e5", "--layers", "2",
        "--hidden", "32", "--heads", "4", "--vocab", "100", "--no-save",
    )  # fmt: skip
    assert result.returncode != 0
    assert "in place of the factory (trace and profile run the factory itself)" in result.stderr
