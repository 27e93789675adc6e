"""Where the plugin's environment lives and what state it is in; starting its preparation.

One environment per plugin install, whatever the entry (``claude --plugin-dir``, a marketplace
install, the ``bin/journal-agent`` launcher run by hand): it is keyed by the plugin's folder,
under ``${JOURNAL_AGENT_ENVS:-${XDG_CACHE_HOME:-~/.cache}/journal-agent}/env-<name>-<crc>``, and
never by ``CLAUDE_PLUGIN_DATA`` (which differs between those entries). It holds ``venv/`` (the
package installed editable from the plugin's folder, so its code is always the plugin's),
``state.json`` (what the last preparation did), ``interpreter.ok`` (:func:`runs`),
``prepare.log`` and ``prepare.lock`` (held by the one process preparing it).

Standard library only, and cheap to import: the SessionStart hook asks :func:`condition` on
every session start (a few ``stat`` calls; a process only when the venv's interpreter changed
since it last ran the package: :func:`runs`).
"""

from __future__ import annotations

import os
import sys

# The package's own minimum (pyproject's requires-python); the hooks run on 3.10 already.
PACKAGE_MIN_PYTHON = (3, 11)
# What a light preparation takes on a laptop, downloads aside; what torch's CPU build adds.
TYPICAL_SECONDS = 60
TYPICAL_TORCH_SECONDS = 180
# Set in the environment of whatever the launcher runs: a second launcher (another copy of the
# plugin on PATH) then never hands over to a third, so two launchers cannot call each other.
LAUNCHED = "JOURNAL_AGENT_LAUNCHED"
GUARD = "JOURNAL_AGENT_HOOK"  # what our hooks and their children carry (capture/settings.py)
MARKER = "journal-agent plugin launcher"  # on the second line of bin/journal-agent
VERIFIED = "interpreter.ok"  # the stamp of the venv's interpreter last seen to run the package


