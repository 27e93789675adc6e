"""The journal speaks when its code is touched (#33): PostToolUse on Read, Edit, Write and Grep
names the entries that explain the lines touched, with their state, once per session; an edit
that changes cited lines says so and leaves a revise moment; a clone's journal stays silent
until the project is approved. Real files, the real CLI's journal append, the hook as a
process under ``python3 -I -S``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.capture.hook_helpers import run_hook
from tests.entries import render_entry
from tests.trust_helpers import approve, approve_on_terminal

ENTRY = "adamw-keeps-two-states-2026-11-20"
AT = {"offset": 2, "limit": 3}  # a Read of the lines around the cited one (2-4)
TRAIN = "".join(f"line {n}\n" for n in range(1, 9)).replace(
    "line 3\n", "opt = AdamW(params, lr=3e-4)\n"
)


@pytest.fixture
def project(tmp_path: Path, cli) -> Path:
    return make_project(tmp_path, cli)


def make_project(tmp_path: Path, cli) -> Path:
    """src/train.py and one entry citing its line 3."""
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text(TRAIN)
    entry = render_entry(
        "AdamW Keeps Two States", "2026-11-20", context="Sizing the optimizer.",
        question="Why 8 bytes per parameter?",
        intuition="AdamW keeps two fp32 states per parameter (src/train.py:3).", tags="#memory",
    )  # fmt: skip
    done = cli("journal", "append", "-", "--root", str(root), input=entry)
    assert done.returncode == 0, done.stderr
    return root


def post(root: Path, tool: str, tool_input: dict, response: dict | None = None, session="s1",
         env=None) -> str:  # fmt: skip
    payload = {
        "session_id": session, "hook_event_name": "PostToolUse", "cwd": str(root),
        "tool_name": tool, "tool_input": tool_input, "tool_response": response or {},
    }  # fmt: skip
    done = run_hook("PostToolUse", payload, root, env=env)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    if not done.stdout:
        return ""
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PostToolUse"
    return out["additionalContext"]


def test_a_read_of_cited_lines_names_the_entry_once_per_session(project):
    path = str(project / "src" / "train.py")
    # The whole file read (8 lines, the cited one an eighth of them) is not a look at it.
    assert post(project, "Read", {"file_path": path}, session="whole") == ""
    said = post(project, "Read", {"file_path": path, **AT})
    # The id says the title (its slug): the title is not said twice.
    assert said == f"src/train.py:3 (fresh) is explained by journal-agent journal show {ENTRY}"
    assert tokens(said) <= 40
    assert post(project, "Read", {"file_path": path, **AT}) == ""  # once per session
    assert ENTRY in post(project, "Read", {"file_path": path, **AT}, session="s2")
    # Lines that do not hold the cited one say nothing.
    assert post(project, "Read", {"file_path": path, "offset": 5, "limit": 3}, session="s3") == ""
    assert ENTRY in post(project, "Read", {"file_path": path, "offset": 2, "limit": 2},
                           session="s4")  # fmt: skip
    # A file outside the workspace, or one no entry cites, says nothing.
    assert post(project, "Read", {"file_path": "/etc/hostname"}, session="s5") == ""
    (project / "src" / "other.py").write_text("x = 1\n")
    assert post(project, "Read", {"file_path": str(project / "src/other.py")}, session="s6") == ""


def test_moved_and_changed_lines_are_said_as_they_are_now(project):
    path = project / "src" / "train.py"
    path.write_text("import os\nimport sys\n" + TRAIN)
    assert "(moved to line 5)" in post(project, "Read", {"file_path": str(path), **AT})
    path.write_text(TRAIN.replace("3e-4", "1e-3"))
    assert "src/train.py:3 (changed)" in post(
        project, "Read", {"file_path": str(path), **AT}, session="b"
    )


def test_an_edit_that_changes_cited_lines_says_so_and_leaves_a_revise_moment(project):
    path = project / "src" / "train.py"
    assert ENTRY in post(project, "Read", {"file_path": str(path), **AT})  # named once already
    path.write_text(TRAIN.replace("3e-4", "1e-3"))
    patch = [{"oldStart": 1, "oldLines": 6, "newStart": 1, "newLines": 6, "lines": [
        " line 1", " line 2", "-opt = AdamW(params, lr=3e-4)", "+opt = AdamW(params, lr=1e-3)",
        " line 4", " line 5", " line 6"]}]  # fmt: skip
    said = post(project, "Edit", {"file_path": str(path), "old_string": "3e-4",
                                  "new_string": "1e-3"}, {"structuredPatch": patch})  # fmt: skip
    assert said == (
        f"your edit changed src/train.py:3, explained by journal-agent journal show {ENTRY}"
    )
    again = {"structuredPatch": patch}
    assert post(project, "Edit", {"file_path": str(path)}, again) == ""  # said once
    moments = [json.loads(x) for x in (project / ".journal/inbox.jsonl").read_text().splitlines()]
    revise = [m for m in moments if m.get("kind") == "revise"]
    assert len(revise) == 1 and revise[0]["entry"] == "adamw-keeps-two-states-2026-11-20"
    assert revise[0]["files"] == [{"path": "src/train.py", "lines": [[3, 3]]}]
    # An edit of other lines of the file names nothing (the context lines do not count).
    far = [{"oldStart": 5, "oldLines": 4, "newStart": 5, "newLines": 4, "lines": [
        " line 5", " line 6", "-line 7", "+line seven", " line 8"]}]  # fmt: skip
    assert post(project, "Edit", {"file_path": str(path)}, {"structuredPatch": far}, "c") == ""


def test_a_grep_hit_on_cited_lines_names_the_entry(project):
    content = f"{project}/src/train.py:3:opt = AdamW(params, lr=3e-4)"
    said = post(project, "Grep", {"pattern": "AdamW", "output_mode": "content"},
                {"mode": "content", "content": content})  # fmt: skip
    assert "src/train.py:3 (fresh)" in said
    assert post(project, "Grep", {"pattern": "x"}, {"content": "src/train.py:7:line 7"}, "d") == ""


def test_a_read_names_an_entry_only_when_its_lines_are_a_share_of_what_was_read(project):
    path = str(project / "src" / "train.py")
    window = lambda offset, limit, s: post(  # noqa: E731
        project, "Read", {"file_path": path, "offset": offset, "limit": limit}, session=s
    )
    assert window(1, 8, "a") == ""  # one line of eight: reading around it, not at it
    assert window(1, 5, "b") == ""  # one of five
    assert "src/train.py:3 (fresh)" in window(1, 4, "c")  # one of four: a quarter
    # A window past the end counts the lines there are: offset 2 of an 8-line file shows 7.
    assert window(2, 2000, "d") == ""
    # A file of four lines read whole: the cited line is a quarter of it.
    (project / "src" / "train.py").write_text(TRAIN.split("line 5")[0])
    assert ENTRY in post(project, "Read", {"file_path": path}, session="e")


def test_an_entry_whose_newest_references_left_the_lines_read_is_not_named(project):
    """The lines passed over unparsed (their keys not read) are the newest: the entry's older
    line, which still cites the lines read, is stale and names nothing."""
    refs = project / ".journal" / "refs.jsonl"
    line = json.loads(refs.read_text().splitlines()[-1])
    (anchor,) = line["anchors"].values()
    line["anchors"] = {"src/train.py:7": anchor}
    with refs.open("a") as f:
        f.write(json.dumps(line) + "\n")
    path = str(project / "src" / "train.py")
    assert post(project, "Read", {"file_path": path, **AT}) == ""  # line 3: cited no more
    assert "src/train.py:7" in post(project, "Read", {"file_path": path, "offset": 6, "limit": 3})


def test_a_session_is_told_of_twenty_entries_at_most(project):
    spoken = project / ".journal" / "capture" / "spoken.txt"
    spoken.parent.mkdir(parents=True, exist_ok=True)
    spoken.write_text("".join(f"s1 other-entry-{n}-2026-11-01\n" for n in range(19)))
    path = str(project / "src" / "train.py")
    assert ENTRY in post(project, "Read", {"file_path": path, **AT}, session="s1")  # the 20th
    with spoken.open("a") as f:
        f.write("s2 " + "\ns2 ".join(f"other-entry-{n}-2026-11-01" for n in range(20)) + "\n")
    assert post(project, "Read", {"file_path": path, **AT}, session="s2") == ""  # 21st: not said
    # An edit that changes its lines is said all the same (it leaves a revise moment).
    (project / "src" / "train.py").write_text(TRAIN.replace("3e-4", "1e-3"))
    patch = [{"oldStart": 3, "oldLines": 1, "newStart": 3, "newLines": 1, "lines": [
        "-opt = AdamW(params, lr=3e-4)", "+opt = AdamW(params, lr=1e-3)"]}]  # fmt: skip
    said = post(project, "Edit", {"file_path": path}, {"structuredPatch": patch}, session="s2")
    assert "your edit changed src/train.py:3" in said


def test_a_tool_call_names_three_entries_at_most_newest_first_the_rest_later(project, cli):
    """Five entries explain line 3: a Read of it names the three newest, one line each; the
    next look at it in the session names the other two (once per entry per session)."""
    for n in range(1, 5):
        entry = render_entry(
            f"Optimizer Line Note {'ABCD'[n - 1]}", f"2026-11-2{n}", context=f"Note {n}.",
            question=f"What else, {n}?", intuition=f"A distinct remark {n} (src/train.py:3).",
            tags=f"#n{n}",
        )  # fmt: skip
        done = cli("journal", "append", "-", "--force", "--root", str(project), input=entry)
        assert done.returncode == 0, done.stderr
    path = str(project / "src" / "train.py")
    first = post(project, "Read", {"file_path": path, **AT}).splitlines()
    assert [line.rsplit(" ", 1)[-1] for line in first] == [
        f"optimizer-line-note-{c}-2026-11-2{n}" for n, c in ((4, "d"), (3, "c"), (2, "b"))
    ]
    second = post(project, "Read", {"file_path": path, **AT}).splitlines()
    assert [line.rsplit(" ", 1)[-1] for line in second] == [
        "optimizer-line-note-a-2026-11-21",
        ENTRY,
    ]
    assert post(project, "Read", {"file_path": path, **AT}) == ""


def test_a_grep_that_finds_many_lines_names_nothing(project):
    hit = f"{project}/src/train.py:3:opt = AdamW(params, lr=3e-4)"
    others = [f"{project}/src/train.py:{n}:line {n}" for n in (1, 2, 4, 5, 6, 7, 8)]
    focused = "\n".join([hit, *others[:2]])
    said = post(project, "Grep", {"pattern": "."}, {"content": focused}, session="a")
    assert ENTRY in said
    survey = "\n".join([hit, *others, *(f"{project}/src/b.py:{n}:x" for n in range(1, 4))])
    assert post(project, "Grep", {"pattern": "."}, {"content": survey}, session="b") == ""


def test_a_write_names_the_entries_whose_lines_it_changed(project):
    path = project / "src" / "train.py"
    new = TRAIN.replace("line 7", "line seven")
    path.write_text(new)
    far = [{"oldStart": 4, "oldLines": 5, "newStart": 4, "newLines": 5, "lines": [
        " line 4", " line 5", " line 6", "-line 7", "+line seven", " line 8"]}]  # fmt: skip
    given = {"file_path": str(path), "content": new}
    done = {"type": "update", "filePath": str(path), "structuredPatch": far, "originalFile": TRAIN}
    assert post(project, "Write", given, done, session="a") == ""
    # Without the hunks (our runtime's Write) the whole file counts as written.
    assert ENTRY in post(project, "Write", given, {}, session="b")
    # Our runtime's Edit gives only its input: the lines its new_string holds now.
    edit = {"file_path": str(path), "old_string": "line 7", "new_string": "line seven"}
    assert post(project, "Edit", edit, {}, session="c") == ""
    edit = {"file_path": str(path), "old_string": "line 2\nopt", "new_string": "line two\nopt"}
    path.write_text(new.replace("line 2\n", "line two\n"))
    assert ENTRY in post(project, "Edit", edit, {}, session="d")


def tokens(text: str) -> int:
    """cl100k tokens, as benchmarks/bench_touch_replay.py counts them."""
    from journal_agent.tokenizer import encoding

    return len(encoding().encode(text))


@pytest.mark.parametrize("folder", ["src", "src/models/optimizers/adaptive_moment_estimation"])
def test_a_long_title_and_path_keep_a_line_to_40_tokens_and_the_command_whole(
    tmp_path, cli, folder
):
    root = tmp_path / "proj"
    (root / folder).mkdir(parents=True)
    rel = f"{folder}/optimizer_states_and_their_memory.py"
    (root / rel).write_text(TRAIN)
    title = "AdamW Keeps Two Full Precision States Per Parameter Beside The Weights, Always"
    short = "Warm-up Counts Steps"
    for name, cited, said in ((title, "2-4", "Two states"), (short, "5-6", "Steps, not epochs")):
        entry = render_entry(
            name, "2026-11-20", context=f"{name}.", question=f"{said}?",
            intuition=f"{said} ({rel}:{cited}).", tags="#memory",
        )  # fmt: skip
        assert cli("journal", "append", "-", "--root", str(root), input=entry).returncode == 0
    said = post(root, "Read", {"file_path": str(root / rel), "offset": 2, "limit": 5})
    lines = said.split("\n")
    assert len(lines) == 2 and all(tokens(line) <= 40 for line in lines), said
    named = {}
    for line in lines:
        # The command is whole and opens the entry; the lines and their state are always said.
        entry_id = line.rpartition("journal-agent journal show ")[2]
        shown = cli("journal", "show", entry_id, "--root", str(root))
        assert shown.returncode == 0, line
        named[shown.stdout.partition(" (")[0].removeprefix("## ")] = line
        assert "(fresh) is explained by journal-agent journal show" in line
    assert set(named) == {title, short}
    # The short title's id says it all, and the file's name fits; the long id (its title's
    # slug cut at 60 characters) takes the room of the folders, and of the file's name when
    # that would pass 40 tokens: the lines are said all the same.
    assert named[short].startswith(("src/", "…")) and "memory.py:5-6 (fresh)" in named[short]
    assert '"' not in named[short] and "2-4 (fresh)" in named[title]
    # An edit of the long title's lines says so within the same 40 tokens.
    path = root / rel
    path.write_text(TRAIN.replace("line 2", "line two"))
    patch = [{"oldStart": 2, "oldLines": 1, "newStart": 2, "newLines": 1,
              "lines": ["-line 2", "+line two"]}]  # fmt: skip
    said = post(root, "Edit", {"file_path": str(path)}, {"structuredPatch": patch}, session="e")
    assert said.startswith("your edit changed ") and tokens(said) <= 40, said
    assert cli("journal", "show", said.rpartition(" ")[2], "--root", str(root)).returncode == 0


def _adamw_with_its_own_id(tmp_path, cli):
    """A project whose journal holds one entry citing src/train.py:3 under an id that does not
    say its title."""
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text(TRAIN)
    entry = render_entry(
        "AdamW Keeps Two States", "2026-11-20", context="Sizing the optimizer.",
        question="Why 8 bytes?", intuition="Two states (src/train.py:3).", tags="#memory",
    ).replace("\n", "\n<!-- entry: adamw-2026-11-20 -->\n", 1)  # fmt: skip
    assert cli("journal", "append", "-", "--root", str(root), input=entry).returncode == 0
    return root


def test_an_id_that_does_not_say_the_title_brings_the_title(tmp_path, cli):
    """A retitled entry keeps its id (ids are stable): the line says the title beside it."""
    root = _adamw_with_its_own_id(tmp_path, cli)
    said = post(root, "Read", {"file_path": str(root / "src" / "train.py"), **AT})
    assert said == (
        'src/train.py:3 (fresh) is explained by "AdamW Keeps Two States": journal-agent journal'
        " show adamw-2026-11-20"
    )
    assert tokens(said) <= 40


def test_titles_come_from_the_index_titles_file_only_while_it_is_of_the_journal_there(
    tmp_path, cli
):
    """The hooks read titles from .journal/titles.tsv (no sqlite3), written by the index for
    the journal as it was; another hand's edit of the journal makes it stale, and a link
    planted there is never followed: the title is then read as before (the index, else the
    journal's headings)."""
    root = _adamw_with_its_own_id(tmp_path, cli)
    cli("journal", "search", "x", "--root", str(root), env={"JOURNAL_AGENT_EMBEDDING_MODEL": "off"})
    titles = root / ".journal" / "titles.tsv"
    assert "adamw-2026-11-20\tAdamW Keeps Two States\n" in titles.read_text()
    read = {"file_path": str(root / "src" / "train.py"), **AT}
    assert '"AdamW Keeps Two States"' in post(root, "Read", read)
    # The file is what the hook reads: a title changed in it (size and mtime kept) is said.
    stat = titles.stat()
    titles.write_text(titles.read_text().replace("AdamW Keeps", "AdamW Holds"))
    os.utime(titles, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert '"AdamW Holds Two States"' in post(root, "Read", read, session="s2")
    # Another hand retitles the entry; without the index the heading is read: the new title.
    journal = root / "learning_journal.md"
    journal.write_text(journal.read_text().replace("## AdamW Keeps", "## Why AdamW Keeps"))
    for stale in root.joinpath(".journal").glob("index.sqlite*"):
        stale.unlink()
    assert '"Why AdamW Keeps Two States"' in post(root, "Read", read, session="s3")
    # A titles file that is a link, even to one of the journal as it is, is not read.
    cli("journal", "search", "x", "--root", str(root), env={"JOURNAL_AGENT_EMBEDDING_MODEL": "off"})
    forged = tmp_path / "forged.tsv"
    forged.write_text(titles.read_text().replace("Why AdamW", "Forged"))
    titles.unlink()
    titles.symlink_to(forged)
    assert '"Why AdamW Keeps Two States"' in post(root, "Read", read, session="s4")
    # An index in line with the journal but no titles file (one made before there was any):
    # the detached child SessionStart and SessionEnd start writes it from the index.
    titles.unlink()
    assert run_hook("refresh", b"", root).returncode == 0
    assert "adamw-2026-11-20\tWhy AdamW Keeps Two States\n" in titles.read_text()
    head = titles.read_text().split("\n")[0].split()
    assert head[-2:] == [str(journal.stat().st_size), str(journal.stat().st_mtime_ns)]


def test_the_hooks_token_count_is_never_under_the_real_one():
    """cost() decides what a line gives way to keep to 40 tokens: on lines made of every path
    of this repository and ids made of its file names, it never counts fewer than cl100k."""
    from journal_agent.capture.touch_line import cost

    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True,
                           cwd=Path(__file__).parents[2]).stdout.split()  # fmt: skip
    ids = [
        "-".join(" ".join(files[i : i + 6]).replace("/", " ").replace(".", " ").split())[:60]
        + "-2026-11-20"
        for i in range(0, len(files), 6)
    ]
    lines = [
        f"{path}:{n}-{n + 7} (moved to line {n * 3}) is explained by journal-agent journal show "
        + ids[n % len(ids)]
        for n, path in enumerate(files)
    ]
    under = [s for s in [*files, *ids, *lines] if cost(s) < tokens(s)]
    assert not under, under[:5]


def test_a_cloned_journal_stays_silent_until_the_project_is_approved(project):
    path = str(project / "src" / "train.py")
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q"], cwd=project, check=True)
    subprocess.run([*git, "add", "src"], cwd=project, check=True)
    assert ENTRY in post(project, "Read", {"file_path": path, **AT})  # the journal is not tracked
    subprocess.run([*git, "add", "learning_journal.md"], cwd=project, check=True)
    assert post(project, "Read", {"file_path": path, **AT}, session="e") == ""  # a clone brought it
    (project / ".journal" / "settings.json").write_text('{"capture": {}}\n')
    approve(project, ".journal/settings.json")
    assert ENTRY in post(project, "Read", {"file_path": path, **AT}, session="f")


def test_the_user_turns_it_off_and_a_repository_cannot_turn_it_on(project):
    path = str(project / "src" / "train.py")
    off = {"JOURNAL_AGENT_CAPTURE": "0"}
    assert post(project, "Read", {"file_path": path, **AT}, env=off) == ""
    (project / ".journal" / "settings.json").write_text('{"capture": {"recall_touch": false}}\n')
    assert ENTRY in post(
        project, "Read", {"file_path": path, **AT}, session="g"
    )  # not approved yet
    approve(project, ".journal/settings.json")
    assert post(project, "Read", {"file_path": path, **AT}, session="h") == ""


def test_a_change_nobody_approved_cannot_turn_back_on_what_the_user_turned_off(project, cli):
    """The user approves settings turning recall off on their terminal; a commit that changes
    the file (a pull setting it on), or their own later edit not yet approved, leaves it off.
    Approving the new file is what turns it on."""
    path = str(project / "src" / "train.py")
    settings = project / ".journal" / "settings.json"
    settings.write_text('{"capture": {"recall_touch": false}}\n')
    out, code = approve_on_terminal(cli, project, "trust")
    assert code == 0 and "approved .journal/settings.json" in out, out
    assert post(project, "Read", {"file_path": path, **AT}, session="i") == ""
    settings.write_text('{"capture": {"recall_touch": true}}\n')  # a pull changed it
    assert post(project, "Read", {"file_path": path, **AT}, session="j") == ""
    settings.write_text('{"capture": {"recall_touch": false, "session_row": false}}\n')
    assert post(project, "Read", {"file_path": path, **AT}, session="k") == ""
    settings.write_text('{"capture": {"recall_touch": true}}\n')
    assert approve_on_terminal(cli, project, "trust")[1] == 0  # the user's own decision
    assert ENTRY in post(project, "Read", {"file_path": path, **AT}, session="l")


def _agent_call(transcript: Path, agent: str, prompt: str) -> None:
    given = {"subagent_type": agent, "description": "write it", "prompt": prompt}
    call = {"type": "tool_use", "id": "toolu_1", "name": "Agent", "input": given}
    line = {"type": "assistant", "message": {"role": "assistant", "content": [call]}}
    with transcript.open("a") as f:
        f.write(json.dumps(line, separators=(",", ":")) + "\n")


def start(root: Path, transcript: Path, agent: str) -> str:
    payload = {"session_id": "s1", "hook_event_name": "SubagentStart", "agent_id": "a1",
               "agent_type": agent, "transcript_path": str(transcript)}  # fmt: skip
    done = run_hook("SubagentStart", payload, root)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    if not done.stdout:
        return ""
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SubagentStart"
    return out["additionalContext"]


def test_our_agents_start_with_what_the_journal_says_of_the_files_they_were_handed(project):
    transcript = project.parent / "t.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": {"content": "hi"}}) + "\n")
    ours = "journal-agent:learning-journal"
    _agent_call(transcript, ours, "Write an entry about the optimizer in src/train.py:2-4.")
    said = start(project, transcript, ours)
    assert '"AdamW Keeps Two States" explains src/train.py:3 (fresh)' in said
    assert "rather than writing it again" in said and len(said) <= 1100
    # Another plugin's agent, or our agent handed nothing the journal cites: nothing.
    _agent_call(transcript, "other:helper", "Look at src/train.py")
    assert start(project, transcript, "other:helper") == ""
    _agent_call(transcript, ours, "Summarise README.md for me.")
    assert start(project, transcript, ours) == ""


