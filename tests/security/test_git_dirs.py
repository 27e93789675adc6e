"""The git directories beyond the workspace's own ``.git/config`` and ``.git/hooks``:
submodules' (``.git/modules/<name>``, nested ``modules/a/modules/b``), linked worktrees'
(``.git/worktrees/<name>``), the one a ``.git`` symlink leads to, and repositories in
subdirectories. Each attack runs through the Bash tool with the real bubblewrap in a writing
mode; then git runs on the host, as the user would later, and nothing planted may run.
``git submodule update`` and ``git worktree add`` keep working.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.security.test_protected_creation import (
    HOOK_TEXT,
    WRITING,
    WRITING_IDS,
    assert_moved,
    host_git,
)

FSMONITOR = "'touch fsmonitor-ran; false'"
FILE_OK = "-c protocol.file.allow=always"


@pytest.fixture(autouse=True)
def hook_script(lab) -> None:
    (lab.ws / "hook.sh").write_text(HOOK_TEXT)


def git(cwd: Path, *args: str) -> str:
    done = host_git(cwd, "-c", "protocol.file.allow=always", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def upstream(lab, name: str = "up") -> Path:
    """A repository outside the workspace to take as a submodule (file://)."""
    up = lab.base / name
    up.mkdir()
    git(up, "init", "-q")
    (up / "f.txt").write_text("v1\n")
    git(up, "add", "f.txt")
    git(up, "commit", "-qm", "v1")
    return up


@pytest.fixture
def submodule(lab) -> Path:
    """The workspace with a submodule ``libs/up`` (its git dir ``.git/modules/libs/up``)."""
    up = upstream(lab)
    git(lab.ws, "submodule", "add", "-q", f"file://{up}", "libs/up")
    git(lab.ws, "commit", "-qm", "sub")
    return lab.ws / ".git/modules/libs/up"


def ran(root: Path) -> list[str]:
    """Marker files a planted command would have left, anywhere under ``root``."""
    return [str(p) for p in root.rglob("*-ran")]


def sub_git_runs_nothing(lab, where: Path) -> None:
    """git status (fsmonitor) and a commit (hooks) in ``where``, on the host."""
    host_git(where, "status", "--short")
    host_git(where, "commit", "-q", "--allow-empty", "-m", "x")
    assert ran(lab.base) == []


# -- submodules -----------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
@pytest.mark.parametrize(
    "attack",
    [
        "cp hook.sh .git/modules/libs/up/hooks/pre-commit && chmod +x "
        ".git/modules/libs/up/hooks/pre-commit",
        f"git -C libs/up config core.fsmonitor {FSMONITOR}",
        f"printf '[core]\\n\\tfsmonitor = {FSMONITOR}\\n' >> .git/modules/libs/up/config",
        "rm -rf .git/modules/libs/up/hooks",
        "mv .git/modules/libs/up/config x",
    ],
    ids=["hook", "git-config", "append", "rm-hooks", "mv-config"],
)
def test_a_submodules_config_and_hooks_are_read_only(lab, submodule, mode, allow, attack):
    config, hooks = (submodule / "config").read_text(), sorted(os.listdir(submodule / "hooks"))
    done = lab.bash(attack, mode, allow)
    assert done.returncode != 0, done.stdout
    assert (submodule / "config").read_text() == config
    assert sorted(os.listdir(submodule / "hooks")) == hooks
    sub_git_runs_nothing(lab, lab.ws / "libs/up")


def test_hooks_planted_where_a_submodule_had_none_are_moved_aside(lab, submodule):
    shutil.rmtree(submodule / "hooks")
    done = lab.bash("mkdir .git/modules/libs/up/hooks && cp hook.sh "
                    ".git/modules/libs/up/hooks/post-commit && chmod +x "
                    ".git/modules/libs/up/hooks/post-commit", "acceptEdits", ("Bash",))  # fmt: skip
    moved = assert_moved(lab, ".git/modules/libs/up/hooks", done.stdout)
    assert (moved / "post-commit").read_text() == HOOK_TEXT
    sub_git_runs_nothing(lab, lab.ws / "libs/up")


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
def test_a_commondir_planted_in_a_submodule_is_moved_aside(lab, submodule, mode, allow):
    done = lab.bash(f"git init -q --bare evil && git -C evil config core.fsmonitor {FSMONITOR}"
                    " && printf '%s/evil\\n' \"$PWD\" > .git/modules/libs/up/commondir",
                    mode, allow)  # fmt: skip
    assert_moved(lab, ".git/modules/libs/up/commondir", done.stdout)
    sub_git_runs_nothing(lab, lab.ws / "libs/up")


def test_a_nested_submodules_git_dir_is_protected_too(lab):
    inner = upstream(lab, "inner")
    outer = upstream(lab, "outer")
    git(outer, "submodule", "add", "-q", f"file://{inner}", "in")
    git(outer, "commit", "-qm", "with inner")
    git(lab.ws, "submodule", "add", "-q", f"file://{outer}", "out")
    git(lab.ws, "submodule", "update", "-q", "--init", "--recursive")
    nested = lab.ws / ".git/modules/out/modules/in"
    assert (nested / "HEAD").exists()
    shutil.rmtree(nested / "hooks")
    done = lab.bash(f"git -C out/in config core.fsmonitor {FSMONITOR}; "
                    "cp hook.sh .git/modules/out/modules/in/config; "
                    "mkdir .git/modules/out/modules/in/hooks && cp hook.sh "
                    ".git/modules/out/modules/in/hooks/pre-commit",
                    "bypassPermissions")  # fmt: skip
    assert "fsmonitor" not in (nested / "config").read_text()
    assert_moved(lab, ".git/modules/out/modules/in/hooks", done.stdout)
    sub_git_runs_nothing(lab, lab.ws / "out/in")


def test_git_submodule_update_still_works(lab, submodule):
    """A submodule cloned afresh (its git dir made by the call, core.worktree and all) and
    one brought up to a new upstream commit: objects and refs are written, nothing moved."""
    up = lab.base / "up"
    (up / "f.txt").write_text("v2\n")
    git(up, "commit", "-qam", "v2")
    shutil.rmtree(submodule)
    shutil.rmtree(lab.ws / "libs/up")
    done = lab.bash(f"git {FILE_OK} submodule update -q && "
                    f"git {FILE_OK} submodule update -q --remote && cat libs/up/f.txt",
                    "acceptEdits", ("Bash",))  # fmt: skip
    assert done.returncode == 0 and "v2" in done.stdout, done.stdout
    assert "Moved" not in done.stdout and not (lab.ws / ".journal/quarantine").exists()
    assert "worktree = " in (submodule / "config").read_text()
    assert git(lab.ws / "libs/up", "log", "--oneline").splitlines()[0].endswith("v2")


def test_a_submodule_cloned_by_the_call_loses_a_config_that_runs_a_command(lab, submodule):
    shutil.rmtree(submodule)
    shutil.rmtree(lab.ws / "libs/up")
    done = lab.bash(f"git {FILE_OK} submodule update -q && "
                    f"git -C libs/up config core.fsmonitor {FSMONITOR}",
                    "acceptEdits", ("Bash",))  # fmt: skip
    assert (submodule / "HEAD").exists()  # the clone stays
    moved = assert_moved(lab, ".git/modules/libs/up/config", done.stdout)
    assert "core.fsmonitor" in done.stdout and "fsmonitor" in moved.read_text()
    host_git(lab.ws / "libs/up", "status", "--short")
    assert ran(lab.base) == []


def test_a_submodule_config_pointing_its_worktree_elsewhere_is_moved_aside(lab, submodule):
    shutil.rmtree(submodule)
    shutil.rmtree(lab.ws / "libs/up")
    done = lab.bash(f"git {FILE_OK} submodule update -q && "
                    "git -C libs/up config core.worktree elsewhere",
                    "bypassPermissions")  # fmt: skip
    assert_moved(lab, ".git/modules/libs/up/config", done.stdout)
    assert "core.worktree" in done.stdout


# -- linked worktrees -----------------------------------------------------------------------


@pytest.fixture
def worktree(lab) -> Path:
    git(lab.ws, "worktree", "add", "-q", "wt")
    return lab.ws / ".git/worktrees/wt"


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
@pytest.mark.parametrize("name", ["commondir", "gitdir"])
def test_a_linked_worktrees_commondir_and_gitdir_are_read_only(lab, worktree, mode, allow, name):
    before = (worktree / name).read_text()
    done = lab.bash(f"git init -q --bare evil && git -C evil config core.fsmonitor {FSMONITOR}"
                    f" ; printf '%s/evil\\n' \"$PWD\" > .git/worktrees/wt/{name}",
                    mode, allow)  # fmt: skip
    assert done.returncode != 0
    assert (worktree / name).read_text() == before
    sub_git_runs_nothing(lab, lab.ws / "wt")


def test_a_worktree_config_planted_by_the_call_is_moved_aside(lab, worktree):
    git(lab.ws, "config", "extensions.worktreeConfig", "true")
    done = lab.bash(f"git -C wt config --worktree core.fsmonitor {FSMONITOR}; "
                    f"git config --worktree core.fsmonitor {FSMONITOR}",
                    "acceptEdits", ("Bash",))  # fmt: skip
    assert_moved(lab, ".git/worktrees/wt/config.worktree", done.stdout)
    assert_moved(lab, ".git/config.worktree", done.stdout)
    sub_git_runs_nothing(lab, lab.ws / "wt")
    sub_git_runs_nothing(lab, lab.ws)


def test_a_worktree_made_by_hand_with_a_commondir_elsewhere_is_moved_aside(lab):
    done = lab.bash(f"git init -q --bare evil && git -C evil config core.fsmonitor {FSMONITOR}"
                    " && mkdir -p .git/worktrees/x wt && cp .git/HEAD .git/worktrees/x/ && "
                    "printf '%s/evil\\n' \"$PWD\" > .git/worktrees/x/commondir && "
                    "printf 'gitdir: %s/.git/worktrees/x\\n' \"$PWD\" > wt/.git",
                    "bypassPermissions")  # fmt: skip
    assert_moved(lab, ".git/worktrees/x/commondir", done.stdout)
    host_git(lab.ws / "wt", "status", "--short")
    assert ran(lab.base) == []


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
def test_git_worktree_add_still_works(lab, mode, allow):
    done = lab.bash("git worktree add -q wt && git -C wt log --oneline", mode, allow)
    assert done.returncode == 0 and "init" in done.stdout, done.stdout
    assert "Moved" not in done.stdout and not (lab.ws / ".journal/quarantine").exists()
    assert git(lab.ws / "wt", "rev-parse", "--abbrev-ref", "HEAD").strip() == "wt"
    assert "wt" in git(lab.ws, "worktree", "list")


# -- a .git that is a symlink ---------------------------------------------------------------


@pytest.fixture
def symlinked(lab) -> Path:
    shutil.move(lab.ws / ".git", lab.ws / "realgit")
    (lab.ws / ".git").symlink_to("realgit")
    return lab.ws / "realgit"


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
@pytest.mark.parametrize(
    "attack",
    [
        "cp hook.sh .git/hooks/pre-commit",
        "cp hook.sh realgit/hooks/pre-commit",
        f"git config core.fsmonitor {FSMONITOR}",
        f"printf '[core]\\n\\tfsmonitor = {FSMONITOR}\\n' >> realgit/config",
    ],
    ids=["hook", "hook-by-real-path", "config", "config-by-real-path"],
)
def test_the_git_dir_a_symlink_leads_to_is_protected(lab, symlinked, mode, allow, attack):
    config = (symlinked / "config").read_text()
    done = lab.bash(attack, mode, allow)
    assert done.returncode != 0
    assert (symlinked / "config").read_text() == config
    assert not (symlinked / "hooks/pre-commit").exists()
    sub_git_runs_nothing(lab, lab.ws)


def test_a_git_symlink_replaced_by_the_call_is_moved_aside_and_put_back(lab, symlinked):
    done = lab.bash(f"git init -q --bare evil && git -C evil config core.fsmonitor {FSMONITOR}"
                    " && ln -sfn evil .git", "acceptEdits", ("Bash",))  # fmt: skip
    assert os.readlink(lab.ws / ".git") == "realgit" and "Put back .git" in done.stdout
    (lab.ws / ".git").unlink()  # (assert_moved wants the path empty)
    moved = assert_moved(lab, ".git", done.stdout)
    assert os.readlink(moved) == "evil"
    (lab.ws / ".git").symlink_to("realgit")
    sub_git_runs_nothing(lab, lab.ws)


# -- repositories in subdirectories ---------------------------------------------------------


@pytest.fixture
def vendored(lab) -> Path:
    vendor = lab.ws / "vendor/lib"
    vendor.mkdir(parents=True)
    git(vendor, "init", "-q")
    return vendor / ".git"


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
@pytest.mark.parametrize(
    "attack",
    [
        "cp hook.sh vendor/lib/.git/hooks/pre-commit && chmod +x vendor/lib/.git/hooks/pre-commit",
        f"git -C vendor/lib config core.fsmonitor {FSMONITOR}",
        "printf 'gitdir: ../../evil\\n' > vendor/lib/.git/commondir",
    ],
    ids=["hook", "config", "commondir"],
)
def test_a_nested_repositorys_config_and_hooks_are_read_only(lab, vendored, mode, allow, attack):
    config = (vendored / "config").read_text()
    done = lab.bash(attack, mode, allow)
    assert (vendored / "config").read_text() == config
    assert not (vendored / "hooks/pre-commit").exists()
    assert not (vendored / "commondir").exists() or "Moved vendor/lib/.git/commondir" in done.stdout
    sub_git_runs_nothing(lab, vendored.parent)


def test_an_existing_nested_gitfile_is_read_only(lab, submodule):
    before = (lab.ws / "libs/up/.git").read_text()
    done = lab.bash("printf 'gitdir: ../../evil\\n' > libs/up/.git", "bypassPermissions")
    assert done.returncode != 0 and (lab.ws / "libs/up/.git").read_text() == before


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
def test_git_init_and_clone_in_a_subdirectory_still_work(lab, mode, allow):
    up = upstream(lab)
    done = lab.bash(f"git init -q a/b && git clone -q file://{up} c && cat c/f.txt",
                    mode, allow)  # fmt: skip
    assert done.returncode == 0 and "v1" in done.stdout, done.stdout
    assert "Moved" not in done.stdout and not (lab.ws / ".journal/quarantine").exists()
    assert (lab.ws / "a/b/.git/config").exists() and (lab.ws / "c/.git/config").exists()
    assert git(lab.ws / "c", "log", "--oneline").strip().endswith("v1")


@pytest.mark.parametrize(("mode", "allow"), WRITING, ids=WRITING_IDS)
def test_a_new_nested_repository_loses_what_would_run_a_command(lab, mode, allow):
    done = lab.bash(f"git init -q deep/sub && git -C deep/sub config core.fsmonitor {FSMONITOR}"
                    " && cp hook.sh deep/sub/.git/hooks/pre-commit && "
                    "chmod +x deep/sub/.git/hooks/pre-commit", mode, allow)  # fmt: skip
    assert_moved(lab, "deep/sub/.git/config", done.stdout)
    assert_moved(lab, "deep/sub/.git/hooks", done.stdout)
    assert (lab.ws / "deep/sub/.git/HEAD").exists()  # the repository itself stays
    sub_git_runs_nothing(lab, lab.ws / "deep/sub")


def test_a_new_nested_gitfile_to_a_repository_that_runs_a_command_is_defused(lab):
    done = lab.bash(f"git init -q --bare evil && git -C evil config core.fsmonitor {FSMONITOR}"
                    " && mkdir sub && printf 'gitdir: %s/evil\\n' \"$PWD\" > sub/.git",
                    "acceptEdits", ("Bash",))  # fmt: skip
    assert_moved(lab, "evil/config", done.stdout)
    host_git(lab.ws / "sub", "status", "--short")
    assert ran(lab.base) == []


@pytest.mark.parametrize(
    ("attack", "rel"),
    [
        (f"mv .git old && git init -q && git config core.fsmonitor {FSMONITOR}", ".git/config"),
        (
            "mv .git old && git init -q && cp hook.sh .git/hooks/pre-commit && "
            "chmod +x .git/hooks/pre-commit",
            ".git/hooks",
        ),
        (
            "mv .git/modules/libs/up m && cp -r m .git/modules/libs/up && "
            "cp hook.sh .git/modules/libs/up/hooks/pre-commit",
            ".git/modules/libs/up/hooks",
        ),
        (
            "mv vendor v2 && mkdir -p vendor/lib && cp -r v2/lib/.git vendor/lib/ && "
            f"git -C vendor/lib config core.fsmonitor {FSMONITOR}",
            "vendor/lib/.git/config",
        ),
    ],
    ids=["git-dir", "git-dir-hooks", "submodule-git-dir", "nested-repo-parent"],
)
def test_a_directory_renamed_away_from_above_protected_files_does_not_escape(
    lab, submodule, vendored, attack, rel
):
    """A read-only file's directory can be renamed (the mount goes with it) and a new one
    made in its place: the new file is judged as one the call created."""
    done = lab.bash(attack, "bypassPermissions")
    assert done.returncode == 0, done.stdout  # the rename itself is allowed by the kernel
    assert_moved(lab, rel, done.stdout)
    for where in (lab.ws, lab.ws / "libs/up", lab.ws / "vendor/lib"):
        sub_git_runs_nothing(lab, where)
