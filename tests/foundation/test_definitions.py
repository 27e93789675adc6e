"""Agent and command files: parsing, validation, discovery precedence, command expansion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journal_agent.definitions import (
    DefinitionError,
    discover_agents,
    discover_commands,
    expand_command,
    load_agent,
    load_command,
    parse_agent,
    parse_command,
    substitute_arguments,
)
from journal_agent.errors import UserError
from journal_agent.paths import plugin_root

AGENT = """---
name: {name}
description: {description}
{more}---

You are a test agent.
"""


def agent_file(write, path: Path, name="helper", description="Helps.", more="") -> Path:
    return write(path, AGENT.format(name=name, description=description, more=more))


# --- agents ---------------------------------------------------------------------------------


def test_agent_fields_and_body(tmp_path, write):
    path = agent_file(
        write,
        tmp_path / "a.md",
        more=(
            "tools: Read, Grep, Bash(git diff:*)\ndisallowedTools: [Write]\nmodel: haiku\n"
            "color: blue\nmaxTurns: 7\npermissionMode: acceptEdits\nmemory: project\n"
        ),
    )
    agent = parse_agent(path)
    assert agent.name == "helper"
    assert agent.tools == ["Read", "Grep", "Bash(git diff:*)"]  # comma inside () kept
    assert agent.disallowed_tools == ["Write"]
    assert (agent.model, agent.color, agent.max_turns) == ("haiku", "blue", 7)
    assert agent.permission_mode == "acceptEdits"
    assert agent.extra == {"memory": "project"}  # unknown keys kept, not fatal
    assert agent.system_prompt == "You are a test agent."


def test_agent_defaults_inherit_model_and_all_tools(tmp_path, write):
    agent = parse_agent(agent_file(write, tmp_path / "a.md"))
    assert agent.tools is None
    assert agent.model == "inherit"


def test_tools_as_yaml_list_and_full_model_id(tmp_path, write):
    path = agent_file(
        write, tmp_path / "a.md", more="tools:\n  - Read\n  - Glob\nmodel: claude-sonnet-5-5\n"
    )
    agent = parse_agent(path)
    assert agent.tools == ["Read", "Glob"]
    assert agent.model == "claude-sonnet-5-5"


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("---\nname: ok\ndescription: Use when: x\n  Context: y\n---\nbody\n", 3, "invalid YAML"),
        ("---\ndescription: no name\n---\nbody\n", 1, "missing the required field 'name'"),
        ("---\nname: ok\n---\nbody\n", 1, "missing the required field 'description'"),
        ("---\nname: Not_Valid\ndescription: d\n---\n", 2, "lowercase"),
        ("---\nname: ok\ndescription: d\nmodel: gpt-5\n---\n", 4, "unknown model 'gpt-5'"),
        ("---\nname: ok\ndescription: d\nmaxTurns: 0\n---\n", 4, "maxTurns"),
        ("---\nname: ok\ndescription: d\n", 1, "never closed"),
    ],
)
def test_malformed_agent_names_file_and_line(tmp_path, write, text, line, needle):
    path = write(tmp_path / "broken.md", text)
    with pytest.raises(DefinitionError) as info:
        parse_agent(path)
    assert info.value.path == path
    assert info.value.line == line
    assert needle in str(info.value)
    assert str(info.value).startswith(f"{path}:{line}:")


def test_non_utf8_agent_file_is_reported_with_line(tmp_path):
    path = tmp_path / "latin.md"
    path.write_bytes(b"---\nname: ok\ndescription: caf\xe9\n---\n")
    with pytest.raises(DefinitionError) as info:
        parse_agent(path)
    assert info.value.line == 3
    assert "UTF-8" in info.value.message


# --- the bundled plugin definitions ----------------------------------------------------------


def test_bundled_agents_and_commands_load_faithfully():
    base = plugin_root()
    lj = parse_agent(base / "agents" / "learning-journal.md", "plugin")
    mcp = "mcp__plugin_journal-agent_journal__"  # how Claude Code names our MCP tools
    assert lj.tools == [
        "Read",
        "Write",
        "Edit",
        "Grep",
        "Glob",
        "Bash",
        f"{mcp}JournalAppend",
        f"{mcp}JournalSearch",
        f"{mcp}MemoryEstimate",
        f"{mcp}MemoryTrace",
        f"{mcp}MemoryProfile",
        f"{mcp}DeviceInfo",
    ]
    assert lj.model == "haiku"
    assert "## 🎓 Core Teaching Philosophy" in lj.system_prompt
    assert "┌" not in lj.system_prompt or "─" in lj.system_prompt
    to = parse_agent(base / "agents" / "training-optimization.md", "plugin")
    assert to.tools is None and to.model == "opus" and to.color == "red"
    assert "<example>" in to.description  # the examples drive delegation: kept in the description
    learn = parse_command(base / "commands" / "learn.md", "learn", "plugin")
    assert learn.description == "Record a learning insight to your personal learning journal"
    assert "β₁" in learn.body and "🧮" in learn.body
    for text in (lj.system_prompt, to.system_prompt, learn.body):
        for mojibake in ("ðŸ", "â”", "â€", "Ã", "❂", "❆"):
            assert mojibake not in text


# --- discovery -------------------------------------------------------------------------------


def test_precedence_project_over_user_over_plugin(project, home, write):
    agent_file(
        write,
        home / ".claude" / "agents" / "lj.md",
        name="learning-journal",
        description="user copy",
    )
    agent_file(
        write,
        project / ".claude" / "agents" / "x.md",
        name="learning-journal",
        description="project copy",
    )
    agent_file(write, home / ".claude" / "agents" / "mine.md", name="mine", description="user")
    found = discover_agents(project, home)
    assert found.found["learning-journal"].description == "project copy"
    assert found.found["learning-journal"].origin == "project"
    assert found.found["mine"].origin == "user"
    assert found.found["training-optimization"].origin == "plugin"
    hidden = {(h.origin, w.origin) for h, w in found.shadowed if h.name == "learning-journal"}
    assert hidden == {("user", "project"), ("plugin", "project")}


def test_commands_are_namespaced_by_subfolder(project, home, write):
    write(project / ".claude" / "commands" / "ml" / "zero.md", "Explain ZeRO stage $0.\n")
    found = discover_commands(project, home)
    zero = found.found["ml:zero"]
    assert zero.description == "Explain ZeRO stage $0."  # default: the first body line
    assert "learn" in found.found and "end-session" in found.found


def test_load_missing_names_the_candidates(project, home):
    with pytest.raises(UserError) as info:
        load_agent("nope", project, home)
    assert "learning-journal" in str(info.value)
    assert "training-optimization" in str(info.value)


def test_load_broken_reports_the_file(project, home, write):
    write(project / ".claude" / "agents" / "bad.md", "---\nname: bad\n---\nx\n")
    with pytest.raises(UserError) as info:
        load_agent("bad", project, home)
    assert "bad.md:1" in str(info.value)


# --- command expansion -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "args", "expected"),
    [
        ("Topic: $ARGUMENTS.", "ZeRO stage 2", "Topic: ZeRO stage 2."),
        ("1st $0, 2nd $1, 3rd [$2]", "alpha 'beta gamma'", "1st alpha, 2nd beta gamma, 3rd []"),
        ("$ARGUMENTS[1] then $ARGUMENTS[0]", "a b", "b then a"),
        ("No placeholder.", "fsdp", "No placeholder.\n\nARGUMENTS: fsdp\n"),
        ("No placeholder.", "", "No placeholder."),
        ("Unbalanced $0|$1", "it's fine", "Unbalanced it's|fine"),
    ],
)
def test_argument_substitution(body, args, expected):
    assert substitute_arguments(body, args) == expected


def _command(write, root: Path, text: str):
    path = write(root / ".claude" / "commands" / "c.md", text)
    return parse_command(path, "c")


def test_at_file_is_inlined_and_outside_paths_refused(project, write):
    write(project / "notes" / "zero.txt", "stage 2 shards gradients")
    cmd = _command(write, project, "Read @notes/zero.txt and mail me@example.com about @missing.md")
    text = expand_command(cmd, "", project)
    assert "stage 2 shards gradients" in text
    assert "me@example.com" in text and "@missing.md" in text  # not files: left alone
    bad = _command(write, project, "Leak @../secret.txt")
    (project.parent / "secret.txt").write_text("s3cret")
    with pytest.raises(UserError):
        expand_command(bad, "", project)


def test_bang_command_needs_allowed_tools(project, write):
    refused = _command(write, project, "Status: !`echo hello`\n")
    with pytest.raises(UserError) as info:
        expand_command(refused, "", project)
    assert "allowed-tools" in str(info.value)
    allowed = _command(
        write, project, "---\nallowed-tools: Bash(echo:*)\n---\nStatus: !`echo hello $0`\n"
    )
    assert expand_command(allowed, "world", project).strip() == "Status: hello world"
    narrow = _command(write, project, "---\nallowed-tools: Bash(git status:*)\n---\n!`rm -rf x`\n")
    with pytest.raises(UserError):
        expand_command(narrow, "", project)


def test_load_command_strips_slash(project, home):
    assert load_command("/learn", project, home).name == "learn"


# --- the CLI ---------------------------------------------------------------------------------


def test_agents_cli_lists_good_ones_despite_a_broken_file(project, home, write, cli):
    write(project / ".claude" / "agents" / "broken.md", "---\nname: Broken!\ndescription: x\n---\n")
    agent_file(
        write,
        project / ".claude" / "agents" / "lj.md",
        name="learning-journal",
        description="project copy",
        more="model: sonnet\n",
    )
    done = cli("agents", "--json", cwd=project, home=home)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    names = {a["name"]: a for a in data["agents"]}
    assert names["learning-journal"]["origin"] == "project"
    assert names["learning-journal"]["model"] == "sonnet"
    assert names["training-optimization"]["tools"] == "all"
    assert data["errors"][0]["line"] == 2 and "broken.md" in data["errors"][0]["file"]
    assert data["shadowed"][0]["origin"] == "plugin"
    strict = cli("agents", "--strict", cwd=project, home=home)
    assert strict.returncode == 1
    assert "broken.md:2" in strict.stderr and "Traceback" not in strict.stderr


def test_commands_cli_and_eject(project, home, cli):
    done = cli("commands", "--json", cwd=project, home=home)
    assert {c["name"] for c in json.loads(done.stdout)["commands"]} >= {"learn", "end-session"}
    ejected = cli("commands", "--eject", "learn", cwd=project, home=home)
    assert ejected.returncode == 0, ejected.stderr
    copy = project / ".claude" / "commands" / "learn.md"
    assert copy.read_bytes() == (plugin_root() / "commands" / "learn.md").read_bytes()
    again = cli("commands", "--json", cwd=project, home=home)
    origins = {c["name"]: c["origin"] for c in json.loads(again.stdout)["commands"]}
    assert origins["learn"] == "project"
    twice = cli("commands", "--eject", "learn", cwd=project, home=home)
    assert twice.returncode == 1 and "already exists" in twice.stderr
