"""The statistics of a comparison: no files, no Locust, no plotting.

A quantile is compared over **units**, each giving one estimate of it: runs, when the sides have
three runs or more in all; otherwise stretches of time of each run (batches of its time slices:
the batch-means method of simulation output analysis, which holds when calls close in time are alike
and calls seconds apart less so, as on a shared machine). Each unit's quantile is read off its
bucket counts (`quantiles`, nearest rank), and the two sides' logs of them are compared with
Student's t (`t_over_units`): paired, when the two runs ran side by side and their batches are the
same stretches of wall time (the machine's load, the same for both, drops out of the difference);
else unpaired, the variance pooled over both sides (on the log scale a spread is a share, so the sides
share it whatever their latency). The spread between the units is what an interval is made of:
between runs, that is everything that differs from run to run; between batches of one run a side,
the variation within the runs only, which is all one run a side can measure.

The error ratios are compared with a two-proportion z-test (pooled; two-sided p-value) and their
difference is given with Newcombe's interval (from Wilson's interval of each side).
"""

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

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


@dataclass(frozen=True, slots=True)
class UnitsEstimate:
    """A quantile compared over units (logs of ms): each side's mean and interval, the difference's."""

    base: tuple[float, float, float]  # mean log, low, high
    new: tuple[float, float, float]
    diff: tuple[float, float, float]  # new - base: the log of the ratio
    df: int


def t_over_units(base: np.ndarray, new: np.ndarray, confidence: float, *, paired: bool = False,
                 centre: tuple[float, float] | None = None) -> UnitsEstimate | None:
    """Student's t over the units' quantiles (`base`, `new`: ms > 0, one a unit), on their logs.

    Paired: `base[i]` and `new[i]` were measured at the same time; the interval of the difference
    comes from the spread of the differences (n - 1 degrees of freedom). Unpaired: the variance is
    pooled over both sides (k_base + k_new - 2), which lets a side of one run be compared with a
    side of several. `centre`: each side's quantile over all its units (ms), the intervals put
    around its log (sectioning: a quantile of fewer samples leans low or high, the spread of the
    units' values does not); else the means of the units' logs. None when there are too few units
    to estimate a spread.
    """
    base, new = np.log(np.asarray(base, dtype=np.float64)), np.log(np.asarray(new, dtype=np.float64))
    mean_b, mean_n = (math.log(centre[0]), math.log(centre[1])) if centre else (float(base.mean()), float(new.mean()))
    if paired:
        n = len(base)
        if len(new) != n or n < 2:
            return None
        df = n - 1
        se_b, se_n, se_d = (float(v.std(ddof=1)) / math.sqrt(n) for v in (base, new, new - base))
    else:
        df = len(base) + len(new) - 2
        if df < 1 or not len(base) or not len(new):
            return None
        pooled = math.sqrt((((base - base.mean()) ** 2).sum() + ((new - new.mean()) ** 2).sum()) / df)
        se_b, se_n = pooled / math.sqrt(len(base)), pooled / math.sqrt(len(new))
        se_d = pooled * math.sqrt(1.0 / len(base) + 1.0 / len(new))
    t = student_t(df, confidence)
    return UnitsEstimate(*((mean, mean - t * se, mean + t * se) for mean, se in ((mean_b, se_b), (mean_n, se_n), (mean_n - mean_b, se_d))), df)


def student_t(df: int, confidence: float) -> float:
    """The two-sided critical value of Student's t (`df` degrees of freedom) at `confidence`:
    bisection on the exact distribution (no statistics library is kept for one function)."""
    low, high = 0.0, 1.0
    while _t_within(high, df) < confidence:
        high *= 2.0
    for _ in range(100):
        middle = (low + high) / 2.0
        low, high = (middle, high) if _t_within(middle, df) < confidence else (low, middle)
    return (low + high) / 2.0


def _t_within(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with a whole number of degrees of freedom (Abramowitz & Stegun 26.7.3-4)."""
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    term, total = 1.0, 1.0
    if df % 2:
        # odd: (2/π)(θ + sin θ cos θ (1 + 2/3 cos²θ + 2·4/(3·5) cos⁴θ + …))
        for k in range(1, (df - 1) // 2):
            term *= cos2 * (2 * k) / (2 * k + 1)
            total += term
        return 2.0 / math.pi * (theta + (math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0))
    # even: sin θ (1 + 1/2 cos²θ + 1·3/(2·4) cos⁴θ + …)
    for k in range(1, df // 2):
        term *= cos2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


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
