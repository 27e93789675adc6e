"""Commands that call neither a model nor torch must not import the heavy SDKs.

Start-up *time* is a benchmark (benchmarks/bench_startup.py), not a test; what a test can pin
without a clock is the cause of slowness: which modules get imported.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

# The web stack of `journal-agent view` counts too: only the view and its exports load it.
HEAVY = {"anthropic", "torch", "mcp", "matplotlib", "starlette", "uvicorn", "jinja2", "genanki"}
JOURNAL = """# Learning Journal

---

## ZeRO Stage 2 (2026-11-20)

**Context**: Reading the DeepSpeed config.

**The Key Question I Had**: *Why shard gradients?*
"""


def _loaded(args: list[str], project, home, env: dict[str, str] | None = None) -> set[str]:
    """The top-level packages ``journal-agent ARGS`` imported (it must succeed)."""
    (project / "learning_journal.md").write_text(JOURNAL, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "journal_agent", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env={"HOME": str(home), "PATH": "", **(env or {})},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        line.split("|")[-1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["agents", "--json"],
        ["commands"],
        ["journal", "--help"],
        ["journal", "list"],
        ["estimate", "--help"],
        ["trace", "--help"],
        ["gpu"],  # no NVIDIA driver here: NVML answers without torch
        ["profile", "--help"],
        ["tool", "--help"],
        ["run", "--help"],
        ["learn", "--help"],
        ["view", "--help"],
        ["export", "--help"],
    ],
)
def test_light_commands_import_no_heavy_module(args, project, home):
    loaded = _loaded(args, project, home)
    assert not loaded & HEAVY, f"{args} imported {sorted(loaded & HEAVY)}"


# What a command's own work does not need must not be imported for it: typer's option parsing
# used pydantic for every option (cli/_typer_values.py), reading a journal used it for the
# citation regex (profiling.citations), `--json` rendered nothing with rich but imported it,
# the profiling commands built the configuration model to describe their flags.
@pytest.mark.parametrize(
    ("args", "env", "unneeded"),
    [
        (["journal", "list"], {}, {"pydantic", "rich"}),
        (["journal", "list", "--tag", "zero", "--json"], {}, {"pydantic", "rich"}),
        (["journal", "list"], {"JOURNAL_AGENT_ROOT": "."}, {"pydantic", "rich"}),
        (["agents", "--json"], {}, {"rich"}),  # definitions are pydantic models: it needs that
        (["commands", "--json"], {}, {"rich"}),
        (["--help"], {}, {"pydantic"}),
        # The workload's flags come from profiling.config_table, not the pydantic model.
        (["estimate", "--help"], {}, {"pydantic"}),
        (["trace", "--help"], {}, {"pydantic"}),
        (["fit", "--help"], {}, {"pydantic"}),
        (["profile", "--help"], {}, {"pydantic"}),
    ],
)
def test_plain_commands_import_no_pydantic_or_rich(args, env, unneeded, project, home):
    loaded = _loaded(args, project, home, env)
    assert not loaded & unneeded, f"{args} imported {sorted(loaded & unneeded)}"


def test_python_dash_m_matches_console_script(project, home):
    import shutil

    script = shutil.which("journal-agent")
    if script is None:
        pytest.skip("journal-agent console script not on PATH")
    a = subprocess.run([script, "--help"], capture_output=True, text=True, cwd=project)
    b = subprocess.run(
        [sys.executable, "-m", "journal_agent", "--help"],
        capture_output=True,
        text=True,
        cwd=project,
    )
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout


def test_the_command_table_says_what_the_modules_say():
    """`--help` lists commands from cli/_commands.py without importing their modules: every
    command must have its row, in the module that defines it, with its own first paragraph."""
    import typer.main

    from journal_agent.cli import app, load_all
    from journal_agent.cli._commands import COMMANDS

    load_all()
    built = typer.main.get_command(app).commands  # every module is imported now: the truth
    assert sorted(COMMANDS) == sorted(built), "add or remove rows in cli/_commands.py"
    wrong = {
        name: first
        for name, command in built.items()
        if COMMANDS[name][1] != (first := (command.help or "").split("\n\n")[0].strip())
    }
    assert not wrong, f"cli/_commands.py's rows should read (the commands' docstrings): {wrong}"
    for name, command in built.items():
        module = COMMANDS[name][0]
        mod = sys.modules[f"journal_agent.cli.{module}"]
        defined_here = getattr(command.callback, "__module__", None) == mod.__name__ or any(
            group.name == name and group.typer_instance in vars(mod).values()
            for group in app.registered_groups
        )
        assert defined_here, f"{name} is not defined in journal_agent.cli.{module}"


def test_a_command_runs_with_only_its_own_module_imported(project, home):
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from journal_agent.cli import main\n"
         "try: main(['gpu', '--json'])\nexcept SystemExit: pass\n"
         "print(sorted(m for m in sys.modules if m.endswith('_cmd')))"],
        cwd=project, capture_output=True, text=True,
        env={"HOME": str(home), "PATH": ""}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "['journal_agent.cli.measure_cmd']"
