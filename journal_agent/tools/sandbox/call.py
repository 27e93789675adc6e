"""One sandboxed call, from start to end: the view, the bounds of its process tree, the outbox
for measurement records, and what is settled afterwards (quarantine, records, cgroups).

Every process that runs what a model influenced goes through here: the Bash tool, a command
file's ``!`cmd```, and the profiling children of MemoryProfile and MemoryTrace.

**The outbox.** ``.journal/`` is never writable inside the sandbox: a symlink planted there
would redirect what the host writes later. A measuring child — a process *our code* starts
with *our own* argv (MemoryProfile, MemoryTrace, ``journal-agent trace/profile/fit`` alone on a
Bash line: :func:`journal_agent.tools.own_commands.measuring_argv`) — writes its records
instead into a fresh, empty directory of this call, seen inside as
``/tmp/journal-agent-outbox`` (``JOURNAL_AGENT_OUTBOX``). After the call the host reads each
plain file there (never following a link, bounded in size and number), validates it as a
record, and saves it through :class:`profiling.records.RecordStore`, its own atomic path.

A call that runs a command line (Bash, ``!`cmd```) gets **no** outbox (``outbox=False``): any
process of the line could write one, and a record is cited as a measurement (``[m:id]``). So a
record is only ever picked up from the sandbox of the child that measured it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from journal_agent import confined
from journal_agent.tools.sandbox import confined_argv, guard
from journal_agent.tools.sandbox.config import SandboxSettings
from journal_agent.tools.sandbox.confinement import Confinement, available_confinement
from journal_agent.tools.sandbox.environment import command_env
from journal_agent.tools.sandbox.limits import TreeLimits, prepare
from journal_agent.tools.sandbox.view import View, build_view, remove_precreated
from profiling import watchdog

OUTBOX_INSIDE = "/tmp/journal-agent-outbox"
OUTBOX_ENV = "JOURNAL_AGENT_OUTBOX"
# Set in every sandboxed process: journal-agent inside says why it cannot write its state.
INSIDE_ENV = "JOURNAL_AGENT_SANDBOX"
MAX_RECORDS = 100
MAX_RECORD_BYTES = 4 * 2**20


@dataclass
class Sandboxed:
    """What one call runs in. Inactive (``conf.active`` false): no sandbox at all."""

    root: Path
    settings: SandboxSettings
    conf: Confinement
    view: View | None = None
    tree: TreeLimits | None = None
    outbox: Path | None = None
    notes: list[str] = field(default_factory=list)  # quarantine moves, records refused

    @property
    def active(self) -> bool:
        return self.conf.active and self.view is not None

    def argv(self, argv: list[str], *, inner_limits: bool = True) -> list[str]:
        """``argv`` as it runs in this sandbox: limits set inside (``inner_limits``: by a bash
        of its own; the Bash tool's wrapper sets them itself), then bubblewrap, then the
        cgroups joined from outside."""
        if not self.active or self.view is None:
            return argv
        tree = self.tree or TreeLimits()
        inner = tree.wrap_inner(argv) if inner_limits else argv
        binds = ((self.outbox, Path(OUTBOX_INSIDE)),) if self.outbox is not None else ()
        wrapped = confined_argv(
            self.conf, self.view, inner, tmp_size=self.settings.limits.tmp, binds=binds
        )
        return tree.outer(wrapped)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = command_env(self.settings, extra=extra)
        if self.active:
            env[INSIDE_ENV] = "1"
            env["TMPDIR"] = "/tmp"
            # The home directory is read-only in there: matplotlib's cache goes to the
            # private /tmp instead of a warning on every plot.
            env.setdefault("MPLCONFIGDIR", "/tmp/matplotlib")
            if self.outbox is not None:
                env[OUTBOX_ENV] = OUTBOX_INSIDE
        return env


@contextlib.contextmanager
def sandboxed(
    root: Path,
    settings: SandboxSettings,
    *,
    writes: bool,
    read_deny: tuple[str, ...] = (),
    home: Path | None = None,
    outbox: bool = False,
) -> Iterator[Sandboxed]:
    """Prepare one call; afterwards move what it created of the protected paths into
    quarantine, save the records it left in the outbox, remove its cgroups. ``outbox``: only
    for a measuring child of ours (see the module's docstring), never a command line."""
    conf = available_confinement(settings, root)
    box = Sandboxed(root, settings, conf)
    if not conf.active:
        yield box
        return
    box.view = build_view(root, settings, writes=writes, read_deny=read_deny, home=home)
    # Protected paths that do not exist yet cannot be mounted read-only: what the command
    # creates of them is moved into quarantine once it has ended (see .guard).
    absent = guard.absent(box.view) if box.view.writes else []
    try:
        if conf.kind == "bubblewrap":
            box.tree = prepare(settings.limits)
            if outbox:
                box.outbox = Path(tempfile.mkdtemp(prefix="journal-agent-outbox-"))
                # Killed before the finally below (SIGKILL, OOM): the watchdog removes it.
                watchdog.folder(box.outbox)
        yield box
    finally:
        if box.tree is not None:
            box.tree.close()  # the tree has ended: its PID namespace is gone
        if box.view.writes:
            box.notes += guard.settle(box.view, absent)
        remove_precreated(box.view)
        if box.outbox is not None:
            box.notes += collect_records(box.outbox, root)
            shutil.rmtree(box.outbox, ignore_errors=True)
            watchdog.release(folder=box.outbox)


def collect_records(outbox: Path, root: Path) -> list[str]:
    """Save the measurement records a sandboxed journal-agent left in ``outbox``; one note per
    file refused (nothing else is said: the command printed the ids it made)."""
    from pydantic import ValidationError

    from journal_agent.paths import measurements_dir
    from profiling.records import MeasurementRecord, RecordStore

    notes: list[str] = []
    try:
        names = sorted(os.listdir(outbox))
    except OSError:
        return notes
    store: RecordStore | None = None
    for name in names[:MAX_RECORDS]:
        data = confined.read_planted(outbox, name, MAX_RECORD_BYTES)
        try:
            if data is None:
                raise ValueError("not a plain file of at most 4 MiB")
            record = MeasurementRecord.model_validate_json(data[:MAX_RECORD_BYTES])
        except (ValidationError, ValueError) as exc:
            first = str(exc).splitlines()[0]
            notes.append(f"A measurement record the command left ({name}) was not saved: {first}.")
            continue
        store = store or RecordStore(measurements_dir(root))
        if store.exists(record.id):  # never replaces one: records are cited by id
            notes.append(f"A measurement record the command left ({name}) was not saved: "
                         f"{record.id} exists already.")  # fmt: skip
            continue
        store.save(record)
    if len(names) > MAX_RECORDS:
        notes.append(f"Only the first {MAX_RECORDS} measurement records of this call were saved.")
    return notes
