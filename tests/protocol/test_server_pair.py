"""The client core against the server core, wired in memory: every transport, both eras, both answer forms."""

import pytest

from mcpbench.protocol.asks import Canned
from mcpbench.protocol.client import (
    Answered, ClientConnection, EndpointReady, Failed, Pushed, ServerRequest, SessionLost, initialize_request,
    initialized_notification,
)
from mcpbench.protocol.jsonrpc import Notification, Response
from mcpbench.protocol.server import Accepted, HostCheck, ServerConnection, SessionEnded
from mcpbench.protocol.versions import allows_server_requests, has_handshake
from tests.protocol.helpers import ServerPair

URLS = {"stdio": None, "streamable-http": "http://127.0.0.1:8000/mcp", "sse": "http://127.0.0.1:8000/sse"}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}


def play(call, server: ServerConnection) -> list:
    """The server's side of each call: the handshake's answer; otherwise progress, a question where the
    version allows one, then the answer."""
    request = call.request
    if request.method == "initialize":
        return [Response(id=request.id, result={"protocolVersion": call.version, "capabilities": {"tools": {}},
                                                 "serverInfo": {"name": "pair", "version": "1"}})]
    messages = []
    token = (request.params or {}).get("_meta", {}).get("progressToken")
    if token is not None:
        messages.append(Notification(method="notifications/progress", params={"progressToken": token, "progress": 1, "total": 1}))
    if allows_server_requests(call.version):
        messages.append(server.ask(call, "sampling/createMessage", {"messages": [], "maxTokens": 1}, waiter="asked"))
    return messages + [Response(id=request.id, result={"content": [{"type": "text", "text": request.method}]})]


CASES = [
    ("stdio", "2025-11-25", False),
    ("stdio", "2026-07-28", False),
    ("streamable-http", "2025-06-18", False),
    ("streamable-http", "2025-11-25", True),
    ("streamable-http", "2026-07-28", False),
    ("streamable-http", "2026-07-28", True),
    ("sse", "2024-11-05", False),
]


@pytest.mark.parametrize(("transport", "version", "json"), CASES)
def test_a_session_from_start_to_end(transport, version, json):
    client = ClientConnection(transport, version, url=URLS[transport], policy=Canned({"sampling/createMessage": SAMPLED}))
    server = ServerConnection(transport, host_check=HostCheck.for_bind("127.0.0.1"))
    pair = ServerPair(client, server, play, json=json)
    if transport == "sse":
        (ready,) = pair.open_legacy()
        assert type(ready) is EndpointReady and server.alive(ready.session_id)
    if has_handshake(version):
        (answered,) = pair.send(client.send(initialize_request(client), waiter="init"))
        assert type(answered) is Answered and answered.waiter == "init" and client.negotiated == version
        assert pair.send(client.send(initialized_notification())) == []
        assert [type(a.message) for a in pair.accepted] == [Notification]

    events = pair.send(client.send(client.prepare("tools/call", {"name": "slow", "_meta": {"progressToken": "p1"}}), waiter="call"))
    kinds = [type(e) for e in events]
    asks = allows_server_requests(version) and not json
    assert kinds == ([] if json else [Pushed]) + ([ServerRequest] if asks else []) + [Answered]
    assert events[-1].waiter == "call" and events[-1].answer.result["content"][0]["text"] == "tools/call"
    if not json:
        assert events[0].waiter == "call" and events[0].message.params["progressToken"] == "p1"
    if asks:  # the client's policy answers the server's question; the server pairs it with its waiter
        pair.send(events[1].reply)
        assert type(pair.accepted[-1]) is Accepted and pair.accepted[-1].waiter == "asked"
        assert pair.accepted[-1].message.result == SAMPLED

    if transport == "streamable-http" and (headers := client.headers("delete")) is not None:
        ended = pair.http("DELETE", client.url, headers)
        assert type(ended) is SessionEnded and not server.alive(ended.session)
        lost = pair.send(client.send(client.prepare("tools/list"), waiter="late"))
        assert [type(e) for e in lost] == [Failed, SessionLost] and lost[0].waiter == "late"
