"""Replay over Streamable HTTP opens the GET stream when the recording shows one."""

import threading
from pathlib import Path

import orjson

from mcpbench.replay import plan as plans
from mcpbench.replay.engine import Replayer
from mcpbench.replay.mock import MockHttpServer, TraceAnswers
from mcpbench.target import parse_target
from tests.record.helpers import peer_server
from tests.support.servers import HOST

LIST_CHANGED = "notifications/tools/list_changed"
# Per request: far above a loopback call, short enough to fail fast.
TIMEOUT = 10.0


def notify_trace(path: Path) -> Path:
    """A recorded session of the peer server: handshake, GET stream, `notify` (its notification came on GET)."""
    base = {"v": 1, "session": "s1", "transport": "streamable-http"}
    post = {"method": "POST", "path": "/mcp"}
    get = {"method": "GET", "path": "/mcp", "status": 200, "content_type": "text/event-stream"}
    events = [
        {"v": 1, "ts": 1.0, "session": None, "transport": "streamable-http", "dir": None, "kind": "trace"},
        {**base, "ts": 2.0, "dir": "c2s", "kind": "message", "flow": "f1", "http": post, "msg": {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}},
        {**base, "ts": 2.1, "dir": "s2c", "kind": "message", "flow": "f1", "msg": {
            "jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}},
                                                  "serverInfo": {"name": "peer", "version": "1"}}}},
        {**base, "ts": 2.2, "dir": "c2s", "kind": "message", "flow": "f2", "http": post,
         "msg": {"jsonrpc": "2.0", "method": "notifications/initialized"}},
        {**base, "ts": 2.3, "dir": None, "kind": "stream", "flow": "f3", "event": "open", "conn": "c", **get},
        {**base, "ts": 3.0, "dir": "c2s", "kind": "message", "flow": "f4", "http": post, "msg": {
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "notify", "arguments": {}}}},
        {**base, "ts": 3.1, "dir": "s2c", "kind": "message", "flow": "f3", "http": get,
         "msg": {"jsonrpc": "2.0", "method": LIST_CHANGED}},
        {**base, "ts": 3.2, "dir": "s2c", "kind": "message", "flow": "f4", "msg": {
            "jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "sent"}], "isError": False}}},
    ]
    path.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in events))
    return path


def test_a_recorded_get_stream_is_opened_and_its_messages_delivered(tmp_path):
    recorded = plans.load(notify_trace(tmp_path / "notify.jsonl"))
    assert recorded.sessions[0].listens
    with peer_server() as peer:
        run = Replayer(parse_target(f"http://{HOST}:{peer.port}/mcp"), timeout=TIMEOUT).run(recorded)
    session = run.sessions[0]
    assert not session.aborted, session.aborted
    assert session.calls[-1].answer.result["content"][0]["text"] == "sent"
    assert [note["method"] for note in session.notifications] == [LIST_CHANGED]


def test_a_server_without_a_get_stream_answers_405_and_that_is_no_failure(tmp_path):
    recorded = plans.load(notify_trace(tmp_path / "notify.jsonl"))
    server = MockHttpServer(TraceAnswers(recorded), transport="streamable-http")  # GET: 405
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        run = Replayer(parse_target(server.url), timeout=TIMEOUT).run(recorded)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(TIMEOUT)
    session = run.sessions[0]
    assert not session.aborted and not session.notes, (session.aborted, session.notes)
    assert all(live.answer is not None and live.failure is None for live in session.calls)
    assert session.notifications == []  # the mock has no GET stream: nothing outside calls
