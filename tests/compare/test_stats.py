"""The statistics: quantiles of bucket counts, t over units (runs, stretches of runs side by side), the two-proportion test."""

import math

import numpy as np
import pytest

from mcpbench.compare.stats import quantiles, student_t, t_over_units, two_proportions
from mcpbench.compare.units import MAX_BATCHES, batch_count, batches, side_by_side
from mcpbench.load.histograms import StepRun


def test_quantiles_of_counts_are_the_nearest_rank_of_the_samples():
    rng = np.random.default_rng(1)
    samples = rng.integers(0, 50, size=1001)
    counts = np.bincount(samples, minlength=50)
    values = np.arange(50, dtype=float)
    got = quantiles(np.stack([counts, counts]), (0.5, 0.95, 0.99), values)
    ordered = np.sort(samples)
    want = [ordered[int(np.ceil(q * len(samples))) - 1] for q in (0.5, 0.95, 0.99)]
    assert got.tolist() == [want, want]


def test_a_row_without_counts_has_no_quantile():
    got = quantiles(np.array([[0, 0, 0], [0, 3, 0]]), (0.5,), np.array([1.0, 2.0, 3.0]))
    assert np.isnan(got[0, 0]) and got[1, 0] == 2.0


@pytest.mark.parametrize(("df", "confidence", "table"), [(1, 0.95, 12.706), (2, 0.95, 4.303), (3, 0.99, 5.841), (5, 0.999, 6.869),
                                                          (6, 0.95, 2.447), (10, 0.9, 1.812), (38, 0.95, 2.024)])
def test_student_t_matches_the_table(df, confidence, table):
    assert student_t(df, confidence) == pytest.approx(table, abs=0.001)


def _median_of(rng, level: float, size: int = 400) -> float:
    return float(np.median(level * np.exp(rng.normal(0.0, 0.3, size))))


def test_runs_as_units_cover_a_spread_between_runs():
    """Runs whose whole level moves (±10 %, as runs on a busy machine do): the t over 3 runs a side keeps
    to its 95 %, where the noise within one run (what one run a side can see) is far smaller."""
    rng = np.random.default_rng(4)
    wrong, trials = 0, 200
    for _ in range(trials):
        base, new = ([_median_of(rng, 100.0 * np.exp(rng.normal(0.0, 0.1))) for _ in range(3)] for _ in range(2))
        estimate = t_over_units(np.array(base), np.array(new), 0.95)
        wrong += not estimate.diff[1] <= 0 <= estimate.diff[2]
    assert wrong <= 0.09 * trials  # 5 % nominal
    # a side of one run against a side of two: the spread comes from the side that has it; two runs in all: none
    assert t_over_units(np.array([100.0]), np.array([101.0, 99.0]), 0.95).df == 1
    assert t_over_units(np.array([100.0]), np.array([101.0]), 0.95) is None


def test_paired_units_leave_out_what_the_machine_did_to_both():
    """Two runs side by side through a machine whose load swings from stretch to stretch (x1 to x3):
    paired stretch by stretch, a 10 % slower side is found; unpaired, the swings swamp it."""
    rng = np.random.default_rng(5)
    swings = np.exp(rng.uniform(0.0, np.log(3.0), 10))
    base = np.array([_median_of(rng, 20.0 * swing) for swing in swings])
    new = np.array([_median_of(rng, 22.0 * swing) for swing in swings])
    paired = t_over_units(base, new, 0.95, paired=True)
    assert paired.df == 9 and 0 < paired.diff[1] < np.log(1.1) < paired.diff[2]
    unpaired = t_over_units(base, new, 0.95)
    assert unpaired.diff[1] < 0 < unpaired.diff[2]
    assert t_over_units(base, new[:9], 0.95, paired=True) is None  # pairs need as many on each side


def _run(start: float, slices: int, slice_s: float, per_slice: int = 10) -> StepRun:
    chunks = np.zeros((slices, 8), dtype=np.int64)
    chunks[:, 3] = per_slice
    return StepRun(chunks, np.full(slices, per_slice), np.zeros(slices, dtype=np.int64), slice_s, start)


def test_runs_side_by_side_are_laid_on_the_time_both_ran():
    used = np.arange(8)
    # base ran 0-10 s, new 1-11 s: 9 s in common, cut in 1 s cells (each run's slice: 0.5 s)
    aligned = side_by_side(_run(100.0, 20, 0.5), _run(101.0, 20, 0.5), used)
    assert aligned is not None
    base, new, common = aligned
    assert common == pytest.approx(9.0) and base.shape == new.shape == (18, 8)
    assert base.sum() == new.sum() == 18 * 10  # the slices outside the common time left out
    # one after the other, or no start time: not side by side
    assert side_by_side(_run(100.0, 20, 0.5), _run(111.0, 20, 0.5), used) is None
    assert side_by_side(_run(100.0, 20, 0.5), _run(math.nan, 20, 0.5), used) is None
    # stretches: consecutive cells added up; as many as have the samples a quantile needs, at most MAX_BATCHES
    assert batches(base, 3).shape == (3, 8) and batches(base, 3).sum() == base.sum()
    assert batch_count([base, new], 10) == MAX_BATCHES and batch_count([base, new], 45) == 4


def test_two_proportions():
    same = two_proportions(10, 1000, 10, 1000, 0.95)
    assert same.diff == 0 and same.p_value == pytest.approx(1.0) and same.low < 0 < same.high
    worse = two_proportions(10, 1000, 40, 1000, 0.95)
    assert worse.diff == pytest.approx(0.03) and worse.p_value < 0.001 and 0 < worse.low < 0.03 < worse.high
    none = two_proportions(0, 100, 0, 100, 0.95)
    assert none.p_value == 1.0 and none.low <= 0 <= none.high
