"""The Seatbelt profile for macOS is generated from the same view as bubblewrap's command line.
sandbox-exec exists only on macOS, so this checks the generated text, not its enforcement
(docs/security.md says so)."""

from __future__ import annotations

from pathlib import Path

from journal_agent.tools.sandbox import SandboxSettings, build_view
from journal_agent.tools.sandbox.macos import sandbox_exec_argv, seatbelt_profile


def test_the_profile_denies_what_the_view_hides_after_granting_what_it_allows(tmp_path):
    ws, home = tmp_path / "ws", tmp_path / "home"
    (ws / ".git/hooks").mkdir(parents=True)
    (ws / ".git/config").write_text("")
    (ws / ".env").write_text("K=v\n")
    (home / ".ssh").mkdir(parents=True)
    view = build_view(ws, SandboxSettings(), writes=True, home=home)
    profile = seatbelt_profile(view)
    lines = profile.splitlines()
    assert lines[:2] == ["(version 1)", "(deny default)"]
    allow_ws = lines.index(f'(allow file-write* (subpath "{ws}"))')
    deny_hooks = lines.index(f'(deny file-write* (subpath "{ws}/.git/hooks"))')
    deny_env = lines.index(f'(deny file-read* file-write* (subpath "{ws}/.env"))')
    deny_ssh = lines.index(f'(deny file-read* file-write* (subpath "{home}/.ssh"))')
    assert allow_ws < deny_hooks < deny_env and allow_ws < deny_ssh  # last match wins
    assert "(allow network*)" not in profile
    argv = sandbox_exec_argv("/usr/bin/sandbox-exec", view, ["bash", "-c", "ls"])
    assert argv[:3] == ["/usr/bin/sandbox-exec", "-p", profile] and argv[3:] == ["bash", "-c", "ls"]


def test_read_only_view_grants_no_workspace_write(tmp_path):
    view = build_view(tmp_path, SandboxSettings(), writes=False, home=tmp_path / "h")
    assert f'(allow file-write* (subpath "{Path(tmp_path)}"))' not in seatbelt_profile(view)
