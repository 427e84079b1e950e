"""One MCP session for a check: the client core (`ClientConnection`) driven one exchange at a time.

    session = open_session(target, deadline=d)         # HttpSession or LegacySession, handshake done
    ex = session.call("tools/list", deadline=d)        # an Exchange: status, instance, answer or failure
    ex = session.call("tools/call", params, deadline=d, cut_after=1)   # read one SSE event, then cut
    ex = session.resume(ex.failed, deadline=d)         # GET with Last-Event-ID: the rest of that stream
    session.end(deadline=d)                            # DELETE (Streamable HTTP) or the stream closed

Both go over the one transport interface: Streamable HTTP over the exchange shell
(`transport.exchange.ExchangeTransport`: one exchange at a time, each POST's answer, JSON or SSE,
read by the core's `AnswerReader` as its chunks come), or any transport of the interface
(`MockTransport`); legacy HTTP+SSE over the blocking transport shell's `LegacySseTransport`, which
already carries a session on its stream. What the server sent, when, and what the core made of it is in the `ProbeExchange`.
"""

import queue
import time
from dataclasses import dataclass, field
from typing import Any

from mcpbench.protocol.client import (
    AnswerReader, Answered, ClientConnection, Event, Failed, GetHead, Outgoing, PostHead, Pushed, ServerRequest,
    StreamEnded, Unmatched, initialize_request, initialized_notification,
)
from mcpbench.protocol.errors import TargetError
from mcpbench.protocol.http import SESSION_ID, Failure, classify_status
from mcpbench.protocol.jsonrpc import ErrorResponse
from mcpbench.protocol.transports import LEGACY_SSE, STREAMABLE_HTTP
from mcpbench.protocol.versions import LATEST_HANDSHAKE, has_handshake
from mcpbench.transport.base import Item, Lost, Opened, Transport
from mcpbench.probe.wire import Wire, WireError, left


# After a streamed answer, how long its stream may take to end before it is cut.
END_GRACE = 0.2


@dataclass
class ProbeExchange:
    """One request and what came of it.

    `arrivals`: (seconds after the request left, event) for each server message (progress, the
    answer), in order; `cut`: the probe cut the stream itself (`cut_after`).
    """

    status: int | None = None
    instance: str | None = None
    answered: Answered | None = None
    failed: Failed | None = None
    events: list[Event] = field(default_factory=list)
    arrivals: list[tuple[float, Event]] = field(default_factory=list)
    reader: AnswerReader | None = None
    latency: float | None = None  # seconds from sending to the answer
    headers: Any = None  # the answer's HTTP headers (an `email.message.Message`: case-insensitive `get`)
    cut: bool = False
    closed_at: float | None = None  # seconds after the request left when its body ended (None: still open)
    detail: str | None = None  # what went wrong outside the core: no connection, no answer in time
    unanswered_close: bool = False  # the peer closed the connection without any answer (no status line)
    expects_answer: bool = True  # False for a notification: a 2xx status is all it gets

    @property
    def ok(self) -> bool:
        return self.answered is not None and type(self.answered.answer) is not ErrorResponse

    @property
    def result(self) -> Any:
        return self.answered.answer.result if self.ok else None

    def failure(self) -> tuple[str, str] | None:
        """(failure class, detail) when the request failed, as the load users class it; None when answered."""
        if self.ok:
            return None
        if self.answered is not None:
            error, status = self.answered.answer, f"HTTP {self.status}: " if self.status and self.status >= 400 else ""
            return Failure.JSONRPC_ERROR, f"{status}JSON-RPC {error.code} {error.message}"
        if self.failed is not None:
            return self.failed.failure, self.failed.detail
        if not self.expects_answer and self.status is not None and self.status < 300:
            return None
        return Failure.ANSWER_LOST, self.detail or "no answer"

    def messages(self, kind: type) -> list:
        return [event for _, event in self.arrivals if type(event) is kind]


@dataclass
class _Reading:
    """The exchange an `HttpSession` is reading: what its items go to."""

    ex: ProbeExchange
    kind: str  # "post", "get" (a stream, resumed or not), "delete"
    out: Outgoing | None = None
    request_id: Any = None  # read until this request is answered
    cut_after: int | None = None
    reader: AnswerReader | None = None
    sent: float = 0.0
    opened: bool = False
    hurried: bool = False


