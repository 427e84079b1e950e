"""2026-07-28 behind a balancer: requestState sealed and tasks kept per process break under round-robin,
a shared key and a shared task store hold (lab/experiments/sticky.py's state modes, on real instances).

One module fixture runs the cells through `run_plan`: per process and shared behind round-robin over
2 instances, on the built-in balancer and, where installed, HAProxy; each cell is a Locust run of 10
sessions of one user (at most 30 s: counted, not timed, so that a busy machine still gives each cell its
steps; one user, so that round-robin sends each retry and poll to the other instance, not by chance).
"""

import csv

import pytest

from mcpbench.lab.experiments.sticky import PER_PROCESS, SHARED, StickyCell, StickyPlan, render, run_plan
from mcpbench.lab.topology.cluster import haproxy_path
from tests.load.helpers import scenario_from_text

# Instances, balancers and four Locust runs: some 40 s, and the fixture's setup counts in the first test's time.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SCENARIO = """
target: http://127.0.0.1:9/mcp
session: session_per_task
calls_per_session: 2
mix:
  - {call: tools/call, tool: ask, arguments: {question: "ready?"}}
  - {call: tools/call, tool: work, arguments: {ms: 50}, as_task: true}
input_responses:
  elicitation: {action: accept, content: {answer: "yes"}}
users: 1
spawn_rate: 1
sessions: 10
duration: 30s
timeout: 10s
"""
ASK, WORK = "tools/call ask", "tools/call work"
# Steps of a kind a cell must have made to be judged (10 sessions of 2 steps: about 10 of each).
ENOUGH = 3
needs_haproxy = pytest.mark.skipif(haproxy_path() is None, reason="haproxy is not installed")
BALANCERS = ["builtin", pytest.param("haproxy", marks=needs_haproxy)]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    balancers = ["builtin"] + (["haproxy"] if haproxy_path() is not None else [])
    cells = tuple(StickyCell(mode, "round-robin", balancer, 2) for balancer in balancers for mode in (PER_PROCESS, SHARED))
    folder = tmp_path_factory.mktemp("sticky-state")
    results = run_plan(StickyPlan(cells, scenario_from_text(SCENARIO, "sticky-state-test")), folder, say=lambda line: None)
    with open(folder / "sticky.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {(r.cell.mode, r.cell.policy, r.cell.balancer): r for r in results}, rows, folder, results


def _failed(result, step: str, name: str) -> float:
    made = result.steps[step]
    assert made >= ENOUGH, f"{result.cell.slug}: too few {step} to judge ({made})"
    return result.step_failures[(step, name)] / made


@pytest.mark.parametrize("balancer", BALANCERS)
def test_per_process_state_and_tasks_fail_round_robin(measured, balancer):
    results, _, _, _ = measured
    spread = results[(PER_PROCESS, "round-robin", balancer)]
    # One user, 2 instances in turn: every retry and every first poll reaches the other instance.
    assert _failed(spread, ASK, "state-rejected") > 0.5, spread.step_failures
    assert _failed(spread, WORK, "task-not-found") > 0.5, spread.step_failures  # polled where it was never created
    assert spread.cell.expected == "break"
    assert any("Invalid or expired requestState" in form for form in spread.forms), spread.forms

def test_per_process_state_is_expected_to_hold_where_a_client_stays_on_one_instance():
    assert StickyCell(PER_PROCESS, "source", "builtin", 3).expected == "hold" and StickyCell(PER_PROCESS, "round-robin", "builtin", 1).expected == "hold"


@pytest.mark.parametrize("balancer", BALANCERS)
def test_a_shared_key_and_task_store_hold_round_robin(measured, balancer):
    results, _, _, _ = measured
    result = results[(SHARED, "round-robin", balancer)]
    assert result.steps[ASK] >= ENOUGH and result.steps[WORK] >= ENOUGH, result.steps
    assert not result.step_failures and result.failed_sessions == 0, result.forms
    assert result.cell.expected == "hold"
    # Spread all the same: the per-process cell behind the same balancer lost its retries and polls. (Each
    # step's own instance says little here: one user's steps start on the same instance by parity.)
    assert results[(PER_PROCESS, "round-robin", balancer)].step_failures


def test_rows_table_and_the_state_chart(measured):
    _, rows, folder, results = measured
    spread = next(r for r in rows if (r["mode"], r["policy"], r["balancer"]) == (PER_PROCESS, "round-robin", "builtin"))
    assert int(spread["failed_calls:state-rejected"]) > 0 and int(spread["failed_calls:task-not-found"]) > 0
    shared = next(r for r in rows if (r["mode"], r["policy"], r["balancer"]) == (SHARED, "round-robin", "builtin"))
    assert shared["failed_calls"] == "0" and shared["expected"] == "hold"
    table = render(results)
    assert f"{PER_PROCESS}-round-robin-builtin-2: {ASK} " in table and "state-rejected" in table
    for chart in ("sticky.png", "sticky-state.png"):
        assert (folder / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
