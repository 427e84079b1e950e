"""The checks that need a deployment in front of the server: sessions behind balancers, buffering, idle cuts."""

import re
import time

import pytest

from mcpbench.lab.topology.cluster import haproxy_path, running_balancer, running_instances
from mcpbench.probe.checks import churn, resume
from mcpbench.probe.run import FIRST_CONTACT, probe, select
from mcpbench.probe.target import ProbeSettings, reach
from mcpbench.probe.verdicts import FAIL, NA, PASS, WARN
from mcpbench.probe.wire import ProbeOptions, Wire
from tests.probe.helpers import until_routed, verdict, verdicts
from tests.support.faults import fault_proxy

pytestmark = pytest.mark.slow  # a lab each: instances, a balancer

needs_haproxy = pytest.mark.skipif(haproxy_path() is None, reason="haproxy is not installed")
IDLE_CUT, IDLE_WATCH = "2s", 4.0  # the fault proxy's idle timeout (the lab's is 5 s: the same addon), and the watch beyond it
SESSIONS = 20  # concurrent sessions of the sessions check: enough to spread over 3 instances


def test_sessions_fail_round_robin_and_pass_sticky(tmp_path):
    """The sticky probe's verdicts (it was scenarios/sticky-probe.yaml): broken behind round-robin, kept when sticky."""
    settings = ProbeSettings(sessions=SESSIONS)
    with running_instances(3, "streamable-http") as servers:
        with running_balancer("builtin", "round-robin", "streamable-http", servers, folder=tmp_path / "rr") as front:
            broken = verdicts(front.url, "sessions", "resume", settings=settings)
        with running_balancer("builtin", "sticky", "streamable-http", servers, folder=tmp_path / "sticky") as front:
            kept = verdict(front.url, "sessions", settings)
    sessions, resume = broken["sessions"], broken["resume"]
    # Concurrent sessions share the rotation: which call of a session first meets another instance varies.
    where = r"(on the first call|after the first call|after \d+ calls|at notifications/initialized \(the handshake: no call ran\))"
    match = re.match(rf"sessions broken: (\d+)/{SESSIONS}, session-not-found {where}", sessions.evidence)
    assert sessions.verdict == FAIL and match and int(match[1]) > SESSIONS // 2, sessions
    assert set(sessions.figures["per_instance"]) == {"s1", "s2", "s3"} and set(sessions.figures["failed_statuses"]) == {"404"}
    assert resume.verdict == NA and "sessions check" in resume.evidence  # not blamed on resumption
    assert kept.verdict == PASS and kept.evidence.startswith(f"sessions kept: {SESSIONS}/{SESSIONS}"), kept
    assert sum(v.get("kept", 0) for v in kept.figures["per_instance"].values()) == SESSIONS


@needs_haproxy
def test_sessions_behind_haproxy_round_robin_and_sticky(tmp_path):
    with running_instances(2, "streamable-http", resumable=True) as servers:
        with running_balancer("haproxy", "round-robin", "streamable-http", servers, folder=tmp_path / "rr") as front:
            broken = verdict(front.url, "sessions", ProbeSettings(sessions=SESSIONS))
        with running_balancer("haproxy", "sticky", "streamable-http", servers, folder=tmp_path / "sticky") as front:
            kept = verdicts(front.url, "sessions", "resume", settings=ProbeSettings(sessions=SESSIONS))
    assert broken.verdict == FAIL and broken.figures["broken"] > SESSIONS // 2, broken  # concurrent sessions may land together by chance
    assert set(broken.figures["sessions_by_class"]) == {"session-not-found"}
    assert kept["sessions"].verdict == PASS and kept["resume"].verdict == PASS, kept


def test_buffering_fails_through_a_buffering_proxy_and_passes_direct(resumable_server):
    direct = verdict(resumable_server.url, "buffering")
    assert direct.verdict == PASS and direct.figures["shape"]["first"] < 0.5, direct
    with fault_proxy(resumable_server.url, "--buffer-sse") as url:
        held = verdict(url, "buffering", ProbeSettings(direct=resumable_server.url))
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


def test_idle_stream_cut_at_the_proxys_idle_timeout_and_kept_without(resumable_server):
    settings = ProbeSettings(idle=IDLE_WATCH)
    with fault_proxy(resumable_server.url, "--idle-timeout", IDLE_CUT) as url:
        cut = verdict(url, "idle", settings)
    kept = verdict(resumable_server.url, "idle", settings)
    assert cut.verdict == FAIL and 2.0 <= cut.figures["stream"]["closed_at"] < IDLE_WATCH, cut
    assert kept.verdict == PASS and kept.figures["stream"]["closed_at"] is None, kept


