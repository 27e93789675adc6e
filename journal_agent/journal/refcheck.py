"""The reference rules of ``journal check``, and the anchors an entry's references are recorded
with (:mod:`journal_agent.journal.refs`), located again by :mod:`journal_agent.journal.relocate`.

- ``missing_ref``: a reference names no file, lines past its end or a path outside the
  project, and nothing recorded says where its lines went (``gone``);
- ``moved_ref``: the recorded lines are now elsewhere (the new place is given; ``journal check
  --fix`` rewrites the reference);
- ``stale_ref``: the lines changed since the entry was written (the diff is given).
"""

from __future__ import annotations

from pathlib import Path

from journal_agent.journal.model import Entry
from journal_agent.journal.places import make_anchor
from journal_agent.journal.problems import Problem
from journal_agent.journal.refs import Anchor, CodeRef, FileCache, resolve_problem
from journal_agent.journal.relocate import CHANGED, Located, Relocator

_GIT_TIMEOUT_S = 5.0


def new_spec(ref: CodeRef, found: Located) -> str:
    """How the moved reference is written now (one line stays ``path:N``)."""
    return found.key if ref.start == ref.end else found.spec


def ref_problems(entry: Entry, anchors: dict[str, Anchor], relocator: Relocator) -> list[Problem]:
    problems = []
    for ref in entry.refs:
        anchor = anchors.get(ref.key)
        if anchor is None:
            why = resolve_problem(ref, relocator.files)
            if why is not None:
                problems.append(Problem(entry.id, "missing_ref", why, ref.line))
            continue
        found = relocator.locate(ref, anchor)
        if found.state == "moved":
            to = new_spec(ref, found)
            problems.append(
                Problem(
                    entry.id,
                    "moved_ref",
                    f"{ref.key}: {found.detail} ({to}); run `journal-agent journal check --fix` "
                    "to update the reference",
                    ref.line,
                    moved_to=to,
                )
            )
        elif found.state == "changed":
            problems.append(
                Problem(
                    entry.id,
                    "stale_ref",
                    stale_detail(entry.id, ref, found),
                    ref.line,
                    diff=list(found.diff) or None,
                )
            )
        elif found.state == "gone":
            problems.append(
                Problem(
                    entry.id,
                    "missing_ref",
                    f"{found.detail}, and the recorded lines are nowhere else in the workspace",
                    ref.line,
                )
            )
    return problems


def stale_detail(entry_id: str, ref: CodeRef, found: Located) -> str:
    """What changed and what to do. ``refresh --accept`` is suggested only for lines that hold
    what was cited: when it is probably elsewhere now, the reference must first point there;
    when nothing holds it, the entry must say what the code does now."""
    lines = f"line {ref.start}" if ref.start == ref.end else f"lines {ref.start}-{ref.end}"
    why = "" if found.detail == CHANGED else f": {found.detail}"
    head = f"{ref.path} {lines} changed since the entry was written (reference {ref.key}{why})"
    likely = found.likely
    if likely == (ref.path, ref.start, ref.end):
        return (
            f"{head}; re-read the code, update the entry, then run "
            f"`journal-agent journal refresh {entry_id} --accept {ref.key}`"
        )
    if likely is not None:
        path, start, end = likely
        to = f"{path}:{start}" if start == end else f"{path}:{start}-{end}"
        return (
            f"{head}; re-read the code at {to}, update the entry and change its reference "
            f"{ref.key} to {to}, then run `journal-agent journal refresh {entry_id}`"
        )
    return (
        f"{head}; nothing in the workspace holds what it cited: update the entry to cite the "
        f"code it explains now (or remove the reference), then run "
        f"`journal-agent journal refresh {entry_id}`"
    )


def anchors_for(root: Path, refs: list[CodeRef], files: FileCache) -> dict[str, Anchor]:
    """The anchors of the references that resolve, with the commit of each file that git
    tracks unmodified (so a later check can follow git's renames)."""
    good = [ref for ref in refs if resolve_problem(ref, files) is None]
    commits = clean_commits(Path(root), sorted({ref.path for ref in good}))
    out = {}
    for ref in good:
        anchor = make_anchor(ref, files, commits.get(ref.path))
        if anchor is not None:
            out[ref.key] = anchor
    return out


def clean_commits(root: Path, paths: list[str]) -> dict[str, str]:
    """``{path: HEAD}`` for the paths git tracks with no change since HEAD; {} outside git."""
    from journal_agent.gitcmd import run_git

    paths = [p for p in paths if not Path(p).is_absolute()]
    if not paths or not any((d / ".git").exists() for d in [root, *root.resolve().parents]):
        return {}
    head = run_git("rev-parse", "--verify", "-q", "HEAD", cwd=root, timeout=_GIT_TIMEOUT_S)
    if head is None or head.returncode:
        return {}
    commit = head.stdout.decode().strip()
    tracked = run_git(
        "--literal-pathspecs", "ls-files", "-z", "--", *paths, cwd=root, timeout=_GIT_TIMEOUT_S
    )
    changed = run_git(
        "--literal-pathspecs",
        "diff",
        "--name-only",
        "--relative",
        "-z",
        "HEAD",
        "--",
        *paths,
        cwd=root,
        timeout=_GIT_TIMEOUT_S,
    )
    if tracked is None or changed is None or tracked.returncode or changed.returncode:
        return {}
    dirty = set(changed.stdout.decode("utf-8", "surrogateescape").split("\0"))
    clean = set(tracked.stdout.decode("utf-8", "surrogateescape").split("\0")) - dirty
    return {p: commit for p in paths if str(Path(p)) in clean}
