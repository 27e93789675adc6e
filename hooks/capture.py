"""journal-agent's Claude Code hook: ``python3 -I -S capture.py EVENT`` (see hooks.json).

Stdlib only and fast: it imports the capture modules straight from the plugin's own copy of
the ``journal_agent`` package without running the package's ``__init__`` (which would pull in
more than a hook needs), so no environment has to be installed for capture to work. Whatever
happens, it exits 0 and prints only what is meant for the model (journal_agent/capture/hook.py).
"""

import os
import sys


def _package_dir():
    """The ``journal_agent`` package beside this plugin: the repository's (a source checkout or
    a plugin installed from it), or the wheel's (the plugin files live in journal_agent/_plugin)."""
    plugin = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for candidate in (os.path.join(plugin, "journal_agent"), os.path.dirname(plugin)):
        if os.path.isfile(os.path.join(candidate, "capture", "hook.py")):
            return candidate
    return None


def _run():
    package = _package_dir()
    if package is None:
        return 0  # a broken copy of the plugin: stay out of the way
    if "journal_agent" not in sys.modules:
        stub = type(sys)("journal_agent")  # a bare module (importing types costs a hook time)
        stub.__path__ = [package]
        sys.modules["journal_agent"] = stub
    from journal_agent.capture.hook import main

    return main(sys.argv[1:])


if __name__ == "__main__":
    try:
        code = _run()
    except Exception:  # an import failed: never let a hook break the session
        code = 0
    sys.exit(code)
