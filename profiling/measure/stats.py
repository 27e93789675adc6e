"""Summary statistics for timings and peaks: median, quartiles, IQR (no numpy needed)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel


class Spread(BaseModel):
    """n samples: median, interquartile range, min, max, mean (seconds or bytes)."""

    n: int
    median: float
    q1: float
    q3: float
    iqr: float
    min: float
    max: float
    mean: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread | None:
        if not values:
            return None
        v = sorted(values)
        if len(v) >= 2:
            # 'inclusive': the quartiles of the samples themselves (as numpy's default).
            q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive")
        else:
            q1 = q3 = v[0]
        return cls(
            n=len(v),
            median=statistics.median(v),
            q1=q1,
            q3=q3,
            iqr=q3 - q1,
            min=v[0],
            max=v[-1],
            mean=statistics.fmean(v),
        )


def running_median_spikes(
    values: Sequence[float], threshold: float, min_history: int = 3
) -> list[tuple[int, float, float]]:
    """Indices whose value exceeds the median of all earlier values by more than ``threshold``
    (0.2 = 20 %), once at least ``min_history`` earlier values exist: ``(index, value, median)``.
    """
    out = []
    for i in range(min_history, len(values)):
        med = statistics.median(values[:i])
        if med > 0 and values[i] > med * (1 + threshold):
            out.append((i, values[i], med))
    return out
