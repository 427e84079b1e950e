"""Blocking transports that carry one live session for the replayer.

A `Transport` has one method, `send(message, version=)`, plus `close()` and
context-manager support (style.md §11). What the server sends back is handed,
as it arrives and from the transport's own threads, to the `sink` given at
construction: an `Incoming` for each message, a `Failure` for a request that
got no usable answer (HTTP status, stream cut) or for the whole transport
(`fatal`: the process exited, the connection was refused).

The transports are thin shells around the protocol core: `LineFramer` (stdio),
`PostAnswer` (what a Streamable HTTP answer carries), `LegacyStream` (the
legacy server stream), `post_headers` and `jsonrpc`.

::

    Transport
    ├── StdioTransport          a child process, newline-delimited JSON-RPC
    ├── StreamableHttpTransport POST per message; JSON or SSE answers (2025-03-26 on)
    ├── LegacySseTransport      GET /sse stream + POST endpoint (2024-11-05)
    └── MockTransport           a function answers (tests)
"""

import http.client
import os
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mcpbench.protocol import jsonrpc
from mcpbench.protocol import http as mcphttp
from mcpbench.protocol.errors import TargetError
from mcpbench.protocol.framing import Line, LineFramer, LineTooLong
from mcpbench.protocol.jsonrpc import Message, Request
from mcpbench.target import SSE, STDIO, STREAMABLE_HTTP, Target

# One read takes at most a pipe's default capacity (stdio) or a typical socket
# buffer (HTTP): larger reads only allocate more for the common small message.
READ_SIZE = 64 * 1024

# How long a connection attempt or a legacy `endpoint` event may take before
# the target counts as unreachable: long enough for a server under load.
CONNECT_TIMEOUT = 10.0

# After stdin is closed, how long a stdio server gets to exit before SIGTERM,
# then SIGKILL: the SDK servers exit at once on EOF.
EXIT_GRACE = 3.0

# Requests in flight at once on Streamable HTTP: one worker thread (and one
# keep-alive connection) each. Recordings rarely show more than a handful.
HTTP_WORKERS = 64

# A DELETE that ends a session is a courtesy: never let it hold up the report.
DELETE_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class Incoming:
    """A message from the server.

    `via` says how it came ("stdio", "json", "sse", "get" for the Streamable
    HTTP GET stream, "stream" for a legacy SSE stream); `request_id` is the live id of the request whose HTTP response
    carried it, when one did.
    """

    message: Message
    ts: float  # time.perf_counter() at arrival
    raw: bytes
    via: str
    request_id: Any = None
    status: int | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """No usable answer: for `request_id`, or for the whole transport when `fatal`."""

    reason: str
    request_id: Any = None
    fatal: bool = False
    status: int | None = None
    ts: float = 0.0


Sink = Callable[[Incoming | Failure], None]


class Transport:
    """Carries one session's messages to a live server.

    Subclasses connect in `__init__` (raising `TargetError` when they cannot)
    and deliver everything the server sends to `sink`.
    """

    #: The session id the server gave, where the transport has one.
    session_id: str | None = None

    def send(self, message: Message, *, version: str | None = None) -> None:
        """Send `message`. `version` is the session's protocol version, for HTTP headers.

        Never blocks on the answer: answers reach the sink.
        """
        raise NotImplementedError

    def close(self) -> None:
        """End the session and release everything; idempotent."""

    def __enter__(self) -> "Transport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MockTransport(Transport):
    """A transport whose server is a function: `handler(message) -> messages to deliver`."""

    def __init__(self, handler: Callable[[Message], Iterable[Message]], sink: Sink) -> None:
        self.handler = handler
        self.sink = sink
        self.sent: list[Message] = []

    def send(self, message: Message, *, version: str | None = None) -> None:
        self.sent.append(message)
        for reply in self.handler(message) or ():
            self.sink(Incoming(reply, time.perf_counter(), jsonrpc.encode(reply), "mock"))


