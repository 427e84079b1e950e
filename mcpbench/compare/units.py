"""The units a comparison judges a quantile over, as bucket counts: stretches of time of a run.

With one run a side, a run's time slices (`load/histograms.py`) are grouped into a few consecutive
batches, each one estimate of the quantile (`stats.t_over_units`). When the two runs ran side by
side, their slices are first laid on one timeline (the `start` histograms.json keeps) and cut into
cells of the time both ran, so that batch i of each side is the same stretch of wall time.
"""

import math

import numpy as np

from mcpbench.load.histograms import StepRun

# Batches a run is cut into at most: enough degrees of freedom for t (9, or 18 unpaired), long
# enough (a tenth of the run) that the drift of a shared machine over a second or two stays inside them.
MAX_BATCHES = 10
# Two runs count as side by side when the time both ran is at least this share of the shorter one.
OVERLAP = 0.5


def side_by_side(base: StepRun, new: StepRun, used: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
    """Each run's counts (`used` buckets) per cell of the time both ran, and that time (s); None
    when the runs have no start time or did not run side by side (`OVERLAP`).

    A slice goes to the cell holding its middle; slices outside the common time are left out.
    """
    runs = (base, new)
    if any(math.isnan(run.start) or run.slice_s <= 0 or not len(run.chunks) for run in runs):
        return None
    ends = [run.start + len(run.chunks) * run.slice_s for run in runs]
    low, high = max(run.start for run in runs), min(ends)
    shorter = min(end - run.start for run, end in zip(runs, ends))
    if high - low < OVERLAP * shorter:
        return None
    cells = max(1, int((high - low) / max(run.slice_s for run in runs)))
    out = []
    for run in runs:
        middles = run.start + (np.arange(len(run.chunks)) + 0.5) * run.slice_s
        cell = np.floor((middles - low) / (high - low) * cells).astype(np.int64)
        inside = (cell >= 0) & (cell < cells)
        counts = np.zeros((cells, len(used)), dtype=np.int64)
        np.add.at(counts, cell[inside], run.chunks[inside][:, used])
        out.append(counts)
    return out[0], out[1], high - low


def batches(cells: np.ndarray, count: int) -> np.ndarray:
    """`cells` (cells, buckets) added up into `count` consecutive batches: (count, buckets)."""
    return np.stack([part.sum(axis=0) for part in np.array_split(cells, count)])


def batch_count(sides: list[np.ndarray], need: int) -> int:
    """How many batches the cells of each side can be cut into with `need` samples a batch on average
    (at most `MAX_BATCHES`, at most one a cell)."""
    return min([MAX_BATCHES] + [len(cells) for cells in sides] + [int(cells.sum()) // need for cells in sides])
