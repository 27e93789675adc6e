"""Our sandboxed children import our own code wherever the package lives: here an editable
checkout under /tmp, the place a user's `git clone` into /tmp puts it (README's commands from
there failed 17 tests: the sandbox gives its children a private /tmp, and bound back only the
workspace and the virtualenv, not the checkout the editable install points into).

A venv of its own holds only the editable install of a copy of this checkout under /tmp (its
dependencies are lent from the test's venv by a path in a .pth file, so nothing is
downloaded); through it, a MemoryTrace factory, a MemoryProfile child and an own command in a
Bash line each run in the sandbox and work."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from journal_agent.tools.sandbox.confinement import available_confinement
from tests.e2e.claude_helpers import user_clone

pytestmark = pytest.mark.slow

FACTORY = """
import torch
from torch import nn


def make(batch=1):
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
    return model, (torch.randn(batch, 8),)
"""

CHILD = """
import json, sys
from pathlib import Path

import journal_agent
from journal_agent.tools import make_context
from journal_agent.tools.bash import Bash
from journal_agent.tools.memory_profile import MemoryProfile
from journal_agent.tools.memory_trace import MemoryTrace

ws = Path(sys.argv[1])
ctx = make_context(ws, mode="bypassPermissions")
calls = {
    "trace": (MemoryTrace(), {"model": "tiny_models:make", "batch": 2}),
    "profile": (MemoryProfile(), {"model": "tiny-gpt2", "seq": 16, "steps": 1, "warmup": 0,
                                  "timeout": 300}),
    "own command": (Bash(), {"command": "journal-agent inbox --json && echo ran"}),
}
out = {"source": journal_agent.__file__}
for name, (tool, args) in calls.items():
    result = tool.call(ctx, args)
    out[name] = [result.is_error, result.content]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def checkout_python():
    """The interpreter of a venv whose journal_agent is an editable checkout under /tmp."""
    if not available_confinement().active:
        pytest.skip(f"no OS sandbox on this machine: {available_confinement().reason}")
    base = Path(os.path.realpath(tempfile.mkdtemp(prefix="ja-checkout-", dir="/tmp")))
    try:
        checkout = user_clone(base / "journal-agent")
        venv = base / "venv"
        python3 = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([python3, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = venv / "bin" / "python"
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        # The dependencies: a plain path line, so the test venv's own editable install of this
        # checkout (a .pth file there) is not read.
        (Path(site) / "lent-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
             "--no-deps", "-e", str(checkout)],
            check=True, capture_output=True,
        )  # fmt: skip
        yield python, checkout
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_sandboxed_children_import_our_code_from_an_editable_checkout_under_tmp(
    checkout_python, tmp_path
):
    python, checkout = checkout_python
    ws = Path(os.path.realpath(tmp_path / "ws"))
    ws.mkdir()
    (ws / "tiny_models.py").write_text(FACTORY)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": os.pathsep.join([str(python.parent), "/usr/bin", "/bin"]),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "LANG": "C.UTF-8",
    }
    done = subprocess.run(
        [str(python), "-I", "-c", CHILD, str(ws)], cwd=ws, env=env, capture_output=True,
        text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["source"] == str(checkout / "journal_agent" / "__init__.py")
    for name in ("trace", "profile", "own command"):
        is_error, content = out[name]
        assert not is_error and "ModuleNotFoundError" not in content, (name, content)
    assert "record:" in out["trace"][1] and "record:" in out["profile"][1]
    assert out["own command"][1].split()[:2] == ["[]", "ran"]
