"""SubagentStart: the plugin's own agents (``learning-journal``, ``training-optimization``)
start with what the journal already says about what they were handed — the entries that cite
the files their prompt names (with the lines' state, as :mod:`journal_agent.capture.touch`
finds them) and those sharing its telling words (:mod:`journal_agent.capture.recall`) — so the
one does not write a duplicate and the other cites earlier measurements. At most
:data:`BRIEF_LIMIT` characters and :data:`BRIEF_TOKENS` tokens; it reaches the sub-agent only.

SubagentStart's input names the agent, not its task: the prompt is the main transcript's last
Agent call for that agent type. Stdlib only, as every hook module.
"""

from __future__ import annotations

import os
import time

from journal_agent import confined
from journal_agent.capture.touch import (
    cited,
    file_lines,
    overlaps,
    span,
    state,
    titles,
)
from journal_agent.capture.touch_line import ID_LIMIT, TITLE_LIMIT, cost
from journal_agent.capture.touched import relative
from journal_agent.terminal_text import one_line

OUR_AGENTS = ("learning-journal", "training-optimization")
BRIEF_LIMIT = 1100  # characters of SubagentStart's context
BRIEF_TOKENS = 300  # … and its tokens, as touch_line.cost counts them (high)
BRIEF_FILES = 8  # files named in the prompt looked up
HANDED_WAITS = 20  # tenths of a second waited for the Agent call to reach the transcript


def handed_files(root: str, prompt: str) -> list[tuple[str, list[tuple[int, int]] | None]]:
    """Workspace files the prompt names (``path`` or ``path:N-M``), as they exist, in order."""
    out: list[tuple[str, list[tuple[int, int]] | None]] = []
    for word in prompt.replace("`", " ").replace("(", " ").replace(")", " ").split():
        word = word.strip(".,;'\"")
        path, _, lines = word.partition(":")
        if "." not in path.rsplit("/", 1)[-1] or len(path) > 300:
            continue
        rel = relative(root, path)
        if rel is None or not os.path.isfile(os.path.join(root, rel)):
            continue
        ranges = [r] if (r := span(f"x:{lines}")) is not None else None
        if all(o[0] != rel for o in out):
            out.append((rel, ranges))
        if len(out) >= BRIEF_FILES:
            break
    return out


def brief(root: str, payload: dict[str, object]) -> str:
    """SubagentStart's ``additionalContext`` for one of the plugin's own agents: the entries
    that explain the files it was handed (with their state) and those related to its task."""
    agent = str(payload.get("agent_type") or "")
    if not agent.endswith(OUR_AGENTS):
        return ""
    path = payload.get("transcript_path")
    if not isinstance(path, str) or not path:
        return ""
    prompt = _handed(path, agent)
    for _ in range(HANDED_WAITS):
        if prompt:
            break
        # Claude Code may start the agent before the call's line reaches the transcript, or
        # (2.1.197 headless) before the transcript exists at all.
        time.sleep(0.1)
        prompt = _handed(path, agent)
    if not prompt:
        return ""
    lines: list[tuple[str, str, str]] = []  # entry, reference, state
    picked: list[str] = []
    for rel, ranges in handed_files(root, prompt):
        file = None
        for entry, key, anchor in cited(root, rel):
            ref = span(key)
            if ref is None or not overlaps(ref, ranges) or entry in picked:
                continue
            file = file_lines(root, rel) or [] if file is None else file
            picked.append(entry)
            lines.append((entry, key, state(file, ref, anchor)))
    from journal_agent.capture.recall import related

    topics = [h for h in _related(root, prompt, related) if str(h["id"]) not in picked]
    if not lines and not topics:
        return ""
    named = titles(root, picked)
    parts: list[tuple[str, str]] = []  # (with the title, without it), for each entry
    for entry, key, now in lines:
        title = one_line(named.get(entry, entry).replace('"', "'"), TITLE_LIMIT)
        where = one_line(key, 60) + (f" ({now})" if now else "")
        ident = one_line(entry, ID_LIMIT)
        parts.append((f'"{title}" explains {where} (id {ident})', f"{ident} explains {where}"))
    for hit in topics:
        title = one_line(str(hit["title"]).replace('"', "'"), TITLE_LIMIT)
        ident = one_line(str(hit["id"]), ID_LIMIT)
        parts.append((f'"{title}" (id {ident}, on the same topic)', f"{ident} (on the same topic)"))
    return _within(parts)


def _within(parts: list[tuple[str, str]]) -> str:
    """The brief with as many of ``parts`` as fit :data:`BRIEF_LIMIT` characters and
    :data:`BRIEF_TOKENS` tokens as :func:`cost` counts them (high: a title in Chinese is about a
    token a character, and 1,100 characters of them were 728 tokens); a part whose title does
    not fit is said by its id alone (the id is the title's slug). "" when none fits."""
    text = "journal-agent: the journal already has: "
    end = (
        ". Read one with `journal-agent journal show ID`; cite or extend it rather than "
        "writing it again."
    )
    kept: list[str] = []
    for part in parts:
        said = next((p for p in part if _fits(text + "; ".join([*kept, p]) + end)), None)
        if said is None:
            break
        kept.append(said)
    return text + "; ".join(kept) + end if kept else ""


def _fits(brief: str) -> bool:
    return len(brief) <= BRIEF_LIMIT and cost(brief) <= BRIEF_TOKENS


def _handed(path: str, agent: str) -> str:
    """The handed prompt, or "" while the transcript does not exist yet."""
    from journal_agent.capture.transcript import handed_prompt

    try:
        return handed_prompt(path, agent)
    except FileNotFoundError:
        return ""


def _related(root: str, prompt: str, related) -> list[dict[str, object]]:
    if confined.lstat(root, ".journal/index.sqlite") is None:
        return []
    try:
        return related(root, prompt)
    except Exception:  # a locked or odd index: the files' entries are said all the same
        return []