class StdioTransport(Transport):
    """A child process: requests on its stdin, messages read from its stdout.

    Args:
        argv: the server command.
        sink: receives what the server sends.
        on_stderr: receives each line the server writes on stderr (else drained).
        cwd, env: for the child process.
    """

    def __init__(
        self,
        argv: list[str] | tuple[str, ...],
        sink: Sink,
        *,
        on_stderr: Callable[[bytes], None] | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.sink = sink
        self.on_stderr = on_stderr
        self._closing = False
        self._lock = threading.Lock()
        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                bufsize=0, cwd=cwd, env=env,
            )
        except OSError as exc:
            raise TargetError(f"cannot start {shlex.join(self.argv)}: {exc.strerror}") from None
        self._stdin = self.proc.stdin.fileno()
        self._threads = [
            threading.Thread(target=self._read, name="mcpbench-stdio-out", daemon=True),
            threading.Thread(target=self._read_stderr, name="mcpbench-stdio-err", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, message: Message, *, version: str | None = None) -> None:
        data = jsonrpc.encode(message) + b"\n"
        with self._lock:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._stdin, view) :]
            except OSError as exc:
                if not self._closing:
                    self.sink(Failure(f"cannot write to the server's stdin: {exc.strerror}", fatal=True, ts=time.perf_counter()))

    def _read(self) -> None:
        framer = LineFramer()
        fd = self.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, READ_SIZE)
            except OSError:
                chunk = b""
            ts = time.perf_counter()
            for event in framer.feed(chunk):
                if isinstance(event, LineTooLong):
                    self.sink(Failure(f"the server wrote a line of {event.size} bytes", ts=ts))
                    continue
                if not event.data.strip():
                    continue
                try:
                    message = jsonrpc.decode(event.data)
                except jsonrpc.InvalidMessage as exc:
                    self.sink(Failure(f"stdout is not JSON-RPC ({exc.reason}): {event.data[:80]!r}", ts=ts))
                    continue
                self.sink(Incoming(message, ts, event.data, "stdio"))
            if not chunk:
                break
        if not self._closing:
            code = self.proc.wait()
            self.sink(Failure(f"the server process exited with status {code}", fatal=True, ts=time.perf_counter()))

    def _read_stderr(self) -> None:
        framer = LineFramer()
        fd = self.proc.stderr.fileno()
        while True:
            try:
                chunk = os.read(fd, READ_SIZE)
            except OSError:
                chunk = b""
            if self.on_stderr is not None:
                for event in framer.feed(chunk):
                    self.on_stderr(event.data if isinstance(event, Line) else event.head)
            if not chunk:
                return

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(EXIT_GRACE)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(EXIT_GRACE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for thread in self._threads:
            thread.join(EXIT_GRACE)
        for pipe in (self.proc.stdout, self.proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass


def _connection(url: str, timeout: float | None) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.hostname, parts.port, timeout=timeout)


def _path(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _connect_failure(url: str, exc: BaseException) -> str:
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return f"cannot connect to {url}: {reason}"


class StreamableHttpTransport(Transport):
    """Streamable HTTP: every message is a POST; answers come as JSON or as an SSE stream.

    Each POST runs on a worker thread with its own keep-alive connection, so
    requests the recording shows in flight together are in flight together,
    and a server request arriving on a response stream can be answered while
    that stream is still open.

    Args:
        url: the MCP endpoint (`http://host:port/mcp`).
        sink: receives what the server sends.
        timeout: socket timeout for one read; a stream silent for longer fails.
    """

    def __init__(self, url: str, sink: Sink, *, timeout: float = 60.0) -> None:
        self.url = url
        self.sink = sink
        self.timeout = timeout
        self.path = _path(url)
        self.session_id: str | None = None
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closing = False
        self._refused = False
        self._pool = ThreadPoolExecutor(HTTP_WORKERS, thread_name_prefix="mcpbench-http")
        self._version: str | None = None
        self._listener: threading.Thread | None = None
        self._get_conn: http.client.HTTPConnection | None = None

    def send(self, message: Message, *, version: str | None = None) -> None:
        if version:
            self._version = version
        headers = mcphttp.post_headers(message, version=version, session_id=self.session_id)
        self._pool.submit(self._post, message, jsonrpc.encode(message), headers)

    def _conn(self, fresh: bool = False) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None or fresh:
            if conn is not None:
                conn.close()
            conn = _connection(self.url, self.timeout)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _post(self, message: Message, body: bytes, headers: dict[str, str]) -> None:
        request_id = message.id if isinstance(message, Request) else None
        try:
            self._exchange(message, request_id, body, headers)
        except Exception as exc:  # noqa: BLE001 - a worker must report, never die silently
            if not self._closing:
                self.sink(Failure(f"{type(exc).__name__}: {exc}", request_id, ts=time.perf_counter()))

    def _exchange(self, message: Message, request_id: Any, body: bytes, headers: dict[str, str]) -> None:
        for attempt in (0, 1):
            conn = self._conn(fresh=attempt > 0)
            reused = getattr(conn, "_mcpbench_used", False)
            try:
                conn.request("POST", self.path, body, headers)
                resp = conn.getresponse()
                conn._mcpbench_used = True  # type: ignore[attr-defined]
                break
            except (ConnectionRefusedError, socket.gaierror) as exc:
                self.sink(Failure(_connect_failure(self.url, exc), request_id, fatal=True, ts=time.perf_counter()))
                return
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                if self._closing:
                    return  # close() cut it: no failure of the target's
                if reused and attempt == 0:
                    continue  # the server closed an idle keep-alive connection: retry once on a new one
                self.sink(Failure(_connect_failure(self.url, exc), request_id, fatal=not reused, ts=time.perf_counter()))
                return
        status = resp.status
        sid = resp.getheader(mcphttp.SESSION_ID)
        if status < 300 and sid and isinstance(message, Request) and message.method == "initialize":
            self.session_id = sid  # before the answer reaches the engine: its next POST needs it
        answer = mcphttp.PostAnswer(request_id, status, resp.getheader("content-type"),
                                    has_session=bool(headers.get(mcphttp.SESSION_ID)))
        self._read_answer(resp, answer, "sse")

    def _read_answer(self, resp: http.client.HTTPResponse, answer: mcphttp.PostAnswer, via_stream: str) -> None:
        """Hand every message and problem of `resp`'s body to the sink as it arrives."""
        request_id, status = answer.request_id, answer.status
        while True:
            chunk = resp.read1(READ_SIZE) if answer.streamed else resp.read()
            ts = time.perf_counter()
            for item in answer.feed(chunk):
                if type(item) is mcphttp.Carried:
                    via = via_stream if item.via == "sse" else item.via
                    self.sink(Incoming(item.message, ts, item.raw, via, request_id, status))
                elif not self._closing:  # a stream cut by close() is no failure
                    self.sink(Failure(f"{item.detail} ({item.failure})", request_id, ts=ts, status=status))
            if not chunk:
                return

    def listen(self) -> None:
        """Open the optional GET stream, for server messages sent outside any request (idempotent).

        Call after the handshake: the stream belongs to the session. A server
        without one answers 405, which is not a failure; other refusals are
        reported as non-fatal `Failure`s without a request id. Returns once the
        server has answered the GET (or `CONNECT_TIMEOUT` has passed), so what
        the replay sends next can already be answered on the stream, as in the
        recording.
        """
        if self._listener is not None or self._closing or not self.session_id:
            return
        answered = threading.Event()
        self._listener = threading.Thread(target=self._listen, args=(answered,), name="mcpbench-http-get", daemon=True)
        self._listener.start()
        answered.wait(CONNECT_TIMEOUT)

    def _listen(self, answered: threading.Event) -> None:
        headers = {"accept": mcphttp.GET_ACCEPT, mcphttp.SESSION_ID: self.session_id}
        if self._version:
            headers[mcphttp.PROTOCOL_VERSION] = self._version
        conn = _connection(self.url, CONNECT_TIMEOUT)  # connecting and the answer's headers are bounded
        try:
            conn.connect()
            with self._lock:
                if self._closing:
                    conn.close()
                    return
                self._get_conn = conn  # from now on close() can cut the stream short
            conn.request("GET", self.path, headers=headers)
            resp = conn.getresponse()
            answered.set()
            status, content_type = resp.status, resp.getheader("content-type")
            if status == 405:
                return  # Streamable HTTP: "the server MUST ... return HTTP 405" when it offers no stream
            if status >= 300 or not mcphttp.is_event_stream(content_type):
                body = resp.read(200).decode("utf-8", "replace").strip()
                self.sink(Failure(f"GET stream refused: HTTP {status} {content_type!r} {body!r}",
                                  status=status, ts=time.perf_counter()))
                return
            conn.sock.settimeout(None)  # the stream may stay silent for long: close() ends it
            self._read_answer(resp, mcphttp.PostAnswer(None, status, content_type, has_session=True), "get")
        except (OSError, ValueError, http.client.HTTPException) as exc:
            # ValueError: http.client reading from a connection close() has just shut
            if not self._closing:
                self.sink(Failure(f"GET stream: {_connect_failure(self.url, exc)}", ts=time.perf_counter()))
        finally:
            answered.set()
            conn.close()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        with self._lock:
            posts = list(self._connections)
        for conn in posts:  # wakes workers still waiting for an answer past the timeout
            if conn.sock is not None:
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._pool.shutdown(wait=True, cancel_futures=False)
        with self._lock:
            stream = self._get_conn
        if stream is not None and stream.sock is not None:
            try:
                stream.sock.shutdown(socket.SHUT_RDWR)  # wakes the reader blocked on a silent stream
            except OSError:
                pass
        if self._listener is not None:
            self._listener.join(EXIT_GRACE)
        if self.session_id:
            try:
                conn = _connection(self.url, DELETE_TIMEOUT)
                headers = {mcphttp.SESSION_ID: self.session_id}
                if self._version:
                    headers[mcphttp.PROTOCOL_VERSION] = self._version
                conn.request("DELETE", self.path, headers=headers)
                conn.getresponse().read()
                conn.close()
            except (OSError, http.client.HTTPException):
                pass
        with self._lock:
            for conn in self._connections:
                conn.close()


class LegacySseTransport(Transport):
    """Legacy HTTP+SSE: a `GET` stream carries every server message; each client message is a POST.

    Connects in the constructor and waits for the `endpoint` event.

    Raises:
        TargetError: the stream cannot be opened or names no endpoint in time.
    """

    def __init__(self, url: str, sink: Sink, *, timeout: float = CONNECT_TIMEOUT) -> None:
        self.url = url
        self.sink = sink
        self.endpoint: str | None = None
        self._closing = False
        self._ready = threading.Event()
        self._error: str | None = None
        self._post_lock = threading.Lock()
        self._stream = _connection(url, timeout)
        try:
            self._stream.request("GET", _path(url), headers={"accept": mcphttp.GET_ACCEPT})
            self._sock = self._stream.sock
            resp = self._stream.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            self._stream.close()
            raise TargetError(_connect_failure(url, exc)) from None
        if resp.status != 200 or not mcphttp.is_event_stream(resp.getheader("content-type")):
            body = resp.read(200).decode("utf-8", "replace").strip()
            self._stream.close()
            raise TargetError(f"{url}: GET answered {resp.status} {resp.getheader('content-type')!r}, not an SSE stream {body!r}")
        self._sock.settimeout(None)  # the stream may stay silent for long: closing it is how we stop
        self._resp = resp
        self._post = _connection(url, 60.0)
        self._reader = threading.Thread(target=self._read, name="mcpbench-sse", daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout) or self.endpoint is None:
            self.close()
            raise TargetError(f"{url}: {self._error or f'no endpoint event within {timeout:g} s'}")
        query = urlsplit(self.endpoint).query
        self.session_id = query.split("=", 1)[1] if "=" in query else query or None

    def _read(self) -> None:
        stream = mcphttp.LegacyStream(self.url)
        try:
            while True:
                try:
                    chunk = self._resp.read1(READ_SIZE)
                except Exception:  # noqa: BLE001 - closing the socket under http.client raises odd things
                    chunk = b""
                ts = time.perf_counter()
                for item in stream.feed(chunk):
                    if type(item) is mcphttp.Carried:
                        self.sink(Incoming(item.message, ts, item.raw, item.via))
                    elif type(item) is mcphttp.Endpoint:
                        self.endpoint = item.url
                        self._ready.set()
                    elif self.endpoint is None:  # no usable endpoint: the constructor reports it
                        self._error = item.detail
                        self._ready.set()
                    else:
                        self.sink(Failure(item.detail, ts=ts))
                if not chunk:
                    break
        finally:
            self._ready.set()
            if not self._closing:
                self.sink(Failure(f"{self.url}: the SSE stream closed", fatal=True, ts=time.perf_counter()))

    def send(self, message: Message, *, version: str | None = None) -> None:
        request_id = message.id if isinstance(message, Request) else None
        body = jsonrpc.encode(message)
        headers = {"content-type": mcphttp.JSON, "accept": "*/*"}
        with self._post_lock:
            for attempt in (0, 1):
                try:
                    self._post.request("POST", _path(self.endpoint), body, headers)
                    resp = self._post.getresponse()
                    data = resp.read()
                    break
                except (OSError, http.client.HTTPException) as exc:
                    self._post.close()
                    if attempt == 0 and not isinstance(exc, ConnectionRefusedError):
                        continue
                    if not self._closing:
                        self.sink(Failure(_connect_failure(self.endpoint, exc), request_id, fatal=True, ts=time.perf_counter()))
                    return
        if resp.status >= 300:
            kind = mcphttp.classify_status(resp.status, has_session=True) or "http"
            text = data.decode("utf-8", "replace").strip()[:200]
            self.sink(Failure(f"HTTP {resp.status} ({kind}): {text}", request_id, status=resp.status, ts=time.perf_counter()))

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._stream.close()
        if hasattr(self, "_resp"):
            self._resp.close()
        if hasattr(self, "_reader"):
            self._reader.join(EXIT_GRACE)
        if hasattr(self, "_post"):
            self._post.close()


def open_transport(target: Target, sink: Sink, **options: Any) -> Transport:
    """The transport for `target`; stdio options: `on_stderr`, `cwd`, `env`.

    Raises:
        TargetError: the target cannot be reached or started.
    """
    if target.transport == STDIO:
        return StdioTransport(target.argv, sink, **{k: v for k, v in options.items() if k in ("on_stderr", "cwd", "env")})
    if target.transport == STREAMABLE_HTTP:
        return StreamableHttpTransport(target.url, sink)
    if target.transport == SSE:
        return LegacySseTransport(target.url, sink)
    raise TargetError(f"unknown transport {target.transport!r}")


__all__ = [
    "Failure", "Incoming", "LegacySseTransport", "MockTransport", "StdioTransport", "StreamableHttpTransport",
    "Transport", "open_transport",
]
