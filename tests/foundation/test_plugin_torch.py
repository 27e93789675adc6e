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


def _fake_cuda_torch(folder: Path) -> Path:
    """A wheel as PyPI's Linux torch is: a CUDA build that requires NVIDIA's libraries (here
    one that no index holds, so an install that took it fails instead of fetching 3 GB), of a
    version newer than the CPU wheel's."""
    import base64
    import hashlib
    import zipfile

    wheel = folder / "torch-2.14.0-py3-none-any.whl"
    files = {
        "torch/__init__.py": "__version__ = '2.14.0'\n",
        "torch-2.14.0.dist-info/METADATA": (
            "Metadata-Version: 2.1\nName: torch\nVersion: 2.14.0\n"
            "Requires-Dist: nvidia-cublas-cu12==12.8.4.1; platform_system == 'Linux'\n"
        ),
        "torch-2.14.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    record.append("torch-2.14.0.dist-info/RECORD,,")
    files["torch-2.14.0.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return wheel


def _simple_index(folder: Path, *wheels: Path) -> str:
    """A PEP 503 index in ``folder`` whose torch page links ``wheels``: its file:// URL (an
    index URL, as PyPI's or PyTorch's, not a folder of wheels)."""
    (folder / "torch").mkdir(parents=True)
    links = "".join(f'<a href="{w.as_uri()}">{w.name}</a>\n' for w in wheels)
    (folder / "torch" / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    return folder.as_uri()


def test_torch_comes_from_the_chosen_index_alone_and_never_as_a_cuda_build_without_a_gpu(
    tmp_path,
):
    wheels = _wheels()
    [cpu_wheel] = wheels.glob(f"torch-2.13.0+cpu-cp{sys.version_info[0]}{sys.version_info[1]}-*")
    cuda_wheel = _fake_cuda_torch(tmp_path)
    cpu_index = _simple_index(tmp_path / "cpu-index", cpu_wheel)
    cuda_index = _simple_index(tmp_path / "cuda-index", cuda_wheel)
    folder = _path_folder(tmp_path, "pip")
    env = {
        "PATH": os.pathsep.join([str(folder), "/usr/bin", "/bin"]),  # no nvidia-smi: no driver
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "JOURNAL_AGENT_INSTALLER": "pip",
        **{k: v for k, v in os.environ.items() if k in ("SSL_CERT_FILE", "SSL_CERT_DIR")},
    }

    def launch(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(LAUNCHER), *args], env={**env, **extra}, cwd=tmp_path, capture_output=True,
            text=True, timeout=1800,
        )  # fmt: skip

    try:
        assert launch("inbox", "--json").returncode == 0  # the light environment
        [home] = list((tmp_path / ".cache" / "journal-agent").glob("env-*"))
        python = home / "venv" / "bin" / "python"
        # The user's pip configuration adds an index that offers a newer torch, a CUDA build
        # (PyPI's, in life), to the indexes the machine already had.
        had = subprocess.run(
            [str(python), "-m", "pip", "config", "get", "global.extra-index-url"],
            env=env, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        config = tmp_path / ".config" / "pip" / "pip.conf"
        config.parent.mkdir(parents=True)
        config.write_text(f"[global]\nextra-index-url = {had} {cuda_index}\n")

        # The index chosen offers only a CUDA build: on a machine without a driver it is taken
        # out again before any NVIDIA library comes, and the sentence says what to do.
        done = launch("gpu", JOURNAL_AGENT_TORCH_INDEX=cuda_index)
        assert done.returncode == 1
        assert f"the torch {cuda_index} offers is a CUDA build (it needs nvidia-cublas" in (
            done.stderr
        )
        assert "point JOURNAL_AGENT_TORCH_INDEX at PyTorch's CPU index" in done.stderr
        gone = subprocess.run([str(python), "-c", "import torch"], capture_output=True)
        assert gone.returncode == 1  # taken out again
        site = Path(glob.glob(str(home / "venv" / "lib" / "python3.*" / "site-packages"))[0])
        assert [n for n in os.listdir(site) if n.startswith("nvidia") and "ml_py" not in n] == []

        # The CPU index chosen: its torch, though the user's extra index offers a newer one.
        done = launch("setup", "--torch", JOURNAL_AGENT_TORCH_INDEX=cpu_index)
        assert done.returncode == 0, done.stderr
        assert "torch 2.13.0+cpu" in launch("gpu", JOURNAL_AGENT_TORCH_INDEX=cpu_index).stdout
        assert json.loads((home / "state.json").read_text())["torch"] == (
            f"installed from {cpu_index} by pip"
        )
    finally:
        shutil.rmtree(tmp_path / ".cache", ignore_errors=True)  # about 1 GB


def test_a_torch_the_users_python3_imports_is_lent_not_installed(tmp_path):
    """The user's python3 already has torch (this test's venv: 2.13.0+cpu): the first profiling
    command lends it to the environment by a .pth file, downloading nothing."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (folder / "python3").chmod(0o755)
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is not None:
        (folder / "uv").symlink_to(uv)  # (the faster light preparation; not what is tested)
    env = {
        "PATH": os.pathsep.join([str(folder), "/usr/bin", "/bin"]),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "JOURNAL_AGENT_TORCH_INDEX": str(tmp_path / "no-wheels-here"),  # an install would fail
        **{k: v for k, v in os.environ.items() if k in ("SSL_CERT_FILE", "SSL_CERT_DIR")},
    }

    def launch(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(LAUNCHER), *args], env=env, cwd=tmp_path, capture_output=True, text=True,
            timeout=1800,
        )  # fmt: skip

    try:
        assert launch("inbox", "--json").returncode == 0
        [home] = list((tmp_path / ".cache" / "journal-agent").glob("env-*"))
        light = _du(home)
        done = launch("gpu")
        assert done.returncode == 0, done.stderr
        assert "torch 2.13.0+cpu" in done.stdout
        import torch

        lent = str(Path(torch.__file__).parent.parent)
        state = json.loads((home / "state.json").read_text())
        assert state["torch"] == f"lent from {lent}"
        assert "installing torch" not in (home / "prepare.log").read_text()
        assert _du(home) - light < 50e6  # a .pth file (and bytecode), not torch's 750 MB
        assert f"torch: lent from {lent}" in launch("setup").stdout
    finally:
        shutil.rmtree(tmp_path / ".cache", ignore_errors=True)
