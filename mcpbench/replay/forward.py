"""`serve-trace --on-miss forward URL`: requests the recording lacks go to a live server.

A `Forwarder` keeps one upstream session per client session of the mock. The
upstream session is opened on the client session's first miss, over the
replayer's transports, with `initialize` + `notifications/initialized` when the
client speaks a handshake-era version (the client's own `initialize` params,
when the mock saw them), and closed when the client session ends. While a
forwarded request runs, what the server sends for it (progress, logging,
sampling and other server requests) is relayed to the client; the answer goes
back under the client's id.

Notifications the server sends outside any forwarded request (on its Streamable
HTTP GET stream, which the upstream session opens, or between calls on stdio
and legacy SSE) go to the client's stream outside calls, where the mock has one
(`Forwarder.attach`): stdio's stdout, the legacy SSE stream, or the client's
Streamable HTTP GET stream. With none, they are dropped, as a server would.

An upstream session that is lost (its process exits, its stream ends, the
server answers 404 for it) is reopened, as `recovery.plan_recovery` says a
forwarder does (`REOPENING`): a new session with a new handshake, and the
request that found it lost goes again when it did not run; one that may have
run gets an error, as before.

A protected upstream gets the forwarder's own credentials (`ClientAccess`: the
user's headers, a bearer token, OAuth, whose token is renewed when due and once
after a 401, the request going again), never the client's: the mock's clients
talk to the mock. Every request goes through the proxy that applies.
"""

import functools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from mcpbench.auth.options import ClientAccess
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.asks import Relay
from mcpbench.protocol.client import (
    Answered, ClientConnection, Event, Failed, Outgoing, Pushed, ServerRequest, initialize_request,
    initialized_notification,
)
from mcpbench.protocol.errors import McpbenchError, TargetError
from mcpbench.protocol.http import AUTHORIZATION, Failure
from mcpbench.protocol.jsonrpc import ErrorResponse, Request, Response
from mcpbench.protocol.recovery import REOPENING, plan_recovery
from mcpbench.protocol.session import C2S, Trigger
from mcpbench.protocol.versions import LATEST_HANDSHAKE, era_of, has_handshake, meta_version
from mcpbench.transport.base import Item, Lost, Transport
from mcpbench.transport.threads import open_transport
from mcpbench.system.target import Target

# How long one forwarded request (or the upstream handshake) may wait for its
# answer: the replayer's default, far above a healthy server's latency.
FORWARD_TIMEOUT = 30.0

# JSON-RPC error a client gets when the upstream server cannot answer
# (JSON-RPC's "internal error": the mock itself could not do its job).
FORWARD_FAILED = -32603

# JSON-RPC error the upstream gets for a server request no client call can take.
NO_CLIENT = -32601

Send = Callable[[jsonrpc.Message], None]
# Relays one server→client request to the client: (method, params) -> the client's answer or None.
AskClient = Callable[[str, Any], "Response | ErrorResponse | None"]


