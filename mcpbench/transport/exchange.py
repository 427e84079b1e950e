"""Streamable HTTP one exchange at a time, on the owner's thread: the blocking shell the probe needs.

`threads.StreamableHttpTransport` sends each POST from a worker and reads its answer there, for a
replay that keeps many in flight. A check wants one exchange, bounded by its own deadline, and to
decide while the answer comes: cut a stream after so many events, wait only briefly for a stream's
end once the answer is in. So `ExchangeTransport.send` returns when the exchange is over, having
handed each item to the sink as it came (`Opened` with the head's headers and the time the request
left, `Arrival` per chunk, `Lost` when no answer came or the body broke); the sink may `cut` the
stream or `hurry` its end, and the transport obeys as soon as the sink returns.

    transport = ExchangeTransport(url, sink, headers_now=..., proxy=..., timeout=5.0)
    transport.next_exchange(deadline, extra={...}, bare=False)   # the next exchange's bounds
    transport.send(out)                                           # POST, on the kept connection
    transport.request("GET", headers)                             # a GET stream, on a fresh one
    transport.end_session(headers)                                # DELETE

`exchange()` is the one blocking HTTP request with a deadline under it (and under `probe.wire`):
connections are `auth.fetch`'s (through the user's proxy when one applies), and a kept connection
the server closed while it was idle is replaced once. Every read is bounded by the deadline
(`time.monotonic()`).
"""

import http.client
import itertools
import select
import socket
import time
from collections.abc import Callable, Iterator, Mapping

from mcpbench.auth.fetch import connection, failure, proxy_headers, target
from mcpbench.auth.proxy import Proxy
from mcpbench.protocol import http as mcphttp
from mcpbench.protocol.client import Outgoing
from mcpbench.protocol.transports import STREAMABLE_HTTP
from mcpbench.transport.base import Arrival, Lost, Opened, Sink, Transport, shut_socket

READ_SIZE = 64 * 1024

# A DELETE's answer is read this long at most (it is a courtesy).
FINISH = 1.0


class ExchangeError(Exception):
    """An exchange could not be made: `unreachable` when no connection came up, `closed` when the peer
    closed (or reset) the connection without answering, `timed_out` when no answer came in time."""

    def __init__(self, detail: str, *, unreachable: bool = False, timed_out: bool = False, closed: bool = False) -> None:
        super().__init__(detail)
        self.unreachable = unreachable
        self.timed_out = timed_out
        self.closed = closed


def left(deadline: float) -> float:
    """Seconds until `deadline` (a `time.monotonic()` time), never below a few ms."""
    return max(0.005, deadline - time.monotonic())


class HttpReply:
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


def exchange(url: str, method: str, headers: Mapping[str, str], body: bytes | None, *, deadline: float,
             proxy: Proxy | None, timeout: float, instance_header: str, conn: http.client.HTTPConnection | None = None,
             named: str | None = None) -> HttpReply:
    """Send one request (`headers` as they go, the proxy's added) and wait for its head.

    A kept connection (`conn`) that the server closed meanwhile is replaced once. `named`: the URL a
    timeout's message names (`url` by default); `timeout`: the bound it says.

    Raises:
        ExchangeError: no connection (`unreachable`), or no answer before `deadline`.
    """
    sent_headers = {**headers, **proxy_headers(url, proxy)}
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
            raise ExchangeError(failure(url, exc, proxy), unreachable=True) from None
        sent = time.perf_counter()
        try:
            conn.request(method, path, body, sent_headers)
            response = conn.getresponse()
        except (TimeoutError, socket.timeout):
            conn.close()
            raise ExchangeError(f"{method} {named or url}: no answer within {timeout:g} s", timed_out=True) from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            if not fresh:
                continue  # the server closed the kept connection while it was idle: once more on a new one
            # ConnectionError: http.client's RemoteDisconnected (closed before a status line), a reset, a broken pipe.
            raise ExchangeError(f"{method} {url}: {_why(exc)}", closed=isinstance(exc, ConnectionError)) from None
        return HttpReply(conn, response, sent, instance_header)
    raise AssertionError("unreachable")  # the loop returns or raises


