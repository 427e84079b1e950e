"""The blocking shell of the one transport interface (`base.py`): threads, for replay, the fuzzer and the probe.

`send(out)` writes an `Outgoing` (its `data`, with its `headers`, to its
`url`); what the server sends is queued, raw, from the transport's own threads
to the `sink` given at construction. The thread that owns the connection hands
each queued item back to `receive(item)`, which feeds the connection and
returns its events (h11 style: one thread owns the connection, the others only
queue bytes).

::

    Transport (base.py)
    ├── StdioTransport          a child process, newline-delimited JSON-RPC
    ├── StreamableHttpTransport POST per message; JSON or SSE answers (2025-03-26 on)
    └── LegacySseTransport      GET /sse stream + POST endpoint (2024-11-05)
"""

import http.client
import itertools
import os
import queue
import select
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mcpbench.auth.fetch import connection, failure, proxy_headers, target
from mcpbench.auth.proxy import ProxySettings
from mcpbench.files.fdio import write_all
from mcpbench.protocol import http as mcphttp
from mcpbench.protocol.client import (
    STDOUT, AnswerReader, ClientConnection, EndpointReady, Event, Garbled, LegacyHead, Outgoing,
)
from mcpbench.protocol.errors import TargetError
from mcpbench.protocol.framing import Line, LineFramer
from mcpbench.system.processes import ended
from mcpbench.system.target import Target
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.transport.base import GET, LEGACY_STREAM, Arrival, Item, Lost, Opened, Sink, Transport, shut_socket

# /proc/PID/statm counts pages.
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

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

# Of a refused stream's body, this much is read for the error message.
REFUSAL_CHARS = 200