class _Upstream:
    """One live session: a shell over a `ClientConnection` whose waiters are the inboxes of
    the forwarded requests (what the server sends for a request goes to its inbox).

    The transports' threads and the forwarding threads share the connection under one lock.
    """

    def __init__(self, target: Target, *, hello: dict | None, version: str | None, timeout: float, unsolicited: Send,
                 access: ClientAccess | None = None) -> None:
        self.timeout = timeout
        self.unsolicited = unsolicited
        self.version = version
        self.access = access = access if access is not None else ClientAccess.none()
        self.init_result: dict | None = None  # the upstream's initialize result (handshake era)
        self._lock = threading.RLock()  # legacy SSE queues a POST's answer from inside `send`
        self.transport: Transport = open_transport(target, self._sink, proxies=access.proxies)
        headers = self._headers() if self.transport.url else None
        self.conn = ClientConnection(self.transport.kind, version if era_of(version) else LATEST_HANDSHAKE,
                                     url=self.transport.url, policy=Relay(), headers=headers)
        try:
            with self._lock:
                early = self.transport.connect(self.conn)
            self._route(early)
            if has_handshake(version):
                self._handshake(hello)
                if (listen := getattr(self.transport, "listen", None)) is not None:
                    listen()  # Streamable HTTP: the GET stream, for what the server sends outside requests
        except BaseException:
            self.transport.close()
            raise

    def _handshake(self, hello: dict | None) -> None:
        params = hello or self.conn.send(initialize_request(self.conn)).message.params
        answer = None
        for item in self.exchange("initialize", params):
            if isinstance(item, Failed):
                raise TargetError(f"upstream initialize failed: {item.detail}")
            if isinstance(item, (Response, ErrorResponse)):
                answer = item
        if not isinstance(answer, Response) or not isinstance(answer.result, dict):
            reason = answer.message if isinstance(answer, ErrorResponse) else "no answer"
            raise TargetError(f"upstream initialize failed: {reason}")
        self.init_result = answer.result
        self.version = self.conn.negotiated or params.get("protocolVersion")
        self._send(lambda: self.conn.send(initialized_notification(), ts=time.perf_counter()))

    def _headers(self, failed: Failed | None = None) -> dict[str, str]:
        """The user's headers and a token that is not due (a new one after `failed`, a 401).

        Raises:
            TargetError: no token can be had (the request gets the forwarder's error).
        """
        tokens = self.access.tokens()
        try:
            if tokens is not None and failed is not None:
                return {**self.access.headers, **tokens.renew(self.conn.extra.get(AUTHORIZATION), failed.challenge)}
            return self.access.headers_now()
        except McpbenchError as exc:
            raise TargetError(f"{exc} ({Failure.AUTH_TOKEN_FAILED})") from None

    def renewed(self, failed: Failed) -> bool:
        """After a 401: whether a new token came (the request may go again with it)."""
        if failed.failure != Failure.AUTH_REQUIRED or self.access.tokens() is None:
            return False
        headers = self._headers(failed)
        with self._lock:
            self.conn.set_headers(headers)
        return True

    def _send(self, build: Callable[[], Outgoing]) -> Outgoing:
        if self.transport.url and self.access.tokens() is not None:
            headers = self._headers()  # renewed when due
            with self._lock:
                self.conn.set_headers(headers)
        with self._lock:
            out = build()
        self.transport.send(out)
        return out

    def exchange(self, method: str, params: Any) -> Iterator[jsonrpc.Message | Failed]:
        """Send a request; yield what the server sends for it, ending with the answer or a `Failed`.

        The params go as the client sent them (its own `_meta` envelope included).
        """
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        out = self._send(lambda: self.conn.send(Request(id=self.conn.next_id(), method=method, params=params, _parsed=True),
                                                waiter=inbox, ts=time.perf_counter()))
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                item = inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                with self._lock:
                    failed = self.conn.fail(f"no answer within {self.timeout:g} s", gave_up=out.request_id)
                if not failed:  # its answer came just now
                    continue
                yield failed[0]
                return
            yield item
            if isinstance(item, (Response, ErrorResponse, Failed)):
                return

    def answer(self, message: Response | ErrorResponse) -> None:
        self._send(lambda: self.conn.send(message, ts=time.perf_counter()))

    @property
    def lost_by(self) -> Trigger | None:
        """Why the session is gone (`ClientConnection.lost_by`); None while it stands."""
        return self.conn.lost_by  # one attribute read: no lock, so that it may be asked under the forwarder's

    def _sink(self, item: Item) -> None:
        """From the transport's threads: feed the connection, then route what it says."""
        with self._lock:
            if type(item) is Lost and item.fatal:  # the transport broke: every request in flight fails
                events = self.conn.fail(item.reason)
            else:
                events = self.transport.receive(item)
        self._route(events)

    def _route(self, events: list[Event]) -> None:
        for event in events:
            kind = type(event)
            if kind is Answered or kind is Failed:
                if event.waiter is not None:
                    event.waiter.put(event.answer if kind is Answered else event)
            elif kind is ServerRequest and event.reply is not None:
                self.transport.send(event.reply)  # the policy answered it (ping)
            elif kind is Pushed or kind is ServerRequest:
                inbox = self._inbox_of(event)
                if inbox is not None:
                    inbox.put(event.message)
                elif kind is ServerRequest:
                    self.answer(ErrorResponse(id=event.request.id, code=NO_CLIENT,
                                              message="mcpbench serve-trace: no client request in flight to ask"))
                else:
                    self.unsolicited(event.message)

    def _inbox_of(self, event: Pushed | ServerRequest) -> queue.SimpleQueue | None:
        """The inbox of the request a server message concerns: the core's word, else the only one in flight."""
        with self._lock:
            pending = self.conn.session.pending
            if type(event) is Pushed and event.waiter is not None:
                return event.waiter
            owner = event.request_id if type(event) is Pushed else event.carrier
            if owner is not None:
                found = pending.get((C2S, owner))
                return found.waiter if found is not None else None
            if event.via == "get":
                return None
            waiters = [p.waiter for (direction, _), p in pending.items() if direction is C2S]
            return waiters[0] if len(waiters) == 1 else None  # stdio, legacy SSE: the only request in flight

    def close(self, *, failing: str | None = None) -> None:
        """End the session. `failing`: why the requests still in flight fail (else they wait out their time)."""
        self.transport.close()
        with self._lock:
            self.conn.close()
            events = self.conn.fail(failing) if failing else []
        self._route(events)


