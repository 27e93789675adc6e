"""The one way tests run the ``journal-agent`` command line: the ``cli`` fixture.

``cli(*args)`` runs it in-process (typer's ``CliRunner`` isolation around the real entry point,
:func:`journal_agent.cli.main`, so expected failures print and exit exactly as for a user): for
arguments, output and usage. ``cli.process(*args)`` runs ``python -m journal_agent`` in a real
subprocess: only where the process itself matters — start-up, signals, concurrency, a terminal,
a process that must stay alive. Both return a ``subprocess.CompletedProcess[str]`` with
``returncode``, ``stdout`` and ``stderr``, so a test reads the same either way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent

# The settings a test must never inherit from the developer's shell.
_SCRUBBED = ("JOURNAL_AGENT_ROOT",)


class CLI:
    """Run ``journal-agent ARGS``; see the module docstring for which of the two to use."""

    def __call__(
        self,
        *args: str,
        cwd: Path | None = None,
        home: Path | None = None,
        env: Mapping[str, str | None] | None = None,
        input: str | None = None,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """In-process. ``home`` becomes ``HOME``; ``env`` entries set to None are removed."""
        from journal_agent.cli import main

        runner = CliRunner()
        overrides: dict[str, str | None] = {name: None for name in _SCRUBBED}
        overrides |= _home(home) | dict(env or {})
        before = Path.cwd()
        code: Any = 0
        with runner.isolation(input=input, env=overrides) as (out, err, _):
            if cwd is not None:
                os.chdir(cwd)
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code
            finally:
                os.chdir(before)
            sys.stdout.flush()
            sys.stderr.flush()
            stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
        if isinstance(code, str):  # sys.exit("message") prints the message, exit status 1
            stderr += code + "\n"
        returncode = code if isinstance(code, int) else (0 if code is None else 1)
        done = subprocess.CompletedProcess(["journal-agent", *args], returncode, stdout, stderr)
        return _checked(done) if check else done

    def process(
        self,
        *args: str,
        cwd: Path | None = None,
        home: Path | None = None,
        env: Mapping[str, str | None] | None = None,
        input: str | None = None,
        check: bool = False,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """``python -m journal_agent ARGS`` in a real subprocess, stdin closed unless ``input``."""
        done = subprocess.run(
            self.command(*args),
            cwd=cwd,
            env=self.environment(_home(home) | dict(env or {})),
            capture_output=True,
            text=True,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            timeout=timeout,
        )
        return _checked(done) if check else done

    def terminal(
        self, *args: str, cwd: Path, home: Path, script: list[tuple[bytes, bytes]]
    ) -> tuple[str, int]:
        """``python -m journal_agent ARGS`` on a pseudo-terminal; each time the output shows
        the next trigger of ``script``, its answer is typed. Returns (everything it printed,
        exit code); a child silent for 30 s is killed."""
        import pty
        import select

        pid, fd = pty.fork()
        if pid == 0:  # the child: become the CLI
            os.chdir(cwd)
            command = self.command(*args)
            os.execve(command[0], command, self.environment(_home(home)))
        out = b""
        seen = 0  # output already matched against earlier triggers
        steps = list(script)
        while True:
            ready, _, _ = select.select([fd], [], [], 30)
            if not ready:
                os.kill(pid, 9)
                break
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
            while steps and steps[0][0] in out[seen:]:
                trigger, answer = steps.pop(0)
                seen = out.index(trigger, seen) + len(trigger)
                os.write(fd, answer)
        _, status = os.waitpid(pid, 0)
        return out.decode(errors="replace"), os.waitstatus_to_exitcode(status)

    def json(self, *args: str, **kwargs: Any) -> Any:
        """In-process with ``--json`` added; the parsed output (the command must succeed)."""
        return json.loads(self(*args, "--json", check=True, **kwargs).stdout)

    @staticmethod
    def command(*args: str) -> list[str]:
        """The argv of ``python -m journal_agent ARGS`` (for Popen and pty tests)."""
        return [sys.executable, "-m", "journal_agent", *args]

    @staticmethod
    def environment(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
        """The subprocess environment: ours, scrubbed, with ``env`` applied (None removes).

        This checkout goes first on ``PYTHONPATH``, so the subprocess runs the code under test.
        """
        out = dict(os.environ)
        for name in _SCRUBBED:
            out.pop(name, None)
        for key, value in (env or {}).items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        paths = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
        out["PYTHONPATH"] = os.pathsep.join([str(REPO), *(p for p in paths if p != str(REPO))])
        return out


def _home(home: Path | None) -> dict[str, str | None]:
    return {} if home is None else {"HOME": str(home)}


def _checked(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    if done.returncode != 0:
        raise AssertionError(
            f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        )
    return done


@pytest.fixture
def cli() -> CLI:
    """Run journal-agent: ``cli(*args, cwd=, env=, input=)`` in-process, ``cli.process`` in a
    subprocess, ``cli.json`` for ``--json`` output."""
    return CLI()


@pytest.fixture(autouse=True)
def _own_trust_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Each test approves project files in a trust store of its own (journal_agent.trust_store:
    ``$XDG_CONFIG_HOME/journal-agent``), never in the developer's; subprocesses inherit it."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
