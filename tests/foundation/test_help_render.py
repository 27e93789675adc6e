"""typer's help renderer imported without rich.markdown and rich.traceback (cli/_help_render.py):
help looks the same, the two are not imported for it, and whatever uses them later gets the real
classes. Each case runs in a fresh interpreter: the test process may have typer's renderer
imported already."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import sys
from journal_agent.cli._help_render import import_renderer
import_renderer()
import typer.rich_utils as ru
assert "rich.markdown" not in sys.modules and "rich.traceback" not in sys.modules
md = ru.Markdown("# Title")  # typer's markdown mode still gets the real class
import rich.markdown, rich.traceback
assert type(md) is rich.markdown.Markdown and isinstance(md, ru.Markdown)
assert rich.markdown.Markdown is not ru.Markdown  # the real module, not the stand-in
try:
    raise ValueError("boom")
except ValueError as exc:
    tb = ru.Traceback.from_exception(type(exc), exc, exc.__traceback__)
assert type(tb) is rich.traceback.Traceback
print("ok")
"""


def _run(code: str, *args: str, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, *(["-c", code] if code else []), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_the_stand_ins_give_the_real_classes():
    done = _run(CHECK)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("args", [["--help"], ["estimate", "--help"], ["journal", "--help"]])
def test_help_is_the_same_and_imports_neither(args, tmp_path):
    env = {"COLUMNS": "100", "PATH": "", "HOME": str(tmp_path)}
    typer_own = _run(
        "import sys, typer.rich_utils; from journal_agent.cli import main; main(sys.argv[1:])",
        *args,
        env=env,
    )
    ours = _run("", "-X", "importtime", "-m", "journal_agent", *args, env=env)
    assert ours.returncode == typer_own.returncode == 0, ours.stderr[-2000:]
    assert ours.stdout == typer_own.stdout
    imported = {line.split("|")[-1].strip() for line in ours.stderr.splitlines()}
    assert not imported & {"rich.markdown", "rich.traceback", "markdown_it"}


def test_help_breaks_no_sentence_and_cuts_no_word(tmp_path):
    """#33: `--help` broke a command's line in mid-sentence ("… offload and micro-batch" /
    "searched, …") and a narrow terminal cut `--snapshot`'s help ("https://pytorch.org/memor…")."""
    env = {"COLUMNS": "100", "PATH": "", "HOME": str(tmp_path)}
    listed = _run("", "-m", "journal_agent", "--help", env=env).stdout
    fit = listed[listed.index("│ fit") : listed.index("│ gpu")]
    # one paragraph, wrapped
    assert "│               checkpointing, LoRA/QLoRA, offload and micro-batch" in fit
    assert "│               held) and, with --gpus N, the parallel plans" in fit
    assert "│               throughput" not in fit
    profile = _run("", "-m", "journal_agent", "profile", "--help", env=env)
    assert profile.returncode == 0, profile.stderr[-2000:]
    joined = "".join(line.strip("│ ").strip() for line in profile.stdout.splitlines())
    assert "…" not in profile.stdout
    assert "torch.cuda.memory._dump_snapshot" in joined.replace(" ", "")
    assert "https://pytorch.org/memory_viz" in joined.replace(" ", "")


def test_a_groups_commands_and_later_paragraphs_read_as_prose(tmp_path):
    """#33: a docstring's line breaks were kept in a group's command list and in the paragraphs
    after the first, so rich wrapped each source line apart ("… drafts and other" / "records
    are read for  ids)"), and `[m:…]` was read as rich markup and dropped."""
    env = {"COLUMNS": "80", "PATH": "", "HOME": str(tmp_path)}
    group = _run("", "-m", "journal_agent", "measurements", "--help", env=env).stdout
    prune = group[group.index("│ prune") : group.index("│ show")]
    text = " ".join(line.strip("│ ").strip() for line in prune.splitlines())
    assert "are read for [m:…] ids); a cited record is never deleted." in text
    assert "│        drafts and other records are read for [m:…] ids); a cited record is" in prune
    own = _run("", "-m", "journal_agent", "measurements", "prune", "--help", env=env).stdout
    assert "and other records are read for [m:…] ids); a cited record is never deleted." in own
    env["COLUMNS"] = "100"
    append = _run("", "-m", "journal_agent", "journal", "append", "--help", env=env).stdout
    assert " An entry that repeats one already in the journal (same concept, near-identical " \
        "content) is refused \n" in append  # fmt: skip
    inbox = _run("", "-m", "journal_agent", "inbox", "--help", env=env).stdout
    assert "│               moments written; a draft with problems is kept" in inbox


def test_no_option_name_is_cut(tmp_path):
    """#33: at 80 columns rich cut long option names to `--prefetch-bucket-si…` and
    `--param-persistence-…`, names no one can type; they fold onto the next line now."""
    import re

    env = {"COLUMNS": "80", "PATH": "", "HOME": str(tmp_path)}
    out = _run("", "-m", "journal_agent", "estimate", "--help", env=env).stdout
    assert not re.findall(r"--[\w-]+…", out)
    names = "".join(line[2:24].strip() for line in out.splitlines() if line.startswith("│ "))
    assert "--prefetch-bucket-size" in names and "--param-persistence-threshold" in names
