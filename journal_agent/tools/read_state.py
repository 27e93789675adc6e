"""Read tracking that outlives one process: ``journal-agent tool Read`` then ``tool Edit``.

Each ``journal-agent tool`` invocation is a run of its own, so an in-memory
:class:`~journal_agent.tools.read_tracking.ReadTracker` would forget the Read before the Edit
("has not been read yet"). The command line keeps what its tool calls read in
``.journal/tool-reads.json`` instead: the same fingerprints (content hash and stat identity),
so the same staleness check applies — a file changed on disk since the ``tool Read`` is refused
as "modified since read", exactly as within one agent run.

The file is ours, beside the journal: replaced atomically under ``.journal/locks/``, merged on
every write (two shells reading at once both keep their reads), read without following a
symlink, bounded (the newest entries are kept), and only paths inside this workspace are
taken from it. An unreadable or foreign file counts as "nothing read yet", never as "read".
"""

from __future__ import annotations

import json
from pathlib import Path

from journal_agent.paths import state_dir
from journal_agent.tools.read_tracking import Fingerprint, ReadTracker

FILE = "tool-reads.json"
_MAX_ENTRIES = 500
_LOCK_TIMEOUT_S = 10.0


class PersistentReadTracker(ReadTracker):
    """A :class:`ReadTracker` loaded from, and written through to, ``.journal/tool-reads.json``."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = Path(root).resolve()
        self.path = state_dir(self.root) / FILE
        for path, fingerprint in self._load().items():
            super().record(path, fingerprint)

    def record(self, path: Path, fingerprint: Fingerprint) -> None:
        super().record(path, fingerprint)
        self._update(path, fingerprint)

    def forget(self, path: Path) -> None:
        super().forget(path)
        self._update(path, None)

    # -- the file ---------------------------------------------------------------------------

    def _load(self) -> dict[Path, Fingerprint]:
        from journal_agent import confined

        try:
            # A link or FIFO planted there records no read (and the next write says why).
            handle = confined.open_read(self.root, self.path)
            if handle is None:
                return {}
            with handle:
                data = json.loads(handle.read(4_000_000))
            entries = data["reads"]
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        out: dict[Path, Fingerprint] = {}
        for key, fp in entries.items() if isinstance(entries, dict) else ():
            path = Path(key)
            if not path.is_absolute() or not path.is_relative_to(self.root):
                continue  # only this workspace's files
            try:
                sha = fp.get("sha256")
                out[path] = Fingerprint(
                    str(sha) if sha else None,
                    int(fp["size"]),
                    int(fp["mtime_ns"]),
                    int(fp["ctime_ns"]),
                    int(fp["inode"]),
                )
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
        return out

    def _update(self, path: Path, fingerprint: Fingerprint | None) -> None:
        from journal_agent import confined
        from journal_agent.locks import held

        lock = state_dir(self.root) / "locks" / "tool-reads.lock"
        with held(lock, _LOCK_TIMEOUT_S, f"{lock} stayed locked; try again.", anchor=self.root):
            current = self._load()
            current.pop(path, None)
            if fingerprint is not None:
                current[path] = fingerprint  # newest last: the oldest go first below
            kept = list(current.items())[-_MAX_ENTRIES:]
            data = {
                "reads": {
                    str(p): {
                        "sha256": f.sha256,
                        "size": f.size,
                        "mtime_ns": f.mtime_ns,
                        "ctime_ns": f.ctime_ns,
                        "inode": f.inode,
                    }
                    for p, f in kept
                }
            }
            confined.replace(self.root, self.path, json.dumps(data, indent=1) + "\n", durable=False)
