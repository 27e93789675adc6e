"""Each hook imports only what its event needs: Claude Code waits for it on every turn, and on
these machines an import like ``json`` (with ``re``), ``pathlib`` or ``sqlite3`` costs more than
the hook's work (docs/plugin.md, "What it costs"; benchmarks/bench_hooks.py measures it)."""

from __future__ import annotations

from tests.capture.hook_helpers import insight, run_hook
from tests.entries import render_entry

# Never, for any event: the capture modules use lightjson and os.path instead.
NEVER = {"json", "pathlib", "typing", "dataclasses", "importlib", "contextlib", "subprocess"}
# Only where the input calls for it: a regex (an Insight, a record id) or the search index.
REGEX = {"re", "enum"}
INDEX = {"sqlite3", "_sqlite3"}


def _imported(event: str, payload: dict, root) -> set[str]:
    done = run_hook(event, payload, root, flags=("-X", "importtime"))
    assert done.returncode == 0
    assert not (root / ".journal" / "hooks.log").exists(), (root / ".journal/hooks.log").read_text()
    names = set()
    for line in done.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    assert "journal_agent.capture.hook" in names  # (-X importtime reached the interpreter)
    return names


def test_session_start_and_session_end_import_neither_json_nor_re_nor_sqlite(project, transcript):
    transcript.prompt("x")
    transcript.edit("train.py", "line 3", "line 3 changed")
    stop = {"session_id": "s1", "transcript_path": str(transcript.path)}
    assert "re" not in _imported("Stop", stop, project)  # no Insight, no record: no regex
    start = {"session_id": "s2", "source": "startup"}
    assert _imported("SessionStart", start, project) & (NEVER | REGEX | INDEX) == set()
    end = {"session_id": "s1", "reason": "other"}
    assert _imported("SessionEnd", end, project) & (NEVER | REGEX | INDEX) == set()


def test_a_prompt_is_looked_up_without_json_or_re(project, cli):
    (project / "learning_journal.md").write_text(
        "# Learning Journal\n\n## Activation checkpointing (2026-11-20)\n\n"
        "**Context**: Studying the trainer.\n\n### 🎯 Intuition\n"
        "Recompute activations during backward to save memory.\n"
    )
    cli(
        "journal",
        "search",
        "x",
        "--root",
        str(project),
        env={"JOURNAL_AGENT_EMBEDDING_MODEL": "off"},
    )
    prompt = {"session_id": "s1", "prompt": "Should I recompute activations in backward?"}
    names = _imported("UserPromptSubmit", prompt, project)
    assert "sqlite3" in names and names & (NEVER | REGEX) == set()
    assert (project / ".journal" / "capture" / "recall.jsonl").exists()


def test_a_turn_with_an_insight_imports_re_but_still_not_json(project, transcript):
    transcript.prompt("x")
    final = insight("Warm-up is counted in optimizer steps (train.py:3).")
    transcript.say(final)
    stop = {"session_id": "s1", "transcript_path": str(transcript.path)}
    names = _imported("Stop", {**stop, "last_assistant_message": final}, project)
    assert "re" in names and names & (NEVER | INDEX) == set()


def test_a_tool_call_on_cited_code_imports_neither_json_nor_re(project, cli):
    """PostToolUse runs after every Read and Edit: no regex, no json, no pathlib; sqlite3 only
    to name an entry (its title) while the index's titles file is not in line with the journal,
    and nothing at all for an uncited file."""
    (project / "m.py").write_text("a = 1\nb = 2\n")
    entry = render_entry(
        "Two Names", "2026-11-20", context="Studying m.py.", question="Why both?",
        intuition="Both are set at once (m.py:1-2).", tags="#names",
    )  # fmt: skip
    assert cli("journal", "append", "-", "--root", str(project), input=entry).returncode == 0
    (project / "n.py").write_text("c = 3\n")
    read = {"session_id": "s1", "tool_name": "Read", "tool_input": {}, "tool_response": {}}
    read["tool_input"] = {"file_path": str(project / "n.py")}
    names = _imported("PostToolUse", read, project)
    assert names & (NEVER | REGEX | INDEX) == set()
    read["tool_input"] = {"file_path": str(project / "m.py")}
    assert _imported("PostToolUse", read, project) & (NEVER | REGEX) == set()
    # Once the search index is in line with the journal, its titles file names the entry:
    # no sqlite3 either (journal/search/titles_file.py).
    cli(
        "journal",
        "search",
        "x",
        "--root",
        str(project),
        env={"JOURNAL_AGENT_EMBEDDING_MODEL": "off"},
    )
    names = _imported("PostToolUse", {**read, "session_id": "s2"}, project)
    assert "journal_agent.journal.search.titles_file" in names
    assert names & (NEVER | REGEX | INDEX) == set()
