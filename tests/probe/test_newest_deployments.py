"""The 2026-07-28 checks on lab deployments, each verdict both ways: a healthy one (a shared requestState key
and task store behind round-robin), per-process sealing behind round-robin with a gateway that rewrites
Mcp-Method, and a buffering proxy in front of a listen stream. Built-in balancer; HAProxy where installed.

One module fixture starts both sets of 2 instances; each test puts a front before one of them.
"""

import pytest

from mcpbench.lab.peers.quirks import Quirks
from mcpbench.lab.topology.cluster import haproxy_path, running_balancer, running_instances
from mcpbench.probe.verdicts import FAIL, PASS
from tests.probe.helpers import verdicts
from tests.support.faults import fault_proxy

pytestmark = pytest.mark.slow  # four instances, balancers and a fault proxy: tens of seconds

needs_haproxy = pytest.mark.skipif(haproxy_path() is None, reason="haproxy is not installed")
NEWEST = ("discover", "headers", "results", "listen", "cancel", "state", "tasks")
PER_PROCESS = ["--seal-state", "process", "--tasks", "--progress-ledger"]


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("newest")
    shared = ["--seal-state", "shared", "--tasks", "--task-store", str(folder / "tasks.db"), "--progress-ledger"]
    with running_instances(2, "streamable-http", extra_args=shared) as healthy:
        with running_instances(2, "streamable-http", extra_args=PER_PROCESS, quirks=Quirks(method_header=False)) as quirky:
            yield folder, healthy, quirky


def test_a_healthy_deployment_passes_every_2026_07_28_check(labs):
    folder, healthy, _ = labs
    with running_balancer("builtin", "round-robin", "streamable-http", healthy, folder=folder / "healthy") as front:
        rows = verdicts(front.url, *NEWEST)
    assert {name: row.verdict for name, row in rows.items()} == dict.fromkeys(NEWEST, PASS), {n: r.evidence for n, r in rows.items()}
    assert rows["state"].figures["moved"] > 0 and "a tampered one refused" in rows["state"].evidence  # retries did cross instances
    assert rows["tasks"].figures["elsewhere"] > 0 and rows["cancel"].figures["ledger"]["ended"] == "cancelled"


def test_per_process_sealing_and_a_rewriting_gateway_fail_their_checks(labs):
    folder, _, quirky = labs
    with running_balancer("builtin", "round-robin", "streamable-http", quirky, folder=folder / "quirky") as front:
        rows = verdicts(front.url, *NEWEST)
    verdict = {name: row.verdict for name, row in rows.items()}
    assert verdict == {**dict.fromkeys(NEWEST, PASS), "headers": FAIL, "state": FAIL, "tasks": FAIL}, {n: r.evidence for n, r in rows.items()}
    assert "mcp-method: tools/call → HTTP 200" in rows["headers"].evidence and "-32022" in rows["headers"].evidence
    assert "Invalid or expired requestState" in rows["state"].evidence and "keys=" in rows["state"].fix
    assert "unknown task" in rows["tasks"].evidence


def test_a_buffering_proxy_holds_the_listen_stream_and_the_cancel_back(labs):
    folder, healthy, _ = labs
    with fault_proxy(healthy[0].url, "--buffer-sse") as url:
        rows = verdicts(url, "headers", "listen", "cancel")
    assert rows["headers"].verdict == PASS  # JSON answers pass through a buffering proxy untouched
    assert rows["listen"].verdict == FAIL and "held back" in rows["listen"].evidence and "buffering off" in rows["listen"].fix
    assert rows["cancel"].verdict == FAIL and rows["cancel"].figures["ledger"]["ended"] == "completed", rows["cancel"].evidence


@needs_haproxy
def test_behind_haproxy_round_robin_per_process_state_fails_and_shared_passes(labs):
    folder, healthy, quirky = labs
    with running_balancer("haproxy", "round-robin", "streamable-http", quirky, folder=folder / "haproxy-quirky") as front:
        broken = verdicts(front.url, "state", "tasks")
    with running_balancer("haproxy", "round-robin", "streamable-http", healthy, folder=folder / "haproxy-healthy") as front:
        kept = verdicts(front.url, "state", "tasks", "listen")
    assert broken["state"].verdict == FAIL and broken["tasks"].verdict == FAIL, (broken["state"].evidence, broken["tasks"].evidence)
    assert all(row.verdict == PASS for row in kept.values()), {n: r.evidence for n, r in kept.items()}
