"""Fixtures for the profiling tests: a user model module on disk, the CLI with checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# The profiling tests describe a machine without a GPU (measured on the CPU, traced for a
# target given explicitly). On a machine with one, torch is told to see none — the real
# mechanism, inherited by the CLI subprocesses, read when CUDA first initialises — unless
# JOURNAL_AGENT_TEST_GPU=1 asks for the GPU tests (marked ``gpu``) to use it.
GPU_TESTS = os.environ.get("JOURNAL_AGENT_TEST_GPU") == "1"
if not GPU_TESTS:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""


def pytest_collection_modifyitems(config, items) -> None:
    reason = (
        "needs a CUDA GPU: run with JOURNAL_AGENT_TEST_GPU=1 on a machine that has one"
        if not GPU_TESTS
        else None
    )
    for item in items:
        if reason and item.get_closest_marker("gpu"):
            item.add_marker(pytest.mark.skip(reason=reason))


USER_MODELS = textwrap.dedent(
    '''
    """A user's own models, loaded by `--model user_models:FACTORY`."""
    import torch
    from torch import nn


    class MLP(nn.Module):
        def __init__(self, width=32, depth=3):
            super().__init__()
            self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
            self.head = nn.Linear(width, 10)

        def forward(self, x, y):
            for block in self.blocks:
                x = torch.relu(block(x))
            return nn.functional.cross_entropy(self.head(x), y)


    def make_mlp(batch=4, seq=1):
        model = MLP()
        return model, (torch.randn(batch, 32), torch.randint(0, 10, (batch,)))


    def broken():
        raise RuntimeError("no checkpoint at /data/ckpt.pt")


    class Peeks(nn.Module):
        """Reads a value in Python: impossible under fake tensors."""

        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            if x.abs().max().item() > 100:
                x = x / 100
            return self.lin(x).sum()


    def make_peeks():
        return Peeks(), torch.randn(2, 8)


    class Selects(nn.Module):
        """Output shape depends on values (nonzero): impossible under fake tensors."""

        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            return self.lin(x[torch.nonzero(x[:, 0] > 0).squeeze(1)]).sum()


    def make_selects():
        return Selects(), torch.randn(4, 8)


    BUILT_AT_IMPORT = None


    def cached():
        """Returns a model made outside the trace (a real one): a common mistake."""
        return BUILT_AT_IMPORT, torch.randn(2, 8)
    '''
)


@pytest.fixture
def user_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`user_models.py` in a temporary directory that is importable (in-process and in CLIs)."""
    path = tmp_path / "user_models.py"
    path.write_text(USER_MODELS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("user_models", None)
    return tmp_path


@pytest.fixture
def run_cli(cli):
    """``run_cli(*args, cwd=, check=True)``: the root ``cli`` fixture's real subprocess (a
    profile counts the process's live tensors and starts ranks: the process matters), with
    ``cwd`` importable for ``--model module:function``; a non-zero exit fails the test unless
    ``check=False``."""

    def run(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        return cli.process(*args, cwd=cwd, env={"PYTHONPATH": str(cwd)}, check=check, timeout=300)

    return run


@pytest.fixture
def run_json(run_cli):
    """``run_json(*args, cwd=)``: the command with ``--json``, its output parsed."""

    def run(*args: str, cwd: Path) -> dict:
        return json.loads(run_cli(*args, "--json", cwd=cwd).stdout)

    return run
