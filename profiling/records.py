"""Measurement records: every measured, traced or estimated number, saved with its provenance.

A record is one JSON file ``<id>.json`` under a directory (journal-agent uses
``<root>/.journal/measurements``). Journal entries cite a record as ``[m:<id>]``.
"""

from __future__ import annotations

import json
import os
import platform
import re
import secrets
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from profiling.citations import cite
from profiling.errors import ProfilingError

Kind = Literal["measured", "traced", "estimated"]

_PREFIX: dict[str, str] = {"measured": "meas", "traced": "trace", "estimated": "est"}
ID_PATTERN = re.compile(r"^(est|trace|meas)-[0-9a-f]{8}$")


class Quantity(BaseModel):
    """One number with its unit, e.g. ``Quantity(name="peak", value=1.5e9, unit="B")``."""

    name: str
    value: float
    unit: str


class Step(BaseModel):
    """One line of a shown calculation: the formula, the numbers put in, and the result."""

    name: str
    formula: str
    substituted: str
    value: float
    unit: str


class MeasurementRecord(BaseModel):
    id: str
    kind: Kind
    created: datetime = Field(default_factory=lambda: datetime.now(UTC))
    title: str
    device: dict[str, Any] = Field(default_factory=dict)
    software: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    results: list[Quantity] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    notes: str = ""
    # Optional extras (not part of the citation contract): e.g. the rendered table text.
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not ID_PATTERN.match(value):
            raise ValueError(
                f"record id {value!r} is not '<est|trace|meas>-<8 lowercase hex digits>'"
            )
        return value

    @field_validator("created")
    @classmethod
    def _check_created(cls, value: datetime) -> datetime:
        # Naive datetimes are ambiguous across machines; we store UTC only.
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("created must be timezone-aware (UTC)")
        return value.astimezone(UTC)

    def result(self, name: str) -> Quantity:
        """The result called ``name``; KeyError if there is none."""
        for quantity in self.results:
            if quantity.name == name:
                return quantity
        raise KeyError(name)

    def citation(self) -> str:
        """How a journal entry cites this record: ``[m:<id>]``."""
        return cite(self.id)


def new_record_id(kind: Kind | str) -> str:
    """A fresh id such as ``est-1a2b3c4d``; ``kind`` is a record kind or an id prefix."""
    prefix = _PREFIX.get(kind, kind)
    if prefix not in _PREFIX.values():
        raise ValueError(f"unknown record kind {kind!r}; use one of {sorted(_PREFIX)}")
    return f"{prefix}-{secrets.token_hex(4)}"


def software_versions(**extra: str) -> dict[str, str | None]:
    """Python and profiling versions, plus torch if it is already imported (never imports it)."""
    from profiling import __version__

    versions: dict[str, str | None] = {
        "python": platform.python_version(),
        "profiling": __version__,
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        versions["torch"] = getattr(torch, "__version__", "unknown")
    versions.update(extra)
    return versions


def host_device() -> dict[str, str | int | None]:
    """A description of the machine the record was made on (no GPU query: that is ``measured``)."""
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


class RecordStore:
    """Records as ``<id>.json`` files in one directory, written atomically.

    The directory is reached from ``anchor`` (default: the project above ``.journal/``, else
    the directory itself) without following a link, and a record file is read only when it
    is a plain file with one name (:mod:`profiling._files`): a cloned project's planted
    ``measurements -> ~/x`` or ``est-….json -> ~/.ssh/id_ed25519`` is refused, never read."""

    def __init__(self, directory: Path, anchor: Path | None = None) -> None:
        from profiling._files import anchor_of

        self.directory = Path(directory).absolute()
        self.anchor = Path(anchor).absolute() if anchor is not None else anchor_of(self.directory)

    def _path(self, record_id: str) -> Path:
        if not ID_PATTERN.match(record_id):
            # Also keeps a hostile id like "../x" from escaping the directory.
            raise KeyError(record_id)
        return self.directory / f"{record_id}.json"

    def save(self, record: MeasurementRecord) -> str:
        """Write ``<id>.json`` (random temp file + fsync + rename) and return the id. The
        record is sealed as this user's first (``extra.seal``, :mod:`profiling._seal`): never
        save again a record loaded from a folder others can write."""
        from profiling import _files, _seal

        _seal.seal(record)
        path = self._path(record.id)
        _files.replace(self.anchor, path, (record.model_dump_json(indent=2) + "\n").encode())
        return record.id

    def exists(self, record_id: str) -> bool:
        import stat

        from profiling._files import open_dir

        try:
            path = self._path(record_id)
        except KeyError:
            return False
        try:
            fd = open_dir(self.anchor, self.directory, create=False)
        except ProfilingError:
            return False
        if fd is None:
            return False
        try:
            st = os.stat(path.name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.close(fd)
        return stat.S_ISREG(st.st_mode)

    def load(self, record_id: str) -> MeasurementRecord:
        """The record; KeyError if there is none, ValueError if its file is corrupt."""
        from profiling import _files

        path = self._path(record_id)
        try:
            raw = _files.read(self.anchor, path)
            if raw is None:
                raise KeyError(record_id)
            text = raw.decode("utf-8")
        except ProfilingError as exc:  # a link, FIFO or hard link planted as a record
            raise ValueError(str(exc)) from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"measurement record {path} is not UTF-8 text: {exc}") from None
        try:
            record = MeasurementRecord.model_validate(json.loads(text))
        except (json.JSONDecodeError, ValidationError) as exc:
            first = str(exc).splitlines()[0]
            raise ValueError(
                f"measurement record {path} is corrupt ({first}); restore it or delete it"
            ) from None
        if record.id != record_id:
            raise ValueError(f"measurement record {path} holds id {record.id!r}, not {record_id!r}")
        return record

    def list(self) -> list[MeasurementRecord]:
        """All readable records, oldest first (corrupt files are left out: :meth:`scan`)."""
        return self.scan()[0]

    def scan(self) -> tuple[list[MeasurementRecord], list[str]]:
        """All readable records, oldest first, and one sentence per file that is not one."""
        records: list[MeasurementRecord] = []
        problems: list[str] = []
        from profiling import _files

        try:
            names = _files.names(self.anchor, self.directory)
        except ProfilingError as exc:  # the folder is a link: nothing in it is ours
            return records, [str(exc)]
        for name in names:
            if not name.endswith(".json"):
                continue
            try:
                records.append(self.load(name.removesuffix(".json")))
            except KeyError:
                continue
            except (ValueError, OSError) as exc:
                problems.append(str(exc))
        records.sort(key=lambda r: (r.created, r.id))
        return records, problems
