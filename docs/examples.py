"""Regenerate the docs' examples from real runs, or check that they still match.

A fenced block after ``<!-- example -->`` holds ``$ COMMAND`` lines, each followed by what it
prints; ``python docs/examples.py`` runs every such command (through bash, with this
interpreter's ``journal-agent`` first on PATH, ``HOME`` a fresh empty directory) and rewrites
its output in place. ``<!-- example: python -->`` before a ```` ```python ```` block runs the
code with this interpreter and rewrites the fenced block right after it with what it printed.

Where a block runs: in a fresh empty temporary directory, or, with ``in=SCENE`` in its marker
(``<!-- example: checked in=journal -->``), in a fresh copy of a prepared workspace from
docs/example_scenes.py (a training script, entries citing its code and real records, a ledger,
review history …; each scene is built once per process). ``keep=NAME`` keeps a block's
workspace after its commands ran as the scene NAME for later blocks (``in=NAME``), so a page can
show a sequence of commands and then what they left behind. A scene with a ``script`` serves it
as the model (journal_agent/testing.py's scripted ``/v1/messages`` endpoint, through the real
SDK) while its examples run, so ``run``/``learn`` print what they print against the API.

A block's directory is a temporary one (named by digits: see :func:`_workdir`); in what the
commands print it is shown as ``/tmp/demo`` (its parent as ``/tmp``, ``HOME`` as ``/home/me``,
this checkout as ``/path/to/journal-agent``), which is where the docs say the examples ran.

``manual`` in a marker (``<!-- example: manual (needs the claude CLI) -->``) says why a block
of commands is not run here: it is copied from a run elsewhere, and the test accepts it only
with that word.

``keys=A,B,…`` runs each command on a terminal (a pseudo-terminal, echo on) and types A at the
first prompt (a line ending in "quit: " or "to cancel: "), B at the next (``⏎``: Enter alone),
as someone at the keyboard would.

``stderr`` in a marker shows what the commands write to stderr, in order with their output
(otherwise stderr is shown only for a command that failed: progress is not the example).

``checked`` in a marker puts the example in the set that tests/foundation/test_doc_examples.py
reruns and compares, so a change to what a command prints fails a test until the docs are
regenerated. Before comparing, :func:`normalize` replaces what differs from run to run and
nothing else: record ids (``est-<id>``), the trace's own duration, a tool call's seconds in a
run's progress lines, timestamps of the moment the command ran (``2026-11-23T13:20:18Z``,
``2026-11-23 13:29``, backup and run names made of them, the ledger's ``Last Updated``
date, which every update sets to today), a run's id, process ids and the view's token.
Sizes, counts, line numbers, scores, costs, token counts and dates the examples wrote themselves
are compared as printed. Where the docs cut a long output short with a line ``…``,
:func:`elide` cuts the new output at the same place.

    python docs/examples.py [--check] [--only checked] [FILE.md …]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import example_scenes  # noqa: E402  (docs/ is no package: found beside this file)

MARKER = re.compile(r"^<!-- example(?::\s*(?P<opts>[^>]*?))?\s*-->\n", re.M)
FENCE = re.compile(r"```[\w-]*\n(?P<body>.*?)^```\n", re.M | re.S)
_IDS = re.compile(r"\b(est|trace|meas|fit|dev)-[0-9a-f]{8}\b")
_DURATION = re.compile(r"\(\d+(?:\.\d+)? (?:s|ms)\)")
# What depends on the moment a command ran (see the module's docstring), each with its stand-in.
_MOMENTS = [
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d\b"), "<time>"),
    (re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b"), "<run>"),  # a run's id: its start, random
    (re.compile(r"\.bak-\d{8}-\d{6}\b"), ".bak-<time>"),
    (re.compile(r"(Last Updated:\*\* |last updated )\d{4}-\d\d-\d\d"), r"\1<today>"),
    (re.compile(r"(✓ \w+ )\d+\.\ds\b"), r"\1<t>s"),  # a tool call's time in a run's progress
    (re.compile(r"\bpid \d+"), "pid <pid>"),
    (re.compile(r"token=[\w-]+"), "token=<token>"),
]


@dataclass
class Example:
    path: Path
    start: int  # where the fenced block (or the python block's output block) starts
    end: int
    body: str  # the block's text between the fences
    opts: set[str]
    code: str = ""  # a python example's code

    @property
    def scene(self) -> str | None:
        """The prepared workspace the example runs in (``in=NAME``), if any."""
        return self.option("in")

    def option(self, key: str) -> str | None:
        for opt in self.opts:
            if opt.startswith(f"{key}="):
                return opt[len(key) + 1 :]
        return None

    @property
    def where(self) -> str:
        line = self.path.read_text(encoding="utf-8")[: self.start].count("\n") + 1
        shown = self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path
        return f"{shown}:{line}"


def find(path: Path) -> list[Example]:
    """The examples of one markdown file, in order."""
    text = path.read_text(encoding="utf-8")
    found = []
    for marker in MARKER.finditer(text):
        # Words before a "(": the options; in parentheses, a reason for people (manual).
        opts = set((marker.group("opts") or "").split("(")[0].split())
        block = FENCE.match(text, marker.end())
        if block is None:
            raise SystemExit(f"{path}: an example marker must be followed by a fenced block")
        if "python" in opts:
            output = FENCE.match(text, _skip_blank_and_prose(text, block.end()))
            if output is None:
                raise SystemExit(f"{path}: a python example needs a fenced output block after it")
            found.append(
                Example(path, output.start(), output.end(), output["body"], opts, block["body"])
            )
        else:
            found.append(Example(path, block.start(), block.end(), block["body"], opts))
    return found


def _skip_blank_and_prose(text: str, at: int) -> int:
    """The start of the next fenced block after ``at`` (a line of prose may sit between)."""
    nxt = text.find("```", at)
    return nxt if nxt >= 0 else at


def _env(home: Path) -> dict[str, str]:
    """The environment of the commands: this one without the settings that would change what
    they print (a key or gateway of the API, journal-agent's own switches)."""
    bin_dir = str(Path(sys.executable).parent)
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "JOURNAL_AGENT_", "CLAUDE_"))
    }
    return {
        **kept,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "HOME": str(home),
        # approvals go to the example's own trust store, never the reader's
        "XDG_CONFIG_HOME": str(home / ".config"),
        "NO_COLOR": "1",
        "TERM": "dumb",
        "COLUMNS": "150",
        "JOURNAL_AGENT_ROOT": "",
        "CLAUDE_PLUGIN_ROOT": str(REPO),
    }


