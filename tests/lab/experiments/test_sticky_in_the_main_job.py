"""The sticky cells the main job runs (scenarios/sticky-short.yaml: 3 instances behind the built-in
balancer), judged from its run as test_sticky.py judges its own cells, not run a second time."""

import csv

import pytest

from mcpbench.lab.experiments.sticky import StickyCell, cell_stats
from mcpbench.load.sessions import read_samples
from tests.lab.experiments.helpers import IN_THE_MAIN_JOB, JUDGED


@pytest.fixture(scope="module")
def lab(main_job):
    """The main job's sticky folder (tests/conftest.py's `main_job`: the session's one `mcpbench run`)."""
    proc, folder = main_job
    assert (folder / "lab" / "sticky.csv").is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return folder / "lab"


@pytest.mark.parametrize(("mode", "policy"), IN_THE_MAIN_JOB, ids=[f"{mode}-{policy}" for mode, policy in IN_THE_MAIN_JOB])
def test_each_shape_breaks_or_keeps_sessions_as_it_must(lab, mode, policy):
    cell = StickyCell(mode, policy, "builtin", 3)
    JUDGED[(mode, policy)](cell_stats(cell, read_samples(lab / "cells" / cell.slug / "samples.jsonl")))


def test_the_csv_counts_the_broken_sessions_by_class(lab):
    with open(lab / "sticky.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    spread = next(r for r in rows if (r["mode"], r["policy"], r["balancer"]) == ("legacy-sse", "round-robin", "builtin"))
    assert spread["transport"] == "sse" and int(spread["failed_sessions:session-not-found"]) == int(spread["failed_sessions"]) > 0
