"""The server core, fed requests directly: answer forms, sessions, eras, Host and Origin, stdio framing."""

import itertools

import orjson
import pytest

from mcpbench.protocol.errors import LocalProtocolError
from mcpbench.protocol.framing import NEED_DATA
from mcpbench.protocol.jsonrpc import ErrorResponse, Notification, Response
from mcpbench.protocol.server import (
    Accepted,
    Call,
    HostCheck,
    HttpRequest,
    Refused,
    ServerConnection,
    SessionEnded,
    State,
    StreamOpened,
)
from tests.protocol.helpers import byte_by_byte, feed_all

HOST = "127.0.0.1:8000"
MODERN = "2026-07-28"
META = {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {}}}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
MODERN_CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {}, **META}}
MODERN_HEADERS = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"}
NOTE = {"jsonrpc": "2.0", "method": "notifications/initialized"}
ANSWER = {"jsonrpc": "2.0", "id": "mcpbench-77", "result": {}}
SID = "sid-1"  # the first session id the connections below mint


def server(transport: str = "streamable-http", **options) -> ServerConnection:
    ids = itertools.count(1)
    options.setdefault("host_check", HostCheck.for_bind("127.0.0.1"))
    return ServerConnection(transport, new_session_id=lambda: f"sid-{next(ids)}", **options)


def request(method: str = "POST", body=None, target: str = "/mcp", **headers: str) -> HttpRequest:
    data = body if isinstance(body, bytes) else orjson.dumps(body) if body is not None else b""
    return HttpRequest(method=method, target=target, headers={"host": HOST, **headers}, body=data)


def open_session(conn: ServerConnection) -> str:
    """An initialized session, as a client that got `initialize` answered sees it."""
    call = conn.http(request(body=INIT))
    conn.respond(call, Response(id=1, result={"protocolVersion": "2025-11-25", "capabilities": {}}))
    return call.session


def body_of(event) -> dict:
    return orjson.loads(event.reply.body)


# --- Streamable HTTP: one table of request -> answer form -----------------------------------------

