"""Records round-trip through the store; bad ids and corrupt files fail clearly."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from profiling.records import (
    MeasurementRecord,
    Quantity,
    RecordStore,
    Step,
    new_record_id,
)


def _record(kind: str = "estimated", **kw) -> MeasurementRecord:
    return MeasurementRecord(
        id=new_record_id(kind),
        kind=kind,
        title="7B mixed AdamW",
        device={"host": "h"},
        software={"python": "3.11"},
        config={"params": 7e9},
        results=[Quantity(name="per_gpu_total", value=77e9, unit="B")],
        steps=[Step(name="weights", formula="Ψ·2", substituted="7e9·2", value=14e9, unit="B")],
        **kw,
    )


def test_ids_have_prefix_and_hex() -> None:
    assert new_record_id("estimated").startswith("est-")
    assert new_record_id("traced").startswith("trace-")
    assert new_record_id("measured").startswith("meas-")
    ident = new_record_id("est")
    assert len(ident.split("-")[1]) == 8
    assert len({new_record_id("traced") for _ in range(200)}) == 200
    with pytest.raises(ValueError):
        new_record_id("guessed")


def test_round_trip(tmp_path) -> None:
    store = RecordStore(tmp_path / ".journal" / "measurements")
    assert store.list() == []
    record = _record()
    assert store.save(record) == record.id
    assert store.exists(record.id)
    loaded = store.load(record.id)
    assert loaded == record
    assert loaded.created.tzinfo is not None
    assert loaded.result("per_gpu_total").value == 77e9
    assert [r.id for r in store.list()] == [record.id]
    # No temp files are left behind.
    assert sorted(p.name for p in store.directory.iterdir()) == [f"{record.id}.json"]


def test_list_is_oldest_first_and_skips_corrupt(tmp_path) -> None:
    store = RecordStore(tmp_path)
    old = _record("traced", created=datetime.now(UTC) - timedelta(days=1))
    new = _record("measured")
    store.save(new)
    store.save(old)
    (tmp_path / "est-deadbeef.json").write_text("{not json", encoding="utf-8")
    assert [r.id for r in store.list()] == [old.id, new.id]


def test_missing_and_corrupt(tmp_path) -> None:
    store = RecordStore(tmp_path)
    with pytest.raises(KeyError):
        store.load("est-00000000")
    with pytest.raises(KeyError):
        store.load("../../etc/passwd")
    assert not store.exists("../x")
    (tmp_path / "est-00000000.json").write_text('{"id": "est-00000000"}', encoding="utf-8")
    with pytest.raises(ValueError, match="corrupt"):
        store.load("est-00000000")


def test_created_must_be_aware_and_is_stored_as_utc() -> None:
    with pytest.raises(ValidationError):
        _record(created=datetime(2026, 1, 1))
    plus2 = timezone(timedelta(hours=2))
    rec = _record(created=datetime(2026, 1, 1, 12, tzinfo=plus2))
    assert rec.created == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert rec.created.utcoffset() == timedelta(0)


def test_bad_id_rejected() -> None:
    with pytest.raises(ValidationError):
        MeasurementRecord(id="est-XYZ", kind="estimated", title="t", results=[])


def test_json_is_plain_and_readable(tmp_path) -> None:
    store = RecordStore(tmp_path)
    record = _record()
    store.save(record)
    data = json.loads((tmp_path / f"{record.id}.json").read_text(encoding="utf-8"))
    assert data["kind"] == "estimated"
    assert data["results"][0] == {"name": "per_gpu_total", "value": 77e9, "unit": "B"}


def test_light_imports() -> None:
    code = (
        "import sys, profiling, profiling.records, profiling.estimate.memory, "
        "profiling.estimate.record, profiling.trace.report, profiling.models.workloads; "
        "bad = [m for m in ('torch', 'journal_agent', 'matplotlib') if m in sys.modules]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