def plugin_root() -> str:
    """The plugin's folder: the repository (a checkout, a marketplace copy) or, in a wheel,
    ``journal_agent/_plugin``."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    packaged = os.path.join(package, "_plugin")
    if os.path.isdir(os.path.join(packaged, "hooks")):
        return packaged
    return os.path.dirname(package)


def package_root(root: str) -> str:
    """The folder that holds ``journal_agent/`` and ``profiling/`` for the plugin at ``root``."""
    if os.path.basename(root) == "_plugin":
        return os.path.dirname(os.path.dirname(root))
    return root


class Env:
    """The paths of the environment of the plugin at ``root``."""

    def __init__(self, root: str, home: str) -> None:
        self.root = root
        self.home = home
        self.venv = os.path.join(home, "venv")
        self.python = os.path.join(self.venv, "bin", "python")
        self.command = os.path.join(self.venv, "bin", "journal-agent")
        self.state_file = os.path.join(home, "state.json")
        self.log = os.path.join(home, "prepare.log")
        self.lock = os.path.join(home, "prepare.lock")


def envs_home() -> str:
    explicit = os.environ.get("JOURNAL_AGENT_ENVS")
    if explicit:
        return explicit
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "journal-agent")


def locate(root: str | None = None) -> Env:
    import zlib  # (a builtin module: cheaper than hashlib for a name)

    root = os.path.realpath(root or plugin_root())
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in os.path.basename(root))
    key = f"{name[:40]}-{zlib.crc32(root.encode('utf-8', 'surrogateescape')):08x}"
    return Env(root, os.path.join(envs_home(), f"env-{key}"))


def deps_stamp(root: str) -> str:
    """What the environment was built from: the package's version and its dependency list
    (pyproject.toml); a change makes the environment stale."""
    import zlib

    try:
        with open(os.path.join(package_root(root), "pyproject.toml"), "rb") as f:
            return f"{zlib.crc32(f.read()):08x}"
    except OSError:
        return "unknown"


def read_state(env: Env) -> dict[str, object]:
    from journal_agent.lightjson import loads

    try:
        with open(env.state_file, "rb") as f:
            state = loads(f.read())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def write_state(env: Env, **changes: object) -> dict[str, object]:
    """Merge ``changes`` into state.json, replaced whole (a reader never sees half of it)."""
    from journal_agent import confined
    from journal_agent.lightjson import dumps

    state = {**read_state(env), **changes}
    os.makedirs(env.home, exist_ok=True)
    # A random O_EXCL temp name and no link followed (a pid-named temp could be planted).
    confined.replace(
        env.home, os.path.basename(env.state_file), dumps(state, sort_keys=True) + "\n"
    )
    return state


def preparing(env: Env) -> bool:
    """Whether a process holds the preparation's lock right now."""
    import fcntl

    try:
        fd = os.open(env.lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # (closing releases a lock this probe took)
    return False


def condition(env: Env, *, preparer: bool = False) -> tuple[str, str]:
    """``(word, why)``: ``ready``, ``preparing``, ``failed``, ``broken`` (prepared, but its
    interpreter is gone or dangling, or no longer runs the package: a system upgrade removed or
    replaced the Python it was made from),
    ``stale`` (built from another pyproject.toml) or ``absent``. ``preparer``: asked by the
    process that holds the lock, which sees what was there before it."""
    state = read_state(env)
    if not preparer and preparing(env):
        return "preparing", str(state.get("step") or "")
    phase = state.get("phase")
    if phase == "failed":
        return "failed", str(state.get("error") or "")
    if phase != "ready":
        return "absent", ""
    if not os.path.exists(env.python):  # follows the symlink: a dangling one is gone too
        made_from = state.get("python") or "its Python"
        return "broken", f"its interpreter ({made_from}) is gone"
    if runs(env) is False:
        return "broken", f"its interpreter ({os.path.realpath(env.python)}) no longer runs it"
    if state.get("deps") != deps_stamp(env.root):
        return "stale", "the plugin's dependencies changed since it was prepared"
    return "ready", ""


def _interpreter_stamp(env: Env) -> str:
    """What the venv's interpreter is now: the file its links lead to, its size and mtime."""
    real = os.path.realpath(env.python)
    st = os.stat(real)
    return f"{st.st_size} {st.st_mtime_ns} {real}"


def runs(env: Env) -> bool | None:
    """Whether the venv's interpreter runs and imports the package and its compiled
    dependency: True, False, or None when that could not be told (the check timed out).

    A system upgrade often leaves the interpreter's link in place (``venv/bin/python`` →
    ``/usr/bin/python3``, now another version) while the venv's packages are for the old one;
    a file that exists proves nothing. The check is a process (about 0.2 s), so it runs only
    when the interpreter changed since it last passed (:data:`VERIFIED` keeps the stamp):
    otherwise this is a ``stat`` and a small read."""
    from journal_agent import confined

    try:
        stamp = _interpreter_stamp(env)
        # (from the folder, no link followed: a stamp planted as a link is no stamp)
        if confined.read_planted(env.home, VERIFIED, 4096) == stamp.encode("utf-8"):
            return True
    except OSError:
        pass
    import subprocess

    probe = [env.python, "-I", "-c", "import journal_agent, pydantic_core"]
    try:  # (-I and the home as cwd: never a project's own journal_agent/ folder)
        done = subprocess.run(probe, capture_output=True, timeout=60, cwd=env.home)
    except subprocess.TimeoutExpired:
        return None  # a loaded machine, not a broken environment: asked again next time
    except OSError:
        return False  # not executable, not an interpreter at all
    if done.returncode:
        return False
    remember_interpreter(env)
    return True


def remember_interpreter(env: Env) -> None:
    """Keep the stamp of an interpreter that just ran the package (a file of its own, replaced
    whole: no read-modify-write of state.json racing a preparation)."""
    from journal_agent import confined

    try:
        stamp = _interpreter_stamp(env)
        # A random O_EXCL temp name and no link followed (a pid-named temp could be planted).
        confined.replace(env.home, VERIFIED, stamp)
    except OSError:
        pass  # checked again next time


def torch_state(env: Env) -> str:
    """``ready`` (importable in the environment, as far as the files tell), ``preparing``,
    ``failed`` or ``absent``."""
    state = read_state(env)
    if preparing(env) and state.get("step") == "torch":
        return "preparing"
    torch = state.get("torch")
    if isinstance(torch, str) and torch.startswith(("lent", "installed", "present")):
        return "ready"
    return "failed" if torch == "failed" else "absent"


def foreign_command() -> str | None:
    """A ``journal-agent`` on PATH that is not a plugin launcher (the user's own install), or
    None. A launcher (ours, or another copy of the plugin's) is recognised by its marker line,
    so the launcher never runs itself."""
    if os.environ.get(LAUNCHED):
        return None
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(folder, "journal-agent")
        if not folder or not os.path.isfile(path) or not os.access(path, os.X_OK):
            continue
        try:
            with open(path, "rb") as f:
                head = f.read(400)
        except OSError:
            continue
        if MARKER.encode() not in head:
            return path
    return None


def start(env: Env, *, torch: bool = False, rebuild: bool = False) -> None:
    """Prepare in a detached child (its own session, stdio on /dev/null) and return at once.
    The child takes the lock; a second one started meanwhile finds it held and leaves."""
    os.makedirs(env.home, exist_ok=True)
    entry = os.path.join(os.path.dirname(os.path.abspath(__file__)), "entry.py")
    argv = [sys.executable, "-I", "-S", entry, "prepare", env.root]
    argv += ["--torch"] if torch else []
    argv += ["--rebuild"] if rebuild else []
    environ = {**os.environ, GUARD: "1"}
    null = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0)] + [
        (os.POSIX_SPAWN_DUP2, 0, fd) for fd in (1, 2)
    ]
    os.posix_spawn(sys.executable, argv, environ, file_actions=null, setsid=True)


