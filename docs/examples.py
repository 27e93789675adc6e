"""Regenerate the docs' examples from real runs, or check that they still match.

A fenced block after ``<!-- example -->`` holds ``$ journal-agent …`` lines, each followed by
what it prints; ``python docs/examples.py`` runs every such command (in a fresh temporary
workspace per block, through bash, with this interpreter's ``journal-agent`` first on PATH) and
rewrites its output in place. ``<!-- example: python -->`` before a ```` ```python ```` block
runs the code with this interpreter and rewrites the fenced block right after it with what it
printed. ``checked`` in a marker (``<!-- example: checked -->``) puts the example in the
cheap set that ``tests/docs/test_examples.py`` reruns and compares, so a change to what a
command prints fails a test until the docs are regenerated.

Record ids and the trace's own duration differ from run to run: :func:`normalize` blanks them
before comparing. Every other character is compared, except where the docs cut a long output
short with a line ``…``: :func:`elide` cuts the new output at the same place.

    python docs/examples.py [--check] [--only checked] [FILE.md …]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- example(?::\s*(?P<opts>[^>]*?))?\s*-->\n", re.M)
FENCE = re.compile(r"```[\w-]*\n(?P<body>.*?)^```\n", re.M | re.S)
_IDS = re.compile(r"\b(est|trace|meas|fit|dev)-[0-9a-f]{8}\b")
_DURATION = re.compile(r"\(\d+(?:\.\d+)? (?:s|ms)\)")


@dataclass
class Example:
    path: Path
    start: int  # where the fenced block (or the python block's output block) starts
    end: int
    body: str  # the block's text between the fences
    opts: set[str]
    code: str = ""  # a python example's code

    @property
    def where(self) -> str:
        line = self.path.read_text(encoding="utf-8")[: self.start].count("\n") + 1
        return f"{self.path.relative_to(REPO)}:{line}"


def find(path: Path) -> list[Example]:
    """The examples of one markdown file, in order."""
    text = path.read_text(encoding="utf-8")
    found = []
    for marker in MARKER.finditer(text):
        opts = set((marker.group("opts") or "").split())
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


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "NO_COLOR": "1",
        "TERM": "dumb",
        "COLUMNS": "150",
        "JOURNAL_AGENT_ROOT": "",
    }


def run(example: Example) -> str:
    """The example's block as it reads after running it now."""
    with tempfile.TemporaryDirectory() as tmp:
        if example.code:
            done = subprocess.run(
                [sys.executable, "-c", example.code], cwd=tmp, env=_env(), text=True,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1800, check=False,
            )  # fmt: skip
            return _tidy(done.stdout)
        out: list[str] = []
        for command in _commands(example.body):
            done = subprocess.run(
                ["bash", "-c", command], cwd=tmp, env=_env(), text=True,
                capture_output=True, timeout=1800, check=False,
            )  # fmt: skip
            out.append(f"$ {command}\n")
            # stderr is progress unless the command failed: then it is the sentence to show.
            shown = done.stdout + (done.stderr if done.returncode else "")
            if shown.strip():
                out.append(_tidy(shown))
        return "".join(out)


def _tidy(output: str) -> str:
    """Lines without the padding rich leaves at their ends (markdown would keep it)."""
    return "\n".join(line.rstrip() for line in output.rstrip("\n").split("\n")) + "\n"


def _commands(body: str) -> list[str]:
    return [line[2:] for line in body.splitlines() if line.startswith("$ ")]


def normalize(text: str) -> str:
    """What may differ between two runs of the same command: record ids, the trace's time."""
    text = _IDS.sub(lambda m: f"{m.group(1)}-<id>", text)
    return _DURATION.sub("(<time>)", text)


def elide(old_body: str, new_body: str) -> str:
    """``new_body`` with the stretches the docs cut (a line ``…``) cut the same way: from the
    line before the ``…`` to the line after it, both found again in the new output. Where an
    anchor is not found the output stays whole, to be cut again by hand."""
    old, new = old_body.split("\n"), new_body.split("\n")
    for i, line in enumerate(old):
        if line.strip() != "…":
            continue
        norm = [normalize(x) for x in new]
        start = -1
        if i > 0:
            if normalize(old[i - 1]) not in norm:
                continue
            start = norm.index(normalize(old[i - 1]))
        stop = len(new)
        following = old[i + 1] if i + 1 < len(old) else ""
        if following and not following.startswith("$ "):
            later = [j for j in range(start + 1, len(new)) if norm[j] == normalize(following)]
            if not later:
                continue
            stop = later[0]
        elif following.startswith("$ ") and following in new[start + 1 :]:
            stop = new.index(following, start + 1)
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on drift")
    parser.add_argument("--only", help="only the examples whose marker has this word")
    opts = parser.parse_args()
    files = opts.files or [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    drift = 0
    for path in files:
        path = path.resolve()
        examples = [e for e in find(path) if opts.only is None or opts.only in e.opts]
        bodies = []
        for example in examples:
            print(f"running {example.where}", file=sys.stderr)
            body = elide(example.body, run(example))
            if normalize(body) == normalize(example.body):
                body = example.body  # the same but for ids and times: leave the docs alone
            bodies.append(body)
            if body != example.body:
                drift += 1
                print(f"{'drifted' if opts.check else 'updated'}: {example.where}", file=sys.stderr)
        if not opts.check and examples:
            rewrite(path, examples, bodies)
    if opts.check and drift:
        sys.exit(1)


if __name__ == "__main__":
    main()
