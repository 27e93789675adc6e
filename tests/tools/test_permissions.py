"""Permission rules (Claude Code syntax), modes, built-in defaults and the Bash analysis."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal_agent.errors import UserError
from journal_agent.tools import make_context
from journal_agent.tools.permissions import (
    PermissionPolicy,
    parse_rule,
    rule_matches,
    rules_permit,
)
from tests.trust_helpers import approve


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the user's real ~/.claude/settings.json out of these tests."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def tree(ws: Path) -> Path:
    files = ["src/app.py", "src/deep/x.py", "secrets/token.txt", "docs/a.md", ".env",
             "config/.env.production", ".env.example", "certs/server.pem", "notes.txt"]  # fmt: skip
    for rel in files:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("x\n")
    return ws


def bash(policy: PermissionPolicy, command: str) -> str:
    return policy.check("Bash", command=command).behavior


# -- rule syntax --------------------------------------------------------------------------------


def test_parse_rule_forms() -> None:
    assert parse_rule("Bash") == ("Bash", None)
    assert parse_rule("Bash(git diff:*)") == ("Bash", "git diff:*")
    assert parse_rule("Bash(*)") == ("Bash", None)
    assert parse_rule("Read(./secrets/**)") == ("Read", "./secrets/**")
    assert parse_rule("mcp__journal__search") == ("mcp__journal__search", None)
    with pytest.raises(ValueError):
        parse_rule("Bash(unclosed")


def test_bad_rule_in_settings_is_a_user_error(ws: Path) -> None:
    (ws / ".claude").mkdir()
    (ws / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"allow": ["(x"]}}))
    approve(ws)
    with pytest.raises(UserError, match="not of the form"):
        make_context(ws)


def test_unknown_mode_is_a_user_error(ws: Path) -> None:
    with pytest.raises(UserError, match="unknown permission mode"):
        PermissionPolicy(ws, mode="yolo")


@pytest.mark.parametrize(
    ("rule", "command", "expected"),
    [
        ("Bash(npm run test)", "npm run test", True),
        ("Bash(npm run test)", "npm run test --watch", False),
        ("Bash(git diff:*)", "git diff", True),
        ("Bash(git diff:*)", "git diff --stat HEAD~1", True),
        ("Bash(git diff:*)", "git difftool", False),
        ("Bash(git diff:*)", "git status", False),
        ("Bash(ls *)", "ls -la", True),
        ("Bash(ls *)", "lsof", False),
        ("Bash(git * main)", "git push origin main", True),
        ("Bash(git * main)", "git push origin dev", False),
        ("Bash", "anything at all", True),
        # A prefix rule does not cover what is chained after the command.
        ("Bash(git diff:*)", "git diff && rm -rf /", False),
        ("Bash(git diff:*)", "git diff | head", False),
        ("Bash(git diff:*)", "git diff; git diff --stat", True),
    ],
)
def test_bash_rule_matching(rule: str, command: str, expected: bool) -> None:
    assert rule_matches(rule, "Bash", command) is expected


def test_rules_permit_covers_each_part_of_a_compound_command() -> None:
    rules = ["Bash(git status:*)", "Bash(git diff:*)"]
    assert rules_permit(rules, "Bash", "git status && git diff --stat")
    assert not rules_permit(rules, "Bash", "git status && git push")
    assert not rule_matches("Bash(git status:*)", "Bash", "git status && git diff")


@pytest.mark.parametrize(
    ("rule", "tool", "rel", "expected"),
    [
        ("Read(./secrets/**)", "Read", "secrets/token.txt", True),
        ("Read(./secrets/**)", "Read", "src/app.py", False),
        ("Read(./secrets)", "Read", "secrets/token.txt", True),  # a directory covers its files
        ("Read(/secrets/**)", "Read", "secrets/token.txt", True),  # "/x" = workspace root
        ("Read(*.pem)", "Read", "certs/server.pem", True),  # no slash: any depth
        ("Read(./*.pem)", "Read", "certs/server.pem", False),  # anchored: top level only
        ("Edit(src/**)", "Edit", "src/deep/x.py", True),
        ("Edit(src/*.py)", "Edit", "src/deep/x.py", False),  # * stays in one directory
        ("Edit(src/**/*.py)", "Edit", "src/app.py", True),  # **/ matches zero directories
        ("Edit(src/**)", "Write", "src/app.py", True),  # Edit rules cover Write
        ("Read(./src/**)", "Grep", "src/app.py", True),  # Read rules cover Grep and Glob
        ("Edit(src/**)", "Read", "src/app.py", False),
        ("Read(docs/[ab].md)", "Read", "docs/a.md", True),
        ("Read(docs/?.md)", "Read", "docs/a.md", True),
    ],
)
def test_path_rule_matching(tree: Path, rule: str, tool: str, rel: str, expected: bool) -> None:
    assert rule_matches(rule, tool, str(tree / rel), root=tree) is expected


def test_absolute_and_home_rule_forms(tmp_path: Path, _home: Path) -> None:
    (_home / ".ssh").mkdir()
    key = _home / ".ssh" / "id"
    key.write_text("k")
    assert rule_matches("Read(~/.ssh/**)", "Read", str(key))
    assert rule_matches(f"Read(/{tmp_path}/**)", "Read", str(key))  # "//abs" form
    assert not rule_matches("Read(//nowhere/**)", "Read", str(key))


# -- precedence ---------------------------------------------------------------------------------


def test_deny_beats_ask_beats_allow(tree: Path) -> None:
    p = PermissionPolicy(
        tree,
        mode="bypassPermissions",
        allow=["Read", "Bash(git:*)"],
        ask=["Bash(git push:*)"],
        deny=["Read(./secrets/**)", "Bash(git push --force:*)"],
    )
    assert not p.check("Read", path=tree / "secrets/token.txt").allowed
    assert "Read(./secrets/**)" in p.check("Read", path=tree / "secrets/token.txt").reason
    assert bash(p, "git push --force origin") == "deny"
    strict = PermissionPolicy(tree, allow=["Bash(git:*)"], ask=["Bash(git push:*)"])
    assert bash(strict, "git push origin") == "deny"  # ask, and nobody to ask
    assert "remove that ask rule" in strict.check("Bash", command="git push origin").reason
    assert bash(strict, "git commit -m x") == "allow"


def test_ask_goes_to_the_prompt(tree: Path) -> None:
    asked: list[tuple[str, str]] = []

    def yes(tool: str, subject: str) -> bool:
        asked.append((tool, subject))
        return True

    p = PermissionPolicy(tree, prompt=yes)
    assert p.check("Bash", command="touch new.txt").allowed
    assert asked == [("Bash", "touch new.txt")]
    no = PermissionPolicy(tree, prompt=lambda tool, subject: False)
    decision = no.check("Edit", path=tree / "notes.txt")
    assert not decision.allowed and "refused by the user" in decision.reason


def test_ask_without_prompt_denies_and_says_which_rule_to_add(tree: Path) -> None:
    decision = PermissionPolicy(tree).check("Bash", command="git commit -m wip")
    assert not decision.allowed
    assert "Bash(git commit:*)" in decision.reason
    decision = PermissionPolicy(tree).check("Edit", path=tree / "src/app.py")
    assert "Edit(./src/app.py)" in decision.reason
    # The suggestion names the part that needs it, not a read-only or already allowed one.
    policy = PermissionPolicy(tree, allow=["Bash(git diff:*)"])
    decision = policy.check("Bash", command="ls && git diff && npm install")
    assert "add the allow rule Bash(npm install:*)" in decision.reason
    assert policy.check("Bash", command="ls && git diff && npm install").allowed is False
    policy = PermissionPolicy(tree, allow=["Bash(git diff:*)", "Bash(npm install:*)"])
    assert policy.check("Bash", command="ls && git diff && npm install").allowed


# -- modes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "read", "edit", "bash_ro", "bash_rw"),
    [
        ("default", "allow", "deny", "allow", "deny"),  # deny = ask with no one to ask
        ("acceptEdits", "allow", "allow", "allow", "deny"),
        ("plan", "allow", "deny", "deny", "deny"),
        ("dontAsk", "allow", "deny", "deny", "deny"),
        ("bypassPermissions", "allow", "allow", "allow", "allow"),
    ],
)
def test_modes(tree: Path, mode: str, read: str, edit: str, bash_ro: str, bash_rw: str) -> None:
    p = PermissionPolicy(tree, mode=mode)
    assert p.check("Read", path=tree / "src/app.py").behavior == read
    assert p.check("Edit", path=tree / "src/app.py").behavior == edit
    assert p.check("Write", path=tree / "new.py").behavior == edit
    assert bash(p, "git status") == bash_ro
    assert bash(p, "rm -rf src") == bash_rw


def test_plan_mode_allows_bash_only_through_an_allow_rule(tree: Path) -> None:
    p = PermissionPolicy(tree, mode="plan", allow=["Bash(git log:*)", "Edit"])
    assert bash(p, "git log --oneline") == "allow"
    assert bash(p, "ls") == "deny"
    assert "plan mode" in p.check("Bash", command="ls").reason
    # Plan mode is read-only even against an Edit allow rule.
    assert not p.check("Edit", path=tree / "src/app.py").allowed


def test_accept_edits_runs_simple_file_commands(tree: Path) -> None:
    p = PermissionPolicy(tree, mode="acceptEdits")
    assert bash(p, "mkdir -p build && touch build/x") == "allow"
    assert bash(p, "rm build/x") == "deny"


def test_mode_and_rules_come_from_settings_and_cli(tree: Path, _home: Path) -> None:
    (tree / ".claude").mkdir()
    (tree / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["Bash(make:*)"], "defaultMode": "plan"}})
    )
    (tree / ".journal").mkdir()
    (tree / ".journal" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Read(./docs/**)"]}})
    )
    (_home / ".claude").mkdir()
    (_home / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["Bash(cargo build)"]}})
    )
    approve(tree)
    ctx = make_context(tree)
    assert ctx.policy.mode == "plan"
    assert bash(ctx.policy, "make test") == "allow"
    assert bash(ctx.policy, "cargo build") == "allow"
    assert not ctx.policy.check("Read", path=tree / "docs/a.md").allowed
    ctx = make_context(tree, mode="acceptEdits", deny=["Bash(make:*)"], allow=["Read(./.env)"])
    assert ctx.policy.mode == "acceptEdits"
    assert bash(ctx.policy, "make test") == "deny"
    assert ctx.policy.check("Read", path=tree / ".env").allowed


# -- built-in defaults ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel", [".env", "config/.env.production", "certs/server.pem", "a/id_rsa", ".aws/credentials"]
)
def test_secrets_are_not_readable_by_default(tree: Path, rel: str) -> None:
    p = PermissionPolicy(tree, mode="bypassPermissions")
    decision = p.check("Read", path=tree / rel)
    assert not decision.allowed and "secret" in decision.reason
    assert bash(p, f"cat {rel}") == "deny"


def test_an_allow_rule_lifts_the_secret_default(tree: Path) -> None:
    assert not PermissionPolicy(tree, allow=["Read"]).check("Read", path=tree / ".env").allowed
    both = PermissionPolicy(tree, allow=["Read", "Read(./.env)"])
    assert both.check("Read", path=tree / ".env").allowed
    p = PermissionPolicy(tree, allow=["Read(./.env)"])
    assert p.check("Read", path=tree / ".env").allowed
    assert not p.check("Read", path=tree / "config/.env.production").allowed
    assert p.check("Read", path=tree / ".env.example").allowed  # examples are not secrets


def test_settings_files_are_not_edited_without_approval(tree: Path) -> None:
    p = PermissionPolicy(tree, mode="acceptEdits")
    assert not p.check("Edit", path=tree / ".claude/settings.json").allowed
    assert p.check("Edit", path=tree / "src/app.py").allowed


@pytest.mark.parametrize(
    "command",
    [
        "sudo ls",
        "ls && sudo rm -rf /",
        "cat /etc/passwd",
        "cd / && ls",
        "cd .. && ls",
        "ls ..",
        "cd src && cat ../../outside.txt",
        "cd src | cat ../x",  # the cd does not carry over a pipe: ../x is above the root
        "ls ~",
        "ls ~/x",
        "cat $HOME/.bashrc",
        "cd",
        "cd -",
        "echo hi > /tmp/x",
        "cp notes.txt /tmp/",
        "FOO=/etc ls",
        "grep -r x --include=/etc/x .",
        "bash -c 'cat /etc/passwd'",
        'sh -c "cd / && ls"',
        "eval cat /etc/shadow",
        "python -c \"open('/etc/passwd').read()\"",
        "ls | xargs cat /etc/hosts",
        'echo "unterminated',
        "cat `echo /etc/passwd`",
        "cat $(echo /etc/passwd)",
        "",
        "env sudo ls",
        "env FOO=1 sudo ls",
        "nice -n 5 sudo ls",
        "exec sudo ls",
        "setsid sudo ls",
        "ls | xargs sudo rm",
        "find . -exec sudo rm {} +",
    ],
)
def test_bash_outside_the_workspace_privileges_and_garbage_are_denied(
    tree: Path, command: str
) -> None:
    p = PermissionPolicy(tree, mode="bypassPermissions")
    assert bash(p, command) == "deny", p.check("Bash", command=command)


def test_a_symlink_leading_out_is_outside(tree: Path, outside: Path) -> None:
    os.symlink(outside, tree / "link")
    p = PermissionPolicy(tree, mode="bypassPermissions")
    assert bash(p, "cat link/secret.txt") == "deny"
    assert "outside the workspace" in p.check("Bash", command="cat link/secret.txt").reason


def test_an_allow_rule_lifts_the_outside_default_only_by_naming_the_path(tree: Path) -> None:
    rules = ["Bash(cat /etc/hostname)", "Bash(git diff:*)", "Bash(echo:*)",
             "Bash(sudo apt-get update)", "Bash"]  # fmt: skip
    p = PermissionPolicy(tree, allow=rules)
    assert bash(p, "cat /etc/hostname") == "allow"
    assert bash(p, "cat /etc/passwd") == "deny"
    assert bash(p, "git diff --stat") == "allow"
    assert bash(p, "git diff --no-index /etc/passwd x") == "deny"
    assert bash(p, "echo pwned > /etc/profile") == "deny"  # a redirect is a path too
    assert bash(p, "echo fine > notes.txt") == "allow"
    assert bash(p, "sudo apt-get update") == "allow"
    assert bash(p, "sudo rm -rf /") == "deny"
    assert bash(p, "cat .env") == "deny"  # secrets: lifted by a Read rule, not by Bash


def test_read_deny_rules_apply_to_bash_paths(tree: Path) -> None:
    p = PermissionPolicy(tree, mode="bypassPermissions", deny=["Read(./secrets/**)"])
    assert bash(p, "cat secrets/token.txt") == "deny"
    assert bash(p, "cd secrets && cat token.txt") == "deny"
    assert bash(p, "cat notes.txt") == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "cat src/app.py | wc -l",
        "git status",
        "git --no-pager log --oneline -5",
        "git diff HEAD~1 -- src",
        "rg -n TODO src",
        "find . -name '*.py'",
        "head -5 notes.txt && tail -2 notes.txt",
        "python -c 'import sys; print(sys.version)'",
        "ls > /dev/null 2>&1",
        "cd src && ls deep",
        "/usr/bin/ls src",
        "pip list",
        "git branch -a",
    ],
)
def test_read_only_commands_run_without_asking(tree: Path, command: str) -> None:
    assert bash(PermissionPolicy(tree), command) == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "rm notes.txt",
        "echo x > notes.txt",
        "cat notes.txt >> other.txt",
        "find . -delete",
        "find . -exec rm {} +",
        "sort -o out.txt notes.txt",
        "git commit -m x",
        "git branch new-branch",
        "git -C src status",
        "python script.py",
        "python -c \"import os; os.remove('notes.txt')\"",
        "python -c \"open('x', 'w').write('y')\"",
        "ls $(touch pwned)",
        "echo $SECRET_VAR",
        "tee out.txt",
        "(cd src)|rm -rf deep",  # ")|" glued by the lexer must still split the commands
        "ls&&(rm notes.txt)",
        "ls && npm install",
        # Listed "read-only" commands whose options run a program or write a file.
        "rg --pre rm TODO src",
        "rg --pre=sh TODO src",
        "git grep -Otouch TODO",
        "git grep --open-files-in-pager=rm TODO",
        "sort --compress-program=sh notes.txt",
        "tree -o listing.txt",
        "uniq notes.txt out.txt",
        "date -s 2020-01-01",
        "hostname evil",
        "nvidia-smi -pm 1",
        "file -C -m magic",
    ],
)
def test_commands_that_may_change_things_need_approval(tree: Path, command: str) -> None:
    decision = PermissionPolicy(tree).check("Bash", command=command)
    assert not decision.allowed and "needs approval" in decision.reason


def test_other_tools_are_allowed_unless_a_rule_says_otherwise(tree: Path) -> None:
    p = PermissionPolicy(tree, deny=["mcp__profiling__run"])
    assert p.check("mcp__journal__search").allowed
    assert not p.check("mcp__profiling__run").allowed


def test_search_filter_hides_secrets_and_denied_paths(tree: Path) -> None:
    visible = PermissionPolicy(tree).search_filter("Grep")
    assert not visible(".env") and not visible("certs/server.pem") and visible("src/app.py")
    ruled = PermissionPolicy(tree, deny=["Read(./src/deep/**)"]).search_filter(
        "Glob", secrets=False
    )
    assert ruled is not None
    assert ruled(".env") and not ruled("src/deep/x.py") and ruled("src/app.py")
    assert PermissionPolicy(tree).search_filter("Glob", secrets=False) is None


# -- property: no path a Bash command names escapes the workspace unless a rule allows it ----------

SEGMENTS = ["..", ".", "src", "deep", "link", "é", "x y", "~", "", "etc", "-", "$HOME", "*"]


@st.composite
def hostile_paths(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=6))
    lead = draw(st.sampled_from(["", "/", "./", "~/", "//", "../"]))
    return lead + "/".join(parts)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=hostile_paths(), second=hostile_paths(), op=st.sampled_from(["&&", ";", "|", "||"]))
def test_no_allowed_bash_command_names_a_path_outside(
    tree: Path, outside: Path, first: str, second: str, op: str
) -> None:
    if not (tree / "link").exists():
        os.symlink(outside, tree / "link")
    policy = PermissionPolicy(tree, mode="bypassPermissions")
    command = f"cd {shlex.quote(first)} {op} cat {shlex.quote(second)}"
    if not policy.check("Bash", command=command).allowed:
        return
    # Independently resolve what bash would touch; all of it must be inside. ("cat -" reads
    # stdin; "cd -" goes to an unknown directory.)
    for cwd_word, word in ((".", first), (first, second)):
        for candidate in (tree / cwd_word / word, tree / word):
            if word.startswith(("$HOME", "~")) or (word == "-" and cwd_word == "."):
                pytest.fail(f"allowed an unresolvable word: {command}")
            if "$" in word:
                continue  # other expansions are opaque: bypassPermissions lets them run
            real = Path(os.path.realpath(candidate))
            if not (real == tree or tree in real.parents):
                pytest.fail(f"allowed {command!r}, which reaches {real}")


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["ls", "cat", "rm", "cd", "sudo", "git", "diff", "echo", "python", "-c",
                             "..", "/", "~", "$HOME", "src", ".env", "'", '"', "`", "$(", ")",
                             "(", "|", "||", "&", "&&", ";", "\n", ">", ">>", "<", "2>&1", "<<",
                             "*", "\\", "#", "=", "x=/etc"]),
            st.text(max_size=6),
        ),
        max_size=12,
    )
)  # fmt: skip
def test_any_command_line_gets_a_decision(tree: Path, tokens: list[str]) -> None:
    command = " ".join(tokens)
    for mode in ("default", "bypassPermissions"):
        decision = PermissionPolicy(tree, mode=mode).check("Bash", command=command)
        assert decision.behavior in ("allow", "deny") and decision.reason


@pytest.mark.parametrize(
    ("command", "runs_unasked"),
    [
        ("journal-agent journal append --file .journal/drafts/zero.md", True),
        ("journal-agent estimate --model llama-7b --gpus 2 --zero 2 --json", True),
        ("python -m journal_agent journal search 'optimizer states'", True),
        ("journal-agent journal check --json", True),
        # Runs a user's factory (arbitrary code), rewrites the journal, or calls a model: not these.
        ("journal-agent trace --model mypkg.models:build", False),
        ("journal-agent journal repair", False),
        ("journal-agent run learning-journal hi", False),
        ("journal-agent commands --eject learn", False),
        ("journal-agent estimate --model llama-7b > /tmp/out.txt", False),
        ("journal-agent journal append --file $DRAFT", False),
    ],
)
def test_own_journal_and_estimate_commands_run_without_asking(ws: Path, command, runs_unasked):
    policy = make_context(ws).policy  # no terminal: anything not allowed outright is denied
    assert (bash(policy, command) == "allow") is runs_unasked


def test_rg_pre_in_default_mode_does_not_run_a_program_on_every_file(tree: Path) -> None:
    # `rg --pre CMD` runs CMD on each searched file: `rg --pre rm x` would delete them all.
    from journal_agent.tools.base import ToolContext
    from journal_agent.tools.bash import Bash

    before = sorted(p.name for p in tree.rglob("*"))
    ctx = ToolContext(root=tree, policy=PermissionPolicy(tree))
    result = Bash().call(ctx, {"command": "rg --pre rm zzz src"})
    assert result.is_error and "needs approval" in result.content
    assert sorted(p.name for p in tree.rglob("*")) == before
    assert bash(PermissionPolicy(tree), "rg -n --pre-glob '*.gz' TODO src") == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "grep -r x .",
        "grep -rn x",
        "grep -R x certs",
        "egrep --recursive x .",
        "rg x",
        "rg -uu x",
        "rg --hidden x config",
        "cd src && grep -r x ..",
        "head .e*",
        "cat .en?",
        "cat certs/*",
        "grep x */*.pem",
        "git show HEAD:.env",
        "git cat-file -p main:certs/server.pem",
    ],
)
def test_recursive_searches_and_globs_do_not_read_secrets(tree: Path, command: str) -> None:
    decision = PermissionPolicy(tree, mode="bypassPermissions").check("Bash", command=command)
    assert not decision.allowed, command
    assert "secret" in decision.reason, decision.reason


@pytest.mark.parametrize(
    "command",
    [
        "grep -rn x src",
        "rg x src docs",
        "rg -n x notes.txt",
        "ls *",
        "cat src/*.py",
        "git show HEAD:src/app.py",
        "git log --since=12:00",
    ],
)
def test_recursive_searches_and_globs_without_secrets_run(tree: Path, command: str) -> None:
    assert bash(PermissionPolicy(tree), command) == "allow", command


def test_a_read_allow_rule_lets_a_recursive_search_read_that_secret(tree: Path) -> None:
    policy = PermissionPolicy(tree, allow=["Read(./certs/**)"])
    assert bash(policy, "grep -r x certs") == "allow"
    assert "secret" in policy.check("Bash", command="grep -r x .").reason  # .env still


def test_git_rev_path_of_a_secret_is_lifted_by_a_read_allow_rule(tree: Path) -> None:
    assert bash(PermissionPolicy(tree), "git show HEAD:.env") == "deny"
    assert bash(PermissionPolicy(tree, allow=["Read(./.env)"]), "git show HEAD:.env") == "allow"