def run(example: Example) -> str:
    """The example's block as it reads after running it now."""
    tmp = _workdir()
    try:
        work = tmp / "demo"
        if example.scene is None:
            work.mkdir()
        else:
            shutil.copytree(_scene(example.scene), work, symlinks=True)
        home = tmp / "home"
        home.mkdir()
        _approve_settings(work, home)
        _adopt_records(work, home)
        with _model(example.scene) as api:
            out = _run_in(example, work, {**_env(home), **api})
        kept = example.option("keep")
        if kept:
            example_scenes.keep(kept, work)
        return _shown(out, work)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _adopt_records(work: Path, home: Path) -> None:
    """A scene's measurement records are its user's own: sealed with the example's key, as
    `journal-agent measurements adopt` seals them (the scene was built under another)."""
    from journal_agent.paths import measurements_dir
    from profiling.records import RecordStore

    saved = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(home / ".config")
    try:
        store = RecordStore(measurements_dir(work))
        for record in store.list():
            store.save(record)  # (sealed as it is saved)
    finally:
        if saved is None:
            os.environ.pop("XDG_CONFIG_HOME", None)
        else:
            os.environ["XDG_CONFIG_HOME"] = saved


def _approve_settings(work: Path, home: Path) -> None:
    """A scene's settings files are its user's own: approved as `journal-agent trust` records
    them, in the example's trust store (its command and agent files are left as they are: the
    docs show approving those)."""
    from journal_agent import trust_store
    from journal_agent.project_trust import SETTINGS_FILES, project_files

    saved = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(home / ".config")
    try:
        files = {f.rel: f.sha256 for f in project_files(work)
                 if f.rel in SETTINGS_FILES and f.sha256 and f.state != "yours"}  # fmt: skip
        if files:
            trust_store.record(work, files)
    finally:
        if saved is None:
            os.environ.pop("XDG_CONFIG_HOME", None)
        else:
            os.environ["XDG_CONFIG_HOME"] = saved


