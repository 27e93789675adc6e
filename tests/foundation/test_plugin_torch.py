"""torch on demand, for real: the plugin's light environment is prepared by the launcher, and the
first profiling command installs torch into it from a folder of wheels
(``JOURNAL_AGENT_TORCH_INDEX``, as a user without PyTorch's index would point it at a download
folder): the CPU build, no NVIDIA packages, the whole environment under 1.5 GB; with pip, and
with uv where uv is at hand (on PATH or in this venv: `pip install uv`). Each run installs torch
(about 750 MB): slow, and the environment is removed at the end."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "bin" / "journal-agent"
pytestmark = pytest.mark.slow


def _wheels() -> Path:
    """A folder holding torch 2.13.0's CPU wheel for this Python: this machine keeps one in
    /opt/wheels (JOURNAL_AGENT_TEST_TORCH_WHEELS names another)."""
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    for folder in (os.environ.get("JOURNAL_AGENT_TEST_TORCH_WHEELS"), "/opt/wheels"):
        if folder and glob.glob(os.path.join(folder, f"torch-2.13.0+cpu-{tag}-*.whl")):
            return Path(folder)
    pytest.skip("no folder with torch 2.13.0's CPU wheel here (JOURNAL_AGENT_TEST_TORCH_WHEELS)")


def _path_folder(tmp_path: Path, installer: str) -> Path:
    """A PATH folder with a python3 that has neither the package nor torch (the base
    interpreter), and uv when it is the installer under test."""
    folder = tmp_path / "bin"
    folder.mkdir()
    base = getattr(sys, "_base_executable", sys.executable)
    (folder / "python3").write_text(f'#!/bin/sh\nexec "{base}" "$@"\n')
    (folder / "python3").chmod(0o755)
    if installer == "uv":
        uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
        if uv is None:
            pytest.skip("no uv here (`pip install uv` into this venv tests that path too)")
        (folder / "uv").symlink_to(uv)
    return folder


def _du(folder: Path) -> int:
    done = subprocess.run(["du", "-sb", str(folder)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_the_first_profiling_command_installs_the_cpu_build_of_torch(tmp_path, installer):
    wheels = _wheels()
    folder = _path_folder(tmp_path, installer)
    env = {
        "PATH": os.pathsep.join([str(folder), "/usr/bin", "/bin"]),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "JOURNAL_AGENT_TORCH_INDEX": str(wheels),
        # The machine's own certificates, as the user's environment carries them (uv reads no
        # pip.conf; a network that inspects TLS has its own authority).
        **{k: v for k, v in os.environ.items() if k in ("SSL_CERT_FILE", "SSL_CERT_DIR")},
    }

    def launch(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(LAUNCHER), *args], env=env, cwd=tmp_path, capture_output=True, text=True,
            timeout=1800,
        )  # fmt: skip

    try:
        # Any command prepares the light environment first: no torch in it.
        done = launch("inbox", "--json")
        assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr
        [home] = list((tmp_path / ".cache" / "journal-agent").glob("env-*"))
        state = json.loads((home / "state.json").read_text())
        assert state["phase"] == "ready" and state["installer"] == installer
        assert state["torch"] == ""
        python = home / "venv" / "bin" / "python"
        light = _du(home)

        # A profiling command installs torch, from the folder, then runs.
        done = launch("gpu")
        assert done.returncode == 0, done.stderr
        assert "preparing torch for the profiling tools" in done.stderr
        assert "torch 2.13.0+cpu" in done.stdout
        state = json.loads((home / "state.json").read_text())
        assert state["torch"] == f"installed from {wheels} by {installer}"
        log = (home / "prepare.log").read_text()
        assert f"installing torch from {wheels} (JOURNAL_AGENT_TORCH_INDEX)" in log
        assert log.count("preparing the environment of") == 1  # torch added, nothing redone
        cuda = subprocess.run(
            [str(python), "-c", "import torch; print(torch.version.cuda)"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert cuda.strip() == "None"  # the CPU build
        site = Path(glob.glob(str(home / "venv" / "lib" / "python3.*" / "site-packages"))[0])
        # No CUDA libraries (nvidia/, nvidia_cublas_cu12…); nvidia-ml-py is ours, a binding.
        cuda_libs = [n for n in os.listdir(site) if n.startswith("nvidia") and "ml_py" not in n]
        assert cuda_libs == []
        size = _du(home)
        assert size < 1.5e9, f"{size / 1e9:.2f} GB with torch ({light / 1e6:.0f} MB without)"

        # `setup` names the installer and where torch came from.
        shown = launch("setup").stdout
        assert f"installed by: {installer}, in " in shown
        assert f"torch: installed from {wheels} by {installer}" in shown
        # Asked again, nothing is installed: torch is there.
        assert launch("gpu").stderr == "" and (home / "prepare.log").read_text() == log
    finally:
        shutil.rmtree(tmp_path / ".cache", ignore_errors=True)  # about 1 GB
