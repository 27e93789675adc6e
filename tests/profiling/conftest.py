"""Fixtures for the profiling tests: a user model module on disk, a CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

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


def _run_cli(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), str(REPO)])}
    env.pop("JOURNAL_AGENT_ROOT", None)
    proc = subprocess.run(
        [sys.executable, "-m", "journal_agent", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


def _run_json(*args: str, cwd: Path) -> dict:
    return json.loads(_run_cli(*args, "--json", cwd=cwd).stdout)


@pytest.fixture
def run_cli():
    """Run `python -m journal_agent ARGS` in a subprocess (the real CLI, real files)."""
    return _run_cli


@pytest.fixture
def run_json():
    """Run the CLI with --json and parse its output."""
    return _run_json
