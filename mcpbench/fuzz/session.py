"""One fuzzing session: the client core (`ClientConnection`) over the replayer's transports, one call at a time.

    session = FuzzSession(target, access=access, cwd=folder, version=version)
    session.open(deadline)                 # the handshake (2026-07-28: server/discover); TargetError when there is no MCP server
    outcome = session.call("tools/call", {"name": "add", "arguments": {...}}, timeout=5.0)
    session.close()

Every message sent and received is kept (`log`), so a finding can be written as a trace that
`mcpbench replay` reads. A session whose carrier went away (a stdio process that exited, a reset
connection) is `lost`; the runner opens another.
"""

import queue
import time
from dataclasses import dataclass, field
from typing import Any

from mcpbench.auth.options import ClientAccess
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.client import (
    Answered, ClientConnection, Failed, Garbled, Pushed, ServerRequest, SessionLost, initialize_request,
    initialized_notification, notification,
)
from mcpbench.protocol.errors import TargetError
from mcpbench.protocol.jsonrpc import ErrorResponse
from mcpbench.protocol.transports import STDIO
from mcpbench.protocol.versions import DISCOVER, LATEST_HANDSHAKE, PROGRESS
from mcpbench.transport.base import Lost, Opened, Transport
from mcpbench.transport.threads import open_transport
from mcpbench.system.target import Target

# One logged message: (direction "c2s" / "s2c", the JSON text, wall time); RAW: bytes sent as they
# are (a protocol case), which need not be JSON.
Logged = tuple[str, bytes, float]
RAW = "c2s-raw"
# The notification whose headers a protocol case's bytes are sent with (never sent itself).
RAW_METHOD = "notifications/mcpbench-fuzz"


@dataclass
class RequestOutcome:
    """What came of one request: its answer, or why none came."""

    answer: jsonrpc.Response | ErrorResponse | None = None
    status: int | None = None  # the HTTP status that carried the answer or the failure
    failure: str | None = None  # the core's failure class (http.Failure) when it failed
    detail: str | None = None  # why no answer came
    timed_out: bool = False
    lost: bool = False  # the session's carrier went away (process exit, reset, stream end)
    latency: float | None = None
    garbled: list[str] = field(default_factory=list)  # what the server sent that was not MCP
    log: list[Logged] = field(default_factory=list)
    live: "Live | None" = None  # how a live-judged call's wait stands
    alive: bool = False  # timed out at the bound for a live call, still showing life
    parked: bool = False  # left to `settle` later, alive past a silence

    @property
    def result(self) -> Any:
        return self.answer.result if type(self.answer) is jsonrpc.Response else None


@dataclass
class Live:
    """A call judged by its signs of life: `silence` seconds without one (no progress notification for its
    token, then a ping unanswered as long) is a hang; one still showing life is waited for `limit` seconds."""

    silence: float
    limit: float
    park: bool = False
    request_id: Any = None
    sent: float = 0.0
    sign: float = 0.0  # the last sign of life (perf_counter)
    ping_id: Any = None  # the ping in flight, sent after a silence
    ping_by: float = 0.0
    progress: int = 0
    pings: int = 0


