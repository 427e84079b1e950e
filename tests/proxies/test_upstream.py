"""A proxy's kept-alive upstream connections (`proxies/upstream.py`): none reused once idle past its
expiry, none reused once dead (soak item 39.9's "server closed connection" 502s through the proxies)."""

import asyncio
import http.client
import select
import threading
import types
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

import pytest

from mcpbench.protocol.http import KEEP_ALIVE_EXPIRY
from mcpbench.proxies.upstream import _dead
from tests.record.helpers import record_proxy
from tests.support.http_thread import serving

BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'
WAIT = 5.0  # seconds: the bound on a socket becoming readable after its peer closed


class Upstream:
    """An HTTP/1.1 keep-alive upstream that never closes an idle connection itself: the client port of each POST."""

    def __init__(self) -> None:
        self.ports: list[int] = []

    def handler(self):
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["content-length"]))
                upstream.ports.append(self.client_address[1])
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(ANSWER)))
                self.end_headers()
                self.wfile.write(ANSWER)

        return Handler


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_record_reuses_an_upstream_connection_until_it_has_idled_past_the_expiry(tmp_path):
    upstream = Upstream()
    with serving(upstream.handler()) as port, record_proxy(f"http://127.0.0.1:{port}/mcp", tmp_path / "t.jsonl") as (url, _):
        parts = urlsplit(url)
        client = http.client.HTTPConnection(parts.hostname, parts.port, timeout=WAIT)  # one client connection
        try:
            for index in range(3):
                if index == 2:  # the connection idles past the expiry: nothing to wait for but time
                    threading.Event().wait(KEEP_ALIVE_EXPIRY * 1.5)
                client.request("POST", parts.path, BODY, {"content-type": "application/json"})
                response = client.getresponse()
                assert response.status == 200 and response.read() == ANSWER
        finally:
            client.close()
    first, second, third = upstream.ports
    assert first == second, upstream.ports  # back to back: the same upstream connection
    assert third != second, upstream.ports  # idle past the expiry: a new one


def test_an_idle_upstream_connection_is_dead_once_its_peer_closed():
    async def check() -> tuple[bool, bool]:
        accepted: asyncio.Queue = asyncio.Queue()

        async def on_connect(reader, writer) -> None:
            await accepted.put(writer)

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
            io = types.SimpleNamespace(reader=reader, writer=writer)
            peer = await asyncio.wait_for(accepted.get(), WAIT)
            before = _dead(io)
            peer.close()
            sock = writer.get_extra_info("socket")
            readable, _, _ = await asyncio.to_thread(select.select, [sock.fileno()], [], [], WAIT)  # the FIN is in
            after = _dead(io) if readable else None
            writer.close()
            return before, after
        finally:
            server.close()

    assert asyncio.run(check()) == (False, True)
