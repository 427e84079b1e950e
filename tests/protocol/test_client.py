"""The client core, fed bytes directly: every transport and era, no process started."""

import orjson
import pytest

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.asks import Canned, Refuse, Relay
from mcpbench.protocol.client import (
    STDOUT, Answered, ClientConnection, EndpointReady, Failed, Garbled, GetHead, LegacyHead, PostHead, Pushed,
    ServerRequest, SessionLost, StreamEnded, Unmatched, initialize_request, initialized_notification,
)
from mcpbench.protocol.http import Failure
from mcpbench.protocol.session import S2C, SessionState, Trigger

URL = "http://127.0.0.1:9/mcp"
HANDSHAKE_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]


def line(obj) -> bytes:
    return orjson.dumps(obj) + b"\n"


def sse(obj, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n".encode() if event_id else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


def result(request_id, value=None) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": value if value is not None else {}}


def init_result(request_id, version) -> dict:
    return result(request_id, {"protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}})


def of(kind, events):
    return [e for e in events if type(e) is kind]


# --- stdio ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_stdio_handshake_then_call(version):
    conn = ClientConnection("stdio", version)
    init = conn.send(initialize_request(conn), waiter="w-init", ts=1.0)
    assert init.data.endswith(b"\n") and orjson.loads(init.data)["params"]["protocolVersion"] == version
    (answered,) = conn.reader(STDOUT).feed(line(init_result(init.request_id, version)), 1.5)
    assert type(answered) is Answered and answered.waiter == "w-init" and answered.via == "stdio"
    assert answered.received - answered.sent == 0.5
    assert conn.negotiated == version
    conn.send(initialized_notification())
    call = conn.send(conn.prepare("tools/call", {"name": "echo", "arguments": {}}), waiter="w-call")
    (answered,) = conn.reader(STDOUT).feed(line(result(call.request_id, {"content": []})))
    assert answered.waiter == "w-call" and conn.in_flight == 0


def test_stdio_answers_out_of_order_and_split_across_chunks():
    conn = ClientConnection("stdio", "2026-07-28")
    a = conn.send(conn.prepare("tools/list"), waiter="a")
    b = conn.send(conn.prepare("ping"), waiter="b")
    data = line(result(b.request_id)) + line(result(a.request_id, {"tools": []}))
    events = conn.reader(STDOUT).feed(data[:7]) + conn.reader(STDOUT).feed(data[7:30]) + conn.reader(STDOUT).feed(data[30:])
    assert [e.waiter for e in of(Answered, events)] == ["b", "a"]


def test_a_prepared_request_waits_for_nothing_until_it_is_sent():
    conn = ClientConnection("stdio", "2026-07-28")
    early = conn.prepare("tools/list")
    assert orjson.loads(early.data)["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert conn.in_flight == 0
    (unmatched,) = conn.reader(STDOUT).feed(line(result(early.request_id)))
    assert type(unmatched) is Unmatched  # an answer to a request that never left
    later = conn.prepare("tools/list")
    conn.send(later, waiter="w", ts=2.0)
    assert conn.in_flight == 1
    (answered,) = conn.reader(STDOUT).feed(line(result(later.request_id, {"tools": []})), 2.5)
    assert answered.waiter == "w" and answered.received - answered.sent == 0.5


def test_blank_and_cut_off_stdout_lines():
    conn = ClientConnection("stdio", "2026-07-28")
    out = conn.send(conn.prepare("ping"), waiter="p")
    assert conn.reader(STDOUT).feed(b"\n  \r\n") == []
    events = conn.reader(STDOUT).feed(orjson.dumps(result(out.request_id))) + conn.reader(STDOUT).feed(b"")
    assert of(Answered, events)[0].waiter == "p"  # the last line had no newline: still an answer


def test_stateless_requests_carry_the_envelope_and_no_handshake():
    conn = ClientConnection("streamable-http", "2026-07-28", url=URL)
    out = conn.send(conn.prepare("tools/call", {"name": "echo"}))
    meta = out.message.params["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert out.headers["mcp-method"] == "tools/call" and out.headers["mcp-name"] == "echo"
    assert out.headers["mcp-protocol-version"] == "2026-07-28"


def test_stdio_end_fails_every_request_in_flight():
    conn = ClientConnection("stdio", "2025-11-25")
    a = conn.send(conn.prepare("tools/list"), waiter="a")
    conn.send(conn.prepare("ping"), waiter="b")
    events = conn.reader(STDOUT).feed(line(result(a.request_id)) + b'{"jsonrpc": "2.0", "id')
    events += conn.reader(STDOUT).feed(b"")
    assert [e.waiter for e in of(Answered, events)] == ["a"]
    failed = of(Failed, events)
    assert [(f.waiter, f.failure) for f in failed] == [("b", Failure.STREAM_CLOSED)]
    assert of(StreamEnded, events)[0].stream == "stdio" and not conn.usable
    (lost,) = of(SessionLost, events)
    assert lost.cause is Trigger.STDOUT_CLOSED and conn.lost_by is Trigger.STDOUT_CLOSED
    assert conn.session.state is SessionState.LOST


def test_the_shell_says_why_stdout_ended_and_the_calls_keep_their_own_words():
    conn = ClientConnection("stdio", "2025-11-25")
    conn.send(conn.prepare("ping"), waiter="p")
    ended, lost, failed = conn.reader(STDOUT).feed(b"", 1.0, why="the server process exited with status 137")
    assert ended.detail == lost.detail == conn.lost == "the server process exited with status 137"
    assert failed.detail == "the server process closed its stdout" and failed.failure == Failure.STREAM_CLOSED


def test_a_broken_transport_fails_every_request_in_flight():
    conn = ClientConnection("stdio", "2025-11-25")
    conn.send(conn.prepare("tools/list"), waiter="a")
    conn.send(conn.prepare("ping"), waiter="b")
    events = conn.fail("cannot write to the server's stdin")
    failed = of(Failed, events)
    assert sorted(f.waiter for f in failed) == ["a", "b"] and {f.failure for f in failed} == {Failure.CONNECT}
    assert conn.in_flight == 0 and not conn.usable
    assert type(events[0]) is SessionLost and events[0].cause is Trigger.CONNECTION_BROKE
    assert len(events) == 3 and conn.fail("again") == []  # lost once: the first cause stays
    assert conn.lost == "cannot write to the server's stdin"


def test_closing_ends_the_session_without_failing_what_is_in_flight():
    conn = ClientConnection("stdio", "2025-11-25")
    conn.send(conn.prepare("ping"), waiter="p")
    conn.close()
    assert conn.lost == "closed by the client" and conn.lost_by is Trigger.CLOSE and conn.in_flight == 1
    assert conn.session.state is SessionState.CLOSED and not conn.usable


def test_stdout_pollution_is_garbled_not_guessed():
    conn = ClientConnection("stdio", "2025-11-25")
    out = conn.send(conn.prepare("ping"), waiter="p")
    events = conn.reader(STDOUT).feed(b"Starting server...\n" + line(result(out.request_id)))
    assert type(events[0]) is Garbled and "not JSON-RPC" in events[0].detail
    assert type(events[1]) is Answered


# --- server requests: one policy on every transport ---------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "sse", "streamable-http"])
def test_server_requests_get_the_policys_answer_on_every_transport(transport):
    policy = Canned({"roots/list": {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}, "sampling/createMessage": None})
    conn = ClientConnection(transport, "2025-11-25", url=URL, policy=policy)
    init = conn.send(initialize_request(conn))
    assert init.message.params["capabilities"] == {"roots": {}}
    asks = [
        {"jsonrpc": "2.0", "id": "r1", "method": "roots/list"},
        {"jsonrpc": "2.0", "id": "r2", "method": "sampling/createMessage", "params": {}},
        {"jsonrpc": "2.0", "id": "r3", "method": "elicitation/create", "params": {}},
        {"jsonrpc": "2.0", "id": "r4", "method": "ping"},
    ]
    if transport == "stdio":
        events = conn.reader(STDOUT).feed(b"".join(line(a) for a in asks))
    elif transport == "sse":
        reader = conn.reader(LegacyHead(200, "text/event-stream"))
        events = reader.feed(b"event: endpoint\ndata: /messages?sessionId=abc\n\n" + b"".join(sse(a) for a in asks))
        assert type(events[0]) is EndpointReady and conn.session_id == "abc"
    else:
        reader = conn.reader(PostHead(init, 200, "text/event-stream", "sid-1"))
        events = reader.feed(b"".join(sse(a) for a in asks))
    replies = {e.request.id: orjson.loads(e.reply.data) for e in of(ServerRequest, events)}
    assert replies["r1"]["result"]["roots"][0]["name"] == "tmp"
    assert replies["r2"]["error"]["code"] == -32601 and "refused by the scenario" in replies["r2"]["error"]["message"]
    assert replies["r3"]["error"]["code"] == -32601
    assert replies["r4"]["result"] == {}


def test_refuse_is_the_default_policy():
    conn = ClientConnection("stdio", "2025-11-25")
    (ask,) = conn.reader(STDOUT).feed(line({"jsonrpc": "2.0", "id": 5, "method": "roots/list"}))
    assert ask.reply.message == Refuse().answer(ask.request)


def test_a_relay_policy_leaves_the_answer_to_the_shell():
    conn = ClientConnection("stdio", "2025-11-25", policy=Relay())
    (ask,) = conn.reader(STDOUT).feed(line({"jsonrpc": "2.0", "id": 5, "method": "roots/list"}))
    assert ask.reply is None and (S2C, 5) in conn.session.pending  # not answered yet
    later = conn.send(jsonrpc.Response(id=5, result={"roots": []}))
    assert orjson.loads(later.data)["id"] == 5 and (S2C, 5) not in conn.session.pending
    (ping,) = conn.reader(STDOUT).feed(line({"jsonrpc": "2.0", "id": 6, "method": "ping"}))
    assert orjson.loads(ping.reply.data)["result"] == {}  # a ping is answered at once, relayed or not


# --- Streamable HTTP ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_streamable_http_headers_follow_the_session_and_version(version):
    conn = ClientConnection("streamable-http", version, url=URL)
    init = conn.send(initialize_request(conn))
    assert "mcp-session-id" not in init.headers and "mcp-protocol-version" not in init.headers
    assert init.headers["accept"] == "application/json, text/event-stream"
    reader = conn.reader(PostHead(init, 200, "application/json", "sid-7"))
    (answered,) = reader.feed(orjson.dumps(init_result(init.request_id, version))) + reader.feed(b"")
    assert type(answered) is Answered and answered.via == "json"
    note = conn.send(initialized_notification())
    call = conn.send(conn.prepare("tools/list"))
    for out in (note, call):
        assert out.headers["mcp-session-id"] == "sid-7"
        assert ("mcp-protocol-version" in out.headers) is (version != "2025-03-26")
    assert conn.headers("delete")["mcp-session-id"] == "sid-7"
    assert conn.headers("get")["accept"] == "text/event-stream"


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_the_users_headers_go_on_every_request_under_the_protocols_own(transport):
    user = {"authorization": "Bearer a", "x-tenant": "t", "accept": "text/plain"}
    conns = [ClientConnection(transport, "2025-11-25", url=URL, headers=user), ClientConnection(transport, "2025-11-25", url=URL)]

    def built(conn):
        conn.session_id, conn.endpoint = "sid", URL
        out = [conn.send(initialize_request(conn)).headers, conn.send(conn.prepare("tools/list")).headers, conn.send(initialized_notification()).headers, conn.headers("legacy")]
        if transport == "streamable-http":
            out += [conn.headers("get"), conn.headers("delete"), conn.headers("resume", "e1")]
        return out

    for with_user, plain in zip(*map(built, conns), strict=True):
        assert with_user == {**user, **plain}  # every request, and the protocol's own headers win (accept)
    conn = conns[0]
    version = conn.headers_version
    conn.set_headers({"authorization": "Bearer b"})  # a renewed token: requests built from now on carry it
    assert conn.headers_version == version + 1
    assert conn.send(conn.prepare("tools/list")).headers["authorization"] == "Bearer b" and "x-tenant" not in conn.send(conn.prepare("ping")).headers
    conn.set_headers({"authorization": "Bearer b"})
    assert conn.headers_version == version + 1  # the same headers change nothing


def test_a_401_fails_its_request_with_the_challenge_and_a_cut_stream_with_its_retry():
    conn = ClientConnection("streamable-http", "2025-11-25", url=URL)
    out = conn.send(initialize_request(conn), waiter="w")
    reader = conn.reader(PostHead(out, 401, "application/json", None, 'Bearer resource_metadata="https://h/m", scope="mcp"'))
    (failed,) = reader.feed(b'{"error": "invalid_token"}') + reader.feed(b"")
    assert failed.failure == Failure.AUTH_REQUIRED and failed.waiter == "w"
    assert failed.challenge.to_json() == {"resource_metadata": "https://h/m", "scope": "mcp"}
    conn.session_id = "sid"
    call = conn.send(conn.prepare("tools/call", {"name": "slow"}), waiter="c")
    reader = conn.reader(PostHead(call, 200, "text/event-stream", None, "Bearer ignored-on-a-200"))
    (cut,) = of(Failed, reader.feed(b"id: p0\nretry: 500\ndata: \n\n") + reader.feed(b""))
    assert (cut.failure, cut.retry_ms, cut.challenge) == (Failure.STREAM_CLOSED, 500, None)


def test_a_probe_goes_with_its_own_version_and_the_handshake_after_it_with_the_settled_one():
    # An `auto` client: `server/discover` as 2026-07-28 sends it, then the handshake era (issue 28).
    conn = ClientConnection("streamable-http", "2025-11-25", url=URL)
    probe = conn.send(conn.prepare("server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}, as_version="2026-07-28"))
    assert probe.headers["mcp-protocol-version"] == "2026-07-28" and probe.headers["mcp-method"] == "server/discover"
    reader = conn.reader(PostHead(probe, 200, "application/json"))
    reader.feed(orjson.dumps({"jsonrpc": "2.0", "id": probe.request_id, "error": {"code": -32601, "message": "no"}}))
    reader.feed(b"")
    init = conn.send(initialize_request(conn))
    assert "mcp-protocol-version" not in init.headers and "mcp-method" not in init.headers
    assert conn.negotiated is None  # the probe's version was never the session's
    reader = conn.reader(PostHead(init, 200, "application/json", "sid-1"))
    reader.feed(orjson.dumps(init_result(init.request_id, "2025-11-25"))) + reader.feed(b"")
    call = conn.send(conn.prepare("tools/list"))
    assert call.headers["mcp-protocol-version"] == "2025-11-25" and "mcp-method" not in call.headers
    assert call.headers["mcp-session-id"] == "sid-1"


def test_a_request_is_complete_when_its_answer_arrives_whatever_the_stream_does_next():
    conn = ClientConnection("streamable-http", "2026-07-28", url=URL)
    out = conn.send(conn.prepare("tools/call", {"name": "slow", "_meta": {"progressToken": "t1"}}), waiter="w")
    reader = conn.reader(PostHead(out, 200, "text/event-stream"))
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t1", "progress": 1}}
    events = reader.feed(sse(progress, "e1") + sse(result(out.request_id), "e2"), 2.0)
    assert [type(e) for e in events] == [Pushed, Answered]
    assert events[0].waiter == "w" and events[0].request_id == out.request_id
    assert reader.answered and reader.first_event == 2.0 and reader.answer.last_event_id == "e2"
    # the server keeps the stream open, then cuts it: nothing more is failed
    assert reader.feed(b": ping\n\n") == [] and reader.feed(b"") == []


def test_a_cut_post_stream_fails_its_request_with_the_resume_point():
    conn = ClientConnection("streamable-http", "2025-11-25", url=URL)
    conn.session_id = "sid"
    out = conn.send(conn.prepare("tools/call", {"name": "slow"}), waiter="w")
    reader = conn.reader(PostHead(out, 200, "text/event-stream"))
    events = reader.feed(b"id: p0\ndata: \n\n") + reader.feed(b"")
    (failed,) = of(Failed, events)
    assert failed.failure == Failure.STREAM_CLOSED and failed.last_event_id == "p0" and failed.waiter == "w"
    resume = conn.headers("resume", failed.last_event_id)
    assert resume["last-event-id"] == "p0" and resume["mcp-session-id"] == "sid"


@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        (404, "application/json", b'{"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32600, "message": "Session not found"}}'),
        (404, "application/json", b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "Session not found"}}'),
        (404, None, b""),
        (400, "text/plain", b"Bad Request: No valid session ID provided"),
    ],
    ids=["404-jsonrpc", "404-jsonrpc-null-id", "404-empty", "400-no-valid-session"],
)
def test_session_lost_in_each_form_servers_use(status, content_type, body):
    conn = ClientConnection("streamable-http", "2025-11-25", url=URL)
    conn.session_id = "gone"
    other = conn.send(conn.prepare("ping"), waiter="other")
    out = conn.send(conn.prepare("tools/list"), waiter="mine")
    reader = conn.reader(PostHead(out, status, content_type))
    events = reader.feed(body) + reader.feed(b"")
    failed = of(Failed, events)
    assert [f.waiter for f in failed] == ["mine", "other"]
    assert {f.failure for f in failed} == {Failure.SESSION_NOT_FOUND}
    assert len(of(SessionLost, events)) == 1 and not conn.usable and conn.lost
    assert of(SessionLost, events)[0].cause is Trigger.SESSION_NOT_FOUND and conn.session.state is SessionState.LOST
    if b"Session not found" in body:
        assert failed[0].detail == "HTTP 404: JSON-RPC -32600 Session not found"
    assert other.request_id not in [k[1] for k in conn.session.pending]


def test_a_notification_that_finds_no_session_fails_and_loses_it():
    conn = ClientConnection("streamable-http", "2025-11-25", url=URL)
    conn.session_id = "gone"
    out = conn.send(initialized_notification())
    reader = conn.reader(PostHead(out, 404, None))
    events = reader.feed(b"")
    assert [type(e) for e in events] == [Failed, SessionLost] and events[0].request is None


def test_a_400_that_is_not_about_the_session_is_a_plain_client_error():
    conn = ClientConnection("streamable-http", "2025-11-25", url=URL)
    conn.session_id = "sid"
    out = conn.send(conn.prepare("tools/call", {"name": "x"}), waiter="w")
    reader = conn.reader(PostHead(out, 400, "text/plain"))
    events = reader.feed(b"Bad Request: invalid JSON") + reader.feed(b"")
    assert [(type(e), e.failure) for e in events] == [(Failed, Failure.HTTP_4XX)] and conn.usable


def test_a_404_before_any_session_is_not_a_lost_session():
    conn = ClientConnection("streamable-http", "2025-11-25", url=URL)
    out = conn.send(initialize_request(conn), waiter="w")
    reader = conn.reader(PostHead(out, 404, "text/html"))
    events = reader.feed(b"<html>nope</html>") + reader.feed(b"")
    assert [e.failure for e in of(Failed, events)] == [Failure.HTTP_4XX] and not of(SessionLost, events)


def test_a_refusals_json_rpc_body_is_handed_over_as_a_message_received():
    """What a refusing answer's body says is a message the server sent: a ledger of the client's
    counts it as the trace does (a 409 to a second GET stream, a 404 for a lost session)."""
    conn = ClientConnection("streamable-http", "2025-11-25", url=URL)
    conn.session_id = "sid"
    conflict = {"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32000, "message": "Conflict: Only one SSE stream is allowed per session"}}
    reader = conn.reader(GetHead(409, "application/json"))
    (refused,) = of(Failed, reader.feed(orjson.dumps(conflict)) + reader.feed(b""))
    assert refused.request is None and jsonrpc.to_obj(refused.refusal) == conflict
    gone = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
    out = conn.send(conn.prepare("tools/list"), waiter="w")
    reader = conn.reader(PostHead(out, 404, "application/json"))
    failed = of(Failed, reader.feed(orjson.dumps(gone)) + reader.feed(b""))
    # paired with its POST's request (`http.pair_with_post`), as a ledger counts the trace's
    assert failed[0].request == out.message and jsonrpc.to_obj(failed[0].refusal) == {**gone, "id": out.message.id}
    html = conn.reader(PostHead(conn.send(conn.prepare("tools/list"), waiter="w"), 500, "text/html"))
    assert [f.refusal for f in of(Failed, html.feed(b"<html>no</html>") + html.feed(b""))] == [None]


def test_get_stream_keeps_its_last_event_id_for_resumption():
    conn = ClientConnection("streamable-http", "2025-11-25", url=URL)
    conn.session_id = "sid"
    assert conn.reader(GetHead(405, None)) is None
    reader = conn.reader(GetHead(200, "text/event-stream"))
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
    events = reader.feed(sse(note, "41") + sse(note, "42"))
    assert [type(e) for e in events] == [Pushed, Pushed] and events[0].via == "get"
    assert conn.headers("get")["last-event-id"] == "42"
    ended = reader.feed(b"")
    assert type(ended[0]) is StreamEnded and ended[0].stream == "get" and conn.usable


def test_give_up_then_a_late_answer_is_unmatched():
    conn = ClientConnection("stdio", "2025-11-25")
    out = conn.send(conn.prepare("tools/call", {"name": "slow"}), waiter="w")
    (failed,) = conn.fail("no answer within 1 s", gave_up=out.request_id)
    assert failed.failure == Failure.ANSWER_LOST and failed.waiter == "w"
    (late,) = conn.reader(STDOUT).feed(line(result(out.request_id)))
    assert type(late) is Unmatched and late.late
    (stray,) = conn.reader(STDOUT).feed(line(result(999)))
    assert type(stray) is Unmatched and not stray.late


def test_a_null_id_error_on_a_post_is_that_requests_answer():
    conn = ClientConnection("streamable-http", "2026-07-28", url=URL)
    out = conn.send(conn.prepare("tools/call", {"name": "x"}), waiter="w")
    reader = conn.reader(PostHead(out, 400, "application/json"))
    body = b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}'
    (answered,) = reader.feed(body) + reader.feed(b"")
    assert type(answered) is Answered and answered.answer.code == -32700


# --- legacy HTTP+SSE -------------------------------------------------------------------------------


def test_legacy_endpoint_then_answers_on_the_stream():
    conn = ClientConnection("sse", "2024-11-05", url="http://127.0.0.1:9/sse")
    assert not conn.usable
    reader = conn.reader(LegacyHead(200, "text/event-stream; charset=utf-8"))
    assert reader.refused() is None
    (ready,) = reader.feed(b"event: endpoint\ndata: /messages/?session_id=ab12\n\n")
    assert ready.url == "http://127.0.0.1:9/messages/?session_id=ab12" and ready.session_id == "ab12"
    init = conn.send(initialize_request(conn), waiter="i")
    assert init.url == ready.url and init.headers == {"content-type": "application/json"}
    post = conn.reader(PostHead(init, 202, None))
    assert post.feed(b"Accepted") + post.feed(b"") == []
    (answered,) = reader.feed(sse(init_result(init.request_id, "2024-11-05")))
    assert answered.waiter == "i" and answered.via == "stream"


def test_legacy_post_404_is_a_lost_session_and_the_stream_end_fails_the_rest():
    conn = ClientConnection("sse", "2024-11-05", url="http://127.0.0.1:9/sse")
    reader = conn.reader(LegacyHead(200, "text/event-stream"))
    reader.feed(b"event: endpoint\ndata: /messages?sessionId=x\n\n")
    out = conn.send(conn.prepare("tools/list"), waiter="a")
    post = conn.reader(PostHead(out, 404, "text/plain"))
    events = post.feed(b"Could not find session") + post.feed(b"")
    assert [type(e) for e in events] == [Failed, SessionLost] and events[0].failure == Failure.SESSION_NOT_FOUND
    conn2 = ClientConnection("sse", "2024-11-05", url="http://127.0.0.1:9/sse")
    reader2 = conn2.reader(LegacyHead(200, "text/event-stream"))
    reader2.feed(b"event: endpoint\ndata: /messages?sessionId=y\n\n")
    conn2.send(conn2.prepare("tools/list"), waiter="b")
    events = reader2.feed(b"")
    assert [type(e) for e in events] == [StreamEnded, SessionLost, Failed] and events[2].waiter == "b"
    assert events[1].cause is Trigger.STREAM_ENDED


def test_a_session_lost_by_404_whose_stream_then_ends_is_told_so_once_more():
    """A replay goes on after a 404 (HTTP still answers) but not once the session's stream is gone."""
    conn = ClientConnection("sse", "2024-11-05", url="http://127.0.0.1:9/sse")
    reader = conn.reader(LegacyHead(200, "text/event-stream"))
    reader.feed(b"event: endpoint\ndata: /messages?sessionId=x\n\n")
    post = conn.reader(PostHead(conn.send(conn.prepare("tools/list"), waiter="a"), 404, "text/plain"))
    post.feed(b"Could not find session")
    post.feed(b"")
    conn.send(conn.prepare("ping"), waiter="b")
    events = reader.feed(b"")
    assert [type(e) for e in events] == [StreamEnded, SessionLost, Failed] and events[1].cause is Trigger.STREAM_ENDED
    assert conn.lost_by is Trigger.SESSION_NOT_FOUND and conn.lost == "HTTP 404: Could not find session"
    assert conn.fail("a write failed") == []  # the carrier was gone already: no news


def test_legacy_endpoint_on_another_origin_is_refused():
    conn = ClientConnection("sse", "2024-11-05", url="http://127.0.0.1:9/sse")
    reader = conn.reader(LegacyHead(200, "text/event-stream"))
    garbled, lost = reader.feed(b"event: endpoint\ndata: http://elsewhere.invalid/messages?s=1\n\n")
    assert type(garbled) is Garbled and conn.endpoint is None and not conn.usable
    assert type(lost) is SessionLost and lost.cause is Trigger.ENDPOINT_REFUSED and conn.lost == garbled.detail
    assert conn.reader(LegacyHead(200, "text/html")).refused() and conn.reader(LegacyHead(500, None)).refused()


def test_batches_from_the_server_are_taken_item_by_item():
    conn = ClientConnection("stdio", "2025-03-26")
    a, b = conn.send(conn.prepare("ping"), waiter="a"), conn.send(conn.prepare("ping"), waiter="b")
    batch = orjson.dumps([result(a.request_id), result(b.request_id)]) + b"\n"
    assert [e.waiter for e in conn.reader(STDOUT).feed(batch)] == ["a", "b"]


def test_unknown_transport_or_version_is_refused():
    with pytest.raises(ValueError):
        ClientConnection("carrier-pigeon")
    with pytest.raises(ValueError):
        ClientConnection("stdio", "1999-01-01")
    assert jsonrpc.decode(ClientConnection("stdio").send(initialized_notification()).data).method == "notifications/initialized"


def test_a_cut_stream_resumed_delivers_its_answer_and_counts_what_came_twice():
    conn = ClientConnection("streamable-http", "2025-11-25", url=URL)
    conn.session_id = "sid"
    out = conn.send(conn.prepare("tools/call", {"name": "slow", "_meta": {"progressToken": 7}}), waiter="first", ts=1.0)
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 7, "progress": 1}}
    reader = conn.reader(PostHead(out, 200, "text/event-stream"))
    (failed,) = of(Failed, reader.feed(sse(progress, "s1-1")) + reader.feed(b""))
    assert failed.last_event_id == "s1-1" and failed.sent == 1.0
    headers = conn.resume(failed, waiter="again")
    assert headers["last-event-id"] == "s1-1" and headers["mcp-session-id"] == "sid"
    resumed = conn.reader(GetHead(200, "text/event-stream", stream="resume"))
    events = resumed.feed(sse(progress, "s1-1") + sse(result(out.request_id), "s1-2"), 3.0)
    answered = of(Answered, events)[0]
    assert answered.waiter == "again" and answered.received - answered.sent == 2.0
    assert conn.replayed == 1
    (dup,) = resumed.feed(sse(result(out.request_id), "s1-3"))
    assert type(dup) is Unmatched and dup.duplicate and not dup.late
    assert type(resumed.feed(b"")[0]) is StreamEnded and conn.usable


def test_resuming_after_a_restart_finds_the_session_gone():
    conn = ClientConnection("streamable-http", "2025-11-25", url=URL)
    conn.session_id = "sid"
    out = conn.send(conn.prepare("tools/list"), waiter="w")
    reader = conn.reader(PostHead(out, 200, "text/event-stream"))
    (failed,) = of(Failed, reader.feed(b"id: a-1\ndata: \n\n") + reader.feed(b""))
    conn.resume(failed, waiter="w2")
    resumed = conn.reader(GetHead(404, "application/json", stream="resume"))
    events = resumed.feed(b'{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Session not found"}}')
    events += resumed.feed(b"")
    assert [e.waiter for e in of(Failed, events) if e.request is not None] == ["w2"]
    assert of(SessionLost, events) and not conn.usable
    assert conn.resume(failed, waiter="w3") is None and conn.in_flight == 0  # a lost session resumes nothing


ALL_VERSIONS = [*HANDSHAKE_VERSIONS, "2026-07-28"]


@pytest.mark.parametrize("version", ALL_VERSIONS)
@pytest.mark.parametrize("transport", ["stdio", "sse", "streamable-http"])
def test_every_transport_and_era_round_trip(transport, version):
    """Handshake (or none), one call answered, its bytes and headers as the transport and era want."""
    conn = ClientConnection(transport, version, url="http://127.0.0.1:9/sse" if transport == "sse" else URL)
    stream = None
    if transport == "sse":
        stream = conn.reader(LegacyHead(200, "text/event-stream"))
        stream.feed(b"event: endpoint\ndata: /messages?session_id=s1\n\n")

    def answer(out, obj):
        if transport == "stdio":
            return conn.reader(STDOUT).feed(line(obj))
        if transport == "sse":
            posted = conn.reader(PostHead(out, 202, None))
            return posted.feed(b"") + stream.feed(sse(obj))
        reader = conn.reader(PostHead(out, 200, "application/json", "sid" if out.message.method == "initialize" else None))
        return reader.feed(orjson.dumps(obj)) + reader.feed(b"")

    if version != "2026-07-28":
        init = conn.send(initialize_request(conn), waiter="init")
        assert [e.waiter for e in answer(init, init_result(init.request_id, version))] == ["init"]
        conn.send(initialized_notification())
    out = conn.send(conn.prepare("tools/call", {"name": "echo", "arguments": {"text": "x"}}), waiter="call")
    body = orjson.loads(out.data)
    assert ("_meta" in body["params"]) is (version == "2026-07-28")
    if transport == "stdio":
        assert out.headers is None and out.data.endswith(b"\n")
    elif transport == "sse":
        assert out.url.endswith("/messages?session_id=s1") and out.headers == {"content-type": "application/json"}
    else:
        assert out.headers.get("mcp-session-id") == (None if version == "2026-07-28" else "sid")
        assert out.headers.get("mcp-protocol-version") == (None if version in ("2024-11-05", "2025-03-26") else version)
        assert (out.headers.get("mcp-name") == "echo") is (version == "2026-07-28")
    (answered,) = answer(out, result(out.request_id, {"content": []}))
    assert type(answered) is Answered and answered.waiter == "call" and conn.negotiated == version


def test_recent_keys_are_bounded_and_keep_at_least_the_last_ones():
    from mcpbench.protocol.client import REMEMBERED, Recent

    recent = Recent()
    for key in range(5 * REMEMBERED):
        recent.add(key)
    assert all(key in recent for key in range(4 * REMEMBERED, 5 * REMEMBERED))
    assert 0 not in recent and len(recent._new) + len(recent._old) <= 2 * REMEMBERED
