"""Protected paths that did not exist before a writing call cannot be mounted read-only; what
the command creates of them is moved to ``.journal/quarantine/<time>/`` once it has ended,
and the result says so. Each attack runs through the Bash tool with the real bubblewrap, and
then git runs on the host, outside any sandbox, as the user would: nothing the command
planted may run there. ``git init`` keeps working.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.trust_helpers import approve

# The modes in which a command may write the workspace (default and plan cannot: below).
WRITING = [("acceptEdits", ("Bash",)), ("bypassPermissions", ())]
WRITING_IDS = ["acceptEdits+allow-Bash", "bypassPermissions"]

# hook.sh (made by the test) holds "#!/bin/sh / touch hook-ran": the permission rules would
# refuse a command naming /bin/sh (outside the workspace) before the sandbox got to show itself.
HOOK = "mkdir -p .git/hooks && cp hook.sh .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit"
HOOK_TEXT = "#!/bin/sh\ntouch hook-ran\n"
MCP = """printf '{"mcpServers":{"x":{"command":"touch","args":["mcp-ran"]}}}' > .mcp.json"""
PLUGIN = """mkdir -p .claude-plugin && printf '{"name":"x"}' > .claude-plugin/plugin.json"""


def quarantined(ws: Path, rel: str) -> list[Path]:
    """Where ``rel`` landed in the quarantine (one per call that moved it)."""
    stamps = ws / ".journal/quarantine"
    found = [d / rel for d in stamps.iterdir()] if stamps.is_dir() else []
    return sorted(p for p in found if os.path.lexists(p))  # a moved symlink may dangle


def host_git(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git outside the sandbox, as the user (or Claude Code) runs it after the call."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=ws,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CEILING_DIRECTORIES": str(ws.parent)},
    )


def no_repo(lab) -> None:
    shutil.rmtree(lab.ws / ".git")


@pytest.fixture(autouse=True)
def hook_script(lab) -> None:
    (lab.ws / "hook.sh").write_text(HOOK_TEXT)


def assert_moved(lab, rel: str, result: str, *, content: str | None = None) -> Path:
    assert not os.path.lexists(lab.ws / rel), f"{rel} is still in place"
    found = quarantined(lab.ws, rel)
    assert len(found) == 1, f"{rel} not in quarantine: {result}"
    if content is not None:
        assert found[0].read_text() == content
    sentence = next((s for s in result.splitlines() if s.startswith(f"Moved {rel}, ")), None)
    assert sentence is not None, result
    assert str(found[0].relative_to(lab.ws)) in sentence and "move it back yourself" in sentence
    return found[0]


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
def test_a_new_mcp_json_is_moved_aside(lab, mode, allow):
    done = lab.bash(MCP, mode, allow)
    moved = assert_moved(lab, ".mcp.json", done.stdout)
    assert json.loads(moved.read_text())["mcpServers"]["x"]["command"] == "touch"
    assert "MCP servers" in done.stdout


def test_a_new_mcp_json_is_moved_aside_through_the_cli(lab):
    done = lab.bash(MCP, "bypassPermissions", cli=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_moved(lab, ".mcp.json", done.stdout)


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
def test_a_new_claude_plugin_is_moved_aside(lab, mode, allow):
    done = lab.bash(PLUGIN, mode, allow)
    moved = assert_moved(lab, ".claude-plugin", done.stdout)
    assert (moved / "plugin.json").read_text() == '{"name":"x"}'


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
def test_a_hook_planted_where_there_is_no_repository_never_runs(lab, mode, allow):
    no_repo(lab)
    done = lab.bash(HOOK, mode, allow)
    assert done.returncode == 0, done.stdout
    moved = assert_moved(lab, ".git/hooks", done.stdout)
    assert (moved / "pre-commit").read_text() == HOOK_TEXT
    assert "hooks" in done.stdout
    # The user makes the repository and commits, outside the sandbox: no hook runs.
    assert host_git(lab.ws, "init", "-q").returncode == 0
    assert host_git(lab.ws, "commit", "-q", "--allow-empty", "-m", "x").returncode == 0
    assert not (lab.ws / "hook-ran").exists()


def test_a_hook_planted_in_a_repository_without_hooks_never_runs(lab):
    shutil.rmtree(lab.ws / ".git/hooks")
    done = lab.bash(HOOK, "acceptEdits", ("Bash",))
    assert_moved(lab, ".git/hooks", done.stdout)
    assert host_git(lab.ws, "commit", "-q", "--allow-empty", "-m", "x").returncode == 0
    assert not (lab.ws / "hook-ran").exists()


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
def test_git_init_still_works_and_keeps_its_sample_hooks_and_config(lab, mode, allow):
    no_repo(lab)
    done = lab.bash("git init -q && git remote add origin https://example.com/r.git && "
                    "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m first && "
                    "git branch -q --set-upstream-to=origin/main 2>/dev/null; git log --oneline",
                    mode, allow)  # fmt: skip
    assert done.returncode == 0 and "first" in done.stdout, done.stdout
    assert "Moved" not in done.stdout and not (lab.ws / ".journal/quarantine").exists()
    hooks = os.listdir(lab.ws / ".git/hooks")
    assert hooks and all(h.endswith(".sample") for h in hooks)
    config = host_git(lab.ws, "config", "--list", "--local").stdout
    assert "remote.origin.url=https://example.com/r.git" in config
    assert host_git(lab.ws, "log", "--oneline").stdout.strip().endswith("first")


def test_a_new_repository_whose_config_runs_a_command_loses_its_config(lab):
    no_repo(lab)
    done = lab.bash("git init -q && git config core.fsmonitor 'touch fsmonitor-ran; false'",
                    "acceptEdits", ("Bash",))  # fmt: skip
    moved = assert_moved(lab, ".git/config", done.stdout)
    assert "fsmonitor = " in moved.read_text() and "core.fsmonitor" in done.stdout
    assert (lab.ws / ".git/HEAD").exists()  # the rest of the repository stays
    # git status outside the sandbox: with that config in place, it would run the command.
    host_git(lab.ws, "status", "--short")
    assert not (lab.ws / "fsmonitor-ran").exists()


@pytest.mark.parametrize(
    "command",
    [
        "git init -q && printf '[include]\\n\\tpath = evil.inc\\n' >> .git/config",
        "git init -q && git config alias.st '!touch alias-ran'",
        "git init -q && git remote add x 'ext::sh -c touch% ext-ran'",
        "git init -q && printf '[core\\n' >> .git/config",  # git cannot parse it
    ],
    ids=["include", "alias", "ext-url", "unparseable"],
)
def test_other_config_that_git_init_never_writes_is_moved_aside(lab, command):
    no_repo(lab)
    done = lab.bash(command, "bypassPermissions")
    assert_moved(lab, ".git/config", done.stdout)


@pytest.mark.parametrize(
    "command",
    ["ln -s elsewhere .git", "printf 'gitdir: elsewhere\\n' > .git"],
    ids=["symlink", "gitfile"],
)
def test_a_new_git_pointing_at_a_repository_of_the_commands_choosing_is_moved_aside(lab, command):
    no_repo(lab)
    evil = "git init -q --bare elsewhere && git -C elsewhere config core.fsmonitor 'touch fsmonitor-ran; false' && "  # noqa: E501
    done = lab.bash(evil + command, "acceptEdits", ("Bash",))
    moved = assert_moved(lab, ".git", done.stdout)
    assert moved.is_symlink() or moved.read_text() == "gitdir: elsewhere\n"
    assert "repository of the command's choosing" in done.stdout
    host_git(lab.ws, "status", "--short")
    assert not (lab.ws / "fsmonitor-ran").exists()
    assert not (lab.ws / "elsewhere/fsmonitor-ran").exists()


def test_a_commondir_that_redirects_the_repository_is_moved_aside(lab):
    """git takes config and hooks from the directory ``.git/commondir`` names — in a plain
    repository too — so a new one would bypass the read-only .git/config."""
    done = lab.bash("git init -q --bare evil && git -C evil config core.fsmonitor "
                    "'touch fsmonitor-ran; false' && printf '%s/evil\\n' \"$PWD\" > .git/commondir",
                    "acceptEdits", ("Bash",))  # fmt: skip
    assert_moved(lab, ".git/commondir", done.stdout, content=f"{lab.ws}/evil\n")
    host_git(lab.ws, "status", "--short")
    assert not (lab.ws / "fsmonitor-ran").exists()
    lab.assert_settings_unchanged()


def test_an_existing_commondir_and_gitfile_stay_read_only(lab):
    (lab.ws / ".git/commondir").write_text(".\n")
    done = lab.bash("echo evil > .git/commondir", "bypassPermissions")
    assert done.returncode != 0 and (lab.ws / ".git/commondir").read_text() == ".\n"
    shutil.move(lab.ws / ".git", lab.ws / "realgit")
    (lab.ws / ".git").write_text("gitdir: realgit\n")
    done = lab.bash("printf 'gitdir: evil\\n' > .git; rm -f .git; mv .git x", "bypassPermissions")
    assert (lab.ws / ".git").read_text() == "gitdir: realgit\n"


def test_a_new_deny_write_path_is_moved_aside(lab):
    (lab.ws / ".claude").mkdir()
    settings = {"sandbox": {"filesystem": {"denyWrite": ["./vendor/locked.txt"]}}}
    (lab.ws / ".claude/settings.json").write_text(json.dumps(settings))
    approve(lab.ws)
    done = lab.bash("mkdir -p vendor && echo mine > vendor/locked.txt && echo ok > vendor/free.txt",
                    "bypassPermissions")  # fmt: skip
    assert_moved(lab, "vendor/locked.txt", done.stdout, content="mine\n")
    assert "denyWrite" in done.stdout
    assert (lab.ws / "vendor/free.txt").read_text() == "ok\n"  # the rest is the command's


@pytest.mark.parametrize("command", [MCP, PLUGIN, HOOK, "git init -q"])
@pytest.mark.parametrize(("mode", "allow"), [("default", ()), ("plan", ("Bash",))],
                         ids=["default", "plan+allow-Bash"])  # fmt: skip
def test_read_only_modes_create_nothing_to_move(lab, mode, allow, command):
    no_repo(lab)
    done = lab.bash(command, mode, allow)
    assert done.returncode != 0
    for rel in (".mcp.json", ".claude-plugin", ".git"):
        assert not os.path.lexists(lab.ws / rel)
    assert not (lab.ws / ".journal").exists() and "Moved" not in done.stdout
