"""The workspaces of the docs' examples that are about tools and agents (docs/tools.md,
runtime.md, plugin.md's drafting, definitions.md), and the scripted model's answers for the ones
that call a model. The registry and the journal's scenes: docs/example_scenes.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.* (the entry template, the hook helpers)


def write(root: Path, rel: str, text: str) -> Path:
    """Write ``text`` to ``root/rel``, making its folders."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


TOOLS_TRAIN = (
    "import torch\n"
    "\n"
    "from model import TinyGPT\n"
    "\n"
    "\n"
    "def train_step(model, batch, optimizer):\n"
    "    loss = model(batch).mean()\n"
    "    loss.backward()\n"
    "    optimizer.step()\n"
    "    optimizer.zero_grad(set_to_none=True)\n"
    "    return loss\n"
)


def build_tools(root: Path) -> None:
    """A small project for the tools (docs/tools.md): a five-line journal, a 5,000-line
    training log, code under src/, an ignored build/, a secret .env, a binary and an empty
    file, private data that a deny rule hides; a git repository."""
    import subprocess

    write(
        root,
        "learning_journal.md",
        "# Learning journal\n\n## ZeRO stages\nZeRO-1 shards optimizer state.\n"
        "TODO: measure stage 2\n",
    )
    log = "".join(f"step {n} loss {2.5 - n / 10_000:.4f}\n" for n in range(1, 5001))
    write(root, "train.log", log)
    write(root, "src/model.py", "from torch import nn\n\n\nclass TinyGPT(nn.Module):\n    pass\n")
    write(root, "src/train.py", TOOLS_TRAIN)
    write(root, "build/gen.py", "# generated: optimizer tables\n")
    write(root, ".gitignore", "build/\n")
    write(root, ".env", "# the optimizer service\nAPI_TOKEN=tok-0123456789abcdef\n")
    (root / "blob.bin").write_bytes(bytes(range(100)))
    write(root, "empty.md", "")
    write(root, "data/private/p.csv", "patient,age\nA,41\n")
    settings = {
        "permissions": {"deny": ["Read(./data/private/**)", "Bash(git push:*)"]},
    }
    write(root, ".claude/settings.json", json.dumps(settings, indent=2) + "\n")
    # Glob and Grep list the newest first: fix the order (model.py is the older file).
    for n, rel in enumerate(["src/model.py", "src/train.py", "learning_journal.md"]):
        os.utime(root / rel, (1_790_000_000 + n * 60, 1_790_000_000 + n * 60))
    git = ["git", "-c", "user.name=Demo", "-c", "user.email=demo@example.com"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "src", "train.log", ".claude"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "the training code"], cwd=root, check=True)


def build_runtime(root: Path) -> None:
    """A project with a small agent of its own, `scribe` (Glob, Read, Write; haiku)."""
    write(root, "README.md", "# Demo project\n")
    write(
        root,
        ".claude/agents/scribe.md",
        "---\nname: scribe\ndescription: Keeps short notes on what the user studies.\n"
        "tools: Glob, Read, Write\nmodel: haiku\n---\n"
        "You are the scribe: you keep short notes on what the user studies, in notes.md.\n",
    )


def _usage(uncached: int, cached: int, out: int) -> dict[str, int]:
    return {
        "input_tokens": uncached,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
        "output_tokens": out,
    }


def scribe_script() -> list:
    """What the model answers `run scribe "Note what ZeRO-2 shards"`: look, read, write, say."""
    from journal_agent.testing import reply, tool_use

    note = "# ZeRO-2\nShards gradients and optimizer state across data-parallel ranks.\n"
    said = "Wrote notes.md: ZeRO-2 shards gradients and optimizer state across data-parallel ranks."
    return [
        reply(
            "Let me look at the project first.",
            tool_use("Glob", {"pattern": "*.md"}),
            usage=_usage(5500, 0, 90),
        ),
        reply(tool_use("Read", {"file_path": "README.md"}), usage=_usage(40, 5500, 60)),
        reply(
            tool_use("Write", {"file_path": "notes.md", "content": note}),
            usage=_usage(60, 5540, 150),
        ),
        reply(said, usage=_usage(60, 5600, 40)),
    ]


def journal_agent_script() -> list:
    """What the model answers a background run of the learning-journal agent."""
    from journal_agent.testing import reply

    return [reply("Recorded the ZeRO-2 memory math.", usage=_usage(6200, 0, 80))]


WARMUP = "Warm-up length is in steps, not epochs (train.py:8)."


def build_drafting(root: Path) -> None:
    """A moment the real Stop hook captured from a Claude Code turn (an Edit of train.py and a
    ★ Insight), drafting turned on (docs/plugin.md, `inbox draft`)."""
    from tests.capture.hook_helpers import Transcript, capture_turn

    write(root, "train.py", "".join(f"line {i}\n" for i in range(1, 21)))
    transcript = Transcript(root.parent / "home" / ".claude" / "projects" / "p" / "s1.jsonl", root)
    edit = ("train.py", "line 8", "line 8 = warmup steps")
    capture_turn(root, transcript, "make warm-up 500 steps", edit, WARMUP)
    write(root, ".journal/settings.json", json.dumps({"capture": {"draft": True}}) + "\n")


def drafting_script() -> list:
    """The learning-journal agent drafting an entry from the warm-up moment."""
    from journal_agent.testing import reply, tool_use
    from tests.entries import render_entry

    entry = render_entry(
        "Warm-up Is Counted in Steps",
        "2026-11-26",
        context="Changing the warm-up in `train.py:8`.",
        question="Is warm-up counted in epochs or in steps?",
        intuition="The scheduler counts optimizer steps, so warm-up is in steps (train.py:8).",
        tags="#warmup #scheduler",
    )
    return [
        reply(tool_use("Read", {"file_path": "train.py"}), usage=_usage(9800, 0, 60)),
        reply(tool_use("JournalAppend", {"entry": entry}), usage=_usage(120, 9800, 420)),
        reply("Drafted one entry.", usage=_usage(90, 9920, 25)),
    ]


def build_definitions(root: Path) -> None:
    """Definitions of the project's own (docs/definitions.md): /learn ejected and granted more,
    an agent that asks for acceptEdits, and one whose description is not valid YAML."""
    learn = (REPO / "commands" / "learn.md").read_text(encoding="utf-8")
    write(
        root,
        ".claude/commands/learn.md",
        learn.replace("---\n", "---\nallowed-tools: Write(notes/*.md), Bash(git log:*)\n", 1),
    )
    write(
        root,
        ".claude/agents/helper.md",
        "---\nname: helper\ndescription: Tidies notes.\npermissionMode: acceptEdits\n---\n"
        "You tidy the notes in notes/.\n",
    )


def build_bad_definition(root: Path) -> None:
    """An agent whose multi-line description is neither a block scalar nor quoted."""
    write(
        root,
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews changes.\n"
        "  Context: the user asks for a review\n---\nYou review changes.\n",
    )
