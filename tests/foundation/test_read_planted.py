"""confined.read_planted: what a sandboxed command or a model planted is read only when it is a
plain file (journal_agent/confined.py), and the outbox of records takes nothing else."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from journal_agent.confined import read_planted
from journal_agent.tools.sandbox.call import collect_records
from profiling.records import MeasurementRecord, Quantity, RecordStore


def test_a_plain_file_is_read_and_everything_else_is_none(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"outside the folder")
    (tmp_path / "plain.md").write_bytes(b"one entry\n")
    (tmp_path / "link.md").symlink_to(secret)
    (tmp_path / "folder.md").mkdir()
    os.mkfifo(tmp_path / "fifo.md")  # no writer: a blocking open would never return
    (tmp_path / "large.md").write_bytes(b"x" * 101)

    assert read_planted(tmp_path, tmp_path / "plain.md", 100) == b"one entry\n"
    for name in ("link.md", "folder.md", "fifo.md", "large.md", "missing.md"):
        assert read_planted(tmp_path, tmp_path / name, 100) is None, name
    assert read_planted(tmp_path, tmp_path / "large.md", 101) == b"x" * 101


def test_a_fifo_never_blocks_the_reader(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    answers: list[bytes | None] = []
    reader = threading.Thread(
        target=lambda: answers.append(read_planted(tmp_path, tmp_path / "fifo", 9))
    )
    reader.start()
    reader.join(timeout=60)
    if reader.is_alive():  # unblock it so the test run can end, then fail
        with open(tmp_path / "fifo", "wb"):
            pass
    assert answers == [None]


def test_the_outbox_saves_the_plain_records_and_names_the_planted_ones(tmp_path: Path) -> None:
    outbox, root = tmp_path / "outbox", tmp_path / "project"
    outbox.mkdir()
    root.mkdir()
    good = MeasurementRecord(
        id="est-0000600d",
        kind="estimated",
        title="a record the command made",
        results=[Quantity(name="total", value=1.5, unit="GB")],
    )
    (outbox / "a.json").write_text(good.model_dump_json())
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(good.model_copy(update={"id": "est-0000001c"}).model_dump_json())
    (outbox / "b.json").symlink_to(elsewhere)
    os.mkfifo(outbox / "c.json")

    notes = collect_records(outbox, root)

    store = RecordStore(root / ".journal" / "measurements")
    assert store.exists("est-0000600d") and not store.exists("est-0000001c")
    assert [n.split(":")[0] for n in notes] == [
        "A measurement record the command left (b.json) was not saved",
        "A measurement record the command left (c.json) was not saved",
    ]
