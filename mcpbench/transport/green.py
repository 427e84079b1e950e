"""The gevent shell of the one transport interface (`base.py`): greenlets, for the load users.

Each transport moves what the client core (`protocol.client.ClientConnection`)
built and feeds it what arrives where it is read (one hub: no hand-off); the
core's events go to the `dispatch` the client attached. A transport never decides
what to send or what an answer means. They use gevent and geventhttpclient
(what Locust's FastHttpUser runs on) but not Locust itself, so the CLI's
pre-flight check and the tests can drive them outside a locust process; nothing
imports this module but the load client's makers (gevent patches what it touches).

::

    Transport (base.py)
    ├── GreenStreamableHttp   POSTs to one endpoint, JSON or SSE answers read inline; the GET stream
    ├── GreenLegacySse        `GET /sse` held by a reader greenlet; POSTs to the endpoint it names
    └── GreenStdio            a child process per user (gevent.subprocess)

Errors are `McpFailure`, carrying one of the failure classes of
`mcpbench.protocol.http.Failure`::

    McpFailure(kind, detail)
      kind: session-not-found | answer-lost/timeout | stream-closed | http-4xx | http-5xx
            | jsonrpc-error | tool-error | connect-failed | auth-required | auth-forbidden | auth-token-failed

HTTP goes through the proxy `auth.proxy.ProxySettings` names for the target (geventhttpclient's
proxy support: absolute-form requests for http, a `CONNECT` tunnel for https), on a client of its
own rather than Locust's pool.
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
import gevent.lock
import gevent.os
import gevent.subprocess
from geventhttpclient.client import HTTPClient
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError
from geventhttpclient.url import URL

from mcpbench.auth.proxy import Proxy, ProxySettings
from mcpbench.protocol.client import (
    STDOUT, ClientConnection, EndpointReady, Failed, GetHead, LegacyHead, Outgoing, PostHead,
)
from mcpbench.protocol.http import (
    AUTHENTICATE, INSTANCE, KEEP_ALIVE_EXPIRY, SESSION_ID, Failure, classify_status, may_send_again,
)
from mcpbench.system.target import Target
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.transport.base import Transport

# One recv: large enough that a typical answer arrives in one call.
READ_SIZE = 64 * 1024
# After its answer a Streamable HTTP server should end the SSE body; a greenlet waits this long for
# the end (so the connection can be reused) before closing the connection instead. The call itself
# is complete when its answer arrives.
DRAIN_TIMEOUT = 1.0
# A GET stream that ended while its session stands is opened again after this pause.
LISTEN_PAUSE = 0.5
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


def _closed_unanswered(exc: BaseException) -> bool:
    """Whether a request's failure is its connection closing (or reset) after it was written and before
    any byte of an answer: the server may have read it. A refused or timed-out connect is not."""
    return isinstance(exc, HTTPConnectionClosed) or (isinstance(exc, OSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE))


# What a request that got no answer on a closed connection is said to be, with what was done about it.
CLOSED_UNANSWERED = "the connection closed before any answer"


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


# --- HTTP, both transports ----------------------------------------------------------------------


def http_client(url: str, *, timeout: float, concurrency: int = 2, pool: Any = None, source: str | None = None,
                proxy: Proxy | None = None, stream: bool = False, **kw: Any) -> HTTPClient:
    """A geventhttpclient client for `url`'s origin (from Locust's pool when given and no `proxy` applies).

    Two connections at least: a server request on a POST's answer stream is answered on another.
    `source`: the local address its sockets bind before connecting (distinct loopback clients).
    `stream`: for a stream that may stay silent for long: no socket timeout once connected.
    """
    if proxy is not None:
        kw.update(proxy_host=proxy.host, proxy_port=proxy.port, proxy_user=proxy.username, proxy_password=proxy.password)
    if pool is not None and proxy is None:
        client = pool.get_client(URL(url))
    else:
        client = HTTPClient.from_url(url, concurrency=concurrency, network_timeout=None if stream else timeout,
                                     connection_timeout=timeout, insecure=True, **kw)
    if source is not None:
        bind_source(client, source)
    expire_idle(client)
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


def expire_idle(client: HTTPClient) -> None:
    """Make `client`'s pool drop a kept-alive connection idle for `KEEP_ALIVE_EXPIRY` or longer rather
    than send on it (the server may be closing it that moment: see the constant).

    The pool already drops an idle socket that is readable (the server's FIN is in) as it hands one
    out (`_is_socket_alive`); the age of each is added to that check, from when it came back.
    """
    pool = client._connection_pool
    if getattr(pool, "_mcpbench_idle", None) is not None:
        return  # a pooled client seen before
    idle: dict[Any, float] = {}  # socket -> when it came back to the pool; at most the pool's size
    pool._mcpbench_idle = idle
    alive, give_back = pool._is_socket_alive, pool.return_socket

    def returned(sock: Any) -> None:
        idle[sock] = time.monotonic()
        give_back(sock)

    def young_and_alive(sock: Any) -> bool:
        since = idle.pop(sock, None)
        return (since is None or time.monotonic() - since < KEEP_ALIVE_EXPIRY) and alive(sock)

    pool.return_socket = returned
    pool._is_socket_alive = young_and_alive


def note_instance(transport: Transport, resp: Any) -> None:
    """Keep the instance a lab balancer named in `resp`'s head on `transport` (the client reads it)."""
    if (name := resp.get(INSTANCE)) is not None:
        transport.instance = name


class _HttpPoster(Transport):
    """POSTs a message and feeds its answer to the core: what both HTTP transports share."""

    _client: HTTPClient

    def _post(self, out: Outgoing, uri: str) -> int:
        resp = None
        again = may_send_again(out.message)
        while resp is None:
            try:
                resp = self._client.request("POST", uri, body=out.data, headers=out.headers)
            except _SOCKET_ERRORS as exc:
                if not _closed_unanswered(exc):
                    failure = _socket_failure(exc, connected=False)
                elif again:  # a query: once more, on another connection (`may_send_again`)
                    again = False
                    continue
                else:  # written, then no answer: it may have run, and is not sent again unasked
                    said = "sent again once, closed again" if may_send_again(out.message) else "it may have run: not sent again"
                    failure = McpFailure(Failure.STREAM_CLOSED, f"{CLOSED_UNANSWERED} ({said})")
                self.dispatch(self.conn.fail(failure.detail, failure.kind, out=out))
                return 0
        note_instance(self, resp)
        reader = self.conn.reader(PostHead(out, resp.status_code, resp.get("content-type"), resp.get(SESSION_ID), resp.get(AUTHENTICATE)))
        streamed = reader.answer.streamed
        draining = False
        try:
            while True:
                chunk = _read_some(resp) if streamed else resp.read()
                self.dispatch(reader.feed(chunk, time.perf_counter()))
                if not chunk:
                    break
                if reader.answered:  # complete: what the stream does next is not this call's
                    draining = not resp.message_complete
                    break
        except (McpFailure, *_SOCKET_ERRORS) as exc:
            if reader.answered:
                pass
            elif streamed:  # the stream's end, as the core reads it: with its last event id, to resume from
                self.dispatch(reader.feed(b"", time.perf_counter()))
            else:
                failure = exc if isinstance(exc, McpFailure) else _socket_failure(exc, connected=True)
                self.dispatch(self.conn.fail(failure.detail, failure.kind, out=out))
        finally:
            self.first_event = reader.first_event
            if draining:
                gevent.spawn(_drain, resp)
            elif resp._sock is not None:
                _discard(resp)
        return reader.size + len(out.data)


def _drain(resp: Any) -> None:
    """Read what follows an answer, so the connection can carry the next request; else close it."""
    try:
        with gevent.Timeout(DRAIN_TIMEOUT, False):
            while _read_some(resp):
                pass
    except (McpFailure, *_SOCKET_ERRORS):
        pass
    finally:
        if resp._sock is not None:
            _discard(resp)


class GreenStreamableHttp(_HttpPoster):
    """POSTs to one endpoint; answers come as JSON or as an SSE body read incrementally."""

    kind = STREAMABLE_HTTP
    has_session_header = True

    def __init__(self, url: str, client: HTTPClient) -> None:
        super().__init__()
        self.url = url
        self._uri = URL(url).request_uri
        self._client = client
        self._listener: gevent.Greenlet | None = None
        self.get_streams = 0  # GET streams opened (reopened after a cut, say)

    def send(self, out: Outgoing) -> int:
        return self._post(out, self._uri)

    def listen(self) -> None:
        """Hold the session's `GET` stream open in a greenlet of its own, feeding what comes to the core.

        A stream that ends while the session stands (a proxy cut it, say) is opened again after
        `LISTEN_PAUSE`, with `Last-Event-ID` when the server gave event ids. It stops when the
        session is lost or ends, the server has no stream (405), or `stop_listening`.
        """
        self.stop_listening()
        self._listener = gevent.spawn(self._listen, self.conn)

    def stop_listening(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.kill(block=False)  # its response is released as the kill lands in its read

    def close(self) -> None:
        self.stop_listening()

    def _listen(self, conn: ClientConnection) -> None:
        while self.conn is conn and conn.usable:
            try:
                resp = self._client.request("GET", self._uri, headers=conn.headers("get"))
            except _SOCKET_ERRORS:
                gevent.sleep(LISTEN_PAUSE)
                continue
            self.get_streams += 1
            reader = conn.reader(GetHead(resp.status_code, resp.get("content-type"), authenticate=resp.get(AUTHENTICATE)))
            try:
                if reader is None:  # 405: the server has no stream for us
                    return
                chunk = b"?"
                while chunk:
                    try:
                        chunk = _read_some(resp)
                    except (McpFailure, *_SOCKET_ERRORS):
                        chunk = b""
                    # A refused stream (409: one is open already) concerns no call: only what it
                    # carried and a lost session (404) go on; the refusal goes to `refused`.
                    events = reader.feed(chunk, time.perf_counter())
                    self.dispatch([e for e in events if type(e) is not Failed])
                    if self.refused is not None and (failed := [e for e in events if type(e) is Failed]):
                        self.refused(failed)
            finally:
                if resp._sock is not None:
                    _discard(resp)
            gevent.sleep(LISTEN_PAUSE)

    def resume(self, headers: dict[str, str], done: Callable[[], bool]) -> tuple[int, str | None, int | None]:
        """`GET` with `Last-Event-ID`: read the resumed stream into the core until `done()` or its end.

        Returns the bytes read, the stream's last event id (where a next resume starts) and its
        last `retry:` (ms, the least wait before that).
        """
        try:
            resp = self._client.request("GET", self._uri, headers=headers)
        except _SOCKET_ERRORS:
            return 0, None, None
        note_instance(self, resp)
        reader = self.conn.reader(GetHead(resp.status_code, resp.get("content-type"), stream="resume", authenticate=resp.get(AUTHENTICATE)))
        try:
            if reader is None:  # 405: the server cannot resume
                return 0, None, None
            chunk = b"?"
            while chunk and not done():
                try:
                    chunk = _read_some(resp)
                except (McpFailure, *_SOCKET_ERRORS):
                    chunk = b""
                self.dispatch(reader.feed(chunk, time.perf_counter()))
            return reader.size, reader.answer.last_event_id, reader.answer.retry_ms
        finally:
            if resp._sock is not None:
                _discard(resp)  # the rest of a resumed stream is not ours to wait for

    def end_session(self, headers: dict[str, str]) -> int:
        """DELETE the session. Streamable HTTP: "The server MAY respond to this request with HTTP 405"."""
        try:
            resp = self._client.request("DELETE", self._uri, body=b"", headers=headers)
        except _SOCKET_ERRORS as exc:
            raise _socket_failure(exc, connected=False) from None
        note_instance(self, resp)
        try:
            body = resp.read()
        except _SOCKET_ERRORS as exc:
            raise _socket_failure(exc, connected=True) from None
        finally:
            if resp._sock is not None:
                _discard(resp)
        if resp.status_code >= 400 and resp.status_code != 405:
            raise McpFailure(classify_status(resp.status_code, has_session=True), f"HTTP {resp.status_code}")
        return len(body)


class GreenLegacySse(_HttpPoster):
    """`GET /sse` held open by one reader greenlet; POSTs go to the endpoint it names."""

    kind = LEGACY_SSE

    def __init__(self, url: str, post_client: HTTPClient, *, timeout: float, source: str | None = None,
                 proxy: Proxy | None = None) -> None:
        super().__init__()
        self.url, self._client, self._timeout, self._source, self._proxy = url, post_client, timeout, source, proxy
        self._stream_client: HTTPClient | None = None
        self._stream: Any = None
        self._reader: gevent.Greenlet | None = None
        self._endpoint = gevent.event.Event()
        self._closed: str | None = None

    @property
    def alive(self) -> bool:
        return self._closed is None and self._reader is not None

    def open(self) -> None:
        # Its own single-connection client: the stream holds that connection for the session.
        # No socket timeout on it: an idle stream is normal (the SDK pings every 15 s).
        self._stream_client = http_client(self.url, timeout=self._timeout, concurrency=1, source=self._source, proxy=self._proxy,
                                          stream=True)
        try:
            with gevent.Timeout(self._timeout, CallTimeout):
                self._stream = self._stream_client.request("GET", URL(self.url).request_uri, headers=self.conn.headers("legacy"))
        except CallTimeout:
            self.close()
            raise McpFailure(Failure.ANSWER_LOST, "no answer to GET") from None
        except _SOCKET_ERRORS as exc:
            self.close()
            raise _socket_failure(exc, connected=False) from None
        note_instance(self, self._stream)
        status = self._stream.status_code
        reader = self.conn.reader(LegacyHead(status, self._stream.get("content-type"), self._stream.get(AUTHENTICATE)))
        if (refused := reader.refused()) is not None:
            self.close()  # a success status that is no event stream counts as the client's error
            raise McpFailure(classify_status(status, has_session=False, challenge=reader.challenge) or Failure.HTTP_4XX, refused)
        self._reader = gevent.spawn(self._read_loop, reader)
        if not self._endpoint.wait(self._timeout):
            self.close()
            raise McpFailure(Failure.ANSWER_LOST, "no endpoint event")
        if self.conn.endpoint is None:
            self.close()
            raise McpFailure(Failure.CONNECT, self.conn.lost or "SSE stream closed before its endpoint event")

    def _read_loop(self, reader: Any) -> None:
        chunk = b"?"
        try:
            while chunk:
                chunk = _read_some(self._stream)
                events = reader.feed(chunk, time.perf_counter())
                if any(type(e) is EndpointReady for e in events) or self.conn.lost:
                    self._endpoint.set()
                self.dispatch(events)
        except (McpFailure, *_SOCKET_ERRORS) as exc:
            self._closed = str(exc) or type(exc).__name__
            self.dispatch(reader.feed(b"", time.perf_counter()))
        finally:
            self._closed = self._closed or "server closed the SSE stream"
            self._endpoint.set()

    def send(self, out: Outgoing) -> int:
        if self._closed is not None or out.url is None:  # not sent: it cannot have run
            self.dispatch(self.conn.fail("not sent: the session's SSE stream closed", Failure.CONNECT, out=out))
            return 0
        return self._post(out, out.url)

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


class GreenStdio(Transport):
    """A child process per user (gevent.subprocess); newline-delimited JSON-RPC on its stdin/stdout."""

    kind = STDIO

    def __init__(self, argv: list[str] | tuple[str, ...], *, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        super().__init__()
        self.argv = list(argv)
        self.env = env
        self.cwd = cwd
        self.proc: gevent.subprocess.Popen | None = None
        self._reader: gevent.Greenlet | None = None
        self._stderr_reader: gevent.Greenlet | None = None
        self._write_lock = gevent.lock.Semaphore()
        self._closed: str | None = None
        self.stderr_tail = b""

    @property
    def alive(self) -> bool:
        return self._closed is None and self.proc is not None

    def open(self) -> None:
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

    def _drain_stderr(self, fd: int) -> None:
        gevent.os.make_nonblocking(fd)
        try:
            while chunk := gevent.os.nb_read(fd, READ_SIZE):
                self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_TAIL:]
        except OSError:
            pass

    def _read_loop(self, fd: int) -> None:
        gevent.os.make_nonblocking(fd)
        chunk = b"?"
        while chunk:
            try:
                chunk = gevent.os.nb_read(fd, READ_SIZE)
            except OSError:
                chunk = b""
            if not chunk:
                self._closed = self._closed or "the server process closed its stdout"
            self.dispatch(self.conn.reader(STDOUT).feed(chunk, time.perf_counter()))

    def send(self, out: Outgoing) -> int:
        if self._closed is not None or self.proc is None:  # not sent: it cannot have run
            self.dispatch(self.conn.fail("not sent: the server process exited", Failure.CONNECT, out=out))
            return 0
        view = memoryview(out.data)
        try:
            with self._write_lock:  # a reply to a server request may be written from another greenlet
                while view:
                    view = view[gevent.os.nb_write(self._stdin, view) :]
        except OSError:
            self._closed = self._closed or "stdin closed"
            self.dispatch(self.conn.fail("server process stdin closed", Failure.STREAM_CLOSED, out=out))
        return len(out.data)

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


def transport_for(target: Target, *, timeout: float, pool: Any = None, source: str | None = None,
                  env: dict[str, str] | None = None, cwd: str | None = None, proxies: ProxySettings | None = None) -> Transport:
    """A fresh, unopened transport for `target` (`pool`: Locust's connection pool, for Streamable HTTP;
    `proxies`: the proxy of each HTTP request, none by default)."""
    if target.transport == STDIO:
        return GreenStdio(list(target.argv), env=env, cwd=cwd)
    proxy = proxies.route(target.url) if proxies is not None else None
    if target.transport == LEGACY_SSE:
        client = http_client(target.url, timeout=timeout, source=source, proxy=proxy)
        return GreenLegacySse(target.url, client, timeout=timeout, source=source, proxy=proxy)
    return GreenStreamableHttp(target.url, http_client(target.url, timeout=timeout, pool=pool, source=source, proxy=proxy))
