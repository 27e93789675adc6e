"""A git directory's ``config`` as a command sees it: its secrets redacted.

``git clone https://oauth2:TOKEN@host/…`` leaves the token in ``.git/config``'s remote URL. A
command needs the file (git reads it for everything) but never the token: the sandbox has no
network to push or fetch with. Redacting what a command *prints* is not enough — a command can
transform what it reads (``rev``, ``base64``, one character a line) past any detector — so
under bubblewrap each git directory's ``config`` that holds a secret is covered, for the call,
by a read-only copy with the secrets replaced by ``[REDACTED]`` (the one detector,
:mod:`journal_agent.secret_text`). Nothing changes on the host; the copy is removed after the
call. (On macOS, whose sandbox cannot cover a file with another, only the output is redacted.)
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from journal_agent import confined

MAX_CONFIG = 1 << 20  # bytes of a git config read to redact (a larger one is left as it is)


def redacted_copies(dot_gits: list[Path]) -> tuple[Path | None, tuple[tuple[Path, Path], ...]]:
    """(the folder holding the copies, or None; (copy, config it covers) for each git directory
    of ``dot_gits`` whose ``config`` holds a secret)."""
    from journal_agent.secret_text import redact_secrets

    folder: Path | None = None
    pairs: list[tuple[Path, Path]] = []
    for dot_git in dot_gits:
        config = dot_git / "config"
        # (hard-linked or not: its secrets are covered either way)
        data = confined.read_planted(dot_git, "config", MAX_CONFIG, one_name=False)
        if data is None or len(data) > MAX_CONFIG:
            continue
        text = data.decode("utf-8", "surrogateescape")
        shown = redact_secrets(text)
        if shown == text:
            continue
        folder = folder or Path(tempfile.mkdtemp(prefix="journal-agent-config-"))
        copy = folder / f"config-{len(pairs)}"
        copy.write_bytes(shown.encode("utf-8", "surrogateescape"))
        copy.chmod(0o444)
        pairs.append((copy, config))
    return folder, tuple(pairs)


def remove_copies(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