def _run_in(example: Example, work: Path, env: dict[str, str]) -> str:
    if example.code:
        done = subprocess.run(
            [sys.executable, "-c", example.code], cwd=work, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1800, check=False,
        )  # fmt: skip
        return _tidy(done.stdout)
    out: list[str] = []
    keys = example.option("keys")
    for command in _commands(example.body):
        out.append(f"$ {command}\n")
        if keys is not None:
            out.append(_tidy(_on_a_terminal(command, work, env, keys.split(","))))
            continue
        merged = "stderr" in example.opts  # warnings and notes on stderr are the point
        done = subprocess.run(
            ["bash", "-c", command], cwd=work, env=env, text=True, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merged else subprocess.PIPE, timeout=1800, check=False,
        )  # fmt: skip
        # stderr is progress unless the command failed: then it is the sentence to show.
        shown = done.stdout + (done.stderr if done.returncode and not merged else "")
        if shown.strip():
            out.append(_tidy(shown))
    return "".join(out)


def _on_a_terminal(command: str, work: Path, env: dict[str, str], keys: list[str]) -> str:
    """What a terminal shows while ``command`` runs on it and someone types ``keys``, one
    answer at each prompt (a line ending in "quit: " or "to cancel: "; "⏎" is Enter alone),
    echo included."""
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, on the terminal
        os.chdir(work)
        os.execvpe("bash", ["bash", "-c", command], env)
    shown = b""
    pending = [("" if k == "⏎" else k) for k in keys]
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], 60)
            if not ready:
                raise SystemExit(f"{command!r} waited a minute for input it was not given")
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the command ended: the terminal is gone
                break
            if not chunk:
                break
            shown += chunk
            if shown.endswith((b"quit: ", b"to cancel: ")) and pending:
                os.write(fd, pending.pop(0).encode() + b"\n")
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    return shown.decode("utf-8", "replace").replace("\r\n", "\n")


def _workdir() -> Path:
    """A new temporary directory named by digits alone: a path the model's prompt holds (the
    workspace root) then has the same number of tokens in every run, so the token counts a
    ``--dry-run`` prints do not change with the directory's random name."""
    while True:
        path = Path(tempfile.gettempdir()) / f"doc-example-{random.randrange(10**9):09d}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue


