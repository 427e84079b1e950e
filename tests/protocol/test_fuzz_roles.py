"""The core's state machines driven by hostile programs: the session's transition table, the client and
server roles, and the version rules (`versions.translate` and the questions asked of any version).

A program is a random list of steps (messages either way, answers in any shape, streams cut or
closed, the session lost or closed). Whatever it holds, nothing but the documented errors is raised,
the session only ever moves along a row of its table, and a client's request gets one outcome at most.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpbench.protocol import versions
from mcpbench.protocol.client import (
    STDOUT, Answered, ClientConnection, Failed, GetHead, LegacyHead, PostHead, notification,
)
from mcpbench.protocol.errors import LocalProtocolError, RemoteProtocolError
from mcpbench.protocol.jsonrpc import ErrorResponse, Request, Response, encode
from mcpbench.protocol.server import Call, HttpRequest, ServerConnection
from mcpbench.protocol.session import C2S, LOSSES, S2C, TRANSITIONS, Session, SessionState, StateChange, Trigger
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from tests.support.fuzz import chunked, cuts, hostile_bytes, ids, json_objects, json_values, messages, params

pytestmark = pytest.mark.fuzz

KNOWN = list(versions.VERSIONS)
any_version = st.sampled_from([*KNOWN, None, "1999-01-01", ""]) | json_values
directions = st.sampled_from([C2S, S2C])
# What an `initialize` and its answer carry, good and bad: the version fields are any JSON value.
handshake = st.one_of(
    st.builds(lambda rid, version, caps: Request(id=rid, method="initialize", params={"protocolVersion": version, "capabilities": caps}),
              ids, any_version, json_values),
    st.builds(lambda rid, version: Response(id=rid, result={"protocolVersion": version, "capabilities": {}}), ids, any_version),
    st.builds(lambda rid, version: Request(id=rid, method="tools/list", params={"_meta": {versions.META_PROTOCOL_VERSION: version}}),
              ids, any_version),
)
session_steps = st.lists(
    st.one_of(
        st.tuples(st.just("observe"), directions, messages | handshake),
        st.tuples(st.just("lose"), st.sampled_from(LOSSES)),
        st.tuples(st.just("close")),
        st.tuples(st.just("resume"), ids),
    ),
    max_size=15,
)


@given(st.sampled_from([*KNOWN, None]), st.sampled_from([STDIO, LEGACY_SSE, STREAMABLE_HTTP, None]), st.booleans(), session_steps)
def test_a_session_only_moves_along_its_table(version, transport, joined, steps):
    session = Session.joined(version, transport) if joined else Session(version, transport)
    for step in steps:
        before = session.state
        match step:
            case ("observe", direction, message):
                events = session.observe(direction, message, 1.0)
            case ("lose", cause):
                events = session.lose(cause, "lost")
            case ("close",):
                events = session.close()
            case ("resume", rid):
                session.resuming(Request(id=rid, method="tools/call"), 1.0)
                events = []
        changes = [e for e in events if type(e) is StateChange]
        for change in changes:
            assert change.new in TRANSITIONS[change.era][change.old].values(), change
        assert session.state in TRANSITIONS[session.era or versions.Era.HANDSHAKE]
        if before is SessionState.CLOSED:
            assert session.state is SessionState.CLOSED  # nothing leaves CLOSED
        if before is SessionState.LOST:
            assert session.state in (SessionState.LOST, SessionState.CLOSED)
        if session.state in (SessionState.LOST, SessionState.CLOSED):
            assert session.ending is not None


@given(any_version, any_version, st.text(max_size=12) | st.sampled_from(["initialize", "ping", "server/discover"]),
       st.none() | json_objects, st.booleans(), st.booleans())
def test_translate_and_every_version_question_take_any_input(recorded, live, method, request_params, input_round, input_retry):
    for question in (versions.rules, versions.era_of, versions.has_handshake, versions.has_legacy_sse, versions.has_get_stream,
                     versions.allows_server_requests, versions.era_name):
        question(recorded)
    versions.request_era(method, request_params)
    versions.meta_version(request_params)
    versions.progress_token(request_params)
    if not isinstance(live, str) or live not in KNOWN:
        return  # `live` is a version the caller speaks: always a known one
    out, why = versions.translate(method, request_params, recorded, live, input_round=input_round, input_retry=input_retry)
    assert why is None or out is None
    if versions.same_era(recorded, live):
        assert out is request_params
    elif out is not None and versions.has_handshake(live) and isinstance(out.get("_meta"), dict):
        assert not any(k.startswith(versions.META_PREFIX) for k in out["_meta"])
    elif out is not None and versions.same_era(live, live):
        back, _ = versions.translate(method, out, live, live)
        assert back is out


# --- the client role ------------------------------------------------------------------------------

statuses = st.sampled_from([200, 202, 400, 404, 405, 409, 500]) | st.integers(min_value=100, max_value=599)
content_types = st.sampled_from(["application/json", "text/event-stream", "text/html", None])
body = hostile_bytes | st.builds(lambda ms, sse: b"".join(
    (b"event: message\ndata: " + encode(m) + b"\n\n") if sse else encode(m) for m in ms), st.lists(messages, max_size=3), st.booleans())
client_steps = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.sampled_from(["tools/call", "initialize", "ping", "tools/list"]), params),
        st.tuples(st.just("notify"), st.sampled_from(["notifications/initialized", "notifications/cancelled"]), params),
        st.tuples(st.just("answer"), st.integers(min_value=0, max_value=9), statuses, content_types, st.none() | st.text(max_size=8),
                  body, cuts(8)),
        st.tuples(st.just("get"), statuses, content_types, body, cuts(8)),
        st.tuples(st.just("stdout"), body, cuts(8)),
        st.tuples(st.just("legacy"), statuses, content_types, body, cuts(8)),
        st.tuples(st.just("give_up"), st.integers(min_value=0, max_value=9)),
        st.tuples(st.just("broken")),
        st.tuples(st.just("close")),
    ),
    max_size=20,
)


@given(st.sampled_from([STDIO, LEGACY_SSE, STREAMABLE_HTTP]), st.sampled_from(KNOWN), client_steps)
def test_a_client_takes_any_answers_and_settles_each_request_once(transport, version, steps):
    url = "http://127.0.0.1:8000/sse" if transport == LEGACY_SSE else "http://127.0.0.1:8000/mcp"
    conn = ClientConnection(transport, version, url=url)
    sent, outcomes = [], {}

    def settle(events):
        for event in events:
            if type(event) in (Answered, Failed) and event.waiter is not None:
                outcomes[event.waiter] = outcomes.get(event.waiter, 0) + 1

    def feed(reader, data, points):
        for chunk in [*chunked(data, points), b""]:
            try:
                settle(reader.feed(chunk))
            except RemoteProtocolError:  # documented: an SSE line past the limit
                break

    for step in steps:
        match step:
            case ("request", method, request_params):
                sent.append(conn.send(conn.prepare(method, request_params), waiter=len(sent) + 1))
            case ("notify", method, request_params):
                sent.append(conn.send(notification(method, request_params)))
            case ("answer", index, status, content_type, session_id, data, points) if sent and transport != STDIO:
                feed(conn.reader(PostHead(sent[index % len(sent)], status, content_type, session_id)), data, points)
            case ("get", status, content_type, data, points) if transport == STREAMABLE_HTTP:
                if (reader := conn.reader(GetHead(status, content_type))) is not None:
                    feed(reader, data, points)
            case ("stdout", data, points) if transport == STDIO:
                for chunk in [*chunked(data, points), b""]:
                    settle(conn.reader(STDOUT).feed(chunk))
            case ("legacy", status, content_type, data, points) if transport == LEGACY_SSE:
                feed(conn.reader(LegacyHead(status, content_type)), data, points)
            case ("give_up", index) if sent:
                out = sent[index % len(sent)]
                if out.request_id is not None:
                    settle(conn.fail("gave up", gave_up=out.request_id))
            case ("broken",):
                settle(conn.fail("broke"))
            case ("close",):
                conn.close()
    assert all(count == 1 for count in outcomes.values()), outcomes  # one outcome per request, at most


# --- the server role ------------------------------------------------------------------------------

header_values = {
    "mcp-session-id": st.sampled_from(["minted", "unknown"]) | st.text(max_size=6),
    "mcp-protocol-version": any_version.map(str),
    "accept": st.sampled_from(["application/json, text/event-stream", "text/event-stream", "*/*", "text/html", ""]),
    "content-type": st.sampled_from(["application/json", "text/plain", ""]),
    "host": st.sampled_from(["127.0.0.1:8000", "evil.example", "[::1]:1", ""]),
    "origin": st.sampled_from(["http://127.0.0.1:3", "http://evil.example", "null"]),
    "mcp-method": st.text(max_size=10), "mcp-name": st.text(max_size=10), "last-event-id": st.text(max_size=5),
}
headers = st.fixed_dictionaries({}, optional=header_values)
request_bodies = hostile_bytes | messages.map(encode) | handshake.map(encode)
http_requests = st.builds(
    lambda method, target, head, data: (method, target, head, data),
    st.sampled_from(["POST", "GET", "DELETE", "PUT"]),
    st.sampled_from(["/mcp", "/mcp?x=1", "/sse", "/messages/?session_id=minted", "/messages/?session_id=nope", "/other", ""]),
    headers, request_bodies,
)
answers = st.sampled_from(["respond", "stream", "event", "ask", "abandon", "answer-twice", "none"])


@given(st.sampled_from([LEGACY_SSE, STREAMABLE_HTTP]), st.booleans(), st.lists(st.tuples(http_requests, answers), max_size=15))
def test_a_server_answers_any_http_request(transport, get_stream, program):
    server = ServerConnection(transport, get_stream=get_stream)
    minted = None
    for (method, target, head, data), answer in program:
        head = {k: (minted or "none") if v == "minted" else v for k, v in head.items()}
        target = target.replace("minted", minted or "none")
        event = server.http(HttpRequest(method=method, target=target, headers=head, body=data))
        minted = getattr(event, "session", None) or minted
        if type(event) is Call:
            answer_call(server, event, answer)


def answer_call(server: ServerConnection, call: Call, how: str) -> None:
    """What a shell may do with a call; misuse (answering twice, server requests where forbidden) is
    the documented LocalProtocolError."""
    reply = Response(id=call.request.id, result={})
    try:
        match how:
            case "respond":
                server.respond(call, reply)
            case "stream":
                server.stream(call)
                server.event(call, reply)
            case "event":
                server.event(call, ErrorResponse(id=call.request.id, code=-1, message="no"))
            case "ask":
                server.event(call, server.ask(call, "sampling/createMessage", {}))
            case "abandon":
                server.abandon(call)
            case "answer-twice":
                server.event(call, reply)
                with pytest.raises(LocalProtocolError):
                    server.event(call, reply)
    except LocalProtocolError:
        assert how in ("respond", "stream", "ask")  # a JSON answer or stream on legacy SSE; asking in 2026-07-28


@given(hostile_bytes | st.lists(messages | handshake, max_size=5).map(lambda ms: b"".join(encode(m) + b"\n" for m in ms)), cuts(),
       answers)
def test_a_stdio_server_takes_any_stdin(data, points, answer):
    server = ServerConnection(STDIO)
    for chunk in [*chunked(data, points), b""]:
        for event in server.receive_stdin(chunk):
            if type(event) is Call:
                answer_call(server, event, answer)
    with pytest.raises(LocalProtocolError):
        server.receive_stdin(b"more")  # documented: stdin had ended
