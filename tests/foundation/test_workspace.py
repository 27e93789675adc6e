"""The Workspace door: one object carries the root and hands out its stores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from journal_agent.workspace import Workspace
from tests.trust_helpers import approve

JOURNAL = """# Learning Journal

---

## ZeRO Stage 2 (2026-11-20)
<!-- entry: zero-2 -->

**Context**: Reading the DeepSpeed config.
"""


def test_at_makes_the_root_absolute_and_resolves_links(tmp_path: Path, monkeypatch) -> None:
    real = tmp_path / "project"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.chdir(tmp_path)
    assert Workspace.at("link").root == real
    assert Workspace.at(Path("project")) == Workspace(real)  # equal roots, equal workspaces


def test_the_stores_live_where_paths_says_and_are_opened_once(tmp_path: Path) -> None:
    ws = Workspace.at(tmp_path)
    assert ws.journal.path == tmp_path / "learning_journal.md"
    assert ws.ledger.path == tmp_path / "learning_ledger.md"
    assert ws.review.path == tmp_path / ".journal" / "review.json"
    assert ws.index.path == tmp_path / ".journal" / "index.sqlite"
    assert ws.inbox.path == tmp_path / ".journal" / "inbox.jsonl"
    assert ws.records.directory == tmp_path / ".journal" / "measurements"
    assert ws.refs.path == tmp_path / ".journal" / "refs.jsonl"
    assert ws.journal is ws.journal and ws.index is ws.index and ws.ledger is ws.ledger


def test_a_long_lived_workspace_sees_what_others_write(tmp_path: Path, home: Path) -> None:
    # The MCP server and the view keep one workspace for hours: a store read earlier must not
    # hide what an editor or another process wrote since, nor a settings file edited since.
    ws = Workspace.at(tmp_path)
    assert not ws.journal.exists()
    (tmp_path / "learning_journal.md").write_text(JOURNAL, encoding="utf-8")
    assert [e.id for e in ws.journal.load().entries] == ["zero-2"]
    assert ws.settings().model_extra == {}
    (tmp_path / ".journal").mkdir(exist_ok=True)
    (tmp_path / ".journal" / "settings.json").write_text(
        json.dumps({"search": {"semantic": False}}), encoding="utf-8"
    )
    approve(tmp_path)
    assert ws.settings().model_extra == {"search": {"semantic": False}}


def test_building_a_workspace_imports_no_store_until_one_is_used(tmp_path: Path) -> None:
    # Every command builds one from --root; `journal-agent --help` and the journal commands
    # must not pay for stores they never open.
    script = (
        "import sys\n"
        "from journal_agent.workspace import Workspace\n"
        f"ws = Workspace.at({str(tmp_path)!r}); ws.state; ws.measurements\n"
        "before = {m for m in sys.modules if m.startswith(('journal_agent.', 'pydantic'))}\n"
        "ws.journal\n"
        "after = {m for m in sys.modules if m.startswith('journal_agent.')}\n"
        "print(sorted(before)); print('journal_agent.journal.store' in after)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    before, opened = done.stdout.splitlines()
    assert before == "['journal_agent.paths', 'journal_agent.workspace']"
    assert opened == "True"
