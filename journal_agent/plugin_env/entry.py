"""The script the plugin's ``bin/journal-agent`` and the preparation's detached child run:
``python3 -I -S entry.py launch ARGS…`` (the ``journal-agent`` command; ``launch mcp`` is the MCP
front Claude Code starts) and ``entry.py prepare ROOT [--torch] [--rebuild]``.

``-S``: the standard library only. The ``journal_agent`` package is imported from the plugin's
own folder without its ``__init__`` (as hooks/capture.py does): nothing has to be installed.
"""

import os
import sys

MINIMUM = (3, 10)


def _bootstrap():
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "journal_agent" not in sys.modules:
        stub = type(sys)("journal_agent")
        stub.__path__ = [package]  # (what makes it a package: the import system reads it)
        sys.modules["journal_agent"] = stub
    if "profiling" not in sys.modules:  # (its _nofollow, the refusals: not its __init__'s imports)
        stub = type(sys)("profiling")
        stub.__path__ = [os.path.join(os.path.dirname(package), "profiling")]
        sys.modules["profiling"] = stub


def _too_old(argv):
    """Run under a Python older than MINIMUM: hand over to a newer ``python3.N`` on PATH;
    without one, the MCP server answers with the reason (degraded.sh), anything else says it."""
    here = os.path.abspath(__file__)
    for minor in range(20, MINIMUM[1] - 1, -1):
        for folder in os.environ.get("PATH", "").split(os.pathsep):
            newer = os.path.join(folder, f"python3.{minor}")
            if folder and os.path.isfile(newer) and os.access(newer, os.X_OK):
                os.execv(newer, [newer, "-I", "-S", here, *argv])
    found = ".".join(str(n) for n in sys.version_info[:3])
    why = (
        f"the python3 on PATH is {found} ({sys.executable}) and the plugin needs "
        f"{MINIMUM[0]}.{MINIMUM[1]} or newer (its tools 3.11): install a newer Python "
        "(python.org, `brew install python`) and put it first on PATH"
    )
    if argv == ["launch", "mcp"]:
        degraded = os.path.join(os.path.dirname(here), "degraded.sh")
        os.execv("/bin/sh", ["/bin/sh", degraded, f"journal-agent's tools are unavailable: {why}."])
    sys.stderr.write(f"journal-agent: {why}.\n")
    return 1


def main(argv):
    if sys.version_info < MINIMUM:
        return _too_old(argv)
    _bootstrap()
    what, rest = (argv[0], argv[1:]) if argv else ("launch", [])
    if what == "prepare":
        from journal_agent.plugin_env.build import prepare
        from journal_agent.plugin_env.env import locate

        return prepare(locate(rest[0]), torch="--torch" in rest, rebuild="--rebuild" in rest)
    from journal_agent.plugin_env.launch import main as launch

    return launch(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
