"""Small statistics (percentiles) shared by load results, the lab's experiments, analysis and benchmarks."""

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
