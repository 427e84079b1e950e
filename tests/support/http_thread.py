"""A small HTTP server of a test's own, in a thread of the test's process, on an ephemeral loopback port."""

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.servers import HOST

# How long a stopped server's thread may take to end.
JOIN_TIMEOUT = 10.0


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
