"""gevent I/O shells that carry JSON-RPC bytes for the load users.

Each transport moves the bytes the protocol core built and hands back decoded
messages; it never decides what to send. They use gevent and geventhttpclient
(what Locust's FastHttpUser runs on) but not Locust itself, so the CLI's
pre-flight check and the tests can drive them outside a locust process.

Errors are `McpFailure`, carrying one of the failure classes of
`mcpbench.protocol.http.Failure`::

    McpFailure(kind, detail)
      kind: session-not-found | answer-lost/timeout | stream-closed | http-4xx | http-5xx
            | jsonrpc-error | tool-error | connect-failed
"""

from __future__ import annotations

import errno
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
import gevent.os
import gevent.subprocess
from geventhttpclient.client import HTTPClient
from geventhttpclient.response import HTTPParseError
from geventhttpclient.url import URL

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.framing import Line, LineFramer, LineTooLong
from mcpbench.protocol.http import (
    EVENT_STREAM,
    GET_ACCEPT,
    INSTANCE,
    SESSION_ID,
    Carried,
    Endpoint,
    Failure,
    LegacyStream,
    PostAnswer,
    Problem,
    classify_status,
    is_event_stream,
)
from mcpbench.protocol.jsonrpc import ErrorResponse, Message, Request, Response

# One recv: large enough that a typical answer arrives in one call.
READ_SIZE = 64 * 1024
# An HTTP error body is read only to show a short detail; never more than this.
MAX_ERROR_BODY = 64 * 1024
# Of a plain-text error body, this much goes into the detail (it names the error's form, not an id).
ERROR_TEXT = 80
# After the final answer a Streamable HTTP server should end the SSE body; we wait this long for the
# end (so the connection can be reused) before closing the connection instead.
DRAIN_TIMEOUT = 1.0
# A stdio server gets this long to exit after its stdin closes, then it is killed.
STDIO_EXIT_GRACE = 2.0
# Kept from a stdio server's stderr per user (it is drained so the server never blocks on it).
STDERR_TAIL = 4096

_SOCKET_ERRORS = (OSError, HTTPParseError)


