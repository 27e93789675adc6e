"""`journal-agent doctor` names each loss of the plugin that would otherwise stay silent, with
the command that fixes it (journal_agent/doctor_plugin.py)."""

from __future__ import annotations

import json
import os

import pytest

from journal_agent.doctor_plugin import (
    check_hooks_ran,
    check_journal_writable,
    check_marketplace,
    check_mcp_cache,
)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere: the mode cannot refuse")
def test_an_unwritable_journal_folder_is_named(tmp_path):
    (tmp_path / ".journal").mkdir(mode=0o500)
    check = check_journal_writable(tmp_path)
    assert not check.ok and "chmod u+w" in check.detail


def test_hooks_that_never_ran_and_why(tmp_path):
    data = tmp_path / ".claude" / "plugins" / "data" / "journal-agent-inline"
    data.mkdir(parents=True)
    check = check_hooks_ran(tmp_path)
    assert not check.ok and check.detail.startswith("never ran since the plugin was installed")
    (data / "hooks-no-python3").write_text(
        "no python3 on the PATH Claude Code runs the hooks with: /x\n"
    )
    check = check_hooks_ran(tmp_path)
    assert (
        not check.ok and "no python3 on the PATH" in check.detail and "Python 3.10" in check.detail
    )
    (data / "hooks-no-python3").unlink()
    (data / "hooks-ran").write_text("2026-11-29T07:00:00Z python 3.11.2 /usr/bin/python3\n")
    assert check_hooks_ran(tmp_path).ok


def test_a_cached_mcp_failure_and_a_moved_marketplace_are_named(tmp_path):
    claude = tmp_path / ".claude"
    (claude / "plugins").mkdir(parents=True)
    (claude / "mcp-needs-auth-cache.json").write_text(
        json.dumps({"plugin:journal-agent:journal": {"timestamp": 1}})
    )
    check = check_mcp_cache(tmp_path)
    assert not check.ok and "plugin:journal-agent:journal" in check.detail and "rm " in check.detail
    known = {"journal-agent": {"source": {"source": "directory", "path": str(tmp_path / "gone")}}}
    (claude / "plugins" / "known_marketplaces.json").write_text(json.dumps(known))
    check = check_marketplace(tmp_path)
    assert not check.ok and "claude plugin marketplace add" in check.detail
    (tmp_path / "gone").mkdir()
    assert check_marketplace(tmp_path).ok


def test_the_old_designs_environments_are_named_with_the_command_that_removes_them(
    tmp_path, monkeypatch
):
    from journal_agent.doctor_plugin import check_old_environments

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CLAUDE_PLUGIN_DATA", raising=False)
    assert check_old_environments().ok
    data = tmp_path / ".claude" / "plugins" / "data"
    for folder in (data / "journal-agent-inline", data / "journal-agent-journal agent"):
        (folder / "venv").mkdir(parents=True)
        (folder / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (data / "other-plugin" / "venv").mkdir(parents=True)  # another plugin's: not ours
    (data / "other-plugin" / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / ".cache" / "journal-agent" / "venv").mkdir(parents=True)  # not a venv
    check = check_old_environments()
    assert not check.ok and check.detail.startswith("2 environment(s) of the plugin's earlier")
    assert (
        f"`rm -r {data}/journal-agent-inline/venv '{data}/journal-agent-journal agent/venv'`"
        in (check.detail)
    )