class HttpSession:
    """A Streamable HTTP session: one exchange at a time, on a transport of the one interface.

    Args:
        wire: the endpoint and the probe's options.
        version: the version to speak (2026-07-28: no handshake, the envelope on every request).
        policy, capabilities: what the client answers and declares (`ClientConnection`'s).

    Its transport is the wire's (`Wire.transport`: the exchange shell, or a `MockTransport` in
    tests), with this session as its sink.
    """

    def __init__(self, wire: Wire, version: str = LATEST_HANDSHAKE, *, policy: Any = None, capabilities: dict | None = None) -> None:
        self.wire = wire
        self.conn = ClientConnection(STREAMABLE_HTTP, version, url=wire.url, policy=policy, capabilities=capabilities)
        self.transport: Transport = wire.transport(self._arrived)
        self.transport.connect(self.conn)
        self.instance: str | None = None  # the instance that answered the handshake
        self._at: _Reading | None = None

    @property
    def session_id(self) -> str | None:
        return self.conn.session_id

    def open(self, *, deadline: float) -> ProbeExchange:
        """The handshake (`initialize`, `notifications/initialized`); its first exchange."""
        steps = self.open_steps(deadline=deadline)
        return steps[0][1] if steps else ProbeExchange()

    def open_steps(self, *, deadline: float) -> list[tuple[str, ProbeExchange]]:
        """The handshake, step by step (none in 2026-07-28, which has no handshake)."""
        if not has_handshake(self.conn.version):
            return []
        ex = self.send(self.conn.send(initialize_request(self.conn), ts=time.perf_counter()), deadline=deadline)
        self.instance = ex.instance
        steps = [("initialize", ex)]
        if ex.ok:
            steps.append(("notifications/initialized", self.send(self.conn.send(initialized_notification()), deadline=deadline)))
        return steps

    def call(self, method: str, params: dict | None = None, *, deadline: float, cut_after: int | None = None,
             extra: dict | None = None) -> ProbeExchange:
        """One request; `cut_after`: read that many SSE events of its answer, then cut the stream."""
        out = self.conn.send(self.conn.prepare(method, params), ts=time.perf_counter())
        return self.send(out, deadline=deadline, cut_after=cut_after, extra=extra)

    def send(self, out, *, deadline: float, cut_after: int | None = None, extra: dict | None = None, bare: bool = False) -> ProbeExchange:
        """POST `out` and read its answer (`extra` headers win; `bare`: without the user's headers)."""
        ex = ProbeExchange(expects_answer=out.request_id is not None)
        reading = _Reading(ex, "post", out, out.request_id, cut_after)
        self._exchange(reading, min(deadline, time.monotonic() + self.wire.options.timeout), lambda: self.transport.send(out),
                       extra=extra, bare=bare)
        return ex

    def resume(self, failed: Failed, *, deadline: float, cut_after: int | None = None) -> ProbeExchange:
        """Wait again for the answer `failed` lost with its stream: a GET with its `Last-Event-ID`."""
        headers = self.conn.resume(failed, waiter=failed.waiter)
        if headers is None:
            return ProbeExchange(detail="the session is gone: nothing to resume")
        return self.get(headers, deadline=deadline, cut_after=cut_after, request_id=failed.request.id)

    def get(self, headers: dict, *, deadline: float, cut_after: int | None = None, request_id: Any = None,
            until_answered: bool = True, timeout: float | None = None) -> ProbeExchange:
        """A GET stream (a resumed one with `Last-Event-ID` in `headers`), read until `request_id` is
        answered, the stream ends, `cut_after` events came, or `deadline` (at most `timeout` s, by
        default the probe's request timeout)."""
        ex = ProbeExchange()
        reading = _Reading(ex, "get", None, request_id if until_answered else object(), cut_after)
        self._exchange(reading, min(deadline, time.monotonic() + (timeout or self.wire.options.timeout)),
                       lambda: self.transport.request("GET", headers))
        return ex

    def end(self, *, deadline: float) -> ProbeExchange:
        """End the session with DELETE; the Exchange's status is the server's answer (None: no session to end)."""
        headers = self.conn.headers("delete")
        ex = ProbeExchange(expects_answer=False)
        if headers is None:
            return ex
        self._exchange(_Reading(ex, "delete"), min(deadline, time.monotonic() + self.wire.options.timeout),
                       lambda: self.transport.end_session(headers))
        if ex.status is not None and ex.status >= 400:
            ex.failed = Failed(None, None, classify_status(ex.status, has_session=True), f"DELETE answered HTTP {ex.status}")
        self.conn.close()
        return ex

    def close(self) -> None:
        self.transport.close()

    def kept_closed_within(self, deadline: float) -> float | None:
        """Seconds until the server closed the idle kept connection (None: still open at `deadline`, or none kept)."""
        return self.transport.kept_closed_within(deadline)

    # --- reading ------------------------------------------------------------------------------

    def _exchange(self, reading: _Reading, deadline: float, start, *, extra: dict | None = None, bare: bool = False) -> None:
        """Run one exchange on the transport; its items come to `_arrived` meanwhile."""
        self._at = reading
        self.transport.next_exchange(deadline, extra=extra, bare=bare)
        try:
            start()
        finally:
            self._at = None

    def _arrived(self, item: Item) -> None:
        """The transport's sink: what the exchange being read brought (its head, a chunk, its loss)."""
        at = self._at
        if at is None:
            return
        ex = at.ex
        if type(item) is Opened:
            at.opened, at.sent = True, item.sent if item.sent is not None else item.ts
            ex.status, ex.instance = item.status, self.transport.instance
            if at.kind == "post":
                ex.headers = item.headers
                at.reader = self.conn.reader(PostHead(at.out, item.status, item.content_type, item.session_id))
            elif at.kind == "get":
                at.reader = self.conn.reader(GetHead(item.status, item.content_type, stream="resume"))
                if at.reader is None:
                    self.transport.cut()
            ex.reader = at.reader
        elif type(item) is Lost:
            if not at.opened:  # no answer at all
                ex.detail = item.reason
                if at.kind == "post":
                    ex.unanswered_close = item.closed
                    self._note(ex, self.conn.fail(item.reason, item.failure, out=at.out), 0.0, 0.0)
            elif at.request_id is not None and not self._done(ex, at.request_id):  # the body broke before the answer
                self._note(ex, self.conn.fail(item.reason, gave_up=at.request_id), at.sent, time.perf_counter())
                ex.detail = ex.detail or item.reason
        elif at.reader is not None:
            self._read(at, at.reader, item.data, item.ts)

    def _read(self, at: _Reading, reader: AnswerReader, chunk: bytes, ts: float) -> None:
        ex = at.ex
        if at.cut_after is not None and chunk and reader.answer.streamed:
            for i in range(len(chunk)):  # byte by byte: the cut comes right after the event's blank line
                self._note(ex, reader.feed(chunk[i:i + 1], ts), at.sent, ts)
                if reader.answer.events >= at.cut_after:
                    self.transport.cut()
                    ex.cut, at.reader = True, None
                    self._note(ex, reader.feed(b"", ts), at.sent, ts)  # the stream ends here, as a proxy's cut ends it
                    return
            return
        self._note(ex, reader.feed(chunk, ts), at.sent, ts)
        if not chunk and not at.hurried:  # (a stream's end after its answer is not waited for: not timed)
            ex.closed_at = ts - at.sent
        if not at.hurried and chunk and reader.answer.streamed and self._done(ex, at.request_id):
            # The answer is in: the stream's end is waited for only briefly (the SDKs end it
            # at once, and the connection can be kept); one the server holds open is cut.
            at.hurried = True
            self.transport.hurry(time.monotonic() + END_GRACE)

    @staticmethod
    def _done(ex: ProbeExchange, request_id: Any) -> bool:
        return request_id is not None and any(
            type(e) in (Answered, Failed) and e.request is not None and e.request.id == request_id for e in ex.events)

    def _note(self, ex: ProbeExchange, events: list[Event], sent: float, ts: float) -> None:
        """Take the core's events into `ex`; `sent` and `ts`: when the request left and the bytes came."""
        for event in events:
            ex.events.append(event)
            kind = type(event)
            if kind is Answered:
                ex.answered = ex.answered or event
                ex.latency = event.received - event.sent if event.sent else None
                ex.arrivals.append((event.received - sent, event))
            elif kind is Failed:
                ex.failed = ex.failed or event
            elif kind is Pushed or kind is Unmatched:
                ex.arrivals.append((ts - sent, event))
            elif kind is ServerRequest and event.reply is not None:
                self._answer_server(event)

    def _answer_server(self, event: ServerRequest) -> None:
        """The server asked something (the core's policy refuses): send the refusal, read nothing of it."""
        try:
            reply = self.wire.request("POST", event.reply.headers, event.reply.data, deadline=time.monotonic() + self.wire.options.timeout)
            reply.close()
        except WireError:
            pass


