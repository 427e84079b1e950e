"""The balancer's routing, the HAProxy configurations and the sticky analysis, without processes."""

import random

import pytest
from mitmproxy.test import taddons, tflow, tutils

from mcpbench.proxies.balancer import (
    Balancer,
    BalancerConfigError,
    EndpointLearner,
    Instance,
    Router,
    parse_instances,
    request_session_key,
)
from mcpbench.lab.experiments.sticky import CSV_BASE, Cell, cell_stats, csv_text, plan_from_node
from mcpbench.lab.topology.haproxy import config
from mcpbench.load.scenario import ScenarioError
from mcpbench.load.sessions import failure_class, verdict
from mcpbench.protocol.http import INSTANCE, SESSION_ID

THREE = [Instance("s1", "127.0.0.1", 8001), Instance("s2", "127.0.0.1", 8002), Instance("s3", "127.0.0.1", 8003)]
ENDPOINT = b"event: endpoint\r\ndata: /messages/?session_id=0123456789abcdef0123456789abcdef\r\n\r\n"


def test_parse_instances_names_and_errors():
    assert parse_instances("127.0.0.1:1, a=http://127.0.0.1:2/sse") == [Instance("s1", "127.0.0.1", 1), Instance("a", "127.0.0.1", 2)]
    for bad in ("127.0.0.1", "x=127.0.0.1:port", "a=h:1,a=h:2"):
        with pytest.raises(BalancerConfigError):
            parse_instances(bad)


def test_round_robin_cycles_and_random_spreads():
    rr = Router(THREE, "round-robin")
    assert [rr.pick(None, "127.0.0.1").name for _ in range(4)] == ["s1", "s2", "s3", "s1"]
    rnd = Router(THREE, "random", random.Random(1))
    assert {rnd.pick("known", "127.0.0.1").name for _ in range(60)} == {"s1", "s2", "s3"}


def test_sticky_follows_learned_sessions_and_falls_back_to_round_robin():
    router = Router(THREE, "sticky")
    assert router.pick(None, "127.0.0.1").name == "s1"
    router.learn("abc", THREE[2])
    assert [router.pick("abc", "127.0.0.1").name for _ in range(3)] == ["s3"] * 3
    assert router.pick("unknown", "127.0.0.1").name == "s2"
    router.forget("abc")
    assert router.pick("abc", "127.0.0.1").name == "s3"  # round-robin again: s1, s2, then s3


def test_source_affinity_per_client_address():
    router = Router(THREE, "source")
    first = {addr: router.pick(None, addr).name for addr in ("127.0.0.2", "127.0.0.3", "127.0.0.4")}
    assert sorted(first.values()) == ["s1", "s2", "s3"]
    assert all(router.pick("any", addr).name == name for addr, name in first.items())


def test_request_session_key_for_both_transports():
    assert request_session_key("sid-1", "/mcp") == "sid-1"
    assert request_session_key(None, "/messages/?session_id=ab12") == "ab12"
    assert request_session_key(None, "/mcp") is None


@pytest.mark.parametrize("size", [1, 7, len(ENDPOINT)])
def test_endpoint_learner_passes_chunks_and_learns_in_any_chunking(size):
    router = Router(THREE, "sticky")
    seen = []
    learner = EndpointLearner(router, THREE[1], lambda chunk: seen.append(chunk) or chunk)
    stream = ENDPOINT + b"event: message\r\ndata: {}\r\n\r\n"
    out = b"".join(learner(stream[i : i + size]) for i in range(0, len(stream), size))
    assert out == stream and b"".join(seen) == stream  # unchanged, and the wrapped callable saw it all
    assert router.pick("0123456789abcdef0123456789abcdef", "127.0.0.1").name == "s2"


def test_addon_routes_marks_and_learns_the_session_header():
    addon = Balancer()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, mcpbench_balancer_instances="127.0.0.1:8001,127.0.0.1:8002", mcpbench_balancer_policy="sticky")
        first = tflow.tflow()
        addon.request(first)
        assert (first.request.host, first.request.port) == ("127.0.0.1", 8001)
        first.response = tutils.tresp()
        first.response.headers[SESSION_ID] = "sid-9"
        addon.responseheaders(first)
        assert first.response.headers[INSTANCE] == "s1"
        for _ in range(3):
            later = tflow.tflow()
            later.request.headers[SESSION_ID] = "sid-9"
            addon.request(later)
            assert later.request.port == 8001
        with pytest.raises(Exception, match="not host:port"):
            tctx.configure(addon, mcpbench_balancer_instances="nowhere")
        with pytest.raises(Exception, match="unknown policy"):
            tctx.configure(addon, mcpbench_balancer_instances="127.0.0.1:1", mcpbench_balancer_policy="sticky-ish")


def test_addon_streams_event_streams_unbuffered():
    addon = Balancer()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, mcpbench_balancer_instances="127.0.0.1:8001", mcpbench_balancer_policy="round-robin")
        flow = tflow.tflow()
        addon.request(flow)
        flow.response = tutils.tresp()
        flow.response.headers["content-type"] = "text/event-stream"
        addon.responseheaders(flow)
        assert flow.response.stream is True


