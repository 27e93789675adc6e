"""One list of protected paths for the sandbox, Write, Edit and the quarantine (finding 6 of
the third review), and a quarantine that never follows a link out of the workspace (finding
5). Every attack runs for real: Write and Edit through the tools in ``acceptEdits``, Bash in
bubblewrap, then git on the host, outside any sandbox, as the user would run it next.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from journal_agent.tools import builtin_tools, make_context
from journal_agent.tools.sandbox import build_view
from journal_agent.tools.sandbox.config import SandboxSettings
from journal_agent.tools.sandbox.view import protected_paths, why_protected
from tests.security.test_git_dirs import FSMONITOR, git, ran, sub_git_runs_nothing, upstream
from tests.security.test_protected_creation import host_git, quarantined


def tool(ws: Path, name: str, mode: str = "acceptEdits", **params):
    return builtin_tools()[name].call(make_context(ws, mode=mode), params)


@pytest.fixture
def repos(lab) -> Path:
    """The lab workspace with a submodule, a linked worktree, a nested repository and the
    state directories, so that every kind of protected path exists."""
    up = upstream(lab)
    git(lab.ws, "submodule", "add", "-q", f"file://{up}", "libs/up")
    git(lab.ws, "commit", "-qm", "sub")
    git(lab.ws, "worktree", "add", "-q", "wt")
    (lab.ws / "vendor/lib").mkdir(parents=True)
    git(lab.ws / "vendor/lib", "init", "-q")
    for d in (".claude/commands", ".claude/agents", ".claude/hooks", ".journal/history",
              ".journal/quarantine/x", ".claude-plugin"):  # fmt: skip
        (lab.ws / d).mkdir(parents=True, exist_ok=True)
    (lab.ws / ".claude/commands/learn.md").write_text("---\ndescription: x\n---\nbody\n")
    return lab.ws


def the_list(ws: Path) -> list[Path]:
    from journal_agent.tools.sandbox import _gitdirs
    from journal_agent.tools.sandbox.view import dot_gits_of, workspace_scan

    scan = workspace_scan(ws, SandboxSettings(), ())
    scan.paths()
    git_dirs = _gitdirs.find(dot_gits_of(ws, scan.repos), [ws])
    return protected_paths(ws, SandboxSettings(), Path.home(), git_dirs)


def test_finding_06_every_consumer_uses_the_one_protected_list(lab, repos):
    ws = repos
    listed = the_list(ws)
    rels = {p.relative_to(ws).as_posix() for p in listed if ws in p.parents}
    # Every kind the review named is on it.
    for rel in (".claude", ".claude-plugin", ".mcp.json", ".journal", ".git/config",
                ".git/hooks", ".git/commondir", ".git/modules/libs/up/config",
                ".git/modules/libs/up/hooks", ".git/worktrees/wt/commondir",
                ".git/worktrees/wt/gitdir", "vendor/lib/.git/hooks", "vendor/lib/.git/config",
                "libs/up/.git", "wt/.git"):  # fmt: skip
        assert rel in rels, rel
    view = build_view(ws, SandboxSettings(), writes=True)
    ctx = make_context(ws, mode="acceptEdits")
    for path in listed:
        # The sandbox keeps it read-only (or guards it while absent) ...
        assert path in view.guarded
        assert (path in view.read_only) == os.path.lexists(path)
        # ... Write and Edit ask (here: no one to ask, so they are refused) ...
        target = path / "x" if path.is_dir() else path
        why = why_protected(ws, target)
        decision = ctx.policy.check("Write", path=target)
        assert why is not None and not decision.allowed and why in decision.reason, target


@pytest.mark.parametrize(
    "rel",
    [
        ".git/commondir",
        ".git/config",
        ".git/hooks/pre-commit",
        "vendor/lib/.git/hooks/post-checkout",
        ".git/modules/libs/up/config",
        ".git/modules/libs/up/hooks/post-checkout",
        ".git/worktrees/wt/commondir",
        "libs/up/.git",
        ".claude-plugin/plugin.json",
        ".claude/hooks/x.sh",
        ".claude/agents/evil.md",
        ".claude/commands/learn.md",
        ".claude/settings.local.json",
        ".journal/history/feedback.jsonl",
        ".journal/quarantine/x/config",
        ".journal/approved-tools.json",
        ".mcp.json",
    ],
)
def test_finding_06_write_and_edit_ask_for_what_the_sandbox_protects(lab, repos, rel):
    path = repos / rel
    before = path.read_bytes() if path.is_file() else None
    written = tool(repos, "Write", file_path=rel, content="[core]\n\tfsmonitor = touch x-ran\n")
    assert written.is_error and "protected path" in written.content, written.content
    if before is not None:
        assert not tool(repos, "Read", file_path=rel).is_error
        ctx = make_context(repos, mode="acceptEdits")
        builtin_tools()["Read"].call(ctx, {"file_path": rel})
        edited = builtin_tools()["Edit"].call(
            ctx, {"file_path": rel, "old_string": before.decode()[:4], "new_string": "zz"}
        )
        assert edited.is_error and "protected path" in edited.content, edited.content
    assert (path.read_bytes() if path.is_file() else None) == before
    # The agent's own drafts stay writable.
    assert not tool(repos, "Write", file_path=".journal/drafts/e.md", content="x\n").is_error


def test_finding_06_the_commondir_chain_is_refused_in_accept_edits(lab):
    ws = lab.ws
    for rel, content in (
        ("evilcommon/config", "[core]\n\tfsmonitor = touch fsmonitor-ran; false\n"),
        ("evilcommon/objects/info/.keep", ""),
        ("evilcommon/refs/heads/.keep", ""),
    ):
        assert not tool(ws, "Write", file_path=rel, content=content).is_error
    done = tool(ws, "Write", file_path=".git/commondir", content="../evilcommon\n")
    assert done.is_error and "protected path" in done.content
    assert not (ws / ".git/commondir").exists()
    host_git(ws, "status", "--short")
    assert ran(lab.base) == []


def test_finding_06_a_bare_edit_rule_does_not_lift_the_protection(lab):
    ctx = make_context(lab.ws, mode="acceptEdits", allow=("Edit", "Write"))
    assert not ctx.policy.check("Write", path=lab.ws / ".git/hooks/pre-commit").allowed
    named = make_context(lab.ws, mode="acceptEdits", allow=("Write(.mcp.json)",))
    assert named.policy.check("Write", path=lab.ws / ".mcp.json").allowed


# -- finding 5: the quarantine never follows a link ------------------------------------------


def _unread_probe(path: Path) -> bool:
    """Set ``path``'s access time before its modification time, so that any read moves it
    (relatime); False where this file system does not record reads at all."""
    probe = path.with_name(path.name + ".probe")
    probe.write_text("x")
    old = time.time() - 3600
    os.utime(probe, (old - 60, old))
    probe.read_text()
    works = os.stat(probe).st_atime > old
    probe.unlink()
    st = os.stat(path)
    os.utime(path, (st.st_mtime - 60, st.st_mtime))
    return works


def script(lab, text: str) -> tuple[str, tuple[str, ...]]:
    """The attack as a script in the workspace, and the allow rule that runs it: the permission
    rules do not read inside it (they would refuse a path outside), so only the sandbox and
    the quarantine stand between the attack and the files."""
    (lab.ws / "swap.sh").write_text(text)
    return "sh swap.sh", ("Bash(sh swap.sh)",)


@pytest.mark.parametrize("mode", ["acceptEdits", "bypassPermissions", "default"])
def test_finding_05_quarantine_never_follows_a_git_symlink(lab, mode):
    kube = lab.base / "kube"
    (kube / "hooks").mkdir(parents=True)
    (kube / "config").write_text("token: KUBE-TOKEN-xyzzy\n")
    (kube / "commondir").write_text("..\n")
    reads_show = _unread_probe(kube / "config")
    atime = os.stat(kube / "config").st_atime
    command, allow = script(lab, f"mv .git .git_old && ln -s {kube} .git\n")
    done = lab.bash(command, mode, allow)
    assert done.returncode == 0, done.stdout
    if reads_show:  # (before this test reads it itself)
        assert os.stat(kube / "config").st_atime == atime, "the outside config was read"
    assert (kube / "config").read_text() == "token: KUBE-TOKEN-xyzzy\n"
    assert sorted(os.listdir(kube)) == ["commondir", "config", "hooks"]
    # The link itself is the protected change: it went to quarantine, still a link.
    assert not os.path.lexists(lab.ws / ".git")
    [moved] = quarantined(lab.ws, ".git")
    assert moved.is_symlink() and os.readlink(moved) == str(kube)
    assert "Moved .git, which this command created" in done.stdout
    assert "KUBE-TOKEN" not in done.stdout
    for p in (lab.ws / ".journal/quarantine").rglob("*"):
        assert p.is_symlink() or not p.is_file() or "KUBE-TOKEN" not in p.read_text()
    assert sorted(p.name for p in lab.base.iterdir()) == ["home", "kube", "outside", "ws"]


def test_finding_05_a_nested_repository_redirected_by_a_link_moves_only_the_link(lab):
    vendor = lab.ws / "vendor/lib"
    vendor.mkdir(parents=True)
    git(vendor, "init", "-q")
    elsewhere = lab.base / "elsewhere"
    (elsewhere / "hooks").mkdir(parents=True)
    (elsewhere / "config").write_text("[core]\n\tbare = false\n")
    swap = f"mv vendor/lib/.git vendor/lib/old && ln -s {elsewhere} vendor/lib/.git\n"
    command, allow = script(lab, swap)
    done = lab.bash(command, "bypassPermissions", allow)
    assert done.returncode == 0, done.stdout
    assert sorted(os.listdir(elsewhere)) == ["config", "hooks"]
    [moved] = quarantined(lab.ws, "vendor/lib/.git")
    assert moved.is_symlink()
    sub_git_runs_nothing(lab, lab.ws)


def test_finding_05_a_git_symlink_to_a_directory_inside_is_still_judged(lab):
    """A link the call made that stays inside the workspace is moved too: it picks the
    repository git uses, whatever it holds."""
    done = lab.bash(
        f"git init -q --bare evil && git -C evil config core.fsmonitor {FSMONITOR} && "
        "mv .git .git_old && ln -s evil .git",
        "bypassPermissions",
    )
    assert done.returncode == 0, done.stdout
    assert not os.path.lexists(lab.ws / ".git") and quarantined(lab.ws, ".git")
    host_git(lab.ws, "status")
    assert ran(lab.base) == []
