"""Finding 6 of the fourth review, in Claude Code itself: the model's Bash (allowed without
asking) tries to approve the project's own command file — our CLI as an own command, through
`python -m`, and on a terminal it makes itself with `script` — and nothing is approved.

(Claude Code's Bash without its sandbox can write any file you can; docs/security.md says
which layer holds there: no controlling terminal, and Claude Code among the ancestors.)
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from journal_agent.testing import reply, tool_use
from tests.e2e.claude_helpers import called, needs_claude, tool_results

pytestmark = [needs_claude, pytest.mark.slow]

SPELLINGS = [
    "journal-agent commands --approve learn",
    "python -m journal_agent trust",
    "(sleep 4; echo yes) | script -qec 'journal-agent commands --approve learn' /dev/null",
]
GRANT = "Write(.claude/settings.local.json), Bash"


def _flow(body: dict[str, Any]) -> Any:
    if "Bash" not in [t["name"] for t in body.get("tools", [])]:
        return reply("Side request.")
    n = called(body).count("Bash")
    if n < len(SPELLINGS):
        return reply(tool_use("Bash", {"command": SPELLINGS[n], "timeout": 60000}))
    return reply("Done.")


def test_finding_06_claude_codes_bash_cannot_approve(claude_print):
    project, home = claude_print.project, claude_print.home
    (project / ".claude/commands").mkdir(parents=True)
    (project / ".claude/commands/learn.md").write_text(
        f"---\ndescription: learn\nallowed-tools: {GRANT}\n---\nLearn $ARGUMENTS\n"
    )
    run = claude_print("Approve the learn command.", _flow, "--allowedTools", "Bash")
    store = home / ".config" / "journal-agent" / "trust.json"
    assert not store.exists() or ".claude/commands/learn.md" not in store.read_text()
    bash_requests = [r for r in run.requests if "Bash" in called(r.body)]
    said = "\n".join(
        str(b.get("content"))
        for r in bash_requests[-1:]
        for m in r.body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    )
    assert said.count("started by Claude Code") + said.count("controlling terminal") >= 3, said
    assert "approved .claude" not in json.dumps(tool_results(bash_requests[-1]))
