"""The statistics: quantiles of bucket counts, the bootstrap over chunks, the two-proportion test."""

import numpy as np
import pytest

from mcpbench.compare.stats import interval, quantiles, replicate_counts, two_proportions


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


def test_one_run_replicates_keep_its_size_and_several_runs_draw_runs():
    chunks = np.array([[5, 0, 0], [0, 5, 0], [0, 0, 5], [5, 0, 0]])
    rng = np.random.default_rng(2)
    one = replicate_counts([chunks], 200, rng)
    assert one.shape == (200, 3) and (one.sum(axis=1) == 20).all()
    assert len({tuple(row) for row in one}) > 10  # chunks are drawn, not copied
    other = np.array([[0, 0, 7], [0, 0, 7]])
    two = replicate_counts([chunks, other], 300, rng)
    # a replicate holds two runs' worth of draws: two of the first, two of the second, or one of each
    assert set(two.sum(axis=1)) <= {40.0, 28.0, 34.0} and len(set(two.sum(axis=1))) == 3


def test_the_interval_of_a_median_covers_the_truth_most_of_the_time():
    rng = np.random.default_rng(3)
    values = np.arange(200, dtype=float)
    covered = 0
    for _ in range(40):
        samples = rng.integers(0, 200, size=2000)  # uniform: the median is 99.5
        chunks = np.stack([np.bincount(part, minlength=200) for part in np.array_split(samples, 20)])
        low, high = interval(quantiles(replicate_counts([chunks], 400, rng), (0.5,), values), 0.95)
        covered += low[0] <= 99.5 <= high[0]
    assert covered >= 33  # 95 % nominal; 40 tries


def test_two_proportions():
    same = two_proportions(10, 1000, 10, 1000, 0.95)
    assert same.diff == 0 and same.p_value == pytest.approx(1.0) and same.low < 0 < same.high
    worse = two_proportions(10, 1000, 40, 1000, 0.95)
    assert worse.diff == pytest.approx(0.03) and worse.p_value < 0.001 and 0 < worse.low < 0.03 < worse.high
    none = two_proportions(0, 100, 0, 100, 0.95)
    assert none.p_value == 1.0 and none.low <= 0 <= none.high