class Forwarder:
    """Forwards unrecorded requests to `target`, one upstream session per client session (thread-safe).

    Args:
        target: the live server (`mcpbench.system.target.parse_target`).
        timeout: how long a forwarded request may wait for its answer.
        access: the forwarder's own headers, tokens and proxies for an HTTP upstream.
    """

    def __init__(self, target: Target, *, timeout: float = FORWARD_TIMEOUT, access: ClientAccess | None = None) -> None:
        self.target = target
        self.timeout = timeout
        self.access = access if access is not None else ClientAccess.none()
        self._upstreams: dict[Any, _Upstream] = {}
        self._hello: dict[Any, dict] = {}  # client session -> its initialize params
        self._lock = threading.Lock()
        self._opening: dict[Any, threading.Lock] = {}
        self._streams: dict[Any, Send] = {}  # client session -> its stream outside calls

    def attach(self, session: Any, push: Send) -> None:
        """`push` delivers to the client of `session` outside any call (its stream for server messages)."""
        with self._lock:
            self._streams[session] = push

    def detach(self, session: Any, push: Send) -> None:
        """That stream is gone (a newer one of the same session stays)."""
        with self._lock:
            if self._streams.get(session) == push:
                del self._streams[session]

    def _unsolicited(self, session: Any, message: jsonrpc.Message) -> None:
        with self._lock:
            push = self._streams.get(session)
        if push is None:
            return  # the client has no stream outside calls: a server would drop it too
        try:
            push(message)
        except OSError:
            pass  # the client went away

    def remember(self, session: Any, request: Request) -> None:
        """Note a client's `initialize`, so its upstream session opens with the same params."""
        if request.method == "initialize" and isinstance(request.params, dict):
            with self._lock:
                self._hello[session] = request.params

    def forward(self, session: Any, request: Request, send: Send, ask: AskClient) -> None:
        """Answer `request` from the live server: relay its messages to `send`, the answer last.

        `ask` relays a server request to the client and returns the client's answer. A request
        that finds the upstream session lost goes again on a new one when it did not run.
        """
        if request.method == "initialize":
            self.remember(session, request)
        for _ in range(1 + REOPENING.attempts):
            try:
                upstream = self._upstream(session, request)
                if request.method == "initialize":
                    if upstream.init_result is None:
                        raise TargetError(f"{self.target} speaks {upstream.version}, which has no initialize")
                    send(Response(id=request.id, result=upstream.init_result))
                    return
            except TargetError as exc:
                send(self._error(request, str(exc)))
                return
            failed = self._relay(upstream, request, send, ask)
            if failed is None:
                return
            try:
                if upstream.renewed(failed):  # a 401: once more with a new token (a 401'd request did not run)
                    failed = self._relay(upstream, request, send, ask)
                    if failed is None:
                        return
            except TargetError as exc:
                send(self._error(request, str(exc)))
                return
            if not plan_recovery(REOPENING, failed.failure, lost=upstream.lost_by, status=failed.status).resend:
                break  # it may have run: never silently repeated
        send(self._error(request, failed.detail))

    def _relay(self, upstream: _Upstream, request: Request, send: Send, ask: AskClient) -> Failed | None:
        """Send `request` upstream and relay what comes for it, the answer last; its failure instead, if it failed."""
        for item in upstream.exchange(request.method, request.params):
            if isinstance(item, Failed):
                return item
            elif isinstance(item, Response):
                send(Response(id=request.id, result=item.result))
            elif isinstance(item, ErrorResponse):
                send(ErrorResponse(id=request.id, code=item.code, message=item.message, data=item.data))
            elif isinstance(item, Request):
                reply = ask(item.method, item.params)
                if reply is None:
                    reply = ErrorResponse(id=None, code=NO_CLIENT, message="mcpbench serve-trace: the client did not answer")
                upstream.answer(_with_id(reply, item.id))
            else:
                send(item)
        return None

    def _upstream(self, session: Any, request: Request) -> _Upstream:
        """The upstream session of `session`: opened on its first miss, reopened once lost."""
        with self._lock:
            upstream = self._upstreams.get(session)
            if upstream is not None and upstream.lost_by is None:
                return upstream
            opening = self._opening.setdefault(session, threading.Lock())
        with opening:  # concurrent misses of one session open one upstream session
            with self._lock:
                upstream = self._upstreams.get(session)
                if upstream is not None and upstream.lost_by is None:
                    return upstream
                hello = self._hello.get(session)
            if upstream is not None:  # lost: a forwarder reopens it (`plan_recovery`: REOPENING reinitializes)
                upstream.close(failing="the upstream session was lost")  # requests sent on it since go again
            version = meta_version(request.params) or (hello or {}).get("protocolVersion")
            upstream = _Upstream(self.target, hello=hello, version=version, timeout=self.timeout,
                                 unsolicited=functools.partial(self._unsolicited, session), access=self.access)
            with self._lock:
                self._upstreams[session] = upstream
            return upstream

    def _error(self, request: Request, reason: str) -> ErrorResponse:
        return ErrorResponse(id=request.id, code=FORWARD_FAILED,
                             message=f"mcpbench serve-trace: forwarding to {self.target} failed: {reason}")

    def end(self, session: Any) -> None:
        """The client session ended: close its upstream session, if it has one."""
        with self._lock:
            upstream = self._upstreams.pop(session, None)
            self._hello.pop(session, None)
            self._opening.pop(session, None)
            self._streams.pop(session, None)
        if upstream is not None:
            upstream.close()

    def close(self) -> None:
        with self._lock:
            sessions = list(self._upstreams)
        for session in sessions:
            self.end(session)


def _with_id(message: Response | ErrorResponse, new_id: Any) -> Response | ErrorResponse:
    if isinstance(message, Response):
        return Response(id=new_id, result=message.result)
    return ErrorResponse(id=new_id, code=message.code, message=message.message, data=message.data)
