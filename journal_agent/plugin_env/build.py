"""Preparing the plugin's environment: light first, torch only when a profiling tool asks.

The light environment is a venv with the package installed editable from the plugin's folder
with the ``view`` extra: the journal, capture, the inbox, review, search and the view work in
it, without torch. ``uv`` makes it when it is on PATH (``uv venv`` + ``uv pip``), else the
Python's own ``venv`` and ``pip``; the log and state.json say which ran.

torch comes later (:func:`build_torch`), asked for by a profiling tool: a torch the user's
``python3`` already imports is lent to the venv by a ``.pth`` file (nothing downloaded);
otherwise the build for this machine is installed: PyTorch's CPU wheel index where there is no
NVIDIA driver, else the index of the newest CUDA the driver supports. ``JOURNAL_AGENT_TORCH_INDEX``
(an index URL, or a folder of wheels) and ``JOURNAL_AGENT_TORCH`` (the requirement, default
``torch>=2.11``) override that; Claude Code passes both from the ``env`` of its settings.

A preparation runs in one process at a time (an ``fcntl`` lock on prepare.lock); standard
library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from journal_agent.plugin_env.env import (
    PACKAGE_MIN_PYTHON,
    VERIFIED,
    Env,
    deps_stamp,
    old_envs,
    package_root,
    read_state,
    remember_interpreter,
    write_state,
)

TORCH = "torch>=2.11"  # pyproject's torch extra
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# PyTorch's CUDA wheel indexes, newest first: the first the driver's CUDA version reaches.
CUDA_INDEXES = [(13, 0), (12, 9), (12, 8), (12, 6), (12, 4), (12, 1), (11, 8)]


class Failed(Exception):
    """A step failed; its message is the sentence state.json and the log keep."""


def prepare(env: Env, *, torch: bool = False, rebuild: bool = False) -> int:
    import fcntl

    os.makedirs(env.home, exist_ok=True)
    with open(env.lock, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another process is preparing it
        with open(env.log, "a", encoding="utf-8") as log:
            try:
                _prepare(env, log, torch=torch, rebuild=rebuild)
            except Failed as exc:
                log.write(f"failed: {exc}\n")
                if torch:
                    write_state(env, step="", torch="failed", torch_error=str(exc))
                else:
                    write_state(env, step="", phase="failed", error=str(exc))
                return 1
    return 0


def _prepare(env: Env, log, *, torch: bool, rebuild: bool) -> None:
    from journal_agent.plugin_env.env import condition

    with open(os.path.join(env.home, "root.txt"), "w", encoding="utf-8") as f:
        f.write(env.root + "\n")  # whose environment this is (doctor lists them)
    word, _ = condition(env, preparer=True)  # (it holds the lock: "preparing" otherwise)
    if rebuild or word != "ready":
        build_light(env, log, fresh=rebuild or word in ("broken", "failed", "absent"))
    if torch:
        build_torch(env, log)


def build_light(env: Env, log, *, fresh: bool) -> None:
    began = time.monotonic()
    log.write(f"--- {_now()} preparing the environment of {env.root}\n")
    write_state(env, step="environment", started=_now(), phase="preparing")
    python = base_python()
    uv = shutil.which("uv") if os.environ.get("JOURNAL_AGENT_INSTALLER") != "pip" else None
    installer = "uv" if uv else "pip"
    log.write(f"installer: {installer}; python: {python}\n")
    if fresh and os.path.lexists(env.venv):
        _remove(env.venv)
        _remove(os.path.join(env.home, VERIFIED), missing_ok=True)
        write_state(env, torch="")  # whatever torch it had went with it
    if not os.path.exists(env.python):
        if uv:
            _step([uv, "venv", "--quiet", "--python", python, env.venv], log)
        else:
            _step([python, "-m", "venv", env.venv], log)
    target = f"{package_root(env.root)}[view]"
    if uv:
        _step([uv, "pip", "install", "--quiet", "--python", env.python, "-e", target], log)
    else:
        _step([env.python, "-m", "pip", "install", "--quiet", "-e", target], log)
    _check(env, log, "import journal_agent.cli, mcp", "the package does not import")
    remember_interpreter(env)  # (what condition() would check next: it just ran)
    torch = "present" if _imports(env.python, "torch") else ""
    seconds = round(time.monotonic() - began, 1)
    write_state(
        env,
        step="",
        phase="ready",
        error="",
        installer=installer,
        python=python,
        deps=deps_stamp(env.root),
        seconds=seconds,
        finished=_now(),
        torch=torch or str(read_state(env).get("torch") or ""),
    )
    log.write(f"ready ({installer}, {seconds} s)\n")  # the word the first-use line names
    for old in old_envs():  # the earlier design's, replaced by this one
        if os.path.realpath(old) != os.path.realpath(env.venv):
            _remove(old)
            log.write(f"removed the environment of the plugin's earlier design: {old}\n")


def build_torch(env: Env, log) -> None:
    if _imports(env.python, "torch"):
        write_state(env, step="", torch=str(read_state(env).get("torch") or "present"))
        return
    began = time.monotonic()
    write_state(env, step="torch", torch_started=_now())
    lent = _lend_torch(env, log)
    if lent:
        how = f"lent from {lent}"
    else:
        index, why = torch_index()
        log.write(f"--- {_now()} installing torch from {index} ({why})\n")
        installer = _install_torch(env, log, index)
        how = f"installed from {index} by {installer}"
    _check(env, log, "import torch", "torch does not import after installing it")
    seconds = round(time.monotonic() - began, 1)
    write_state(env, step="", torch=how, torch_error="", torch_seconds=seconds)
    log.write(f"torch ready ({how}, {seconds} s)\n")


def torch_index() -> tuple[str, str]:
    """The index (or folder of wheels) torch comes from, and why."""
    explicit = os.environ.get("JOURNAL_AGENT_TORCH_INDEX")
    if explicit:
        return explicit, "JOURNAL_AGENT_TORCH_INDEX"
    cuda = driver_cuda()
    if cuda is None:
        return CPU_INDEX, "no NVIDIA driver: the CPU build"
    said = f"{cuda[0]}.{cuda[1]}"
    for version in CUDA_INDEXES:
        if cuda >= version:
            tag = f"cu{version[0]}{version[1]}"
            return f"https://download.pytorch.org/whl/{tag}", f"the driver supports CUDA {said}"
    return CPU_INDEX, f"the driver's CUDA {said} is older than any PyTorch build: the CPU one"


def driver_cuda() -> tuple[int, int] | None:
    """The CUDA version the NVIDIA driver supports (``nvidia-smi``'s header), or None when
    there is no driver."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    marker = "CUDA Version:"
    if marker not in out:
        return None
    words = out.split(marker, 1)[1].split()
    major, _, minor = (words[0] if words else "").partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


def _install_torch(env: Env, log, index: str) -> str:
    """torch alone from ``index`` and nowhere else, then its dependencies from the usual
    indexes; the installer that ran (the environment's).

    Nowhere else: the user's pip configuration (``extra-index-url``, ``find-links``, a
    ``PIP_``/``UV_`` variable) would otherwise offer its own torch beside ``index``, and pip
    takes the newest wherever it is, so PyPI's CUDA build of a newer torch beat the CPU
    index's (3 GB of NVIDIA libraries on a machine without a GPU). Where there is no NVIDIA
    driver, a torch that needs NVIDIA's libraries is taken out again before they come."""
    spec = os.environ.get("JOURNAL_AGENT_TORCH") or TORCH
    source = ["--no-index", "--find-links", index] if os.path.isdir(index) else []
    source = source or ["--index-url", index]
    uv = shutil.which("uv") if read_state(env).get("installer") == "uv" else None
    if uv:
        install = [uv, "pip", "install", "--quiet", "--python", env.python]
    else:
        install = [env.python, "-m", "pip", "install", "--quiet"]
    _step([*install, "--no-deps", *source, spec], log, environ=_one_source(env, uv))
    if driver_cuda() is None:
        cuda = _cuda_libraries(env)
        if cuda:
            remove = [uv, "pip", "uninstall", "--python", env.python] if uv else []
            remove = remove or [env.python, "-m", "pip", "uninstall", "--yes"]
            _step([*remove, "torch"], log)
            raise Failed(
                f"the torch {index} offers is a CUDA build (it needs {cuda}, …) and this "
                "machine has no NVIDIA driver; point JOURNAL_AGENT_TORCH_INDEX at PyTorch's "
                f"CPU index ({CPU_INDEX}) or at a folder holding its CPU wheel"
            )
    _step([*install, spec], log)
    return "uv" if uv else "pip"


# What decides where a package comes from, as pip names its options and settings.
PIP_SOURCES = {"index-url", "extra-index-url", "find-links", "no-index", "config-file"}
UV_SOURCES = {"UV_INDEX", "UV_DEFAULT_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL"}
UV_SOURCES |= {"UV_FIND_LINKS", "UV_NO_INDEX", "UV_CONFIG_FILE"}


def _one_source(env: Env, uv: str | None) -> dict[str, str]:
    """The environment of an install that must take its package from the command line's
    source alone: every other source left out, the rest of the user's settings kept (a
    certificate, a proxy, a constraint). pip's configuration files are read by pip itself
    (``pip config list``) and passed on as variables, since the files cannot be half read.
    uv reads no pip configuration, and with its default index strategy (first index) never
    mixes two indexes for one package; its variables that name a source are left out."""

    def source(name: str) -> bool:
        pip = name.startswith("PIP_") and name[4:].lower().replace("_", "-") in PIP_SOURCES
        return pip or name in UV_SOURCES

    environ = {k: v for k, v in os.environ.items() if not source(k)}
    if uv:
        return environ
    listed = subprocess.run(
        [env.python, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=120
    )
    for line in listed.stdout.splitlines():
        name, _, value = line.partition("=")
        section, _, key = name.partition(".")
        if section.startswith(":") or not key or key in PIP_SOURCES:
            continue  # (":env:" lines are variables already there)
        variable = "PIP_" + key.upper().replace("-", "_")
        environ.setdefault(variable, _unquoted(value))
    environ["PIP_CONFIG_FILE"] = os.devnull  # (pip's documented way to read no file)
    return environ


def _unquoted(value: str) -> str:
    """A value as ``pip config list`` prints it (Python's repr of a str)."""
    import ast

    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value
    return parsed if isinstance(parsed, str) else value


def _cuda_libraries(env: Env) -> str:
    """The first NVIDIA library the installed torch requires ("" for a CPU build)."""
    return _output(
        [env.python, "-c", "import importlib.metadata as m; print(next((r.split(';')[0] for r "
         "in m.requires('torch') or () if r.lower().startswith('nvidia-')), ''))"]
    )  # fmt: skip


def _lend_torch(env: Env, log) -> str | None:
    """Write ``journal-agent-torch.pth`` into the venv, naming the folder that holds the
    torch of the user's ``python3``; the folder, or None when that Python has none."""
    user = shutil.which("python3")
    if not user or not _imports(user, "torch"):
        return None
    folder = _output(
        [user, "-c", "import sys; del sys.path[0]; import importlib.util as u, os; "
         "print(os.path.dirname(u.find_spec('torch').submodule_search_locations[0]))"]
    )  # fmt: skip
    site = _output([env.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    if not folder or not site or not os.path.isdir(folder):
        return None
    with open(os.path.join(site, "journal-agent-torch.pth"), "w", encoding="utf-8") as f:
        f.write(folder + "\n")  # appended to sys.path: the venv's own packages come first
    if not _imports(env.python, "torch"):
        os.unlink(os.path.join(site, "journal-agent-torch.pth"))
        log.write(f"(the torch in {folder} does not import in the environment: installing one)\n")
        return None
    return folder


def base_python() -> str:
    """The Python the venv is made from: the ``python3`` on PATH when it is new enough, else
    the newest ``python3.N`` on PATH that is."""
    names = ["python3"] + [f"python3.{n}" for n in range(20, PACKAGE_MIN_PYTHON[1] - 1, -1)]
    seen = []
    for name in names:
        path = shutil.which(name)
        if path is None:
            continue
        version = _output([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        seen.append(f"{path} is {version or 'unusable'}")
        major, _, minor = (version or "0.0").partition(".")
        if (int(major), int(minor)) >= PACKAGE_MIN_PYTHON:
            return path
    need = ".".join(map(str, PACKAGE_MIN_PYTHON))
    found = "; ".join(seen) or "none on PATH"
    raise Failed(f"its tools need Python {need} or newer to install into ({found})")


def _check(env: Env, log, code: str, what: str) -> None:
    """The environment's interpreter runs and does ``code`` (-P: not from the current folder)."""
    done = subprocess.run(
        [env.python, "-P", "-c", code], capture_output=True, text=True, timeout=300, cwd=env.home
    )
    if done.returncode:
        log.write(done.stdout + done.stderr)
        raise Failed(f"{what} ({(done.stderr.strip().splitlines() or ['?'])[-1]})")


def _imports(python: str, module: str) -> bool:
    """Whether ``python`` finds ``module`` (looked up, not imported: torch takes seconds)."""
    probe = (  # (sys.path[0] is the current folder for -c: dropped, as -P would, on 3.10 too)
        "import sys; del sys.path[0]; import importlib.util as u; "
        f"sys.exit(getattr(u.find_spec({module!r}), 'origin', None) is None)"
    )
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _output(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _step(argv: list[str], log, environ: dict[str, str] | None = None) -> None:
    log.write("$ " + " ".join(argv) + "\n")
    log.flush()
    try:
        done = subprocess.run(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=environ)
    except OSError as exc:
        raise Failed(f"{os.path.basename(argv[0])} could not start ({exc})") from None
    if done.returncode:
        raise Failed(f"`{' '.join(argv[:4])} …` exited with {done.returncode}")


def _remove(path: str, *, missing_ok: bool = False) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif not missing_ok or os.path.lexists(path):
        os.unlink(path)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