class LegacySession:
    """A legacy HTTP+SSE session on the blocking transport shell's `LegacySseTransport` (its stream, its POSTs).

    The user's headers (and a token) are those of the moment the stream opens: a probe's session is short.
    """

    def __init__(self, wire: Wire, version: str = LATEST_HANDSHAKE) -> None:
        from mcpbench.transport.threads import LegacySseTransport

        self.wire = wire
        self.conn = ClientConnection(LEGACY_SSE, version, url=wire.url)
        self.items: queue.SimpleQueue = queue.SimpleQueue()
        self.transport = LegacySseTransport(wire.url, self.items.put, timeout=wire.options.timeout, proxies=wire.options.access.proxies)
        self.instance: str | None = None
        self._connected = False

    @property
    def session_id(self) -> str | None:
        return self.conn.session_id

    def open(self, *, deadline: float) -> ProbeExchange:
        """Open the stream (its endpoint event), then the handshake; the `initialize` exchange (or the failed stream's)."""
        steps = self.open_steps(deadline=deadline)
        return next((ex for name, ex in steps if name == "initialize"), steps[0][1])

    def open_steps(self, *, deadline: float) -> list[tuple[str, ProbeExchange]]:
        """The stream (`connect`: the instance that holds the session, from its head), then `initialize`."""
        try:
            self.conn.set_headers(self.wire.options.headers())
            self.transport.connect(self.conn)
        except (TargetError, WireError) as exc:
            return [("connect", ProbeExchange(failed=Failed(None, None, Failure.CONNECT, str(exc)), detail=str(exc)))]
        self._connected = True
        self.instance = self._instance(self.transport.stream_headers)
        stream = ProbeExchange(status=200, instance=self.instance, headers=self.transport.stream_headers, expects_answer=False)
        ex = self.send(self.conn.send(initialize_request(self.conn), ts=time.perf_counter()), deadline=deadline)
        if ex.ok:
            self.transport.send(self.conn.send(initialized_notification()))
        return [("connect", stream), ("initialize", ex)]

    def _instance(self, headers) -> str | None:
        return headers.get(self.wire.options.instance_header) if headers is not None else None

    def call(self, method: str, params: dict | None = None, *, deadline: float, cut_after: int | None = None,
             extra: dict | None = None) -> ProbeExchange:
        return self.send(self.conn.send(self.conn.prepare(method, params), ts=time.perf_counter()), deadline=deadline)

    def send(self, out, *, deadline: float) -> ProbeExchange:
        deadline = min(deadline, time.monotonic() + self.wire.options.timeout)
        ex = ProbeExchange()
        sent = time.perf_counter()
        self.transport.send(out)
        while not HttpSession._done(ex, out.request_id):
            item = self.transport.next_item(self.items, left(deadline))
            if item is None:
                if time.monotonic() >= deadline:
                    for late in self.conn.fail("no answer on the stream in time", gave_up=out.request_id):
                        ex.failed = late
                    break
                continue
            if getattr(item, "out", None) is out and hasattr(item, "status"):
                ex.status, ex.headers = item.status, item.headers
                ex.instance = self._instance(item.headers)
            for event in self.transport.receive(item):
                ex.events.append(event)
                if type(event) is Answered:
                    ex.answered = ex.answered or event
                    ex.latency = event.received - event.sent if event.sent else None
                    ex.arrivals.append((item.ts - sent, event))
                elif type(event) is Failed and event.request is not None:
                    ex.failed = ex.failed or event
                elif type(event) in (Pushed, Unmatched):
                    ex.arrivals.append((item.ts - sent, event))
                elif type(event) is StreamEnded:
                    ex.detail = event.detail
        return ex

    def end(self, *, deadline: float) -> ProbeExchange:
        """A legacy session ends with its stream."""
        self.close()
        return ProbeExchange()

    def close(self) -> None:
        if self._connected:
            self.conn.close()
        self.transport.close()


ProbeSession = HttpSession | LegacySession


def new_session(wire: Wire, transport: str, version: str = LATEST_HANDSHAKE) -> ProbeSession:
    return LegacySession(wire, version) if transport == LEGACY_SSE else HttpSession(wire, version)


def open_session(wire: Wire, transport: str, *, deadline: float, version: str = LATEST_HANDSHAKE) -> tuple[ProbeSession, ProbeExchange]:
    """A session with its handshake done (look at the Exchange: it may have failed)."""
    session = new_session(wire, transport, version)
    return session, session.open(deadline=deadline)


__all__ = ["ProbeExchange", "HttpSession", "LegacySession", "ProbeSession", "new_session", "open_session"]
