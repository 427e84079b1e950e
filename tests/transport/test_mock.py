"""`MockTransport` owned the blocking way (the replayer's): items queued to a sink, each fed to the core by `receive`."""

import queue

from mcpbench.protocol.client import Answered, ClientConnection, Failed, SessionLost, initialize_request
from mcpbench.protocol.jsonrpc import Notification, Request, Response
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.transport import CUT, Arrival, MockTransport, Opened


def drain(transport: MockTransport, items: queue.SimpleQueue) -> list:
    """What the queued items become, fed one at a time as the owner's thread would."""
    events = []
    while (item := transport.next_item(items, 0)) is not None:
        events += transport.receive(item)
    return events


def test_a_streamable_http_answer_arrives_as_a_head_then_its_body_and_names_the_session():
    items: queue.SimpleQueue = queue.SimpleQueue()
    transport = MockTransport(lambda m: [Response(id=m.id, result={"protocolVersion": "2025-11-25", "capabilities": {},
                                                                   "serverInfo": {"name": "m", "version": "1"}})],
                              items.put, kind=STREAMABLE_HTTP, session_id="s-1")
    conn = ClientConnection(STREAMABLE_HTTP, "2025-11-25", url=transport.url)
    assert transport.connect(conn) == []
    transport.send(conn.send(initialize_request(conn), ts=0.0))
    queued = []
    while not items.empty():
        queued.append(items.get_nowait())
    assert [type(item) for item in queued] == [Opened, Arrival, Arrival] and queued[-1].data == b""
    for item in queued:
        items.put(item)
    (answered,) = [e for e in drain(transport, items) if type(e) is Answered]
    assert answered.answer.result["serverInfo"]["name"] == "m" and conn.session_id == "s-1"


def test_a_cut_stdout_loses_the_session_and_fails_what_was_in_flight():
    items: queue.SimpleQueue = queue.SimpleQueue()
    transport = MockTransport(lambda m: [Notification(method="notifications/message", params={}), CUT], items.put, kind=STDIO)
    conn = ClientConnection(STDIO, "2026-07-28")
    transport.connect(conn)
    transport.send(conn.send(conn.prepare("tools/call", {"name": "x", "arguments": {}})))
    events = drain(transport, items)
    assert any(type(e) is SessionLost for e in events) and any(type(e) is Failed for e in events)
    assert not transport.alive and isinstance(transport.sent[0], Request)


def test_a_legacy_stream_names_its_endpoint_on_connecting_and_carries_the_answers():
    items: queue.SimpleQueue = queue.SimpleQueue()
    transport = MockTransport(lambda m: [Response(id=m.id, result={})], items.put, kind=LEGACY_SSE, session_id="abc")
    conn = ClientConnection(LEGACY_SSE, "2024-11-05", url=transport.url)
    transport.connect(conn)
    assert conn.endpoint == "http://mock.invalid/messages?session_id=abc"
    transport.send(conn.send(conn.prepare("ping", None)))
    assert [type(e) for e in drain(transport, items) if type(e) is Answered] == [Answered]