@contextlib.contextmanager
def _model(scene: str | None) -> Iterator[dict[str, str]]:
    """The scripted model a scene's commands talk to (a fresh script each time), if it has one."""
    found = example_scenes.SCENES.get(scene or "")
    if found is None or found.script is None:
        yield {}
        return
    from journal_agent.testing import ScriptedModel

    with ScriptedModel(found.script()).serve() as url:
        yield {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-scripted-0000000000"}


def _scene(name: str) -> Path:
    """A scene of docs/example_scenes.py, or the workspace a block kept (``keep=NAME``): that
    block runs first if it has not run in this process."""
    if not example_scenes.known(name):
        for path in _pages():
            for example in find(path):
                if example.option("keep") == name:
                    run(example)
    return example_scenes.prepare(name)


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _shown(output: str, work: Path) -> str:
    """The output with the temporary paths written as the docs show them."""
    shown_as = (
        (REPO, "/path/to/journal-agent"),
        (work.parent / "home", "/home/me"),
        (work, "/tmp/demo"),
        (work.parent, "/tmp"),
    )
    for path, shown in shown_as:
        output = output.replace(str(path.resolve()), shown).replace(str(path), shown)
    return output


def _tidy(output: str) -> str:
    """Lines without the spaces rich pads them with (markdown would keep them); a tab at the
    end of a line (Read's number of an empty line) stays."""
    return "\n".join(line.rstrip(" ") for line in output.rstrip("\n").split("\n")) + "\n"


def _commands(body: str) -> list[str]:
    return [line[2:] for line in body.splitlines() if line.startswith("$ ")]


def normalize(text: str) -> str:
    """What may differ between two runs of the same command (see the module's docstring)."""
    text = _IDS.sub(lambda m: f"{m.group(1)}-<id>", text)
    text = _DURATION.sub("(<time>)", text)
    for pattern, stand_in in _MOMENTS:
        text = pattern.sub(stand_in, text)
    return text


def elide(old_body: str, new_body: str, missed: list[str] | None = None) -> str:
    """``new_body`` with the stretches the docs cut (a line ``…``) cut the same way: from the
    line before the ``…`` to the next line after it that is not blank, both found again in the
    new output (blank lines between stay). Where an anchor is not found the output stays whole,
    to be cut again by hand; that anchor is added to ``missed`` (the generator says so: a block
    left whole without a word was easy to commit)."""
    old, new = old_body.split("\n"), new_body.split("\n")
    for i, line in enumerate(old):
        if line.strip() != "…":
            continue
        norm = [normalize(x) for x in new]
        start = -1
        if i > 0:
            # The line before the cut, as many times over as it occurs up to there in the docs.
            anchor = normalize(old[i - 1])
            nth = [normalize(x) for x in old[:i]].count(anchor)
            found = [j for j, x in enumerate(norm) if x == anchor]
            if len(found) < nth:
                if missed is not None:
                    missed.append(old[i - 1])
                continue
            start = found[nth - 1]
        after = i + 1
        while after < len(old) and not old[after].strip() and after + 1 < len(old):
            after += 1
        blanks = after - i - 1
        following = old[after] if after < len(old) else ""
        stop = len(new) - 1  # the last element is the "" after the final newline
        if following and not following.startswith("$ "):
            later = [j for j in range(start + 1, len(new)) if norm[j] == normalize(following)]
            if not later:
                if missed is not None:
                    missed.append(following)
                continue
            stop = later[0] - blanks
        elif following.startswith("$ ") and following in new[start + 1 :]:
            stop = new.index(following, start + 1) - blanks
        new = [*new[: start + 1], line, *new[stop:]]
    return "\n".join(new)


def rewrite(path: Path, examples: list[Example], bodies: list[str]) -> bool:
    text = path.read_text(encoding="utf-8")
    for example, body in sorted(zip(examples, bodies, strict=True), key=lambda p: -p[0].start):
        fence = text[example.start : text.index("\n", example.start) + 1]
        text = text[: example.start] + fence + body + "```\n" + text[example.end :]
    changed = text != path.read_text(encoding="utf-8")
    if changed:
        path.write_text(text, encoding="utf-8")
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on drift")
    parser.add_argument("--only", help="only the examples whose marker has this word")
    opts = parser.parse_args()
    files = opts.files or _pages()
    drift = 0
    for path in files:
        path = path.resolve()
        examples = [
            e
            for e in find(path)
            if "manual" not in e.opts and (opts.only is None or opts.only in e.opts)
        ]
        bodies = []
        for example in examples:
            print(f"running {example.where}", file=sys.stderr)
            missed: list[str] = []
            body = elide(example.body, run(example), missed)
            for anchor in missed:
                print(
                    f"left whole: {example.where}: the line next to a '…', {anchor.strip()!r}, "
                    "is no longer in the output; cut the block again by hand",
                    file=sys.stderr,
                )
            if normalize(body) == normalize(example.body):
                body = example.body  # the same but for ids and times: leave the docs alone
            bodies.append(body)
            if body != example.body:
                drift += 1
                print(f"{'drifted' if opts.check else 'updated'}: {example.where}", file=sys.stderr)
        if not opts.check and examples:
            rewrite(path, examples, bodies)
    example_scenes.cleanup()
    if opts.check and drift:
        sys.exit(1)


if __name__ == "__main__":
    main()
