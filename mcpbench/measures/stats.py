"""Small statistics shared by load results, the lab's experiments, analysis, the live view and benchmarks."""

import math
import statistics


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0–100) by linear interpolation; NaN for no samples."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary(samples: list[float]) -> dict[str, float]:
    """Count, p50, p90, p99 and mean of samples (in the unit given)."""
    return {
        "count": len(samples),
        "p50": percentile(samples, 50),
        "p90": percentile(samples, 90),
        "p99": percentile(samples, 99),
        "mean": statistics.fmean(samples) if samples else float("nan"),
    }


class LogHistogram:
    """Percentiles of an endless stream of positive values (latencies) in bounded memory.

    Each value is counted in a bucket of width `GROWTH` - 1 relative to its lower edge (2%), so a
    percentile is off by at most 1% of itself (the bucket's geometric middle is returned), and a
    stream of any length holds at most one bucket per 2% of the range its values span (about 1,100
    from 1 µs to an hour). Adding is O(1); a percentile walks the buckets in order.
    """

    GROWTH = 1.02
    FLOOR = 1e-6  # values below it (and 0) share the first bucket

    def __init__(self) -> None:
        self.count = 0
        self.buckets: dict[int, int] = {}
        self._log_growth = math.log(self.GROWTH)

    def add(self, value: float) -> None:
        index = int(math.log(value / self.FLOOR) / self._log_growth) if value > self.FLOOR else 0
        self.buckets[index] = self.buckets.get(index, 0) + 1
        self.count += 1

    def percentile(self, q: float) -> float:
        """The q-th percentile (0–100), within 1%; NaN for no values."""
        if not self.count:
            return float("nan")
        rank = max(1, math.ceil(self.count * q / 100))
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                return self.FLOOR * self.GROWTH ** (index + 0.5) if index else self.FLOOR
        return float("nan")  # unreachable: the counts add up to `count`