def test_haproxy_configs_carry_what_mcp_needs(tmp_path):
    servers = [("s1", "127.0.0.1", 8001), ("s2", "127.0.0.1", 8002)]
    for policy, balance in (("random", "random"), ("round-robin", "roundrobin"), ("source", "source")):
        text = config(policy, "streamable-http", servers, port=9000, folder=tmp_path)
        assert f"balance {balance}" in text and "option http-no-delay" in text and "timeout server 60s" in text
        assert "bind 127.0.0.1:9000" in text and f"http-response set-header {INSTANCE} %[srv_name]" in text
    sticky = config("sticky", "streamable-http", servers, port=9000, folder=tmp_path)
    assert "stick match req.hdr(mcp-session-id)" in sticky and "stick store-response res.hdr(mcp-session-id)" in sticky
    legacy = config("sticky", "sse", servers, port=9000, folder=tmp_path)
    assert "set-map(" in legacy and "use-server s2 if { url_param(session_id)" in legacy


def _step(session, step, t, instance, failure=None, detail=None):
    return {"session": session, "step": step, "t": t, "instance": instance, "failure": failure, "detail": detail}


def test_cell_stats_verdict_and_csv_contract():
    records = [
        _step("a", "connect", 1, "s1"), _step("a", "initialize", 2, "s1"), _step("a", "tools/call echo", 3, "s1"),
        _step("b", "initialize", 1, "s1"),
        _step("b", "notifications/initialized", 2, "s2", "session-not-found", "HTTP 404 JSON-RPC -32600 Session not found"),
        _step("c", "initialize", 1, "s3"), _step("c", "tools/call echo", 2, "s3", "answer-lost/timeout", "no answer within 5 s"),
        {"step": "initialize", "t": 1, "failure": None},  # no session tag: not counted
    ]
    result = cell_stats(Cell("stateful-sse", "round-robin", "builtin", 3), records)
    assert (result.sessions, result.calls, result.failed_calls, result.failed_sessions) == (3, 6, 2, 2)
    assert result.first_instance_share == pytest.approx((1 + 0.5 + 1) / 3)
    assert dict(result.sessions_by_class) == {"session-not-found": 1, "timeout": 1}
    assert verdict(result).startswith("sessions broken: 2/3, ")
    header, row = csv_text([result]).splitlines()
    assert header.split(",")[: len(CSV_BASE)] == list(CSV_BASE)
    assert "failed_calls:session-not-found" in header and "failed_sessions:timeout" in header
    assert row.startswith("streamable-http,stateful-sse,round-robin,builtin,3,3,6,2,2,")
    kept = cell_stats(Cell("stateless", "random", "builtin", 3), records[:3])
    assert verdict(kept) == "sessions kept: 1/1"


def test_failure_classes_split_answer_lost_from_timeout():
    assert failure_class("answer-lost/timeout", "POST accepted, no answer on the stream") == "answer-lost"
    assert failure_class("answer-lost/timeout", "no answer within 10 s") == "timeout"
    assert failure_class("stream-closed", "SSE stream closed") == "stream-closed"


def test_sticky_scenario_errors_name_the_line():
    import yaml

    text = "modes: [legacy-sse]\npolicies: [sticky, nope]\nmix:\n  - {call: tools/list}\n"
    with pytest.raises(ScenarioError, match=r"s\.yaml:2: policies: unknown 'nope'"):
        plan_from_node(yaml.compose(text), "s.yaml")
    with pytest.raises(ScenarioError, match=r"s\.yaml:1: a sticky scenario sets no 'target'"):
        plan_from_node(yaml.compose("target: http://x/mcp\nmix:\n  - {call: tools/list}\n"), "s.yaml")
    plan = plan_from_node(yaml.compose("modes: [stateless]\ninstances: [1, 3]\nmix:\n  - {call: tools/list}\n"), "s.yaml")
    assert [c.slug for c in plan.cells][:2] == ["stateless-round-robin-builtin-1", "stateless-round-robin-builtin-3"]


def test_session_scenario_keys_are_checked():
    from mcpbench.load.scenario import scenario_from_text

    base = "session: session_per_task\nmix:\n  - {call: tools/list}\n"
    probe = scenario_from_text(f"target: http://127.0.0.1:1/mcp\nsessions: 7\ndistinct_sources: true\n{base}", "p.yaml")
    assert (probe.sessions, probe.distinct_sources) == (7, True)
    assert type(probe).from_json(probe.to_json()) == probe
    with pytest.raises(ScenarioError, match="distinct_sources needs an HTTP target on loopback"):
        scenario_from_text(f"target: http://example.com/mcp\ndistinct_sources: true\n{base}", "p.yaml")
    with pytest.raises(ScenarioError, match="sessions counts whole sessions"):
        scenario_from_text("target: http://127.0.0.1:1/mcp\nsessions: 3\nmix:\n  - {call: tools/list}\n", "p.yaml")
    with pytest.raises(ScenarioError, match=r"p\.yaml:2: sessions: must be a whole number"):
        scenario_from_text(f"target: http://127.0.0.1:1/mcp\nsessions: 0\n{base}", "p.yaml")
