"""The balancer's routing (proxies/balancer.py), without processes."""

import random
import types

import pytest
from mitmproxy.test import taddons, tflow, tutils

from mcpbench.proxies.balancer import (
    WELCOME_PAGE,
    Balancer,
    BalancerConfigError,
    EndpointLearner,
    Instance,
    Router,
    parse_instances,
    request_session_key,
)
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


def test_session_hash_sends_an_id_where_it_hashes_and_a_new_session_round_robin():
    router = Router(THREE, "session-hash")
    assert [router.pick(None, "127.0.0.1").name for _ in range(4)] == ["s1", "s2", "s3", "s1"]  # no id yet: initialize
    ids = [f"{n:032x}" for n in range(60)]
    homes = {sid: router.pick(sid, "127.0.0.1").name for sid in ids}
    assert all(router.pick(sid, "127.0.0.2").name == home for sid, home in homes.items())  # the same id, the same instance
    assert set(homes.values()) == {"s1", "s2", "s3"}  # ids spread: a session created elsewhere does not follow its id


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


@pytest.mark.parametrize(("answer", "status", "body"), [("refuse", 421, b"Invalid Host header"), ("page", 200, WELCOME_PAGE), ("empty", 200, b"")])
def test_a_foreign_host_is_refused_or_answered_as_other_fronts_answer_it(answer, status, body):
    addon = Balancer()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, listen_host="127.0.0.1", mcpbench_balancer_instances="127.0.0.1:8001",
                       mcpbench_balancer_foreign_host=answer)
        flow = tflow.tflow()
        flow.request.headers["host"] = "rebind.mcpbench.invalid"
        addon.request(flow)
        assert (flow.response.status_code, flow.response.content) == (status, body)
        assert "mcpbench_instance" not in flow.metadata  # it reached no instance


def test_a_foreign_host_can_be_closed_without_an_answer():
    addon = Balancer()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, listen_host="127.0.0.1", mcpbench_balancer_instances="127.0.0.1:8001",
                       mcpbench_balancer_foreign_host="close")
        flow = tflow.tflow()
        flow.request.headers["host"] = "rebind.mcpbench.invalid"
        addon.request(flow)
        assert flow.response is None and flow.error is not None and flow.killable is False  # killed
        with pytest.raises(Exception, match="not one of refuse, page, empty, close"):
            tctx.configure(addon, mcpbench_balancer_foreign_host="shrug")


def test_the_lab_command_line_offers_what_the_balancer_does():
    from mcpbench.lab import cli
    from mcpbench.lab.topology import cluster
    from mcpbench.proxies import balancer

    assert cli.POLICIES == cluster.POLICIES == balancer.POLICIES and cli.FOREIGN_HOST == balancer.FOREIGN_HOST
    one = [types.SimpleNamespace(port=8001)]  # what balancer_argv reads of a running instance
    argv, _ = cluster.balancer_argv("builtin", "session-hash", "streamable-http", one, port=1, folder=None, foreign_host="close")
    assert "mcpbench_balancer_policy=session-hash" in argv and "mcpbench_balancer_foreign_host=close" in argv
