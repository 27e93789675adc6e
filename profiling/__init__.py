"""Memory without the hardware: estimate and trace training steps, keep every number's provenance.

Light at import time: ``torch`` is imported only inside the functions that need it, so
``import profiling`` (and ``profiling.records`` / ``profiling.estimate``) stays fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

from profiling.errors import ProfilingError
from profiling.records import MeasurementRecord, Quantity, RecordStore, Step, new_record_id

__all__ = [
    "MeasurementRecord",
    "ProfilingError",
    "Quantity",
    "RecordStore",
    "Step",
    "__version__",
    "new_record_id",
]
