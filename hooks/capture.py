"""journal-agent's Claude Code hook: ``python3 -I -S capture.py EVENT`` (hooks.json runs it through
capture.sh, which stays silent where there is no python3 at all).

Stdlib only and fast: it imports the capture modules straight from the plugin's own copy of
the ``journal_agent`` package without running the package's ``__init__`` (which would pull in
more than a hook needs), so no environment has to be installed for capture to work. Whatever
happens, it exits 0 and prints only what is meant for the model (journal_agent/capture/hook.py).
"""

import os
import sys

# The oldest Python the hooks run on (docs/plugin.md); `journal-agent doctor` checks it too. This
# file itself parses on older ones, so that they get the sentence instead of a silent failure.
MINIMUM = (3, 10)


def _package_dir():
    """The ``journal_agent`` package beside this plugin: the repository's (a source checkout or
    a plugin installed from it), or the wheel's (the plugin files live in journal_agent/_plugin)."""
    plugin = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for candidate in (os.path.join(plugin, "journal_agent"), os.path.dirname(plugin)):
        if os.path.isfile(os.path.join(candidate, "capture", "hook.py")):
            return candidate
    return None


def _too_old():
    """One sentence, where the user looks: the project's hooks.log (when it has a .journal/)
    and the plugin's data folder (for doctor). Capture stays off: the modules need 3.10."""
    found = ".".join(str(n) for n in sys.version_info[:3])
    sentence = (
        f"capture is off: the hooks need Python {MINIMUM[0]}.{MINIMUM[1]} or newer and the "
        f"python3 Claude Code runs is {found} ({sys.executable}); put a newer python3 first on "
        "the PATH Claude Code starts from"
    )
    now = __import__("time").strftime("%Y-%m-%dT%H:%M:%SZ", __import__("time").gmtime())
    event = sys.argv[1] if len(sys.argv) > 1 else "-"
    journal = os.path.join(os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd(), ".journal")
    data = os.environ.get("CLAUDE_PLUGIN_DATA")
    targets = [(os.path.join(journal, "hooks.log"), "a")] if os.path.isdir(journal) else []
    if data and os.path.isdir(data):
        targets.append((os.path.join(data, "hooks-python-too-old"), "w"))
    for path, mode in targets:
        try:
            with open(path, mode) as f:
                f.write(f"{now} {event} {sentence}\n")
        except OSError:
            pass


def _run():
    if sys.version_info < MINIMUM:
        _too_old()
        return 0
    package = _package_dir()
    if package is None:
        return 0  # a broken copy of the plugin: stay out of the way
    if "journal_agent" not in sys.modules:
        stub = type(sys)("journal_agent")  # a bare module (importing types costs a hook time)
        stub.__path__ = [package]
        sys.modules["journal_agent"] = stub
    if "profiling" not in sys.modules:  # (its _nofollow, the refusals: not its __init__'s imports)
        stub = type(sys)("profiling")
        stub.__path__ = [os.path.join(os.path.dirname(package), "profiling")]
        sys.modules["profiling"] = stub
    from journal_agent.capture.hook import main

    return main(sys.argv[1:])


if __name__ == "__main__":
    try:
        code = _run()
    except Exception:  # an import failed: never let a hook break the session
        code = 0
    sys.exit(code)
