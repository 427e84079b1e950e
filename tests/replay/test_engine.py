"""The engine's ordering, id remapping and server-request answers, with a MockTransport (no process)."""

import pytest

from mcpbench.protocol.jsonrpc import Notification, Request, Response
from mcpbench.replay.asks import RecordedAsks
from mcpbench.replay import plan as plans
from mcpbench.replay.compare import IgnoreRules
from mcpbench.replay.engine import DEFAULT_TIMEOUT, Pace, Replayer
from mcpbench.replay.report import Judging, build, learn_noise, render
from mcpbench.transport import MockTransport
from mcpbench.system.target import parse_target
from tests.support.traces import event, header, write_trace

def trace_file(tmp_path, messages):
    """messages: (dir, msg) pairs, written with increasing timestamps."""
    return write_trace(tmp_path / "t.jsonl", [event(10.0 + i * 0.01, "s1", d, m) for i, (d, m) in enumerate(messages)],
                       header=header())


def req(id_, method, **params):
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def res(id_, result):
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def replay_with(monkeypatch, path, handler):
    """Replay `path` with `handler(message, transport)` as the server."""
    sent = []

    def fake_open(self, sink, on_stderr):
        transport = MockTransport(lambda message: handler(message, sent), sink)
        return transport

    monkeypatch.setattr(Replayer, "open", fake_open)
    replayer = Replayer(parse_target("http://127.0.0.1:1/mcp"), timeout=2.0)
    return replayer.run(plans.load(path)), sent


def test_in_flight_requests_are_sent_together_and_matched_by_id(tmp_path, monkeypatch):
    path = trace_file(tmp_path, [
        ("c2s", req("a", "tools/call", name="one")),
        ("c2s", req("b", "tools/call", name="two")),  # sent before a's answer: in flight together
        ("s2c", res("b", {"v": 2})),
        ("s2c", res("a", {"v": 1})),
        ("c2s", req("c", "tools/call", name="three")),  # after both answers
        ("s2c", res("c", {"v": 3})),
    ])
    session = plans.load(path).sessions[0]
    assert [step.wait_for for step in session.steps] == [(), (), (1, 0)]  # in the order the answers came
    held = []

    def server(message, sent):
        sent.append(message)
        if message.params["name"] == "one":
            held.append(message)  # answer "one" only once "two" has arrived
            return []
        answers = [Response(id=message.id, result={"v": {"two": 2, "three": 3}[message.params["name"]]})]
        if message.params["name"] == "two":
            answers.insert(0, Response(id=held[0].id, result={"v": 1}))
        return answers

    run, sent = replay_with(monkeypatch, path, server)
    assert [m.params["name"] for m in sent] == ["one", "two", "three"]
    assert [m.id for m in sent] == [1, 2, 3]  # live ids, mapped back to a, b, c
    report = build(run, Judging(IgnoreRules()))
    assert report.counts()["identical"] == 3 and report.exit_code == 0


def test_a_server_request_is_answered_from_the_recording(tmp_path, monkeypatch):
    path = trace_file(tmp_path, [
        ("c2s", req(1, "tools/call", name="ask")),
        ("s2c", req(7, "sampling/createMessage", maxTokens=5)),
        ("c2s", res(7, {"text": "recorded answer"})),
        ("s2c", res(1, {"ok": True})),
    ])

    def server(message, sent):
        sent.append(message)
        if isinstance(message, Request):
            return [Request(id="srv-1", method="sampling/createMessage", params={"maxTokens": 5})]
        if isinstance(message, Response) and message.id == "srv-1":
            assert message.result == {"text": "recorded answer"}
            return [Response(id=1, result={"ok": True})]
        return []

    run, sent = replay_with(monkeypatch, path, server)
    assert build(run, Judging(IgnoreRules())).exit_code == 0
    assert any(isinstance(m, Response) and m.id == "srv-1" for m in sent)


def test_learn_noise_marks_what_differs_between_runs(tmp_path, monkeypatch):
    path = trace_file(tmp_path, [("c2s", req(1, "tools/call", name="roll")), ("s2c", res(1, {"n": 0, "same": 1}))])
    counter = iter(range(1, 100))

    def server(message, sent):
        return [Response(id=message.id, result={"n": next(counter), "same": 1})]

    first, _ = replay_with(monkeypatch, path, server)
    second, _ = replay_with(monkeypatch, path, server)
    rules = learn_noise(first, second, IgnoreRules())
    assert rules == ["tools/call@roll:result.n"]
    assert build(second, Judging(IgnoreRules(rules))).exit_code == 0
    assert build(second, Judging(IgnoreRules())).exit_code == 1


