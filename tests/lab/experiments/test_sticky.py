"""Sessions behind a balancer, measured on 3 real reference-server instances, with both balancers.

One module fixture runs every cell below through `run_plan` (each a short Locust run of many
sessions, in its own process); the tests assert the shapes. HAProxy cells skip with a reason when
`haproxy` is not on PATH.
"""

import csv
import shutil
import subprocess
import sys

import pytest

from mcpbench.lab.experiments.sticky import CSV_BASE, Cell, StickyPlan, run_plan
from tests.load.helpers import scenario_from_text

pytestmark = pytest.mark.slow  # seconds each: `./dev test -m "not slow"` leaves them out

HAPROXY = shutil.which("haproxy") is not None
BALANCERS = ["builtin", pytest.param("haproxy", marks=pytest.mark.skipif(not HAPROXY, reason="haproxy is not on PATH"))]
# Short cells: 4 users, 2 s, sessions of 3 calls; each cell still holds dozens of sessions (5 are enough to judge).
SCENARIO = """
target: http://127.0.0.1:9/mcp
session: session_per_task
calls_per_session: 3
mix:
  - {call: tools/call, tool: echo, arguments: {text: hi}}
users: 4
spawn_rate: 4
duration: 2s
timeout: 10s
"""
SHAPES = [
    ("legacy-sse", "round-robin"), ("legacy-sse", "sticky"), ("legacy-sse", "source"),
    ("stateful-sse", "round-robin"), ("stateful-json", "random"),
    ("stateless", "round-robin"), ("2026-07-28", "random"),
]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    balancers = ["builtin"] + (["haproxy"] if HAPROXY else [])
    cells = tuple(Cell(mode, policy, balancer, 3) for balancer in balancers for mode, policy in SHAPES)
    folder = tmp_path_factory.mktemp("sticky")
    results = run_plan(StickyPlan(cells, scenario_from_text(SCENARIO, "sticky-test")), folder, say=lambda line: None)
    with open(folder / "sticky.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {(r.cell.mode, r.cell.policy, r.cell.balancer): r for r in results}, rows, folder


def _broken(result) -> float:
    assert result.sessions >= 5, f"{result.cell.slug}: too few sessions to judge ({result.sessions})"
    return result.failed_sessions / result.sessions


@pytest.mark.parametrize("balancer", BALANCERS)
def test_legacy_sse_needs_stickiness(measured, balancer):
    results, _, _ = measured
    spread = results[("legacy-sse", "round-robin", balancer)]
    assert _broken(spread) > 0.5, spread.forms
    assert spread.sessions_by_class["session-not-found"] == spread.failed_sessions
    assert any("HTTP 404" in form for form in spread.forms)
    for policy in ("sticky", "source"):
        kept = results[("legacy-sse", policy, balancer)]
        assert _broken(kept) == 0, (policy, kept.forms)
        assert kept.first_instance_share == 1.0


@pytest.mark.parametrize("balancer", BALANCERS)
def test_stateful_streamable_http_loses_sessions(measured, balancer):
    results, _, _ = measured
    for mode, policy in (("stateful-sse", "round-robin"), ("stateful-json", "random")):
        result = results[(mode, policy, balancer)]
        assert _broken(result) > 0.5, (mode, result.forms)
        assert set(result.sessions_by_class) == {"session-not-found"}
        assert any("HTTP 404" in form and "Session not found" in form for form in result.forms)


@pytest.mark.parametrize("balancer", BALANCERS)
def test_stateless_and_2026_pass_without_stickiness(measured, balancer):
    results, _, _ = measured
    for mode, policy in (("stateless", "round-robin"), ("2026-07-28", "random")):
        result = results[(mode, policy, balancer)]
        assert _broken(result) == 0, (mode, result.forms)
        assert result.first_instance_share < 1.0  # requests really were spread over the instances


def test_csv_and_chart_follow_the_contract(measured):
    _, rows, folder = measured
    assert list(rows[0])[: len(CSV_BASE)] == list(CSV_BASE)
    assert len(rows) == len(SHAPES) * (2 if HAPROXY else 1)
    spread = next(r for r in rows if (r["mode"], r["policy"], r["balancer"]) == ("legacy-sse", "round-robin", "builtin"))
    assert spread["transport"] == "sse" and int(spread["failed_sessions:session-not-found"]) == int(spread["failed_sessions"]) > 0
    assert (folder / "sticky.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_instance_passes_every_policy_through_the_cli(tmp_path):
    scenario = tmp_path / "one.yaml"
    policies = "[random, round-robin, sticky, source]"
    scenario.write_text(
        f"modes: [legacy-sse]\npolicies: {policies}\ninstances: [1]\nbalancers: [builtin]\n"
        "calls_per_session: 2\nmix:\n  - {call: tools/list}\nusers: 2\nspawn_rate: 2\nduration: 1s\ntimeout: 10s\n"
    )
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "mcpbench", "lab", "run", str(scenario), "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with open(out / "sticky.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4
    assert all(int(r["sessions"]) > 0 and r["failed_sessions"] == "0" and float(r["first_instance_share"]) == 1.0 for r in rows), rows
    assert "sessions kept" in done.stdout and "legacy-sse" in done.stdout
