"""What a measurement record that this user's journal-agent did not make may do: be shown as
made elsewhere, never cited as a measurement until adopted.

Every record :class:`profiling.records.RecordStore` saves carries this user's seal
(:mod:`profiling._seal`: an HMAC under a key outside every workspace, hidden inside the
sandbox). A record without one that verifies came with a repository (``git clone`` keeps a
committed ``.journal/measurements/meas-….json``), from another machine, or was changed by
another hand: ``measurements`` lists it as made elsewhere, ``measurements show`` says so, and
``journal append`` / ``journal check`` refuse an entry citing it (``bad_citation``) until the
user reads it and runs ``journal-agent measurements adopt`` on their own terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling._seal import key_path, seal, sealed_here

if TYPE_CHECKING:
    from profiling.records import MeasurementRecord


def made_here(record: MeasurementRecord) -> bool:
    """Whether this user's journal-agent saved ``record`` as it is now."""
    return sealed_here(record)


def not_made_here(record_id: str) -> str:
    """Why an entry may not cite such a record, in one sentence with what to do."""
    return (
        f"[m:{record_id}] was not made by your journal-agent (it came with the repository, from "
        "another machine, or another hand changed it), so its numbers are not your "
        "measurements: measure again and cite the new record, or read it with `journal-agent "
        f"measurements show {record_id}` and adopt it in your terminal with `journal-agent "
        f"measurements adopt {record_id}`"
    )


__all__ = ["key_path", "made_here", "not_made_here", "seal"]