def test_notifications_go_at_their_recorded_position(tmp_path, monkeypatch):
    path = trace_file(tmp_path, [
        ("c2s", req(1, "initialize", protocolVersion="2025-11-25", capabilities={}, clientInfo={"name": "t"})),
        ("s2c", res(1, {"protocolVersion": "2025-11-25", "capabilities": {}})),
        ("c2s", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ("c2s", req(2, "ping")),
        ("s2c", res(2, {})),
    ])

    def server(message, sent):
        sent.append(message)
        if isinstance(message, Request):
            result = {"protocolVersion": "2025-11-25", "capabilities": {}} if message.method == "initialize" else {}
            return [Response(id=message.id, result=result)]
        return []

    run, sent = replay_with(monkeypatch, path, server)
    assert [m.method for m in sent] == ["initialize", "notifications/initialized", "ping"]
    assert isinstance(sent[1], Notification)


def test_pace_scales_recorded_gaps() -> None:
    """`--pace xN` divides a recorded gap by N, `original` keeps it (capped), `fast` drops it."""
    assert Pace.parse("x2").gap(1.0) == 0.5 and Pace.parse("original", 0.1).gap(5.0) == 0.1
    assert Pace.parse("fast").gap(5.0) == 0.0


def test_a_server_request_with_no_recorded_answer_gets_none() -> None:
    assert RecordedAsks([]).take("x", {}) is None


def test_recorded_asks_answer_from_the_recording_refuse_the_rest_and_always_pong():
    asked = plans.Ask("roots/list", {}, {"result": {"roots": [{"uri": "file:///r"}]}})
    missed: list[str] = []
    policy = RecordedAsks([asked], missed)
    roots = policy.answer(Request(id=1, method="roots/list", params={}))
    assert isinstance(roots, Response) and roots.result["roots"][0]["uri"] == "file:///r"
    refused = policy.answer(Request(id=2, method="sampling/createMessage", params={"maxTokens": 1}))
    assert refused.code == -32601 and missed == ["sampling/createMessage"]
    assert policy.answer(Request(id=3, method="ping")).result == {} and missed == ["sampling/createMessage"]


def test_latency_is_reported_beside_a_call_and_fails_only_when_asked(tmp_path, monkeypatch):
    path = trace_file(tmp_path, [("c2s", req(1, "tools/call", name="a")), ("s2c", res(1, {})),
                                 ("c2s", req(2, "tools/call", name="b")), ("s2c", res(2, {}))])  # 10 ms each
    run, _ = replay_with(monkeypatch, path, lambda message, sent: [Response(id=message.id, result={})])
    for live in run.sessions[0].calls:
        live.answered = live.sent + 2.0  # 200 x slower than recorded
    report = build(run, Judging(IgnoreRules()))
    first, second = report.sessions[0].calls
    assert first.cold and first.slower is None  # the first call of a cold target: not judged
    assert second.slower == pytest.approx(200, rel=0.01) and second.status == "identical" and report.exit_code == 0
    text = render(report)
    assert "cold start" in text and "slower ×200" in text
    failing = build(run, Judging(IgnoreRules(), fail_on_latency=3.0))
    assert [c.status for c in failing.sessions[0].calls] == ["identical", "changed"] and failing.exit_code == 1


def test_a_calls_default_timeout_derives_from_its_recorded_latency(tmp_path):
    path = trace_file(tmp_path, [("c2s", req(1, "tools/call", name="slow")), ("s2c", res(1, {})),
                                 ("c2s", req(2, "tools/call", name="lost"))])
    slow, lost = plans.load(path).sessions[0].calls
    slow.answered = slow.sent + 60.0  # recorded: a 60 s answer
    derived = Replayer(parse_target("http://127.0.0.1:1/mcp"))
    assert derived.timeout_for(slow) > 60.0 and derived.timeout_for(lost) == DEFAULT_TIMEOUT
    bounded = Replayer(parse_target("http://127.0.0.1:1/mcp"), timeout=5.0)
    assert bounded.timeout_for(slow) == bounded.timeout_for(lost) == 5.0


def test_only_a_refused_request_with_a_host_no_accepted_request_carried_is_a_rebinding_check():
    from mcpbench.protocol.jsonrpc import ErrorResponse, Request, Response
    from mcpbench.replay.plan import RecordedCall, SessionPlan, mark_foreign_hosts

    def call(host, answer=None, status=None):
        request = Request(id=1, method="initialize", params={})
        return RecordedCall(0, request, 0.0, answer=answer, status=status, host=host)

    ok = Response(id=1, result={})
    refused, local_404, rebinding, errored = (call("rebound.example", status=421), call("127.0.0.1:9", status=404),
                                              call("127.0.0.1:7", ok), call("evil.example", ErrorResponse(id=1, code=-1, message="no")))
    plan = SessionPlan("s", "streamable-http", calls=[refused, local_404, rebinding, errored])
    mark_foreign_hosts([plan], "http://127.0.0.1:5000")
    assert [c.foreign_host for c in plan.calls] == ["rebound.example", None, None, "evil.example"]
    # A remote upstream recorded through `record`: every request carried the recorder's address.
    through = [call("127.0.0.1:7", ok), call("127.0.0.1:7", status=401)]
    mark_foreign_hosts([SessionPlan("r", "streamable-http", calls=through)], "https://mcp.example.com")
    assert [c.foreign_host for c in through] == [None, None]