def test_an_agents_brief_keeps_to_300_tokens_whatever_the_titles_language(tmp_path, cli):
    """The brief was bounded by characters only (1,100): eight entries titled in Chinese made
    it 728 tokens. Now it keeps to 300 (cl100k), an entry whose title does not fit said by its
    id, and it still names the newest entries."""
    from journal_agent.tokenizer import encoding

    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text("".join(f"x{n} = {n}\n" for n in range(1, 40)))
    title = "优化器状态在每个参数上保留两份浮点副本以及梯度累积的中间结果第{}部分说明"
    for i in range(1, 9):
        entry = render_entry(
            title.format(i), f"2026-11-2{i}", context=f"阅读训练脚本第{i}部分。",
            question=f"为什么每个参数需要八个字节？第{i}问", tags=f"#t{i}",
            intuition=f"优化器保留两个状态，第{i}条 (src/train.py:1{i})。",
        )  # fmt: skip
        done = cli("journal", "append", "-", "--force", "--root", str(root), input=entry)
        assert done.returncode == 0, done.stderr
    transcript = root.parent / "t.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": {"content": "hi"}}) + "\n")
    ours = "journal-agent:learning-journal"
    _agent_call(transcript, ours, "Write an entry about src/train.py:10-19.")
    said = start(root, transcript, ours)
    assert len(encoding().encode(said)) <= 300, said
    assert f'"{title.format(8)}" explains src/train.py:18 (fresh)' in said
    assert "rather than writing it again" in said