class FuzzSession:
    """A session to `target` (every transport), its handshake done by `open`.

    Args:
        target: where to connect.
        access: the user's headers, tokens and proxies (HTTP).
        cwd: the working folder of a stdio server.
        version: the protocol version to speak: a handshake-era one is offered in `initialize`; 2026-07-28
            goes in every request's `_meta` envelope, and `server/discover` stands in for the handshake.
    """

    def __init__(self, target: Target, *, access: ClientAccess | None = None, cwd: str | None = None,
                 version: str = LATEST_HANDSHAKE) -> None:
        self.target = target
        self.access = access if access is not None else ClientAccess.none()
        self.cwd = cwd
        self.version = version
        self.items: queue.SimpleQueue = queue.SimpleQueue()
        self.transport: Transport | None = None
        self.conn: ClientConnection | None = None
        self.handshake: list[Logged] = []  # the messages of the handshake, for every finding's trace
        self.server_info: dict | None = None
        self.lost: str | None = None
        self.stderr: list[bytes] = []
        self._tokens = 0  # progress tokens given out

    def open(self, timeout: float, handshake: bool = True) -> None:
        """Start the transport and make the handshake (2026-07-28: `server/discover`; `handshake` False: neither yet).

        Raises:
            TargetError: nothing there, or what answered is not an MCP server (one line).
        """
        self.transport = open_transport(self.target, self.items.put, on_stderr=self._on_stderr, cwd=self.cwd,
                                        direct=True, proxies=self.access.proxies)
        self.conn = ClientConnection(self.transport.kind, self.version, url=self.transport.url,
                                     headers=self.access.headers_now() if self.transport.url else None)
        self._events(self.transport.connect(self.conn), None, self.handshake, RequestOutcome())
        if handshake:
            self.shake(timeout)

    def shake(self, timeout: float) -> RequestOutcome:
        """The handshake on the open transport (2026-07-28: `server/discover`), kept in `handshake`.

        Raises:
            TargetError: no answer, or what answered is not an MCP server (one line).
        """
        log = self.handshake
        if self.conn.stateless:
            outcome = self._exchange(self.conn.send(self.conn.prepare(DISCOVER, None), ts=time.perf_counter()), timeout, log)
        else:
            outcome = self._exchange(self.conn.send(initialize_request(self.conn), ts=time.perf_counter()), timeout, log)
        if type(outcome.answer) is not jsonrpc.Response:
            why = outcome.detail or (f"JSON-RPC {outcome.answer.code} {outcome.answer.message}" if outcome.answer else "no answer")
            if outcome.garbled:
                why = f"it sent what is not MCP ({outcome.garbled[0]})"
            raise TargetError(f"{self.target}: the MCP handshake failed: {why}" if not self.conn.stateless
                              else f"{self.target}: {DISCOVER} failed: {why}")
        self.server_info = outcome.result
        if not self.conn.stateless:
            out = self.conn.send(initialized_notification(), ts=time.perf_counter())
            log.append(("c2s", out.data.rstrip(b"\n"), time.time()))
            self.transport.send(out)
        return outcome

    @property
    def session_id(self) -> str | None:
        return None if self.conn is None else self.conn.session_id

    def call(self, method: str, params: dict | None, timeout: float, live: "Live | None" = None) -> RequestOutcome:
        """One request and its answer, waiting at most `timeout` seconds; `live`: judged by its signs of life
        instead (`settle`), a `progressToken` sent with it so that the server can show them."""
        if self.lost:
            return RequestOutcome(lost=True, detail=self.lost, failure="session-lost")
        if live is not None:
            self._tokens += 1
            params = dict(params or {})
            params["_meta"] = {**(params.get("_meta") or {}), "progressToken": f"mcpbench-fuzz-{self._tokens}"}
        return self._exchange(self.conn.send(self.conn.prepare(method, params), ts=time.perf_counter()), timeout, [], live)

    def send_raw(self, data: bytes, wait: float, headers: dict[str, str] | None = None) -> RequestOutcome:
        """Send `data` as the transport carries a message (a stdio line; a POST with the session's headers,
        or `headers` instead), and read what comes back until the POST's status (HTTP), at most `wait` seconds.
        On stdio nothing is waited for: what the server writes back comes before the answer to the next
        request on the same pipe, and is read (and logged) with it."""
        if self.lost:
            return RequestOutcome(lost=True, detail=self.lost, failure="session-lost")
        out = self.conn.send(notification(RAW_METHOD))  # this session's headers and URL; the bytes are replaced
        out.data = data + b"\n" if self.transport.kind == STDIO else data
        if headers is not None and out.headers is not None:
            out.headers = headers
        outcome = RequestOutcome(log=[(RAW, data, time.time())])
        self.transport.send(out)
        deadline = time.perf_counter() + (wait if self.transport.url else 0.0)
        while not outcome.lost and outcome.status is None and (remaining := deadline - time.perf_counter()) > 0:
            item = self.transport.next_item(self.items, remaining)
            if item is None:
                break
            if type(item) is Lost and item.fatal:
                outcome.lost, outcome.detail = True, item.reason
                self.lost = item.reason
                break
            if type(item) is Opened and item.out is out:
                outcome.status = item.status
            self._events(self.transport.receive(item), None, outcome.log, outcome)
        return outcome

    def _exchange(self, out, timeout: float, log: list[Logged], live: "Live | None" = None) -> RequestOutcome:
        outcome = RequestOutcome(log=log)
        log.append(("c2s", out.data.rstrip(b"\n"), time.time()))
        sent = time.perf_counter()
        self.transport.send(out)
        if live is not None:
            live.request_id, live.sent, live.sign = out.request_id, sent, sent
            outcome.live = live
            return self.settle(outcome, park=live.park)
        deadline = sent + timeout
        wanted = out.request_id
        while outcome.answer is None and outcome.failure is None and not outcome.lost:
            remaining = deadline - time.perf_counter()
            item = self.transport.next_item(self.items, remaining) if remaining > 0 else None
            if item is None:
                outcome.timed_out = True
                outcome.detail = f"no answer within {timeout:g} s"
                self.conn.fail(outcome.detail, gave_up=wanted)
                break
            if self._carrier_lost(item, outcome):
                break
            self._events(self.transport.receive(item), wanted, log, outcome)
        return self._done(outcome, sent)

    def settle(self, outcome: RequestOutcome, park: bool = False) -> RequestOutcome:
        """Wait for a live-judged call's answer (`call(..., live=...)`): silence past `live.silence` is answered
        with a ping; a ping unanswered as long is a hang; a call still showing life (progress for its token, pings
        answered) is waited for until `live.limit` after it was sent. `park`: return as soon as the call has
        shown life past a silence (`outcome.parked`), for the caller to `settle` it later while it goes on."""
        live, log = outcome.live, outcome.log
        outcome.parked = False
        while outcome.answer is None and outcome.failure is None and not outcome.lost:
            if park and live.pings:
                outcome.parked = True
                return outcome
            now = time.perf_counter()
            if live.ping_id is None and now >= live.sign + live.silence:
                ping = self.conn.send(self.conn.prepare("ping", None), ts=now)
                log.append(("c2s", ping.data.rstrip(b"\n"), time.time()))
                self.transport.send(ping)
                live.ping_id, live.ping_by = ping.request_id, now + live.silence
            deadline = min(live.sent + live.limit, live.ping_by if live.ping_id is not None else live.sign + live.silence)
            item = self.transport.next_item(self.items, deadline - now) if deadline > now else None
            if item is None and live.ping_id is not None and time.perf_counter() >= live.ping_by:
                outcome.timed_out = True
                outcome.detail = (f"no answer and no sign of life: no progress notification for {live.silence:g} s, "
                                  f"then a ping unanswered for {live.silence:g} s")
                self.conn.fail(outcome.detail, gave_up=live.ping_id)
                self.conn.fail(outcome.detail, gave_up=live.request_id)
                break
            if item is None and time.perf_counter() >= live.sent + live.limit:
                outcome.timed_out = outcome.alive = True
                outcome.detail = (f"no answer within {live.limit:g} s, the bound for a live call (it showed life: "
                                  f"{live.progress} progress notifications, {live.pings} pings answered)")
                self.conn.fail(outcome.detail, gave_up=live.request_id)
                break
            if item is None or self._carrier_lost(item, outcome):
                continue
            self._events(self.transport.receive(item), live.request_id, log, outcome, live)
        return self._done(outcome, live.sent)

    def _carrier_lost(self, item, outcome: RequestOutcome) -> bool:
        if type(item) is Lost and item.fatal:
            outcome.lost, outcome.detail = True, item.reason
            self.lost = item.reason
            return True
        return False

    def _done(self, outcome: RequestOutcome, sent: float) -> RequestOutcome:
        if outcome.answer is not None:
            outcome.latency = time.perf_counter() - sent
        if outcome.lost and getattr(self.transport, "exit_detail", None):  # a stdio process's exit status says more
            outcome.detail = self.lost = self.transport.exit_detail
        return outcome

    def _events(self, events: list, wanted: Any, log: list[Logged], outcome: RequestOutcome, live: "Live | None" = None) -> None:
        for event in events:
            kind = type(event)
            if live is not None and (kind is Pushed and event.request_id == live.request_id and event.message.method == PROGRESS
                                     or kind is Answered and event.request.id == live.ping_id):
                live.sign = time.perf_counter()  # a sign of life: progress for the call, or the ping answered
                if kind is Pushed:
                    live.progress += 1
                else:
                    live.pings += 1
                    live.ping_id = None
            if kind is Answered:
                log.append(("s2c", jsonrpc.encode(event.answer), time.time()))
                if event.request.id == wanted:
                    outcome.answer, outcome.status = event.answer, event.status
            elif kind is Failed:
                if event.request is not None and event.request.id == wanted:
                    outcome.failure, outcome.detail, outcome.status = event.failure, event.detail, event.status
            elif kind is SessionLost:
                outcome.lost, outcome.detail = True, event.detail
                self.lost = event.detail
            elif kind is Garbled:
                outcome.garbled.append(event.detail)
            elif kind is ServerRequest:
                log.append(("s2c", jsonrpc.encode(event.request), time.time()))
                if event.reply is not None:
                    log.append(("c2s", event.reply.data.rstrip(b"\n"), time.time()))
                    self.transport.send(event.reply)
            elif hasattr(event, "message"):
                log.append(("s2c", jsonrpc.encode(event.message), time.time()))

    def resident(self) -> int | None:
        """A stdio server's resident memory in bytes (Linux `/proc`; None elsewhere, or for HTTP)."""
        resident = getattr(self.transport, "resident", None)
        return resident() if resident is not None else None

    def _on_stderr(self, line: bytes) -> None:
        if len(self.stderr) < 200:
            self.stderr.append(line)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if self.conn is not None:
            self.conn.close()


__all__ = ["RAW", "FuzzSession", "Live", "Logged", "RequestOutcome"]