def expected(env: Env, torch: bool = False) -> str:
    """How long a preparation should take, in words, from the last one's duration if any."""
    took = read_state(env).get("torch_seconds" if torch else "seconds")
    seconds = took if isinstance(took, int | float) and took > 0 else None
    typical = TYPICAL_TORCH_SECONDS if torch else TYPICAL_SECONDS
    return _words(seconds or typical) + ("" if seconds else ", plus downloads")


def _words(seconds: float) -> str:
    if seconds < 90:
        return f"about {max(10, round(seconds / 10) * 10)} s"
    return f"about {round(seconds / 60)} min"


def path_hint(env: Env) -> str:
    """The one line that puts the launcher on the user's own PATH."""
    return f"ln -s '{os.path.join(env.root, 'bin', 'journal-agent')}' ~/.local/bin/"


def usable(env: Env, torch: bool = False) -> bool:
    """Whether the environment runs (a stale one still does), with torch when asked."""
    if condition(env)[0] not in ("ready", "stale"):
        return False
    return not torch or torch_state(env) == "ready"


def failure(env: Env, torch: bool = False) -> str:
    """The sentence for a failed preparation (the cause, the log, the one command that tries
    again), or "" when the last one did not fail."""
    if preparing(env):
        return ""
    state = read_state(env)
    if torch and state.get("torch") == "failed":
        why = state.get("torch_error") or "see the log"
        return (
            f"journal-agent: installing torch failed ({why}; log: {env.log}); "
            "`journal-agent setup --torch` tries again."
        )
    if not torch and state.get("phase") == "failed":
        why = state.get("error") or "see the log"
        return (
            f"journal-agent: preparing its environment failed ({why}; log: {env.log}); "
            "`journal-agent setup --rebuild` tries again."
        )
    return ""


def wait(env: Env, *, torch: bool, limit: float, tick=None) -> str:
    """Wait for a preparation started just now or earlier: ``ready``, ``failed``, ``stopped``
    (no process prepares it and nothing came of it) or ``timeout``. ``tick(seconds)`` is
    called about every quarter second meanwhile."""
    import time

    began = time.monotonic()
    seen = False
    while True:
        if usable(env, torch):
            return "ready"
        if failure(env, torch):
            return "failed"
        busy = preparing(env)
        seen = seen or busy
        elapsed = time.monotonic() - began
        if not busy and (seen or elapsed > 20):  # (a loaded machine starts the child slowly)
            return "stopped"
        if elapsed > limit:
            return "timeout"
        if tick is not None:
            tick(elapsed)
        time.sleep(0.25)


def old_envs() -> list[str]:
    """Environments the plugin's earlier design made: ``$CLAUDE_PLUGIN_DATA/venv`` in Claude
    Code's data folder of each journal-agent install (``--plugin-dir``, the marketplace), and
    ``~/.cache/journal-agent/venv`` for the launcher run by hand: each one a whole venv (5.7 GB
    with the CUDA build of torch) that nothing uses any more. Only venvs (a ``pyvenv.cfg``)."""
    import glob

    home = os.path.expanduser("~")
    claude = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(home, ".claude")
    data = sorted(glob.glob(os.path.join(claude, "plugins", "data", "journal-agent*")))
    if os.environ.get("CLAUDE_PLUGIN_DATA"):
        data.append(os.environ["CLAUDE_PLUGIN_DATA"])
    data.append(os.path.join(home, ".cache", "journal-agent"))
    found = []
    for folder in data:
        venv = os.path.join(folder, "venv")
        if os.path.isfile(os.path.join(venv, "pyvenv.cfg")) and venv not in found:
            found.append(venv)
    return found
