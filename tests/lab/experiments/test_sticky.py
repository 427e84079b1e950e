"""Sessions behind a balancer, measured on 3 real reference-server instances, with both balancers.

One module fixture runs every cell below through `run_plan` (each a short Locust run of many
sessions, in its own process); the tests assert the shapes (tests/lab/experiments/helpers.py). The
built-in balancer's cells the main job runs as well are judged from its run (test_sticky_in_the_main_job.py).
HAProxy cells skip with a reason when `haproxy` is not on PATH.
"""

import csv
import shutil
import subprocess
import sys

import pytest

from mcpbench.lab.experiments.sticky import CSV_BASE, StickyCell, StickyPlan, run_plan
from tests.lab.experiments.helpers import IN_THE_MAIN_JOB, JUDGED
from tests.load.helpers import scenario_from_text

# Seconds each (`./dev test -m "not slow"` leaves them out); the fixture's cells take a minute or more under load.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HAPROXY = shutil.which("haproxy") is not None
NEEDS_HAPROXY = pytest.mark.skipif(not HAPROXY, reason="haproxy is not on PATH")
# Short cells: 4 users, 12 sessions of 3 calls (5 are enough to judge), counted, not timed, so that a busy
# machine still gives each cell its sessions (30 s is the bound).
SCENARIO = """
target: http://127.0.0.1:9/mcp
session: session_per_task
calls_per_session: 3
mix:
  - {call: tools/call, tool: echo, arguments: {text: hi}}
users: 4
spawn_rate: 4
sessions: 12
duration: 30s
timeout: 10s
"""
# Every shape on each balancer, but the built-in balancer's shapes the main job runs too.
CELLS = [(balancer, mode, policy) for balancer in ("builtin", "haproxy") for mode, policy in JUDGED
         if balancer != "builtin" or (mode, policy) not in IN_THE_MAIN_JOB]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    balancers = ["builtin"] + (["haproxy"] if HAPROXY else [])
    cells = tuple(StickyCell(mode, policy, balancer, 3) for balancer, mode, policy in CELLS if balancer in balancers)
    folder = tmp_path_factory.mktemp("sticky")
    results = run_plan(StickyPlan(cells, scenario_from_text(SCENARIO, "sticky-test")), folder, say=lambda line: None)
    with open(folder / "sticky.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {(r.cell.mode, r.cell.policy, r.cell.balancer): r for r in results}, rows, folder, cells


@pytest.mark.parametrize(("balancer", "mode", "policy"), [
    pytest.param(*cell, id="-".join(cell), marks=NEEDS_HAPROXY if cell[0] == "haproxy" else ()) for cell in CELLS
])
def test_each_shape_breaks_or_keeps_sessions_as_it_must(measured, balancer, mode, policy):
    """Legacy SSE and stateful Streamable HTTP need stickiness; stateless and 2026-07-28 pass without."""
    results = measured[0]
    JUDGED[(mode, policy)](results[(mode, policy, balancer)])


def test_csv_and_chart_follow_the_contract(measured):
    _, rows, folder, cells = measured
    assert list(rows[0])[: len(CSV_BASE)] == list(CSV_BASE)
    assert sorted((r["mode"], r["policy"], r["balancer"]) for r in rows) == sorted((c.mode, c.policy, c.balancer) for c in cells)
    assert (folder / "sticky.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_instance_passes_every_policy_through_the_cli(tmp_path):
    scenario = tmp_path / "one.yaml"
    policies = "[random, round-robin, sticky, source]"
    scenario.write_text(
        f"modes: [legacy-sse]\npolicies: {policies}\ninstances: [1]\nbalancers: [builtin]\n"
        "calls_per_session: 2\nmix:\n  - {call: tools/list}\nusers: 2\nspawn_rate: 2\nsessions: 2\nduration: 30s\ntimeout: 10s\n"
    )  # 2 sessions a cell, counted, not timed: a 1 s cell on a busy machine ran none
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "mcpbench", "lab", "run", str(scenario), "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with open(out / "sticky.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4
    assert all(int(r["sessions"]) == 2 and r["failed_sessions"] == "0" and float(r["first_instance_share"]) == 1.0 for r in rows), rows
    assert "sessions kept" in done.stdout and "legacy-sse" in done.stdout