class ExchangeTransport(Transport):
    """Streamable HTTP, one exchange at a time on the owner's thread (see the module).

    Args:
        url: the MCP endpoint.
        sink: receives each item as it comes, on the owner's thread, while `send` runs.
        headers_now: the user's headers for a request sent now (credentials, a token not due);
            raises `ExchangeError` when there are none to be had.
        proxy: the HTTP proxy the requests go through, or None.
        timeout: the bound a timed-out exchange's message names.
        instance_header: the response header that names the server instance (`instance`).
    """

    kind = STREAMABLE_HTTP
    has_session_header = True

    def __init__(self, url: str, sink: Sink, *, headers_now: Callable[[], dict[str, str]], proxy: Proxy | None = None,
                 timeout: float = 5.0, instance_header: str = mcphttp.INSTANCE) -> None:
        super().__init__()
        self.url, self.sink, self.headers_now, self.proxy = url, sink, headers_now, proxy
        self.timeout, self.instance_header = timeout, instance_header
        self._streams = itertools.count(1)
        self._kept: http.client.HTTPConnection | None = None  # the keep-alive connection, while idle
        self._deadline = time.monotonic() + timeout
        self._extra: dict[str, str] = {}
        self._bare = False
        self._cut = False
        self._until: float | None = None

    def next_exchange(self, deadline: float, *, extra: dict[str, str] | None = None, bare: bool = False) -> None:
        self._deadline, self._extra, self._bare = deadline, dict(extra or {}), bare

    def cut(self) -> None:
        self._cut = True

    def hurry(self, until: float) -> None:
        self._until = until

    def send(self, out: Outgoing) -> int:
        """POST `out` on the kept connection and read its answer; returns when the exchange is over."""
        self.request("POST", out.headers, out.data, out=out, kept=True)
        return 0

    def end_session(self, headers: dict[str, str]) -> int:
        """DELETE on the kept connection; its answer is read briefly, and the connection kept."""
        self.request("DELETE", headers, kept=True, finish=FINISH)
        return 0

    def request(self, method: str, headers: Mapping[str, str] | None, body: bytes | None = None, *,
                out: Outgoing | None = None, kept: bool = False, finish: float | None = None) -> None:
        """One exchange, its items to the sink. `kept`: on the kept connection, kept again when its
        answer ended cleanly (else a fresh one, closed after); `finish`: read the body at most that
        many seconds after the head, not to the deadline."""
        stream, deadline = next(self._streams), self._deadline
        self._cut, self._until = False, None
        conn, self._kept = (self._kept, None) if kept else (None, self._kept)
        try:
            sent_headers = {**({} if self._bare else self.headers_now()), **(headers or {}), **self._extra}
            reply = exchange(self.url, method, sent_headers, body, deadline=deadline, proxy=self.proxy, timeout=self.timeout,
                             instance_header=self.instance_header, conn=conn, named=self.url)
        except ExchangeError as exc:
            failure_ = mcphttp.Failure.CONNECT if exc.unreachable else mcphttp.Failure.ANSWER_LOST
            self.sink(Lost(str(exc), out, ts=time.perf_counter(), failure=failure_, closed=exc.closed))
            return
        self.instance = reply.instance
        self.sink(Opened(stream, out, reply.status, reply.content_type, reply.header(mcphttp.SESSION_ID), reply.head,
                         reply.header(mcphttp.AUTHENTICATE), reply.response.headers, sent=reply.sent))
        if self._cut:
            reply.close()
            return
        for chunk, ts in reply.chunks(time.monotonic() + finish if finish is not None else deadline):
            self.sink(Arrival(stream, chunk, ts))
            if self._cut:  # the owner cut it: the stream ends here, as a proxy's cut ends it
                reply.close()
                return
            if self._until is not None and chunk:  # the owner has its answer: the stream's end, briefly
                for rest, at in reply.chunks(self._until):
                    self.sink(Arrival(stream, rest, at))
                break
        if reply.broken and not reply.ended:
            self.sink(Lost(reply.broken, out, ts=time.perf_counter(), failure=mcphttp.Failure.ANSWER_LOST))
        if kept and reply.ended and not reply.response.will_close:
            self._keep(reply.conn)
        else:
            reply.close()

    def _keep(self, conn: http.client.HTTPConnection) -> None:
        if self._kept is not None:
            self._kept.close()
        self._kept = conn

    def kept_closed_within(self, deadline: float) -> float | None:
        """Seconds until the server closed the idle kept connection (None: still open at `deadline`, or none kept)."""
        kept, start = self._kept, time.monotonic()
        if kept is None or kept.sock is None:
            return None
        ready, _, _ = select.select([kept.sock], [], [], left(deadline))
        if not ready:
            return None
        try:
            closed = kept.sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            closed = True
        return time.monotonic() - start if closed else None

    def close(self) -> None:
        kept, self._kept = self._kept, None
        if kept is not None:
            kept.close()


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


__all__ = ["ExchangeError", "ExchangeTransport", "HttpReply", "exchange", "left"]
