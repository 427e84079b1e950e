"""The statistics of a comparison, vectorised with numpy: no files, no Locust, no plotting.

Quantile intervals come from a bootstrap over chunks (`load/histograms.py` cuts each run into up
to 20 time slices, each step's latencies in a slice an HDR histogram): a replicate draws runs with replacement (when a side
has several), then chunks with replacement within each drawn run, and adds their bucket counts; the
quantile of a replicate is read off its cumulative counts. The interval is the percentile interval of
the replicates (the middle `confidence` share), for each side's quantile and for the difference of
the two sides (replicates of the two sides drawn independently). Drawing whole chunks keeps the
order within a run: drift over a run widens the interval instead of passing for a change.

The error ratios are compared with a two-proportion z-test (pooled; two-sided p-value) and their
difference is given with Newcombe's interval (from Wilson's interval of each side).
"""

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

# Replicates per bootstrap: the ends of a 95 % interval rest on 25 replicates each, and a
# (replicates x buckets) array of a step with a wide spread stays under ~50 MB.
REPLICATES = 1000
# Seeded: the same folders give the same intervals and verdicts on every run of the command.
SEED = 37


def replicate_counts(runs: list[np.ndarray], replicates: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap replicates of a side's bucket counts: (replicates, buckets).

    `runs` holds each run's (chunks, buckets) counts. Runs are drawn with replacement (several runs),
    then, for each run drawn, as many of its chunks with replacement.
    """
    count = len(runs)
    if count == 1:
        drawn = np.ones((replicates, 1), dtype=np.int64)
    else:
        drawn = rng.multinomial(count, np.full(count, 1.0 / count), size=replicates)
    total = np.zeros((replicates, runs[0].shape[1]), dtype=np.float64)
    for index, chunks in enumerate(runs):
        size = chunks.shape[0]
        # The sum of m draws of `size` chunks each is one draw of m * size chunks.
        weights = rng.multinomial(drawn[:, index] * size, np.full(size, 1.0 / size))
        total += weights.astype(np.float64) @ chunks.astype(np.float64)  # floats: BLAS, not numpy's integer loop
    return total


def quantiles(counts: np.ndarray, qs: tuple[float, ...], values: np.ndarray) -> np.ndarray:
    """The quantiles `qs` (0-1) of each row of bucket counts (nearest rank): (rows, len(qs)).

    `values` is each bucket's value; a row without counts gives NaN.
    """
    counts = np.atleast_2d(counts)
    rows, buckets = counts.shape
    cum = np.cumsum(counts, axis=1)
    total = cum[:, -1]
    # One search over all rows: each row shifted above the one before keeps the whole array sorted.
    shift = (np.arange(rows, dtype=np.float64) * (total.max() + 1.0))[:, None]
    flat = (cum + shift).ravel()
    out = np.empty((rows, len(qs)), dtype=np.float64)
    for column, q in enumerate(qs):
        rank = np.maximum(1.0, np.ceil(q * total))
        found = np.searchsorted(flat, rank + shift[:, 0]) - np.arange(rows) * buckets
        out[:, column] = values[np.clip(found, 0, buckets - 1)]
    out[total == 0] = np.nan
    return out


def interval(replicates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of each column of replicates: (low, high)."""
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.nanpercentile(replicates, [tail, 100.0 - tail], axis=0)
    return low, high


@dataclass(frozen=True, slots=True)
class Proportions:
    """Two error ratios compared: `diff` is new - base (a share), with its interval and the test's p-value."""

    base: float
    new: float
    diff: float
    low: float
    high: float
    p_value: float


def two_proportions(base_failures: int, base_count: int, new_failures: int, new_count: int, confidence: float) -> Proportions:
    """The pooled two-proportion z-test of the error ratios, and Newcombe's interval of their difference."""
    p1, p2 = base_failures / base_count, new_failures / new_count
    pooled = (base_failures + new_failures) / (base_count + new_count)
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / base_count + 1.0 / new_count))
    p_value = math.erfc(abs(p2 - p1) / se / math.sqrt(2.0)) if se > 0 else 1.0
    z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    l1, u1 = wilson(base_failures, base_count, z)
    l2, u2 = wilson(new_failures, new_count, z)
    diff = p2 - p1
    return Proportions(p1, p2, diff, diff - math.hypot(p2 - l2, u1 - p1), diff + math.hypot(u2 - p2, p1 - l1), p_value)


def wilson(successes: int, count: int, z: float) -> tuple[float, float]:
    """Wilson's score interval of a proportion."""
    p = successes / count
    scale = 1.0 + z * z / count
    centre = (p + z * z / (2.0 * count)) / scale
    half = z * math.sqrt(p * (1.0 - p) / count + z * z / (4.0 * count * count)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)
