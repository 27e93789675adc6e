"""Background runs: a detached ``python -m journal_agent …`` process per run.

``.journal/runs/<id>/status.json`` holds the run's state (written atomically: temp file +
fsync + rename): ``running`` with the pid, then ``completed`` / ``max_turns`` / ``budget`` /
… / ``failed`` with the result summary and exit code. ``output.log`` holds the process's
stdout and stderr. A run whose process died without writing a result is reported ``failed``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Required, TypedDict, Unpack

from journal_agent import confined
from journal_agent.errors import UserError
from journal_agent.paths import runs_dir
from journal_agent.runtime.result import RunSummary
from journal_agent.runtime.transcript import new_run_id

RUNNING = "running"
FAILED = "failed"


class RunFields(TypedDict, total=False):
    """What the launcher and the run write into a run's status."""

    status: str  # running, then the result's status or failed / interrupted
    kind: str
    target: str
    prompt: str
    started: str  # ISO time, UTC
    pid: int | None
    pid_started: float | None  # tells the run's process from a later one with its pid
    exit_code: int
    message: str
    result: RunSummary


class RunStatus(RunFields, total=False):
    """``status.json`` of a background run."""

    id: Required[str]
    updated: str  # ISO time, UTC, of the last write


def run_dir(root: Path, run_id: str) -> Path:
    return runs_dir(root) / run_id


def _known_id(root: Path, run_id: str) -> None:
    """Refuse a run id that is not one name (``runs show ../x``): no such run."""
    if not run_id or "/" in run_id or os.sep in run_id or run_id in (".", ".."):
        raise UserError(f"'{run_id}' is not a background run id; `journal-agent runs` lists them.")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_status(root: Path, run_id: str, **fields: Unpack[RunFields]) -> RunStatus:
    """Merge ``fields`` into the run's status file, atomically."""
    from journal_agent.locks import held

    _known_id(root, run_id)
    directory = run_dir(root, run_id)
    path = directory / "status.json"
    # The launcher and the run itself both write here: read-modify-write under a lock.
    busy = f"the status of background run {run_id} stayed locked for 30 s; try again"
    with held(directory / "status.lock", 30, busy, anchor=root):
        exists = confined.lstat(root, path) is not None
        old: RunStatus = read_status(root, run_id) if exists else {"id": run_id}
        status: RunStatus = {**old, **fields, "updated": _now()}
        text = json.dumps(status, indent=2, ensure_ascii=False, default=str)
        confined.replace(root, path, text)
    return status


def read_status(root: Path, run_id: str) -> RunStatus:
    _known_id(root, run_id)
    path = run_dir(root, run_id) / "status.json"
    try:
        data = confined.read(root, path)
        if data is None:
            raise FileNotFoundError(path)
        return json.loads(data)
    except FileNotFoundError:
        known = ", ".join(s["id"] for s in list_runs(root)[-5:]) or "none"
        raise UserError(
            f"no background run '{run_id}' under {runs_dir(root)} (recent: {known}); "
            "see `journal-agent runs`."
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} is corrupt ({exc}); remove the run's directory.") from exc


def process_started(pid: int) -> float | None:
    """The process's start time (to tell it from a later process that reuses the pid)."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _alive(pid: int, started: float | None = None) -> bool:
    import psutil

    try:  # reap it if it is our own child (tests, or a long-lived parent)
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        proc = psutil.Process(pid)
        # A zombie is dead (in a container nobody may ever reap it); a different start time
        # means the pid now belongs to another process.
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(proc.create_time() - started) < 1.0
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def refresh(root: Path, status: RunStatus) -> RunStatus:
    """A running status whose process is gone becomes ``failed``."""
    pid, started = status.get("pid"), status.get("pid_started")
    if status.get("status") == RUNNING and pid and not _alive(int(pid), started):
        # The process may have finished between our read and its final write: re-read once.
        status = read_status(root, status["id"])
        if status.get("status") == RUNNING:
            status = write_status(
                root,
                status["id"],
                status=FAILED,
                exit_code=1,
                message="the background process exited without recording a result; "
                f"see {run_dir(root, status['id']) / 'output.log'}.",
            )
    return status


def list_runs(root: Path) -> list[RunStatus]:
    base = runs_dir(root)
    out: list[RunStatus] = []
    for name in confined.listdir(root, base):
        try:
            data = confined.read(root, base / name / "status.json")
            if data is not None:
                out.append(json.loads(data))
        except (OSError, ValueError):
            continue  # a run's folder that is a link, or a torn status: not listed
    return sorted(out, key=lambda s: (s.get("started", ""), s["id"]))


def start(
    root: Path,
    argv: list[str],
    *,
    kind: str,
    target: str,
    prompt: str,
    flags: Sequence[str] = (),
) -> RunStatus:
    """Spawn ``python -m journal_agent <command> <flags> --run-id ID -- <arguments>`` detached
    (``argv`` is the command then its arguments); return its status.

    The arguments come after ``--`` so that a prompt starting with ``-`` stays a prompt."""
    run_id = new_run_id()
    directory = run_dir(root, run_id)
    # -P: the workspace (our working directory) is not put on sys.path, so a typer.py or
    # rich.py a command left there is never imported by the run in place of the library.
    cmd = [
        sys.executable,
        "-P",
        "-m",
        "journal_agent",
        argv[0],
        *flags,
        "--run-id",
        run_id,
        "--yes",
        "--root",
        str(root),
        "--",
        *argv[1:],
    ]
    write_status(
        root,
        run_id,
        status=RUNNING,
        kind=kind,
        target=target,
        prompt=prompt,
        started=_now(),
        pid=None,
    )
    with confined.open_append(root, directory / "output.log") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return write_status(root, run_id, pid=proc.pid, pid_started=process_started(proc.pid))


def wait(root: Path, run_id: str, timeout: float | None = None, poll: float = 0.2) -> RunStatus:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        status = refresh(root, read_status(root, run_id))
        if status.get("status") != RUNNING:
            return status
        if deadline is not None and time.monotonic() >= deadline:
            raise UserError(
                f"run {run_id} is still running after {timeout:g} s; wait again later "
                f"(`journal-agent wait {run_id}`)."
            )
        time.sleep(poll)