class McpFailure(Exception):
    """One step failed; `kind` is its failure class, `detail` a short low-cardinality text."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(kind, detail)
        self.kind = kind
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail else self.kind

    def __repr__(self) -> str:  # Locust groups failures by repr: keep it free of ids and addresses
        return f"McpFailure({str(self)!r})"


class CallTimeout(Exception):
    """Raised by the per-call gevent.Timeout (an Exception, so it cannot end a greenlet by mistake)."""


def _socket_failure(exc: BaseException, *, connected: bool) -> McpFailure:
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return McpFailure(Failure.ANSWER_LOST, "socket timeout")
    if isinstance(exc, ConnectionRefusedError) or (isinstance(exc, OSError) and exc.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH)):
        return McpFailure(Failure.CONNECT, "connection refused")
    if isinstance(exc, socket.gaierror):
        return McpFailure(Failure.CONNECT, "unknown host")
    return McpFailure(Failure.STREAM_CLOSED if connected else Failure.CONNECT, type(exc).__name__)


def _read_some(resp: Any) -> bytes:
    """The next bytes of an HTTP body as soon as any arrive; b"" at its end.

    geventhttpclient's `read(n)` waits for n bytes, which an SSE stream may never
    send; this reads one socket chunk at a time instead.
    """
    buf = resp._body_buffer
    if buf:
        data = bytes(buf)
        del buf[:]
        return data
    while not resp.message_complete:
        sock = resp._sock
        if sock is None:
            break
        try:
            chunk = sock.recv(READ_SIZE)
        except BaseException:
            resp.release()
            raise
        if not chunk:
            resp.release()
            raise McpFailure(Failure.STREAM_CLOSED, "connection closed mid-body")
        resp.feed(chunk)
        if buf:
            data = bytes(buf)
            del buf[:]
            return data
    return b""


def _discard(resp: Any) -> None:
    """Close a response whose body we will not read (its connection is not reused)."""
    try:
        resp._pool and resp._sock and resp._pool.release_socket(resp._sock)
    finally:
        resp._sock = None
        resp._pool = None


def _short_exchange(client: Any, method: str, uri: str, body: bytes, headers: dict[str, str] | None,
                    *, has_session: bool, also_ok: tuple[int, ...] = (), seen: "Transport | None" = None) -> int:
    """One request whose answer is only a status (202, 200 to DELETE, …): its body size.

    `seen` notes the instance that answered (`Transport.note_instance`).

    Raises:
        McpFailure: an HTTP error status (not in `also_ok`), classified, or a socket failure.
    """
    try:
        resp = client.request(method, uri, body=body, headers=headers)
    except _SOCKET_ERRORS as exc:
        raise _socket_failure(exc, connected=False) from None
    if seen is not None:
        seen.note_instance(resp)
    try:
        status = resp.status_code
        if status >= 400 and status not in also_ok:
            raise McpFailure(classify_status(status, has_session=has_session), _error_detail(resp, status))
        return len(resp.read())
    except _SOCKET_ERRORS as exc:
        raise _socket_failure(exc, connected=True) from None
    finally:
        if resp._sock is not None:
            _discard(resp)


def _error_detail(resp: Any, status: int) -> str:
    """`HTTP 404` plus the JSON-RPC error message in the body, if short."""
    try:
        body = b""
        while len(body) < MAX_ERROR_BODY:
            chunk = _read_some(resp)
            if not chunk:
                break
            body += chunk
    except (McpFailure, *_SOCKET_ERRORS):
        body = b""
    detail = f"HTTP {status}"
    try:
        msg = jsonrpc.decode(body)
        if isinstance(msg, ErrorResponse):
            detail += f" JSON-RPC {msg.code} {msg.message[:80]}"
    except jsonrpc.InvalidMessage:
        # A plain-text error (the SDK's legacy "Could not find session"): its first line, short.
        text = body[:ERROR_TEXT].decode("utf-8", "replace").strip().splitlines()
        if text and text[0].isprintable():
            detail += f" {text[0]}"
    return detail


class _Waiting:
    """Requests awaiting answers that a reader greenlet finds on a stream (legacy SSE, stdio)."""

    def __init__(self) -> None:
        self._waiters: dict[Any, gevent.event.AsyncResult] = {}

    def call(self, request_id: Any, send: Callable[[], Any]) -> tuple[Response | ErrorResponse, Any]:
        """Run `send`, then wait for the answer to `request_id`: (the answer, what `send` returned).

        Raises:
            McpFailure: the stream ended first (`fail_all`).
        """
        waiter = gevent.event.AsyncResult()
        self._waiters[request_id] = waiter
        try:
            sent = send()
            answer = waiter.get()  # the caller's per-call timeout bounds the wait
        finally:
            self._waiters.pop(request_id, None)
        if isinstance(answer, McpFailure):
            raise answer
        return answer, sent

    def answer(self, message: Response | ErrorResponse) -> None:
        """Wake the request `message` answers, if one waits."""
        waiter = self._waiters.pop(message.id, None)
        if waiter is not None:
            waiter.set(message)

    def fail_all(self, failure: McpFailure) -> None:
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.set(failure)


class Reply:
    """What one request got back."""

    __slots__ = ("answer", "size", "first_event", "session_id")

    def __init__(self, answer: Response | ErrorResponse, size: int, first_event: float | None = None, session_id: str | None = None):
        self.answer = answer
        self.size = size
        self.first_event = first_event  # perf_counter time of the first SSE event, if the answer was streamed
        self.session_id = session_id


class Transport:
    """One MCP connection of one load user. `open()` before use, `close()` after (idempotent)."""

    name = "transport"
    has_session_header = False
    instance: str | None = None
    """The server instance that answered the last exchange, as a lab balancer names it
    (`X-Mcpbench-Instance`); the client reads and clears it after each step."""

    def note_instance(self, resp: Any) -> None:
        if (name := resp.get(INSTANCE)) is not None:
            self.instance = name

    def open(self) -> float | None:
        """Connect; returns the perf_counter time the transport became ready, or None if instant."""
        return None

    def request(self, request: Request, data: bytes, headers: dict[str, str] | None = None) -> Reply:
        raise NotImplementedError

    def notify(self, data: bytes, headers: dict[str, str] | None = None) -> int:
        raise NotImplementedError

    def end_session(self, headers: dict[str, str]) -> int | None:
        """End the session on the server (HTTP DELETE); None when the transport has no such step."""
        return None

    def close(self) -> None:
        pass

    @property
    def alive(self) -> bool:
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- Streamable HTTP ----------------------------------------------------------------------------


def http_client(url: str, *, timeout: float, concurrency: int = 1, pool: Any = None, source: str | None = None, **kw: Any) -> HTTPClient:
    """A geventhttpclient client for `url`'s origin (from Locust's pool when given).

    `source`: the local address its sockets bind before connecting (distinct loopback clients).
    """
    if pool is not None:
        client = pool.get_client(URL(url))
    else:
        client = HTTPClient.from_url(url, concurrency=concurrency, network_timeout=timeout, connection_timeout=timeout, insecure=True, **kw)
    if source is not None:
        bind_source(client, source)
    return client


def bind_source(client: HTTPClient, address: str) -> None:
    """Make `client`'s new sockets bind `address` before connecting.

    geventhttpclient has no source-address setting; its pool's socket factory is the documented
    place to set socket options ("might be overridden"), so it is wrapped here.
    """
    pool = client._connection_pool
    if getattr(pool, "_mcpbench_source", None) == address:
        return  # a pooled client seen before: already bound
    pool._mcpbench_source = address
    create = pool._create_tcp_socket

    def create_bound(family: int, socktype: int, protocol: int) -> Any:
        sock = create(family, socktype, protocol)
        if family == socket.AF_INET:
            sock.bind((address, 0))
        return sock

    pool._create_tcp_socket = create_bound


class StreamableHttpTransport(Transport):
    """POSTs to one endpoint; answers come as JSON or as an SSE body read incrementally."""

    name = "streamable-http"
    has_session_header = True

    def __init__(self, url: str, client: HTTPClient) -> None:
        self.url = url
        parts = URL(url)
        self._uri = parts.request_uri
        self._client = client

    def request(self, request: Request, data: bytes, headers: dict[str, str] | None = None) -> Reply:
        resp = self._post(data, headers)
        self.note_instance(resp)
        try:
            status = resp.status_code
            answer = PostAnswer(request.id, status, resp.get("content-type"), has_session=bool(headers and SESSION_ID in headers))
            if answer.failure:  # the status decides, whatever the body says (a 404 is the lost session)
                raise McpFailure(answer.failure, _error_detail(resp, status))
            first, problem = None, None
            while answer.answer is None:
                chunk = _read_some(resp) if answer.streamed else resp.read()
                for item in answer.feed(chunk):
                    if type(item) is Problem:
                        problem = item  # the last one sums up: the stream's end comes last
                    # progress notifications and server requests are seen and let go
                if first is None and answer.events:
                    first = time.perf_counter()  # time to first event
                if not chunk:
                    break
            if answer.answer is None:
                failure = problem or Problem(Failure.ANSWER_LOST, f"HTTP {status} without an answer")
                raise McpFailure(failure.failure, failure.detail)
            if answer.streamed:
                self._drain(resp)
            return Reply(answer.answer, answer.size, first, resp.get(SESSION_ID))
        except _SOCKET_ERRORS as exc:
            raise _socket_failure(exc, connected=True) from None
        finally:
            if resp._sock is not None:
                _discard(resp)

    def _post(self, data: bytes, headers: dict[str, str] | None) -> Any:
        try:
            return self._client.request("POST", self._uri, body=data, headers=headers)
        except _SOCKET_ERRORS as exc:
            raise _socket_failure(exc, connected=False) from None

    @staticmethod
    def _drain(resp: Any) -> None:
        """Read what follows the answer, so the connection can carry the next request."""
        if resp.message_complete or resp._sock is None:
            return
        try:
            with gevent.Timeout(DRAIN_TIMEOUT, False):
                while _read_some(resp):
                    pass
        except (McpFailure, *_SOCKET_ERRORS):
            pass

    def notify(self, data: bytes, headers: dict[str, str] | None = None) -> int:
        has_session = bool(headers and SESSION_ID in headers)
        return _short_exchange(self._client, "POST", self._uri, data, headers, has_session=has_session, seen=self)

    def end_session(self, headers: dict[str, str]) -> int | None:
        # Streamable HTTP: "The server MAY respond to this request with HTTP 405".
        return _short_exchange(self._client, "DELETE", self._uri, b"", headers, has_session=True, also_ok=(405,), seen=self)


# --- legacy HTTP+SSE ----------------------------------------------------------------------------


class SseTransport(Transport):
    """`GET /sse` held open by one reader greenlet; POSTs to the endpoint it names, answers matched by id."""

    name = "sse"

    def __init__(self, url: str, post_client: HTTPClient, *, timeout: float, source: str | None = None) -> None:
        self.url = url
        self._post_client = post_client
        self._timeout = timeout
        self._source = source
        self._stream_client: HTTPClient | None = None
        self._stream: Any = None
        self._reader: gevent.Greenlet | None = None
        self._endpoint: gevent.event.AsyncResult = gevent.event.AsyncResult()
        self._endpoint_uri: str | None = None
        self._waiting = _Waiting()
        self._closed: str | None = None

    @property
    def alive(self) -> bool:
        return self._closed is None and self._reader is not None

    def open(self) -> float:
        # Its own single-connection client: the stream holds that connection for the session.
        # No socket timeout on it: an idle stream is normal (the SDK pings every 15 s).
        self._stream_client = HTTPClient.from_url(self.url, concurrency=1, network_timeout=None, connection_timeout=self._timeout, insecure=True)
        if self._source is not None:
            bind_source(self._stream_client, self._source)
        try:
            with gevent.Timeout(self._timeout, CallTimeout):
                self._stream = self._stream_client.request("GET", URL(self.url).request_uri, headers={"accept": GET_ACCEPT})
        except CallTimeout:
            self.close()
            raise McpFailure(Failure.ANSWER_LOST, "no answer to GET") from None
        except _SOCKET_ERRORS as exc:
            self.close()
            raise _socket_failure(exc, connected=False) from None
        self.note_instance(self._stream)
        status = self._stream.status_code
        if status >= 400:
            detail = _error_detail(self._stream, status)
            self.close()
            raise McpFailure(classify_status(status, has_session=False), detail)
        if not is_event_stream(self._stream.get("content-type")):
            self.close()
            raise McpFailure(Failure.HTTP_4XX, f"GET answered {self._stream.get('content-type')!r}, not {EVENT_STREAM}")
        self._reader = gevent.spawn(self._read_loop)
        try:
            endpoint = self._endpoint.get(timeout=self._timeout)
        except gevent.Timeout:
            self.close()
            raise McpFailure(Failure.ANSWER_LOST, "no endpoint event") from None
        if isinstance(endpoint, McpFailure):
            self.close()
            raise endpoint
        self._endpoint_uri = endpoint
        return time.perf_counter()

    def _read_loop(self) -> None:
        stream = LegacyStream(self.url)
        reason = "server closed the SSE stream"
        try:
            while True:
                chunk = _read_some(self._stream)
                for item in stream.feed(chunk):
                    if type(item) is Carried:
                        if type(item.message) in (Response, ErrorResponse):
                            self._waiting.answer(item.message)
                    elif type(item) is Endpoint:
                        self._endpoint.set(item.url)
                    elif not self._endpoint.ready():  # an endpoint we must not use
                        self._endpoint.set(McpFailure(item.failure, item.detail))
                    # an unreadable message: its caller's timeout counts it
                if not chunk:
                    break
        except McpFailure as exc:
            reason = exc.detail
        except _SOCKET_ERRORS as exc:
            reason = type(exc).__name__
        finally:
            self._closed = reason
            failure = McpFailure(Failure.STREAM_CLOSED, "SSE stream closed")
            if not self._endpoint.ready():
                self._endpoint.set(failure)
            self._waiting.fail_all(failure)

    def request(self, request: Request, data: bytes, headers: dict[str, str] | None = None) -> Reply:
        if self._closed is not None or self._endpoint_uri is None:
            raise McpFailure(Failure.STREAM_CLOSED, "SSE stream closed")
        posted: list[int] = []
        try:
            answer, size = self._waiting.call(request.id, lambda: posted.append(self._post(data)) or posted[0])
        except CallTimeout:
            if not posted:
                raise
            # The POST was accepted (an error status would have raised): the answer never came on the stream.
            raise McpFailure(Failure.ANSWER_LOST, "POST accepted, no answer on the stream") from None
        return Reply(answer, size + len(data))

    def notify(self, data: bytes, headers: dict[str, str] | None = None) -> int:
        if self._closed is not None or self._endpoint_uri is None:
            raise McpFailure(Failure.STREAM_CLOSED, "SSE stream closed")
        return self._post(data)

    def _post(self, data: bytes) -> int:
        # The endpoint URI carries the session: a 404 there means the session is gone.
        return _short_exchange(self._post_client, "POST", self._endpoint_uri, data, {"content-type": "application/json"}, has_session=True, seen=self)

    def close(self) -> None:
        if self._closed is None:
            self._closed = "closed by the client"
        if self._reader is not None:
            self._reader.kill(block=False)
        if self._stream is not None and self._stream._sock is not None:
            _discard(self._stream)
        if self._stream_client is not None:
            self._stream_client.close()
            self._stream_client = None


# --- stdio --------------------------------------------------------------------------------------


class StdioTransport(Transport):
    """A child process per user (gevent.subprocess); newline-delimited JSON-RPC on its stdin/stdout."""

    name = "stdio"

    def __init__(self, argv: list[str] | tuple[str, ...], *, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.argv = list(argv)
        self.env = env
        self.cwd = cwd
        self.proc: gevent.subprocess.Popen | None = None
        self._reader: gevent.Greenlet | None = None
        self._stderr_reader: gevent.Greenlet | None = None
        self._waiting = _Waiting()
        self._closed: str | None = None
        self.stderr_tail = b""

    @property
    def alive(self) -> bool:
        return self._closed is None and self.proc is not None

    def open(self) -> float:
        try:
            self.proc = gevent.subprocess.Popen(
                self.argv, stdin=gevent.subprocess.PIPE, stdout=gevent.subprocess.PIPE, stderr=gevent.subprocess.PIPE,
                env=self.env, cwd=self.cwd, bufsize=0,
            )
        except OSError as exc:
            self._closed = "not started"
            raise McpFailure(Failure.CONNECT, f"cannot start {os.path.basename(self.argv[0])}: {exc.strerror}") from None
        self._stdin = self.proc.stdin.fileno()
        gevent.os.make_nonblocking(self._stdin)
        self._reader = gevent.spawn(self._read_loop, self.proc.stdout.fileno())
        self._stderr_reader = gevent.spawn(self._drain_stderr, self.proc.stderr.fileno())
        return time.perf_counter()

    def _drain_stderr(self, fd: int) -> None:
        gevent.os.make_nonblocking(fd)
        try:
            while chunk := gevent.os.nb_read(fd, READ_SIZE):
                self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_TAIL:]
        except OSError:
            pass

    def _read_loop(self, fd: int) -> None:
        gevent.os.make_nonblocking(fd)
        framer = LineFramer()
        try:
            while True:
                chunk = gevent.os.nb_read(fd, READ_SIZE)
                framer.receive_data(chunk)
                while isinstance(event := framer.next_event(), (Line, LineTooLong)):
                    if isinstance(event, Line) and event.data.strip():
                        self._dispatch(event.data)
                if not chunk:
                    break
        except OSError:
            pass
        finally:
            self._closed = self._closed or "the server process closed its stdout"
            self._waiting.fail_all(McpFailure(Failure.STREAM_CLOSED, "server process exited"))

    def _dispatch(self, line: bytes) -> None:
        try:
            msg = jsonrpc.decode(line)
        except jsonrpc.InvalidMessage:
            return  # stdout pollution: not ours to judge here
        if isinstance(msg, (Response, ErrorResponse)):
            self._waiting.answer(msg)
        elif isinstance(msg, Request):
            # A server request (handshake era): answer ping, refuse the rest, so the server never waits.
            reply: Message = (
                Response(id=msg.id, result={}) if msg.method == "ping"
                else ErrorResponse(id=msg.id, code=jsonrpc.METHOD_NOT_FOUND, message="not supported by the load client")
            )
            gevent.spawn(self._write, jsonrpc.encode(reply) + b"\n")

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[gevent.os.nb_write(self._stdin, view) :]
        except OSError as exc:
            self._closed = self._closed or "stdin closed"
            raise McpFailure(Failure.STREAM_CLOSED, "server process stdin closed") from exc

    def request(self, request: Request, data: bytes, headers: dict[str, str] | None = None) -> Reply:
        if self._closed is not None or self.proc is None:
            raise McpFailure(Failure.STREAM_CLOSED, "server process exited")
        answer, _ = self._waiting.call(request.id, lambda: self._write(data + b"\n"))
        return Reply(answer, len(data))

    def notify(self, data: bytes, headers: dict[str, str] | None = None) -> int:
        if self._closed is not None or self.proc is None:
            raise McpFailure(Failure.STREAM_CLOSED, "server process exited")
        self._write(data + b"\n")
        return 0

    def close(self) -> None:
        self._closed = self._closed or "closed by the client"
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()  # stdio: the client ends a session by closing the server's stdin
        except OSError:
            pass
        try:
            proc.wait(timeout=STDIO_EXIT_GRACE)
        except gevent.subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=STDIO_EXIT_GRACE)
            except gevent.subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for greenlet in (self._reader, self._stderr_reader):
            if greenlet is not None:
                greenlet.kill(block=False)
        for stream in (proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
