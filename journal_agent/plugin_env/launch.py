"""``journal-agent`` as the plugin's ``bin/`` runs it: Claude Code puts that folder on the Bash
tool's PATH, and a user can link it into their own (``setup`` prints the line).

In order: a ``journal-agent`` on PATH that is not a launcher (the user's own install) runs;
else the plugin's environment, when prepared; else it is prepared now, in the foreground, and
then runs. A profiling command first gets torch (build.build_torch). ``--version`` and
``--help`` answer without preparing anything, and ``setup`` shows or (re)prepares the
environment itself.
"""

from __future__ import annotations

import os
import sys

from journal_agent.plugin_env.env import (
    LAUNCHED,
    Env,
    condition,
    expected,
    failure,
    foreign_command,
    locate,
    path_hint,
    preparing,
    read_state,
    start,
    usable,
    wait,
    write_state,
)

# The commands (and tools, for `journal-agent tool NAME`) that import torch.
TORCH_COMMANDS = {"trace", "profile", "fit", "gpu"}
TORCH_TOOLS = {"MemoryTrace", "MemoryProfile", "DeviceInfo"}
WAIT_LIMIT = 1800  # seconds: a preparation still running then is reported, not waited for


def needs_torch(argv: list[str]) -> bool:
    words = [a for a in argv if not a.startswith("-")]
    if not words:
        return False
    if words[0] == "tool":
        return len(words) > 1 and words[1] in TORCH_TOOLS
    return words[0] in TORCH_COMMANDS


def main(argv: list[str]) -> int:
    if argv[:1] == ["mcp"] and len(argv) == 1:
        from journal_agent.plugin_env.front import serve

        return serve()  # answers at once, whatever state the environment is in
    foreign = foreign_command()
    if foreign:
        _exec([foreign, *argv])
    env = locate()
    if argv[:1] == ["setup"]:
        return setup(env, argv[1:])
    word, _ = condition(env)
    if word not in ("ready", "stale") and _only_asks(argv):
        return _answer_without_preparing(env, argv)
    if word == "stale" and not preparing(env):
        start(env)  # the old one still runs meanwhile
    elif word != "stale" and not ensure(env, torch=False, say=_stderr):
        return 1
    if needs_torch(argv) and not ensure(env, torch=True, say=_stderr):
        return 1
    _exec([env.command, *argv])
    return 1  # (not reached)


def ensure(env: Env, *, torch: bool, say) -> bool:
    """Prepare the environment (or torch in it), waiting for it; False with the sentence said
    when that failed."""
    if usable(env, torch):
        return True
    if failure(env, torch):
        say(failure(env, torch))
        return False
    word, why = condition(env)
    if not preparing(env):
        start(env, torch=torch, rebuild=word == "broken")
        if word == "broken":
            say(f"journal-agent: its environment is broken ({why}); rebuilding it.")
    what = "torch for the profiling tools" if torch else "its environment (first use)"
    say(f"journal-agent: preparing {what}, {expected(env, torch)}; log: {env.log}")
    outcome = wait(env, torch=torch, limit=WAIT_LIMIT)
    if outcome == "ready":
        return True
    say(failure(env, torch) or f"journal-agent: preparing it {outcome}; log: {env.log}")
    return False


def setup(env: Env, args: list[str]) -> int:
    """``journal-agent setup [--rebuild | --torch]``: where the environment is and its state;
    (re)prepare it, or add torch."""
    if "--rebuild" in args or "--torch" in args:
        torch = "--torch" in args
        if not preparing(env):
            if "--rebuild" in args:
                write_state(env, phase="")  # absent now: ensure builds it afresh
            if torch and read_state(env).get("torch") == "failed":
                write_state(env, torch="")  # asked again: try again
        if not ensure(env, torch=False, say=_stderr):
            return 1
        if torch and not ensure(env, torch=True, say=_stderr):
            return 1
    word, why = condition(env)
    state = read_state(env)
    print(f"plugin: {env.root}")
    print(f"environment: {env.venv} ({word}{': ' + why if why else ''})")
    if state.get("installer"):
        took = state.get("seconds")
        print(f"installed by: {state['installer']}, in {took} s, from {state.get('python')}")
    print(f"torch: {state.get('torch') or 'not installed (the profiling tools install it)'}")
    print(f"log: {env.log}")
    print(f"on your own PATH: {path_hint(env)}")
    return 0 if word in ("ready", "stale") else 1


def _only_asks(argv: list[str]) -> bool:
    return not argv or any(a in ("--help", "-h", "--version") for a in argv)


def _answer_without_preparing(env: Env, argv: list[str]) -> int:
    from journal_agent.plugin_env.env import package_root

    version = "?"
    try:
        with open(os.path.join(package_root(env.root), "profiling", "_version.py")) as f:
            for line in f:
                if line.startswith("__version__"):
                    version = line.split("=", 1)[1].strip().strip("\"'")
    except OSError:
        pass
    if "--version" in argv:
        print(f"journal-agent {version}")
        return 0
    print(
        f"journal-agent {version}: the plugin's environment is not prepared yet; any command "
        f"prepares it first ({expected(env)}), and `journal-agent setup` shows where it is.\n"
        "Commands: learn, run, estimate, trace, profile, fit, journal, ledger, review, inbox, "
        "view, export, doctor, mcp, … (`journal-agent --help` lists them all once prepared)."
    )
    return 0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _exec(argv: list[str]) -> None:
    os.execve(argv[0], argv, {**os.environ, LAUNCHED: "1"})
