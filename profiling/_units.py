"""Kept so ``from profiling._units import ...`` written before 0.1.x keeps working; use
:mod:`profiling.units`."""

from profiling.units import GB, GiB, fmt_bytes, fmt_count, parse_count

__all__ = ["GB", "GiB", "fmt_bytes", "fmt_count", "parse_count"]
