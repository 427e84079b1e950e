"""The load client's kept-alive connections: none reused past its expiry, and a request whose connection
closed before any answer goes again only when it is a query (soak item 39.9's `connect-failed` and 502s).

A Streamable HTTP peer of the test's own (HTTP/1.1, keep-alive, JSON answers, no session) counts each
POST by method and connection, and closes the connection on the first POST of a chosen method after
reading it, with no answer: what a server closing an idle connection as the request came looks like
to the client, and what the client cannot tell apart from a server that read the request and died.
Or it begins an SSE answer and closes it before any event: a stream with nothing to resume from.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler

from mcpbench.load.client import McpClient
from mcpbench.transport.green import transport_for
from mcpbench.protocol.http import Failure
from mcpbench.protocol.reconnect import ReconnectPolicy
from mcpbench.system.target import Target
from mcpbench.protocol.transports import STREAMABLE_HTTP
from tests.support.http_thread import serving
from tests.support.load_client import TIMEOUT, Steps, in_session

VERSION = "2025-11-25"
ANSWERS = {
    "initialize": {"protocolVersion": VERSION, "capabilities": {"tools": {}}, "serverInfo": {"name": "keep-alive", "version": "1"}},
    "tools/list": {"tools": []},
    "tools/call": {"content": [{"type": "text", "text": "done"}]},
}


class Peer:
    """Counts POSTs as (method, client port); closes the connection unanswered on the first POST of each
    method in `close_first`, and after the headers of an SSE answer on the first of each in `cut_first`."""

    def __init__(self, close_first: frozenset[str] = frozenset(), cut_first: frozenset[str] = frozenset()) -> None:
        self.close_first = set(close_first)
        self.cut_first = set(cut_first)
        self.posts: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def methods(self) -> list[str]:
        return [method for method, _ in self.posts]

    def handler(self):
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                message = json.loads(self.rfile.read(int(self.headers["content-length"])))
                method = message.get("method")
                with peer.lock:
                    peer.posts.append((method, self.client_address[1]))
                    close, cut = method in peer.close_first, method in peer.cut_first
                    peer.close_first.discard(method)
                    peer.cut_first.discard(method)
                if close:
                    self.close_connection = True  # read, never answered
                    return
                if cut:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    self.close_connection = True  # the stream ends before its first event (and id)
                    return
                if "id" not in message:
                    self.send_response(202)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": ANSWERS[method]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_DELETE(self) -> None:
                self.send_response(405)
                self.send_header("content-length", "0")
                self.end_headers()

        return Handler


def session(peer: Peer, body, reconnect: ReconnectPolicy | None = None) -> Steps:
    """`body(client)` in one session against `peer`; the steps fired."""
    steps = Steps()
    with serving(peer.handler()) as port:
        target = Target(STREAMABLE_HTTP, url=f"http://127.0.0.1:{port}/mcp")
        client = McpClient(lambda: transport_for(target, timeout=TIMEOUT), steps, request_type=target.transport,
                           version=VERSION, timeout=TIMEOUT, reconnect=reconnect)
        in_session(client, steps, lambda: body(client))
    return steps


def failure_of(steps: Steps, name: str):
    (step,) = [s for s in steps.fired if s["name"] == name]
    return step["exception"]


def test_a_query_whose_connection_closed_unanswered_goes_again_once():
    peer = Peer(frozenset({"tools/list"}))
    steps = session(peer, lambda client: client.list_tools())
    assert failure_of(steps, "tools/list") is None
    assert peer.methods().count("tools/list") == 2


def test_a_call_whose_connection_closed_unanswered_is_not_sent_again_and_says_it_may_have_run():
    peer = Peer(frozenset({"tools/call"}))
    steps = session(peer, lambda client: client.call_tool("echo", {"text": "once"}))
    failed = failure_of(steps, "tools/call echo")
    assert failed.kind == Failure.STREAM_CLOSED, failed
    assert "the connection closed before any answer (it may have run: not sent again)" in str(failed)
    assert peer.methods().count("tools/call") == 1


def test_a_kept_connection_is_reused_until_its_expiry(monkeypatch):
    """Back to back, the calls share one connection; with an expiry of 0 s, every request takes a new one."""
    peer = Peer()
    session(peer, lambda client: [client.call_tool("echo") for _ in range(3)])
    reused = {port for method, port in peer.posts if method == "tools/call"}
    monkeypatch.setattr("mcpbench.transport.green.KEEP_ALIVE_EXPIRY", 0.0)
    fresh = Peer()
    session(fresh, lambda client: [client.call_tool("echo") for _ in range(3)])
    ports = [port for _, port in fresh.posts]
    assert len(reused) == 1, peer.posts
    assert len(set(ports)) == len(ports) == 5, fresh.posts  # initialize, initialized, three calls


def test_a_call_whose_stream_closed_before_any_event_id_says_there_was_nothing_to_resume_from():
    peer = Peer(cut_first=frozenset({"tools/call"}))
    steps = session(peer, lambda client: client.call_tool("echo", {"text": "once"}), ReconnectPolicy(mode="resume", attempts=1))
    failed = failure_of(steps, "tools/call echo")
    assert failed.kind == Failure.STREAM_CLOSED, failed
    assert ("(resume given up: no event id came before the stream closed; 1 new session tried; "
            "not sent again: it may have run and the tool is not idempotent)") in str(failed), failed
    assert peer.methods().count("tools/call") == 1 and peer.methods().count("initialize") == 2