# (case, request, with a live session "sid-1", event type, HTTP status, JSON-RPC error code)
STREAMABLE = [
    ("initialize mints a session", request(body=INIT), False, Call, None, None),
    ("a call in the session", request(body=CALL, **{"mcp-session-id": SID, "mcp-protocol-version": "2025-11-25"}),
     True, Call, None, None),
    ("a call without the session id", request(body=CALL), True, Refused, 400, -32600),
    ("a call in an unknown session", request(body=CALL, **{"mcp-session-id": "nope"}), True, Refused, 404, -32600),
    ("a notification", request(body=NOTE, **{"mcp-session-id": SID}), True, Accepted, 202, None),
    ("an answer", request(body=ANSWER, **{"mcp-session-id": SID}), True, Accepted, 202, None),
    ("a body that is not JSON", request(body=b"{nope"), True, Refused, 400, -32700),
    ("JSON that is no JSON-RPC", request(body={"a": 1}), True, Refused, 400, -32600),
    ("a batch", request(body=[CALL, CALL], **{"mcp-session-id": SID}), True, Refused, 400, -32600),
    ("an unknown MCP-Protocol-Version", request(body=CALL, **{"mcp-session-id": SID, "mcp-protocol-version": "1999-01-01"}),
     True, Refused, 400, -32022),
    ("2026-07-28: a call with its headers", request(body=MODERN_CALL, **MODERN_HEADERS), False, Call, None, None),
    ("2026-07-28: a session id is ignored", request(body=MODERN_CALL, **MODERN_HEADERS, **{"mcp-session-id": "nope"}),
     False, Call, None, None),
    ("2026-07-28: no version header", request(body=MODERN_CALL, **{"mcp-method": "tools/call", "mcp-name": "echo"}),
     False, Refused, 400, -32020),
    ("2026-07-28: version header unlike _meta",
     request(body={**MODERN_CALL, "params": {"name": "echo", "_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25"}}},
             **MODERN_HEADERS), False, Refused, 400, -32020),
    ("2026-07-28: Mcp-Method unlike the body", request(body=MODERN_CALL, **{**MODERN_HEADERS, "mcp-method": "tools/list"}),
     False, Refused, 400, -32020),
    ("2026-07-28: Mcp-Name missing", request(body=MODERN_CALL, **{"mcp-protocol-version": MODERN, "mcp-method": "tools/call"}),
     False, Refused, 400, -32020),
    ("2026-07-28: no _meta", request(body=CALL, **MODERN_HEADERS), False, Refused, 400, -32602),
    ("an unknown version in header and _meta",
     request(body={**MODERN_CALL, "params": {"name": "echo", "_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}},
             **{**MODERN_HEADERS, "mcp-protocol-version": "2099-01-01"}), False, Refused, 400, -32022),
    ("2026-07-28: a notification", request(body=NOTE, **{"mcp-protocol-version": MODERN}), False, Accepted, 202, None),
    ("2026-07-28: an answer", request(body=ANSWER, **{"mcp-protocol-version": MODERN}), False, Refused, 400, -32600),
    ("GET without a stream to offer", request("GET", **{"mcp-session-id": SID}), True, Refused, 405, None),
    ("DELETE ends the session", request("DELETE", **{"mcp-session-id": SID}), True, SessionEnded, 200, None),
    ("DELETE without the session id", request("DELETE"), True, Refused, 400, -32600),
    ("DELETE of an unknown session", request("DELETE", **{"mcp-session-id": "nope"}), True, Refused, 404, -32600),
    ("DELETE in 2026-07-28", request("DELETE", **{"mcp-protocol-version": MODERN}), False, Refused, 405, None),
    ("another method", request("PUT"), False, Refused, 405, None),
    ("another path", request(body=INIT, target="/other"), False, Refused, 404, None),
    ("a foreign Host", HttpRequest(method="POST", target="/mcp", headers={"host": "evil.example"}, body=orjson.dumps(INIT)),
     False, Refused, 421, None),
    ("no Host", HttpRequest(method="POST", target="/mcp", headers={}, body=orjson.dumps(INIT)), False, Refused, 421, None),
    ("a foreign Origin", request(body=INIT, origin="http://evil.example"), False, Refused, 403, None),
    ("a loopback Origin", request(body=INIT, origin="http://localhost:3000"), False, Call, None, None),
    ("localhost on any port", HttpRequest(method="POST", target="/mcp", headers={"host": "localhost:9"}, body=orjson.dumps(INIT)),
     False, Call, None, None),
]


@pytest.mark.parametrize(("case", "http", "session", "kind", "status", "code"), STREAMABLE, ids=[c[0] for c in STREAMABLE])
def test_streamable_http_answer_forms(case, http, session, kind, status, code):
    conn = server()
    if session:
        assert open_session(conn) == SID
    event = conn.http(http)
    assert type(event) is kind, event
    if status is not None:
        assert event.reply.status == status
    if code is not None:
        assert body_of(event)["error"]["code"] == code
    if kind is Call:
        assert event.reply is None  # Streamable HTTP: the shell answers with respond() or stream()


def test_a_call_carries_its_session_and_version():
    conn = server()
    init = conn.http(request(body=INIT))
    assert init.session == SID and init.version == "2025-11-25" and init.sse
    modern = conn.http(request(body=MODERN_CALL, **MODERN_HEADERS, **{"mcp-session-id": SID}))
    assert modern.session is None and modern.version == MODERN
    json_only = conn.http(request(body=MODERN_CALL, **MODERN_HEADERS, accept="application/json"))
    assert json_only.sse is False


def test_a_failed_initialize_leaves_no_session():
    conn = server()
    call = conn.http(request(body=INIT))
    reply = conn.respond(call, ErrorResponse(id=1, code=-32600, message="no"))
    assert reply.status == 200 and "mcp-session-id" not in dict(reply.headers)
    again = conn.http(request(body=CALL, **{"mcp-session-id": call.session}))
    assert type(again) is Refused and again.reply.status == 404


def test_the_session_takes_the_version_initialize_settled():
    conn = server()
    call = conn.http(request(body=INIT))
    reply = conn.respond(call, Response(id=1, result={"protocolVersion": "2025-06-18"}))
    assert dict(reply.headers)["mcp-session-id"] == SID
    later = conn.http(request(body=CALL, **{"mcp-session-id": SID}))
    assert later.version == "2025-06-18"


def test_a_deleted_session_is_gone():
    conn = server()
    open_session(conn)
    assert type(conn.http(request("DELETE", **{"mcp-session-id": SID}))) is SessionEnded
    assert not conn.alive(SID)
    gone = conn.http(request(body=CALL, **{"mcp-session-id": SID}))
    assert type(gone) is Refused and gone.reply.status == 404


def test_a_get_stream_when_the_server_has_one():
    conn = server(get_stream=True)
    open_session(conn)
    opened = conn.http(request("GET", **{"mcp-session-id": SID}))
    assert type(opened) is StreamOpened and opened.reply.status == 200
    assert dict(opened.reply.headers)["content-type"] == "text/event-stream"
    assert conn.http(request("GET")).reply.status == 400
    assert conn.http(request("GET", **{"mcp-session-id": "nope"})).reply.status == 404
    assert conn.http(request("GET", **{"mcp-protocol-version": MODERN})).reply.status == 405
    assert conn.push(Notification(method="notifications/tools/list_changed")) == (
        b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\r\n\r\n')


def test_delete_can_be_refused():
    conn = server(delete=False)
    open_session(conn)
    assert conn.http(request("DELETE", **{"mcp-session-id": SID})).reply.status == 405
    assert conn.alive(SID)


# --- Host and Origin -------------------------------------------------------------------------------


@pytest.mark.parametrize(("check", "host", "origin", "status"), [
    (HostCheck.for_bind("0.0.0.0"), "evil.example", "http://evil.example", None),  # off unless asked
    (HostCheck.for_bind("::1"), "[::1]:8000", None, None),
    (HostCheck.for_bind("localhost"), "127.0.0.1", None, 421),  # the SDK's patterns want a port
    (HostCheck.for_bind("0.0.0.0", hosts=("mcp.example.com:*",)), "mcp.example.com:443", None, None),
    (HostCheck.for_bind("0.0.0.0", hosts=("mcp.example.com:*",)), "evil.example:443", None, 421),
    (HostCheck.for_bind("0.0.0.0", hosts=("mcp.example.com",)), "mcp.example.com", "http://mcp.example.com", 403),
    (HostCheck.for_bind("127.0.0.1", hosts=("*",), origins=("https://app.example",)), "any.example", "https://app.example", None),
])
def test_host_and_origin_as_the_sdk_checks_them(check, host, origin, status):
    headers = {"host": host, **({"origin": origin} if origin else {})}
    refused = check.refusal(headers)
    assert (refused.reply.status if refused else None) == status


# --- legacy HTTP+SSE -------------------------------------------------------------------------------


def test_legacy_stream_names_the_session_in_its_endpoint():
    conn = server("sse")
    opened = conn.http(request("GET", target="/sse"))
    assert type(opened) is StreamOpened and opened.session == SID and opened.endpoint == f"/messages/?session_id={SID}"
    assert opened.reply.body == b"event: endpoint\r\ndata: /messages/?session_id=sid-1\r\n\r\n"
    assert dict(opened.reply.headers)["content-type"].startswith("text/event-stream")


# (case, request, event type, HTTP status)
LEGACY = [
    ("a request", request(body=INIT, target=f"/messages/?session_id={SID}"), Call, 202),
    ("a notification", request(body=NOTE, target=f"/messages/?session_id={SID}"), Accepted, 202),
    ("an answer", request(body=ANSWER, target=f"/messages/?x=1&session_id={SID}"), Accepted, 202),
    ("no session", request(body=INIT, target="/messages/"), Refused, 400),
    ("an unknown session", request(body=INIT, target="/messages/?session_id=nope"), Refused, 404),
    ("a bad body", request(body=b"{nope", target=f"/messages/?session_id={SID}"), Refused, 400),
    ("a batch", request(body=[NOTE], target=f"/messages/?session_id={SID}"), Refused, 400),
    ("DELETE", request("DELETE", target="/sse"), Refused, 405),
    ("GET the POST endpoint", request("GET", target="/messages/"), Refused, 405),
    ("another path", request("GET", target="/mcp"), Refused, 404),
    ("a foreign Host", HttpRequest(method="GET", target="/sse", headers={"host": "evil.example"}), Refused, 421),
]


@pytest.mark.parametrize(("case", "http", "kind", "status"), LEGACY, ids=[c[0] for c in LEGACY])
def test_legacy_answer_forms(case, http, kind, status):
    conn = server("sse")
    conn.http(request("GET", target="/sse"))
    event = conn.http(http)
    assert type(event) is kind, event
    assert event.reply.status == status


def test_a_legacy_session_ends_with_its_stream():
    conn = server("sse")
    opened = conn.http(request("GET", target="/sse"))
    assert conn.end(opened.session) and not conn.end(opened.session)
    late = conn.http(request(body=NOTE, target=f"/messages/?session_id={SID}"))
    assert type(late) is Refused and late.reply.status == 404


# --- stdio -----------------------------------------------------------------------------------------


STDIN = b"".join(orjson.dumps(m) + b"\n" for m in (INIT, NOTE, CALL)) + b"not json\r\n\n" + orjson.dumps(CALL)


class _Stdin:
    """`receive_stdin` behind h11's two-step interface, for the helpers' chunking."""

    def __init__(self) -> None:
        self.conn = ServerConnection("stdio")
        self.events: list = []

    def receive_data(self, data: bytes) -> None:
        self.events += self.conn.receive_stdin(data)

    def next_event(self):
        return self.events.pop(0) if self.events else NEED_DATA


@pytest.mark.parametrize("chunking", ["whole", "byte by byte"])
def test_stdio_lines_in_any_chunking(chunking):
    events = feed_all(_Stdin, STDIN) if chunking == "whole" else byte_by_byte(_Stdin, STDIN)
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["Call", "Accepted", "Call", "Refused", "Call", "SessionEnded"]
    refused = events[3]
    assert refused.reply.status is None and orjson.loads(refused.reply.body)["error"]["code"] == -32700
    assert refused.reply.body.endswith(b"\n")
    assert events[4].request.id == 2  # the last line, cut off by the end of stdin, still counts


def test_stdio_ends_once():
    conn = ServerConnection("stdio")
    assert [type(e) for e in conn.receive_stdin(b"")] == [SessionEnded]
    assert conn.state is State.CLOSED
    with pytest.raises(LocalProtocolError):
        conn.receive_stdin(orjson.dumps(CALL) + b"\n")


def test_stdio_answers_are_lines_and_initialize_settles_the_version():
    conn = ServerConnection("stdio")
    (call,) = conn.receive_stdin(orjson.dumps(INIT) + b"\n")
    data = conn.event(call, Response(id=1, result={"protocolVersion": "2025-03-26"}))
    assert data.endswith(b"\n") and orjson.loads(data)["result"]["protocolVersion"] == "2025-03-26"
    (later,) = conn.receive_stdin(orjson.dumps(CALL) + b"\n")
    assert later.version == "2025-03-26"


# --- answering, once -------------------------------------------------------------------------------


def test_a_call_is_answered_once():
    conn = server()
    call = conn.http(request(body=INIT))
    head = conn.stream(call)
    assert head.status == 200 and dict(head.headers)["mcp-session-id"] == SID
    progress = conn.event(call, Notification(method="notifications/progress", params={"progressToken": 1, "progress": 1}))
    assert progress.startswith(b"event: message\r\ndata: ") and progress.endswith(b"\r\n\r\n")
    conn.event(call, Response(id=1, result={}))
    assert conn.in_flight == 0
    with pytest.raises(LocalProtocolError):
        conn.event(call, Notification(method="notifications/progress"))
    with pytest.raises(LocalProtocolError):
        conn.respond(call, Response(id=1, result={}))


def test_respond_is_for_streamable_http_answers_only():
    conn = server("sse")
    conn.http(request("GET", target="/sse"))
    call = conn.http(request(body=INIT, target=f"/messages/?session_id={SID}"))
    with pytest.raises(LocalProtocolError):
        conn.respond(call, Response(id=1, result={}))
    with pytest.raises(LocalProtocolError):
        server().respond(server().http(request(body=INIT)), Notification(method="x"))


def test_our_requests_pair_with_the_clients_answers():
    conn = server()
    open_session(conn)
    call = conn.http(request(body=CALL, **{"mcp-session-id": SID}))
    asked = conn.ask(call, "sampling/createMessage", {"messages": []}, waiter="w")
    assert asked.id == "mcpbench-1"
    assert b'"method":"sampling/createMessage"' in conn.event(call, asked)
    answer = {"jsonrpc": "2.0", "id": asked.id, "result": {"role": "assistant"}}
    accepted = conn.http(request(body=answer, **{"mcp-session-id": SID}))
    assert type(accepted) is Accepted and accepted.waiter == "w" and accepted.message.result == {"role": "assistant"}
    again = conn.ask(call, "roots/list", waiter="w2")
    conn.give_up(again.id)
    late = conn.http(request(body={**answer, "id": again.id}, **{"mcp-session-id": SID}))
    assert type(late) is Accepted and late.waiter is None


def test_a_2026_client_is_never_asked():
    conn = server()
    call = conn.http(request(body=MODERN_CALL, **MODERN_HEADERS))
    with pytest.raises(LocalProtocolError):
        conn.ask(call, "sampling/createMessage", {})


def test_sessions_are_bounded(monkeypatch):
    import mcpbench.protocol.server as module

    monkeypatch.setattr(module, "MAX_SESSIONS", 3)
    conn = server()
    sids = [open_session(conn) for _ in range(4)]
    assert conn.sessions == 3 and not conn.alive(sids[0]) and conn.alive(sids[-1])
