"""One finding of ``journal-agent doctor``: what was checked, whether it is fine, one line of
detail. Its own module so that the plugin's checks (doctor_plugin) and the rest (doctor) share
it without importing each other."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)
