"""2026-07-28 behind a balancer: requestState sealed and tasks kept per process break under round-robin,
a shared key and a shared task store hold (lab/experiments/sticky.py's state modes, on real instances).

One module fixture runs the cells through `run_plan`: per process and shared behind round-robin, on
the built-in balancer and, where installed, HAProxy, and per process behind `source` (one client,
one instance) on the built-in one; each cell is a 3 s Locust run.
"""

import csv

import pytest

from mcpbench.lab.experiments.sticky import PER_PROCESS, SHARED, Cell, StickyPlan, render, run_plan
from tests.lab.experiments.test_sticky import BALANCERS, HAPROXY
from tests.load.helpers import scenario_from_text

pytestmark = pytest.mark.slow  # instances, balancers and Locust runs: tens of seconds
SCENARIO = """
target: http://127.0.0.1:9/mcp
session: session_per_task
calls_per_session: 2
mix:
  - {call: tools/call, tool: ask, arguments: {question: "ready?"}}
  - {call: tools/call, tool: work, arguments: {ms: 50}, as_task: true}
input_responses:
  elicitation: {action: accept, content: {answer: "yes"}}
users: 3
spawn_rate: 3
duration: 3s
timeout: 10s
"""
ASK, WORK = "tools/call ask", "tools/call work"
# Steps of a kind a cell must have made to be judged: on a busy machine a 3 s cell makes few.
ENOUGH = 3


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    balancers = ["builtin"] + (["haproxy"] if HAPROXY else [])
    cells = tuple(Cell(mode, "round-robin", balancer, 3) for balancer in balancers for mode in (PER_PROCESS, SHARED))
    cells += (Cell(PER_PROCESS, "source", "builtin", 3),)
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
    # 3 instances in turn: a retry or a poll reaches its own instance about 1 time in 3, unless every user's
    # requests interleave just so; most fail.
    assert _failed(spread, ASK, "state-rejected") > 0.3, spread.step_failures
    assert _failed(spread, WORK, "task-expired") > 0.3, spread.step_failures
    assert spread.cell.expected == "break"
    assert any("Invalid or expired requestState" in form for form in spread.forms), spread.forms

def test_per_process_state_holds_when_a_client_stays_on_one_instance(measured):
    results, _, _, _ = measured
    held = results[(PER_PROCESS, "source", "builtin")]  # one client, one instance: nothing to lose
    assert not held.step_failures and held.steps[ASK] >= ENOUGH and held.first_instance_share == 1.0, held.forms
    assert held.cell.expected == "hold"


@pytest.mark.parametrize("balancer", BALANCERS)
def test_a_shared_key_and_task_store_hold_round_robin(measured, balancer):
    results, _, _, _ = measured
    result = results[(SHARED, "round-robin", balancer)]
    assert result.steps[ASK] >= ENOUGH and result.steps[WORK] >= ENOUGH, result.steps
    assert not result.step_failures and result.failed_sessions == 0, result.forms
    assert result.cell.expected == "hold" and result.first_instance_share < 1.0  # spread, and still held


def test_rows_table_and_the_state_chart(measured):
    _, rows, folder, results = measured
    spread = next(r for r in rows if (r["mode"], r["policy"], r["balancer"]) == (PER_PROCESS, "round-robin", "builtin"))
    assert int(spread["failed_calls:state-rejected"]) > 0 and int(spread["failed_calls:task-expired"]) > 0
    shared = next(r for r in rows if (r["mode"], r["policy"], r["balancer"]) == (SHARED, "round-robin", "builtin"))
    assert shared["failed_calls"] == "0" and shared["expected"] == "hold"
    table = render(results)
    assert f"{PER_PROCESS}-round-robin-builtin-3: {ASK} " in table and "state-rejected" in table
    for chart in ("sticky.png", "sticky-state.png"):
        assert (folder / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