def test_behind_a_session_id_hash_the_sessions_check_decides_and_a_lost_session_is_routing(tmp_path):
    """Hashing on the session id keeps ~1 session in 3: the one-session checks follow the sessions check (n/a), and
    run alone (their first contact may have stayed), a session lost mid-check is routing (warn), never the server's."""
    with running_instances(3, "streamable-http", resumable=True) as servers:
        with running_balancer("builtin", "session-hash", "streamable-http", servers, folder=tmp_path) as front:
            run = probe(front.url, select(["versions,sessions,unknown,resume,buffering,churn"]), settings=ProbeSettings(sessions=SESSIONS))
            rows = {row.check: row for row in run.rows}
            target = reach(front.url, Wire(front.url, ProbeOptions()), ProbeSettings(), deadline=time.monotonic() + FIRST_CONTACT)
            target.affinity = True  # as when first contact's session happened to stay, without the sessions check
            tried = [row for check in (resume, churn) for row in until_routed(check, target)]
    assert rows["sessions"].verdict == FAIL and 0 < rows["sessions"].figures["broken"] < SESSIONS, rows["sessions"]
    lost = rows["sessions"].figures["sessions_by_class"]["session-not-found"]
    assert all(rows[name].verdict == NA and rows[name].evidence.startswith(f"{lost} of {SESSIONS} sessions lost")
               for name in ("resume", "buffering", "churn")), rows
    # Parts left out are said, and no pass: versions runs before the sessions check (first contact decides).
    versions, unknown = rows["versions"], rows["unknown"]
    assert (versions.verdict == PASS and versions.evidence.endswith("MCP-Protocol-Version 1999-01-01 → HTTP 400")) or (
        versions.verdict == WARN and "MCP-Protocol-Version 1999-01-01 not tried" in versions.evidence), versions
    assert unknown.verdict == WARN and "made-up id → HTTP 404" in unknown.evidence and "ended id not tried" in unknown.evidence
    assert all(row.verdict in (PASS, WARN) for row in tried), tried  # never a failure of the server's
    routed = [row for row in tried if row.verdict == WARN]
    assert {row.check for row in routed} == {"resume", "churn"}, tried
    assert all("routing, not the server" in row.evidence and row.fix.startswith("Route each session") for row in routed)


def test_legacy_sse_behind_a_balancer_names_its_instances(tmp_path):
    with running_instances(3, "sse") as servers:
        with running_balancer("builtin", "round-robin", "sse", servers, folder=tmp_path / "rr") as front:
            broken = verdict("sse+" + front.url, "sessions", ProbeSettings(sessions=SESSIONS, calls=2))
        with running_balancer("builtin", "sticky", "sse", servers, folder=tmp_path / "sticky") as front:
            kept = verdict("sse+" + front.url, "sessions", ProbeSettings(sessions=SESSIONS, calls=2))
            unnamed = probe("sse+" + front.url, select(["sessions"]), settings=ProbeSettings(sessions=3, calls=1),
                            options=ProbeOptions(instance_header="x-elsewhere")).rows[0]
    assert broken.verdict == FAIL and set(broken.figures["per_instance"]) == {"s1", "s2", "s3"}, broken  # before: "unnamed"
    assert kept.verdict == PASS and "3 instance(s) named (s1, s2, s3)" in kept.evidence, kept
    assert kept.figures["first_instance_share"] == 1.0  # every step of a session on the instance of its stream
    assert set(unnamed.figures["per_instance"]) == {"unnamed"}  # --instance-header names another header: read, not found


@pytest.mark.parametrize(("answer", "seen"), [("page", "HTTP 200, not an MCP answer"), ("empty", "HTTP 200, not an MCP answer"),
                                              ("close", "the connection closed without an answer (refused)")])
def test_a_front_that_answers_a_foreign_host_itself_never_served_it(tmp_path, answer, seen):
    with running_instances(1, "streamable-http") as servers:
        with running_balancer("builtin", "round-robin", "streamable-http", servers, folder=tmp_path, foreign_host=answer) as front:
            row = verdict(front.url, "origin")
    assert row.verdict == PASS and row.evidence.startswith(f"foreign Host → {seen}") and "; foreign Origin → HTTP 403" in row.evidence, row
