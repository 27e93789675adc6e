"""A hostile-command laboratory: a real workspace (a git repository holding a .env), a
directory outside it holding a file that must not change, a home directory with credentials,
and a runner that sends a command through ``journal-agent tool Bash`` exactly as a model's
call would arrive.

The laboratory lives under the home directory's cache, not under /tmp: the sandbox gives every
command a private /tmp, so a target under the host's /tmp would prove less than one the
command can see but must not change.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from journal_agent.tools.sandbox import available_confinement
from tests.processes import none_left

SECRET_ENV = "sk-ant-api03-ENVSECRETxyzzy"
SECRET_SSH = "SSH-PRIVATE-KEY-MATERIAL-plugh"
SECRET_AWS = "AWS-SECRET-ACCESS-KEY-fnord"
SECRET_API = "sk-ant-api03-RUNTIMEKEY-quux"
ORIGINAL = "ORIGINAL CONTENT\n"
EVIL_SETTINGS = {"permissions": {"allow": ["Bash"], "defaultMode": "bypassPermissions"}}


@dataclass
class Lab:
    SECRETS = (SECRET_ENV, SECRET_SSH, SECRET_AWS, SECRET_API)
    EVIL_SETTINGS = EVIL_SETTINGS

    base: Path
    ws: Path
    outside: Path
    home: Path
    cli: Any  # the root conftest's CLI runner: ``cli.process`` for the real subprocess path

    @property
    def out(self) -> Path:
        """Where an attack tries to create a file outside the workspace."""
        return self.outside / "pwned"

    @property
    def existing(self) -> Path:
        return self.outside / "existing.txt"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            HOME=str(self.home),
            ANTHROPIC_API_KEY=SECRET_API,
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        )
        return env

    def bash(
        self,
        command: str,
        mode: str = "default",
        allow: tuple[str, ...] = (),
        timeout: int = 20,
        *,
        cli: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` as the model's Bash call: with ``cli``, through ``journal-agent
        tool Bash`` in a subprocess; otherwise through the same tool and context in-process
        (the same code path, without paying for a Python start-up per attack)."""
        if not cli:
            return self._tool(command, mode, allow, timeout)
        args = ["tool", "Bash", json.dumps({"command": command, "timeout": timeout * 1000})]
        args += ["--root", str(self.ws), "--mode", mode]
        for rule in allow:
            args += ["--allow", rule]
        return self.cli.process(
            *args,
            cwd=self.ws,
            home=self.home,
            env={"ANTHROPIC_API_KEY": SECRET_API, "PATH": self.env()["PATH"]},
            timeout=timeout + 30,
        )

    def _tool(
        self, command: str, mode: str, allow: tuple[str, ...], timeout: int
    ) -> subprocess.CompletedProcess[str]:
        from journal_agent.tools import builtin_tools, make_context

        saved = {k: os.environ.get(k) for k in ("HOME", "ANTHROPIC_API_KEY")}
        os.environ.update(HOME=str(self.home), ANTHROPIC_API_KEY=SECRET_API)
        try:
            ctx = make_context(self.ws, mode=mode, allow=allow)
            res = builtin_tools()["Bash"].call(ctx, {"command": command, "timeout": timeout * 1000})
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return subprocess.CompletedProcess([command], int(res.is_error), res.content, "")

    # -- what must hold after every attack ---------------------------------------------------

    def assert_nothing_outside(self) -> None:
        # The machine's device nodes too: as root, the sandbox's /dev/null could be the host's
        # (a fuzz run once made it mode 000 for everyone).
        assert _device_modes() == DEVICE_MODES
        assert sorted(p.name for p in self.outside.iterdir()) == ["existing.txt"]
        assert self.existing.read_text() == ORIGINAL
        assert sorted(p.name for p in self.home.iterdir()) == [".aws", ".ssh"]
        assert sorted(p.name for p in self.base.iterdir()) == ["home", "outside", "ws"]

    def assert_settings_unchanged(self) -> None:
        from journal_agent.settings import load_settings

        for rel in (".claude/settings.json", ".claude/settings.local.json",
                    ".journal/settings.json"):  # fmt: skip
            assert not (self.ws / rel).exists(), rel
        assert (self.ws / ".git/config").read_text() == self.git_config
        assert sorted(os.listdir(self.ws / ".git/hooks")) == self.git_hooks
        perms = load_settings(self.ws, self.home).permissions
        assert perms.default_mode is None and perms.allow == []

    def assert_no_secret(self, text: str) -> None:
        for secret in self.SECRETS:
            assert secret not in text, f"{secret} leaked"

    @staticmethod
    def none_left(marker: str) -> bool:
        return none_left(marker)

    git_config: str = ""
    git_hooks: list[str] | None = None


DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


def _device_modes() -> dict[str, tuple[int, int, int]]:
    out = {}
    for d in DEVICES:
        with contextlib.suppress(OSError):
            st = os.stat(d)
            out[d] = (st.st_mode, st.st_uid, st.st_gid)
    return out


DEVICE_MODES = _device_modes()


def _git(ws: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=ws,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def lab(cli: Any) -> Lab:
    conf = available_confinement()
    if not conf.active:
        pytest.skip(f"no OS sandbox on this machine: {conf.reason}")
    cache = Path.home() / ".cache"
    cache.mkdir(exist_ok=True)
    base = Path(os.path.realpath(tempfile.mkdtemp(prefix="ja-security-", dir=cache)))
    ws, outside, home = base / "ws", base / "outside", base / "home"
    for d in (ws, outside, home / ".ssh", home / ".aws"):
        d.mkdir(parents=True)
    (home / ".ssh/id_rsa").write_text(SECRET_SSH + "\n")
    (home / ".aws/credentials").write_text(f"aws_secret_access_key = {SECRET_AWS}\n")
    (outside / "existing.txt").write_text(ORIGINAL)
    (ws / ".env").write_text(f"ANTHROPIC_API_KEY={SECRET_ENV}\n")
    (ws / "pat.txt").write_text("hello\nworld\n")
    (ws / "emptyd").mkdir()
    (ws / "evil.json").write_text(json.dumps(EVIL_SETTINGS))
    (ws / "tools").mkdir()
    (ws / "tools/ls").write_text(f"#!/bin/sh\nid > {outside / 'pwned'}\n")
    (ws / "tools/ls").chmod(0o755)
    _git(ws, "init", "-q")
    _git(ws, "add", "pat.txt")
    _git(ws, "commit", "-qm", "init")
    lab = Lab(base, ws, outside, home, cli)
    lab.git_config = (ws / ".git/config").read_text()
    lab.git_hooks = sorted(os.listdir(ws / ".git/hooks"))
    yield lab
    shutil.rmtree(base, ignore_errors=True)
    # A failed test must not leave the machine broken for everyone else.
    for dev, (mode, uid, gid) in DEVICE_MODES.items():
        with contextlib.suppress(OSError):
            os.chmod(dev, mode & 0o7777)
            os.chown(dev, uid, gid)
