"""The writers the sweep of #29 moved into the room, each tried with a link planted where it
writes: the trust store (outside the workspace by design, yet never through a link), the
plugin's state and the hooks' note in the plugin's data folder, a memory snapshot's file, and
the two readers of the journal that opened it by name (the view's pages, the drafting tools).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from journal_agent import confined, trust_store
from journal_agent.errors import UserError
from journal_agent.tools.base import ToolError
from tests.capture.hook_helpers import run_hook
from tests.trust_helpers import approve

SECRET = "PRECIOUS user data\n"


def _outside(tmp_path: Path, name: str = "precious.txt") -> Path:
    target = tmp_path / "outside" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(SECRET)
    return target


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "settings.json").write_text('{"permissions": {"defaultMode": "plan"}}')
    return root


def test_a_trust_store_that_is_a_link_approves_nothing_and_is_never_written_through(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    # A store elsewhere that approves the project's settings, linked in as the store.
    forged = _outside(tmp_path, "trust.json")
    data = trust_store.read_file(root / ".claude" / "settings.json")
    assert data is not None
    approval = {"sha256": trust_store.digest(data), "approved": "2026-01-01T00:00:00Z"}
    projects = {trust_store.project_key(root): {".claude/settings.json": approval}}
    forged.write_text(json.dumps({"version": 1, "projects": projects}))
    before = forged.read_bytes()
    os.makedirs(trust_store.store_dir(), exist_ok=True)
    os.symlink(forged, trust_store.store_path())

    assert trust_store.read_approved(root, ".claude/settings.json") is None
    with pytest.raises(UserError, match="trust store"):
        approve(root, ".claude/settings.json")
    assert forged.read_bytes() == before
    assert os.path.islink(trust_store.store_path())


def test_the_trust_stores_lock_is_never_a_link(tmp_path: Path) -> None:
    root = _project(tmp_path)
    target = _outside(tmp_path)
    os.makedirs(trust_store.store_dir(), exist_ok=True)
    os.symlink(target, os.path.join(trust_store.store_dir(), ".trust.lock"))
    with pytest.raises(UserError, match="trust store"):
        approve(root, ".claude/settings.json")
    assert target.read_text() == SECRET
    assert not os.path.exists(trust_store.store_path())


def test_the_trust_store_is_replaced_through_a_random_temp_name(tmp_path: Path) -> None:
    # The old temp names a planted link could have caught are not used: whatever is planted
    # beside the store stays as it was, and the store is a plain file of one name.
    root = _project(tmp_path)
    target = _outside(tmp_path)
    folder = Path(trust_store.store_dir())
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("trust.json.tmp", ".trust.json.tmp", f"trust.json.{os.getpid()}.tmp"):
        os.symlink(target, folder / name)
    approve(root, ".claude/settings.json")
    assert target.read_text() == SECRET
    assert trust_store.read_approved(root, ".claude/settings.json") is not None
    assert (folder / "trust.json").stat().st_nlink == 1


def test_the_plugins_state_is_never_written_through_a_planted_name(tmp_path: Path) -> None:
    from journal_agent.plugin_env.env import Env, read_state, write_state

    home = tmp_path / "plugin-data" / "env-x"
    home.mkdir(parents=True)
    env = Env(str(tmp_path), str(home))
    target = _outside(tmp_path)
    # The temp name it used to take (state.json.<pid>.tmp) was predictable.
    os.symlink(target, f"{env.state_file}.{os.getpid()}.tmp")
    write_state(env, condition="ready")
    assert target.read_text() == SECRET
    assert read_state(env)["condition"] == "ready"
    # A link at the state's own name is refused, never followed.
    os.unlink(env.state_file)
    os.symlink(target, env.state_file)
    with pytest.raises(confined.Refused):
        write_state(env, condition="broken")
    assert target.read_text() == SECRET


def test_the_hooks_note_in_the_plugin_data_folder_follows_no_link(tmp_path: Path) -> None:
    data = tmp_path / "plugin-data"
    data.mkdir()
    target = _outside(tmp_path)
    stale = _outside(tmp_path, "other.txt")
    os.symlink(target, data / "hooks-ran")
    os.symlink(stale, data / "hooks-no-python3")  # removed as a name, never what it names
    root = tmp_path / "proj"
    root.mkdir()
    done = run_hook("SessionStart", {"session_id": "s1", "cwd": str(root)}, root,
                    env={"CLAUDE_PLUGIN_DATA": str(data)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert target.read_text() == SECRET
    assert stale.read_text() == SECRET
    assert not (data / "hooks-no-python3").is_symlink()


def test_a_memory_snapshot_is_never_written_through_a_link(tmp_path: Path) -> None:
    from profiling.errors import ProfilingError
    from profiling.trace.snapshot_export import write_snapshot

    target = _outside(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(target, out / "snap.pickle")
    with pytest.raises(ProfilingError, match="symlink"):
        write_snapshot({"segments": [], "device_traces": []}, out / "snap.pickle")  # type: ignore[arg-type]
    assert target.read_text() == SECRET
    write_snapshot({"segments": [], "device_traces": []}, out / "new.pickle")  # type: ignore[arg-type]
    assert (out / "new.pickle").stat().st_size > 0
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_the_drafting_tools_read_no_journal_through_a_link(tmp_path: Path) -> None:
    from journal_agent.drafts.tools import _journal_text

    root = tmp_path / "proj"
    root.mkdir()
    target = _outside(tmp_path)
    os.symlink(target, root / "learning_journal.md")
    with pytest.raises(ToolError, match="symlink"):
        _journal_text(root)
    assert target.read_text() == SECRET
