"""A small HTTP server of a test's own, in a thread of the test's process, on an ephemeral loopback port."""

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.servers import HOST

# How long a stopped server's thread may take to end.
JOIN_TIMEOUT = 10.0


class QuietHandler(BaseHTTPRequestHandler):
    """A test server's handler: logs nothing (the test's output stays its own) and answers in one call."""

    def reply(self, status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        """Write a whole answer: `status`, `headers` and a `content-length` for `body`."""
        self.send_response(status)
        for name, value in {**(headers or {}), "content-length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """Serve `handler` until the block ends; yields the port. The server is shut and its thread joined after."""
    server = ThreadingHTTPServer((HOST, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(JOIN_TIMEOUT)
