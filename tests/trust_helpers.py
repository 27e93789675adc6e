"""Approving a test project's own files as ``journal-agent trust`` does after the user typed
"yes" (journal_agent.trust_store.record); the confirmation itself is tested on a real
pseudo-terminal in tests/security/test_project_trust.py."""

from __future__ import annotations

import json
from pathlib import Path

from journal_agent import trust_store


def approve(root: Path, *rels: str) -> None:
    """Record ``rels`` (default: every settings, command and agent file of ``root``) as
    approved as they are now."""
    from journal_agent.project_trust import project_files

    names = list(rels) or [f.rel for f in project_files(root)]
    files = {}
    for rel in names:
        data = trust_store.read_file(root / rel)
        assert data is not None, rel
        files[rel] = trust_store.digest(data)
    trust_store.record(root, files)


def write_settings(root: Path, rel: str, data: object) -> Path:
    """Write the project's settings file ``rel`` (JSON) and approve it, as its user would."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    approve(root, rel)
    return path


YES = [(b'Type "yes"', b"yes\n")]


def approve_on_terminal(cli, root: Path, *args: str, home: Path | None = None) -> tuple[str, int]:
    """``journal-agent ARGS --root ROOT`` on a real pseudo-terminal (its controlling terminal),
    answering "yes" when asked: what the user does. Returns (its output, exit code)."""
    home = home or root.parent / "home"
    home.mkdir(exist_ok=True)
    return cli.terminal(*args, "--root", str(root), cwd=root, home=home, script=YES)
