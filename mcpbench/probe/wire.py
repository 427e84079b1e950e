"""The probe's blocking HTTP shell: one exchange at a time over `http.client`, every body read by the client core.

A check asks for exchanges and gets back what the core made of them::

    wire = Wire("http://127.0.0.1:8000/mcp", ProbeOptions(access=client_options.resolve(url)))
    reply = wire.request("POST", headers, body, deadline=deadline)     # the head: status, headers, instance
    for chunk, ts in reply.chunks(deadline): ...                         # the body, b"" at its end

`HttpSession` (sessions.py) carries one MCP session on it. Nothing here parses HTTP bodies, SSE or
JSON-RPC: `http.client` reads the HTTP, `protocol/` the rest. Connections are `auth.fetch`'s (through
the user's proxy when one applies), and each request carries the user's headers and an OAuth token
fetched or renewed as it falls due. Every read is bounded by a deadline (`time.monotonic()`), so no
check waits longer than its time bound.
"""

import http.client
import socket
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from mcpbench.auth.fetch import connection, failure, proxy_headers, target
from mcpbench.auth.options import ClientAccess
from mcpbench.auth.proxy import Proxy
from mcpbench.protocol.errors import McpbenchError
from mcpbench.protocol.http import INSTANCE
from mcpbench.transport.base import shut_socket

READ_SIZE = 64 * 1024


@dataclass(frozen=True, slots=True)
class ProbeOptions:
    """What every request of the probe carries, and how long one may take.

    `access`: the user's headers, OAuth tokens and proxies (`auth.options`, as replay and load have
    them); `instance_header`: the response header that names the instance that served it;
    `timeout`: seconds one request may take.
    """

    access: ClientAccess = field(default_factory=ClientAccess.none)
    timeout: float = 5.0
    instance_header: str = INSTANCE

    def headers(self) -> dict[str, str]:
        """The user's headers for a request sent now, with a token that is not due (fetched if needed).

        Raises:
            WireError: no token can be had (the token endpoint refused, or cannot be reached).
        """
        try:
            return self.access.headers_now()
        except McpbenchError as exc:
            raise WireError(f"no credentials to send: {exc}") from None

    def proxy(self, url: str) -> Proxy | None:
        """The proxy a request to `url` goes through, or None."""
        return self.access.proxies.route(url)


class WireError(Exception):
    """An exchange could not be made: `unreachable` when no connection came up, `closed` when the peer
    closed (or reset) the connection without answering, `timed_out` when no answer came in time."""

    def __init__(self, detail: str, *, unreachable: bool = False, timed_out: bool = False, closed: bool = False) -> None:
        super().__init__(detail)
        self.unreachable = unreachable
        self.timed_out = timed_out
        self.closed = closed


def each(func, items, workers: int) -> list:
    """`func` over `items` on up to `workers` threads, results in order. Interrupted (Ctrl-C), what has
    not started is dropped; what runs ends within its own deadline."""
    pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="mcpbench-probe")
    try:
        return list(pool.map(func, items))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def left(deadline: float) -> float:
    """Seconds until `deadline` (a `time.monotonic()` time), never below a few ms."""
    return max(0.005, deadline - time.monotonic())


class Reply:
    """The answer to one request: its head, then its body as it arrives (`chunks`)."""

    def __init__(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse, sent: float, instance_header: str) -> None:
        self.conn = conn
        self.response = response
        self.status = response.status
        self.sent = sent  # time.perf_counter() when the request left
        self.head = time.perf_counter()
        self.instance = response.getheader(instance_header)
        self.ended = False  # the body was read to its end: the connection may carry another request
        self.broken: str | None = None  # the body ended by a reset or a timeout, not by its own end

    def header(self, name: str) -> str | None:
        return self.response.getheader(name)

    @property
    def content_type(self) -> str | None:
        return self.header("content-type")

    def chunks(self, deadline: float) -> Iterator[tuple[bytes, float]]:
        """The body as it arrives, each chunk with its `perf_counter` time; `b""` at its end.

        Stops (without `b""`) at `deadline`, with `broken` saying so; a reset ends it with `b""`.
        """
        # A body of known length is read whole: `read1` never marks a zero-length body done, and
        # http.client then reads the next answer on the kept connection as an empty one.
        sized = self.response.length is not None
        while True:
            try:
                if self.conn.sock is not None:
                    self.conn.sock.settimeout(left(deadline))
                chunk = self.response.read() if sized else self.response.read1(READ_SIZE)
                if sized and chunk:
                    yield chunk, time.perf_counter()
                    chunk = b""
            except (TimeoutError, socket.timeout):
                self.broken = "no more of the answer before the check's time ran out"
                return
            except (OSError, ValueError, http.client.HTTPException) as exc:  # ValueError: read after close()
                self.broken = f"the connection broke: {_why(exc)}"
                chunk = b""
            if not chunk:
                self.ended = self.broken is None
            yield chunk, time.perf_counter()
            if not chunk:
                return

    def close(self) -> None:
        """Cut the exchange: the connection closes under whatever is still coming."""
        shut_socket(self.conn.sock)
        self.conn.close()


class Wire:
    """Requests to one HTTP endpoint with the probe's options; a fresh or a kept connection each."""

    def __init__(self, url: str, options: ProbeOptions) -> None:
        self.url = url
        self.options = options
        self.host = urlsplit(url).hostname or ""

    def request(
        self,
        method: str,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        deadline: float,
        conn: http.client.HTTPConnection | None = None,
        url: str | None = None,
        extra: Mapping[str, str] | None = None,
        bare: bool = False,
    ) -> Reply:
        """Send one request and wait for its head.

        `extra` headers go last (they win); `bare` leaves the probe's own headers (credentials) out.
        A kept connection (`conn`) that the server closed meanwhile is replaced once.

        Raises:
            WireError: no connection (`unreachable`), or no answer before `deadline`.
        """
        url = url or self.url
        proxy = self.options.proxy(url)
        sent_headers = {**({} if bare else self.options.headers()), **(headers or {}), **(extra or {}), **proxy_headers(url, proxy)}
        path = target(url, proxy)
        for attempt in (0, 1):
            fresh = conn is None or attempt > 0
            if fresh:
                conn = connection(url, left(deadline), proxy)
            try:
                if conn.sock is None:
                    conn.connect()
                conn.sock.settimeout(left(deadline))
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise WireError(failure(url, exc, proxy), unreachable=True) from None
            sent = time.perf_counter()
            try:
                conn.request(method, path, body, sent_headers)
                response = conn.getresponse()
            except (TimeoutError, socket.timeout):
                conn.close()
                raise WireError(f"{method} {self.url}: no answer within {self.options.timeout:g} s", timed_out=True) from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                if not fresh:
                    continue  # the server closed the kept connection while it was idle: once more on a new one
                # ConnectionError: http.client's RemoteDisconnected (closed before a status line), a reset, a broken pipe.
                raise WireError(f"{method} {url}: {_why(exc)}", closed=isinstance(exc, ConnectionError)) from None
            return Reply(conn, response, sent, self.options.instance_header)
        raise AssertionError("unreachable")  # the loop returns or raises


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


__all__ = ["ProbeOptions", "Reply", "Wire", "WireError", "each", "left"]
