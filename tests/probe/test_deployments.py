"""The checks that need a deployment in front of the server: sessions behind balancers, buffering, idle cuts."""

import json
import re
import subprocess
import sys

import pytest

from mcpbench.lab.topology.cluster import haproxy_path, running_balancer, running_instances, running_lab
from mcpbench.probe.target import Settings
from mcpbench.probe.verdicts import FAIL, NA, PASS
from tests.probe.helpers import verdict, verdicts
from tests.support.faults import fault_proxy
from tests.support.servers import REPO_ROOT

pytestmark = pytest.mark.slow  # a lab each: instances, a balancer

needs_haproxy = pytest.mark.skipif(haproxy_path() is None, reason="haproxy is not installed")
IDLE_CUT, IDLE_WATCH = "5s", 8.0  # the lab's idle timeout, and the probe's watch beyond it


def test_sessions_fail_round_robin_and_pass_sticky(tmp_path):
    """The sticky probe's verdicts (it was scenarios/sticky-probe.yaml): broken behind round-robin, kept when sticky."""
    with running_instances(3, "streamable-http") as servers:
        with running_balancer("builtin", "round-robin", "streamable-http", servers, folder=tmp_path / "rr") as front:
            broken = _probe(front.url, tmp_path / "rr.json", "sessions,resume")
        with running_balancer("builtin", "sticky", "streamable-http", servers, folder=tmp_path / "sticky") as front:
            kept = _probe(front.url, tmp_path / "sticky.json", "sessions")
    assert broken.returncode == 1, broken.stderr[-2000:]
    rows = {row["check"]: row for row in json.loads((tmp_path / "rr.json").read_text())["checks"]}
    match = re.match(r"sessions broken: (\d+)/50, session-not-found after the first call", rows["sessions"]["evidence"])
    assert match and int(match[1]) > 25, rows["sessions"]
    assert set(rows["sessions"]["figures"]["per_instance"]) == {"s1", "s2", "s3"}
    assert set(rows["sessions"]["figures"]["failed_statuses"]) == {"404"}
    assert rows["resume"]["verdict"] == NA and "sessions check" in rows["resume"]["evidence"]  # not blamed on resumption
    assert kept.returncode == 0, kept.stdout + kept.stderr[-2000:]
    row = json.loads((tmp_path / "sticky.json").read_text())["checks"][0]
    assert row["evidence"].startswith("sessions kept: 50/50") and sum(v.get("kept", 0) for v in row["figures"]["per_instance"].values()) == 50


def _probe(url: str, out, only: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcpbench", "probe", url, "--only", only, "--json", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)


@needs_haproxy
def test_sessions_behind_haproxy_round_robin_and_sticky(tmp_path):
    with running_instances(2, "streamable-http", resumable=True) as servers:
        with running_balancer("haproxy", "round-robin", "streamable-http", servers, folder=tmp_path / "rr") as front:
            broken = verdict(front.url, "sessions")
        with running_balancer("haproxy", "sticky", "streamable-http", servers, folder=tmp_path / "sticky") as front:
            kept = verdicts(front.url, "sessions", "resume")
    assert broken.verdict == FAIL and broken.figures["broken"] > 25, broken  # concurrent sessions may land together by chance
    assert set(broken.figures["sessions_by_class"]) == {"session-not-found"}
    assert kept["sessions"].verdict == PASS and kept["resume"].verdict == PASS, kept


def test_buffering_fails_through_a_buffering_proxy_and_passes_direct(resumable_server):
    direct = verdict(resumable_server.url, "buffering")
    assert direct.verdict == PASS and direct.figures["shape"]["first"] < 0.5, direct
    with fault_proxy(resumable_server.url, "--buffer-sse") as url:
        held = verdict(url, "buffering", Settings(direct=resumable_server.url))
    assert held.verdict == FAIL and held.figures["shape"]["first"] >= 0.8 and held.figures["shape"]["spread"] <= 0.1, held
    assert held.figures["direct_shape"]["first"] < 0.5 and "buffering off" in held.fix


@needs_haproxy
def test_buffering_behind_haproxy_with_buffering_on_and_off(tmp_path):
    with running_instances(1, "streamable-http") as servers:
        with running_balancer("haproxy", "round-robin", "streamable-http", servers, folder=tmp_path / "on", buffer=True) as front:
            held = verdict(front.url, "buffering")
        with running_balancer("haproxy", "round-robin", "streamable-http", servers, folder=tmp_path / "off") as front:
            streamed = verdict(front.url, "buffering")
    assert held.verdict == FAIL and streamed.verdict == PASS, (held, streamed)


def test_idle_stream_cut_at_the_labs_idle_timeout_and_kept_without(tmp_path):
    settings = Settings(idle=IDLE_WATCH)
    with running_lab(1, "streamable-http", policy="round-robin", folder=tmp_path / "cut", faults={"idle_timeout": IDLE_CUT}) as lab:
        cut = verdict(lab.url, "idle", settings)
    with running_lab(1, "streamable-http", policy="round-robin", folder=tmp_path / "kept") as lab:
        kept = verdict(lab.url, "idle", settings)
    assert cut.verdict == FAIL and 5.0 <= cut.figures["stream"]["closed_at"] < IDLE_WATCH, cut
    assert kept.verdict == PASS and kept.figures["stream"]["closed_at"] is None, kept