class StdioTransport(Transport):
    """A child process: requests on its stdin, what it writes on stdout fed to the connection.

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
        direct: bool = False,
    ) -> None:
        super().__init__()
        self.argv = list(argv)
        self.sink = sink
        self.on_stderr = on_stderr
        self.direct = direct  # the owner's thread reads stdout itself (`next_item`): no hand-off per answer
        self._stdout_open = True
        self.exit_detail: str | None = None
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
        self._threads = [threading.Thread(target=self._read_stderr, name="mcpbench-stdio-err", daemon=True)]
        self._stdout_fd = self.proc.stdout.fileno()
        if direct:  # one poll object, registered once: the wait per answer is one call
            poller = select.poll()
            poller.register(self._stdout_fd, select.POLLIN)
            self._stdout_ready = poller.poll
        else:
            self._threads.append(threading.Thread(target=self._read, name="mcpbench-stdio-out", daemon=True))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def resident(self) -> int | None:
        """The server process's resident memory in bytes (Linux `/proc`; None elsewhere, or once it is gone)."""
        try:
            with open(f"/proc/{self.proc.pid}/statm", "rb") as statm:
                return int(statm.read().split()[1]) * PAGE_SIZE
        except (OSError, ValueError, IndexError):
            return None

    def connect(self, conn: ClientConnection) -> list[Event]:
        self._readers[STDOUT] = self._stdout
        for thread in self._threads:
            thread.start()
        return super().connect(conn)

    def _stdout(self, data: bytes, ts: float) -> list[Event]:
        if data:
            return self.conn.reader(STDOUT).feed(data, ts)
        return self.conn.reader(STDOUT).feed(data, ts, why=self.exit_detail)  # the exit status says more than "stdout closed"

    def send(self, out: Outgoing) -> None:
        with self._lock:
            try:
                write_all(self._stdin, out.data)
            except OSError as exc:
                if not self._closing:
                    self.sink(Lost(f"cannot write to the server's stdin: {exc.strerror}", fatal=True, ts=time.perf_counter()))

    def _read(self) -> None:
        for chunk in _chunks(self.proc.stdout.fileno()):
            if chunk or not self._closing:
                self.sink(self._arrived(chunk))

    def _arrived(self, chunk: bytes) -> Arrival:
        if not chunk:  # an end the replay did not cause: the server went away
            self._stdout_open = False
            try:
                self.exit_detail = f"the server process {ended(self.proc.wait(EXIT_GRACE))}"  # or the signal that killed it
            except subprocess.TimeoutExpired:
                self.exit_detail = "the server process closed its stdout"
        return Arrival(STDOUT, chunk, time.perf_counter())

    def next_item(self, items: queue.SimpleQueue, timeout: float) -> Item | None:
        """With `direct`, stdout is read here, on the owner's thread; what other threads queued first."""
        if not self.direct or not self._stdout_open or self._closing:
            return super().next_item(items, timeout)
        if not items.empty():
            return items.get_nowait()  # stderr lines and write failures wait for no answer
        if not self._stdout_ready(int(timeout * 1000) + 1 if timeout > 0 else 0):  # poll takes ms: never less than asked
            return super().next_item(items, 0)
        try:
            chunk = os.read(self._stdout_fd, READ_SIZE)
        except OSError:
            chunk = b""
        return self._arrived(chunk)

    def _read_stderr(self) -> None:
        framer = LineFramer()
        for chunk in _chunks(self.proc.stderr.fileno()):
            if self.on_stderr is not None:
                for event in framer.feed(chunk):
                    self.on_stderr(event.data if isinstance(event, Line) else event.head)

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
            if thread.ident is not None:
                thread.join(EXIT_GRACE)
        for pipe in (self.proc.stdout, self.proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass


def _chunks(fd: int) -> Iterator[bytes]:
    """What a pipe delivers, chunk by chunk, then `b""` at its end (or once reading fails)."""
    while True:
        try:
            chunk = os.read(fd, READ_SIZE)
        except OSError:
            chunk = b""
        yield chunk
        if not chunk:
            return


class StreamableHttpTransport(Transport):
    """Streamable HTTP: every message is a POST; answers come as JSON or as an SSE stream.

    Each POST runs on a worker thread with its own keep-alive connection, so
    requests the recording shows in flight together are in flight together,
    and a server request arriving on a response stream can be answered while
    that stream is still open. A request is complete when its answer arrives:
    a POST stream the server keeps open after the answer is cut then, so its
    worker is free again.

    Args:
        url: the MCP endpoint (`http://host:port/mcp`).
        sink: receives what the server sends.
        timeout: socket timeout for one read; a stream silent for longer fails.
        proxies: the HTTP proxy of each request (none: straight to the server).
    """

    kind = STREAMABLE_HTTP

    def __init__(self, url: str, sink: Sink, *, timeout: float = 60.0, proxies: ProxySettings | None = None) -> None:
        super().__init__()
        self.url = url
        self.sink = sink
        self.timeout = timeout
        self.proxy = proxies.route(url) if proxies is not None else None
        self.path = target(url, self.proxy)
        self._via_proxy = proxy_headers(url, self.proxy)
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closing = False
        self._pool = ThreadPoolExecutor(HTTP_WORKERS, thread_name_prefix="mcpbench-http")
        self._posts = itertools.count(1)  # numbers the POSTs: the key of each answer's stream
        # The socket of each POST whose answer is being read (http.client hands a `Connection: close`
        # answer's socket to the response: the connection no longer has it).
        self._reading: dict[int, socket.socket] = {}
        self._released: set[int] = set()  # answers the connection has: their streams are cut
        self._listener: threading.Thread | None = None
        self._get_sock: socket.socket | None = None

    def send(self, out: Outgoing) -> None:
        self._pool.submit(self._post, next(self._posts), out)

    def _reader_for(self, stream: Any, reader: AnswerReader) -> Callable[[bytes, float], list[Event]]:
        return lambda data, ts: self._read(stream, reader, data, ts)

    def _read(self, stream: Any, reader: AnswerReader, data: bytes, ts: float) -> list[Event]:
        events = reader.feed(data, ts)
        if data and reader.answered and reader.answer.streamed and stream not in self._released:
            self._release(stream)
        return events

    def _release(self, stream: int) -> None:
        """The request's answer is in: stop reading its stream (the server may hold it open)."""
        self._readers.pop(stream, None)
        with self._lock:
            sock = self._reading.get(stream)
            if sock is None:
                return  # its worker has finished already
            self._released.add(stream)
        shut_socket(sock)  # wakes the worker blocked on the stream

    def _conn(self, fresh: bool = False) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None or fresh:
            if conn is not None:
                conn.close()
            conn = connection(self.url, self.timeout, self.proxy)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _post(self, stream: int, out: Outgoing) -> None:
        try:
            self._exchange(stream, out)
        except Exception as exc:  # noqa: BLE001 - a worker must report, never die silently
            with self._lock:
                released = stream in self._released
            if not self._closing and not released:
                self.sink(Lost(f"{type(exc).__name__}: {exc}", out, ts=time.perf_counter()))
        finally:
            with self._lock:
                self._reading.pop(stream, None)
                released = stream in self._released
                self._released.discard(stream)
            if released and (conn := getattr(self._local, "conn", None)) is not None:
                conn.close()
                self._local.conn = None  # its socket is shut: the next POST opens a new one

    def _exchange(self, stream: int, out: Outgoing) -> None:
        for attempt in (0, 1):
            conn = self._conn(fresh=attempt > 0)
            reused = getattr(conn, "_mcpbench_used", False)
            try:
                conn.request("POST", self.path, out.data, {**out.headers, **self._via_proxy} if self._via_proxy else out.headers)
                with self._lock:
                    self._reading[stream] = conn.sock
                resp = conn.getresponse()
                conn._mcpbench_used = True  # type: ignore[attr-defined]
                break
            except (ConnectionRefusedError, socket.gaierror) as exc:
                self.sink(Lost(failure(self.url, exc, self.proxy), out, fatal=True, ts=time.perf_counter()))
                return
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                if self._closing:
                    return  # close() cut it: no failure of the target's
                if reused and attempt == 0:
                    continue  # the server closed an idle keep-alive connection: retry once on a new one
                self.sink(Lost(failure(self.url, exc, self.proxy), out, fatal=not reused, ts=time.perf_counter()))
                return
        content_type = resp.getheader("content-type")
        streamed = resp.status < 300 and mcphttp.is_event_stream(content_type)
        self.sink(Opened(stream, out, resp.status, content_type, resp.getheader(mcphttp.SESSION_ID), time.perf_counter(),
                         resp.getheader(mcphttp.AUTHENTICATE)))
        self._pass_body(stream, resp, streamed)

    def _pass_body(self, stream: Any, resp: http.client.HTTPResponse, streamed: bool, limit: int | None = None) -> None:
        """Queue `resp`'s body as it arrives, then its end (none when the replay cut it)."""
        while True:
            chunk = resp.read1(READ_SIZE) if streamed else resp.read(limit) if limit else resp.read()
            with self._lock:
                cut = self._closing or stream in self._released
            if cut:
                return  # close() or the answer's arrival ended it: no failure of the target's
            self.sink(Arrival(stream, chunk, time.perf_counter()))
            if not chunk:
                return
            if limit:
                self.sink(Arrival(stream, b"", time.perf_counter()))
                return

    def listen(self) -> None:
        """Open the optional GET stream, for server messages sent outside any request (idempotent).

        Call after the handshake: the stream belongs to the session. Returns
        once the server has answered the GET (or `CONNECT_TIMEOUT` has passed),
        so what the replay sends next can already be answered on the stream,
        as in the recording.
        """
        if self._listener is not None or self._closing or not self.conn.session_id:
            return
        answered = threading.Event()
        headers = self.conn.headers("get")  # built here: the connection belongs to this thread
        self._listener = threading.Thread(target=self._listen, args=(headers, answered), name="mcpbench-http-get", daemon=True)
        self._listener.start()
        answered.wait(CONNECT_TIMEOUT)

    def _listen(self, headers: dict[str, str], answered: threading.Event) -> None:
        conn = connection(self.url, CONNECT_TIMEOUT, self.proxy)  # connecting and the answer's headers are bounded
        try:
            conn.connect()
            with self._lock:
                if self._closing:
                    conn.close()
                    return
                self._get_sock = conn.sock  # from now on close() can cut the stream short
            conn.request("GET", self.path, headers={**headers, **self._via_proxy})
            resp = conn.getresponse()
            status, content_type = resp.status, resp.getheader("content-type")
            self.sink(Opened(GET, None, status, content_type, None, time.perf_counter(), resp.getheader(mcphttp.AUTHENTICATE)))
            answered.set()
            if status == 405:
                return  # Streamable HTTP: "the server MUST ... return HTTP 405" when it offers no stream
            streamed = status < 300 and mcphttp.is_event_stream(content_type)
            if streamed:
                conn.sock.settimeout(None)  # the stream may stay silent for long: close() ends it
            self._pass_body(GET, resp, streamed, None if streamed else REFUSAL_CHARS)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            # ValueError: http.client reading from a connection close() has just shut
            if not self._closing:
                self.sink(Lost(f"GET stream: {failure(self.url, exc, self.proxy)}", ts=time.perf_counter()))
        finally:
            answered.set()
            conn.close()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        with self._lock:
            reading = list(self._reading.values())
        for sock in reading:  # wakes workers still waiting for an answer past the timeout, or on a held stream
            shut_socket(sock)
        self._pool.shutdown(wait=True, cancel_futures=False)
        with self._lock:
            stream = self._get_sock
        shut_socket(stream)  # wakes the reader blocked on a silent stream
        if self._listener is not None:
            self._listener.join(EXIT_GRACE)
        headers = self.conn.headers("delete") if self.conn is not None else None
        if headers is not None:
            try:
                conn = connection(self.url, DELETE_TIMEOUT, self.proxy)
                conn.request("DELETE", self.path, headers={**headers, **self._via_proxy})
                conn.getresponse().read()
                conn.close()
            except (OSError, http.client.HTTPException):
                pass
        with self._lock:
            for conn in self._connections:
                conn.close()


class LegacySseTransport(Transport):
    """Legacy HTTP+SSE: a `GET` stream carries every server message; each client message is a POST.

    `connect` opens the stream and waits for the `endpoint` event.

    Raises:
        TargetError: the stream cannot be opened or names no endpoint in time (`AuthRefused`: it
            asked for credentials).
    """

    kind = LEGACY_SSE

    def __init__(self, url: str, sink: Sink, *, timeout: float = CONNECT_TIMEOUT, proxies: ProxySettings | None = None) -> None:
        super().__init__()
        self.url, self.sink, self.timeout, self.proxies = url, sink, timeout, proxies
        self._post_proxy = None
        self._closing = False
        self._post_lock = threading.Lock()
        self._posts = itertools.count(1)
        self._stream: http.client.HTTPConnection | None = None
        self._post: http.client.HTTPConnection | None = None
        self._reader: threading.Thread | None = None
        self.stream_headers = None

    def connect(self, conn: ClientConnection) -> list[Event]:
        super().connect(conn)
        url = self.url
        proxy = self.proxies.route(url) if self.proxies is not None else None
        self._stream = connection(url, self.timeout, proxy)
        try:
            self._stream.request("GET", target(url, proxy), headers={**conn.headers("legacy"), **proxy_headers(url, proxy)})
            self._sock = self._stream.sock
            resp = self._stream.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            self._stream.close()
            raise TargetError(failure(url, exc, proxy)) from None
        content_type = resp.getheader("content-type")
        reader = conn.reader(LegacyHead(resp.status, content_type, resp.getheader(mcphttp.AUTHENTICATE)))
        if reader.refused():
            body = resp.read(REFUSAL_CHARS).decode("utf-8", "replace").strip()
            self._stream.close()
            kind = mcphttp.classify_status(resp.status, has_session=False, challenge=reader.challenge)
            if kind in mcphttp.AUTH_FAILURES:
                raise AuthRefused(f"{url}: {kind}: {reader.refused()}", kind)
            raise TargetError(f"{url}: GET answered {resp.status} {content_type!r}, not an SSE stream {body!r}")
        self._resp = resp
        self.stream_headers = resp.headers  # the stream's head (a balancer's instance header, for one)
        # The endpoint is read here, on the connection's thread; the reader thread takes over after.
        events: list[Event] = []
        deadline = time.monotonic() + self.timeout
        try:
            while conn.endpoint is None and conn.lost is None and time.monotonic() < deadline:
                chunk = resp.read1(READ_SIZE)
                events += reader.feed(chunk, time.perf_counter())
                if not chunk:
                    break
        except (OSError, http.client.HTTPException):
            pass
        if conn.endpoint is None:
            self.close()
            refused = [event.detail for event in events if type(event) is Garbled]
            raise TargetError(f"{url}: {refused[0] if refused else f'no endpoint event within {self.timeout:g} s'}")
        self._sock.settimeout(None)  # the stream may stay silent for long: closing it is how we stop
        self._readers[LEGACY_STREAM] = reader.feed
        self._post_proxy = self.proxies.route(conn.endpoint) if self.proxies is not None else None
        self._post = connection(conn.endpoint, 60.0, self._post_proxy)
        self._reader = threading.Thread(target=self._read, name="mcpbench-sse", daemon=True)
        self._reader.start()
        return [event for event in events if type(event) is not EndpointReady]

    def _read(self) -> None:
        while True:
            try:
                chunk = self._resp.read1(READ_SIZE)
            except Exception:  # noqa: BLE001 - closing the socket under http.client raises odd things
                chunk = b""
            if self._closing:
                return  # the replay closed it: no failure of the target's
            self.sink(Arrival(LEGACY_STREAM, chunk, time.perf_counter()))
            if not chunk:
                return

    def send(self, out: Outgoing) -> None:
        with self._post_lock:
            for attempt in (0, 1):
                try:
                    proxy = self._post_proxy
                    self._post.request("POST", target(out.url, proxy), out.data, {**out.headers, **proxy_headers(out.url, proxy)})
                    resp = self._post.getresponse()
                    data = resp.read()
                    break
                except (OSError, http.client.HTTPException) as exc:
                    self._post.close()
                    if attempt == 0 and not isinstance(exc, ConnectionRefusedError):
                        continue
                    if not self._closing:
                        self.sink(Lost(failure(out.url, exc, self._post_proxy), out, fatal=True, ts=time.perf_counter()))
                    return
        stream, ts = next(self._posts), time.perf_counter()
        self.sink(Opened(stream, out, resp.status, resp.getheader("content-type"), None, ts, resp.getheader(mcphttp.AUTHENTICATE),
                         resp.headers))
        self.sink(Arrival(stream, data, ts))
        self.sink(Arrival(stream, b"", ts))

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._stream is None:
            return
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass
        self._stream.close()
        if hasattr(self, "_resp"):
            self._resp.close()
        if self._reader is not None:
            self._reader.join(EXIT_GRACE)
        if self._post is not None:
            self._post.close()


class AuthRefused(TargetError):
    """The target asked for credentials it was not given (or refused the ones it was): `kind` is the
    failure class (`auth-required`, `auth-forbidden`)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def open_transport(target: Target, sink: Sink, *, proxies: ProxySettings | None = None, **options: Any) -> Transport:
    """The transport for `target` (not yet connected); stdio options: `on_stderr`, `cwd`, `env`, `direct`;
    HTTP: `proxies`, the proxy of each request.

    Raises:
        TargetError: a stdio target cannot be started.
    """
    if target.transport == STDIO:
        return StdioTransport(target.argv, sink, **{k: v for k, v in options.items() if k in ("on_stderr", "cwd", "env", "direct")})
    if target.transport == STREAMABLE_HTTP:
        return StreamableHttpTransport(target.url, sink, proxies=proxies)
    if target.transport == LEGACY_SSE:
        return LegacySseTransport(target.url, sink, proxies=proxies)
    raise TargetError(f"unknown transport {target.transport!r}")


__all__ = ["AuthRefused", "LegacySseTransport", "StdioTransport", "StreamableHttpTransport", "open_transport"]
