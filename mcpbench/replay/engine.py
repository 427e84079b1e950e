"""The replay engine: drive a live target with a recording's client messages, in recorded order.

For each recorded session (in order) the engine opens a fresh transport and
walks the session's steps. Before each step it waits for the answers the
recording shows had arrived before that step (so requests recorded in flight
together go out together), then sends the step with a fresh request id.

The engine is a shell over the client core: one `ClientConnection` per
session allocates the ids, builds every header and envelope, pairs answers
with their `LiveCall` (the waiter it keeps in its one table of requests in
flight) and answers server requests through its policy. One thread owns the
connection and does all the deciding; the transport's threads only queue raw
bytes, which this thread feeds to the connection.

- Ids: every request gets a new live id; answers map back to the recorded call.
- Server→client requests (sampling, roots, elicitation) are answered from the
  recording (`asks.RecordedAsks`, the connection's policy). A 2026-07-28
  `input_required` result that the recording did not have (a replay in
  another era) is answered the same way:
  the request is re-sent with `inputResponses` built from the recording.
  A recorded retry carrying a `requestState` gets the live server's state.
- Era (`protocol_version`): a handshake-era recording replayed as 2026-07-28
  loses `initialize`, `notifications/initialized` and `ping`, and every
  request gets the `_meta` envelope (the connection's); a 2026-07-28 recording replayed in the
  handshake era gets an `initialize` first and loses `server/discover` and
  the envelope.
- Pacing: "fast" sends as soon as allowed; "original" keeps the recorded gaps
  between client messages; "xN" divides them by N; `max_gap` caps one gap.
- Credentials: recorded `Authorization` values are hashed in traces, so a replay
  sends what it is given now (`ClientAccess`: the user's headers, a bearer token,
  OAuth); with OAuth a token is renewed when due, and a call answered 401 gets one
  new token and goes again. Every request goes through the proxy that applies.

State: `Replayer.run()` returns a `ReplayRun` holding, per session, each
recorded call with its live answer; comparing is `report.build()`'s job.
"""

import gc
import math
import queue
import time
from dataclasses import dataclass, field, replace
from typing import Any

from mcpbench.auth.options import ClientAccess
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.client import (
    Answered,
    ClientConnection,
    EndpointReady,
    Event,
    Failed,
    Garbled,
    Outgoing,
    Pushed,
    ServerRequest,
    SessionLost,
    Unmatched,
)
from mcpbench.protocol.errors import McpbenchError, ReplayError, TargetError
from mcpbench.protocol.http import AUTH_FAILURES, AUTHORIZATION, Failure
from mcpbench.protocol.reconnect import NONE
from mcpbench.protocol.recovery import REPORTING, plan_recovery
from mcpbench.protocol.jsonrpc import ErrorResponse, Notification, Request, Response
from mcpbench.protocol.session import S2C
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.protocol.versions import (
    INPUT_REQUESTS,
    INPUT_RESPONSES,
    LATEST_HANDSHAKE,
    REQUEST_STATE,
    eras_differ,
    has_get_stream,
    has_handshake,
    meta_version,
    rules,
    same_era,
    translate,
)
from mcpbench.replay.asks import RecordedAsks
from mcpbench.replay.plan import RecordedCall, SessionPlan, Step, TracePlan, is_input_required
from mcpbench.replay.transports import AuthRefused, Item, Lost, ReplayTransport, open_transport
from mcpbench.target import Target
from mcpbench.trace.format import Kind, now, text_or_b64
from mcpbench.trace.writer import TraceWriter

# How long one request may wait for its answer by default: the recorded latency times
# TIMEOUT_FACTOR plus TIMEOUT_MARGIN, and never less than DEFAULT_TIMEOUT, so that a server that
# answers as slowly as it did when recorded (a 60 s tool) is not reported failed, and one that
# stopped answering is not waited for much longer. `--timeout` sets one bound for every call instead.
DEFAULT_TIMEOUT = 30.0
TIMEOUT_FACTOR = 2.0
TIMEOUT_MARGIN = 10.0

# 2026-07-28 allows a request several input rounds; a server that keeps asking
# is cut off here rather than looping.
MAX_INPUT_ROUNDS = 8

# `_ahead`: a step built after the wait, not before it.
_LIVE = object()
_BUILT_LIVE = frozenset({"initialize", "notifications/cancelled"})

# At the end of a session that listens on a GET stream, how long to wait for
# server messages the recording had outside any call and the replay has not
# seen yet: that stream races the last answer, and loopback delivery takes
# milliseconds; a server that no longer sends them costs this once a session.
UNSOLICITED_GRACE = 1.0

# Why a replay a stop signal ended did not finish (the report's `aborted`).
INTERRUPTED = "interrupted (Ctrl-C or SIGTERM)"

# Which `Host` a request recorded with a deliberately foreign one (a DNS-rebinding check) is sent with:
# the recorded one (the check is replayed as it was made) or the target's.
FOREIGN_HOST_RECORDED, FOREIGN_HOST_TARGET = "recorded", "target"
FOREIGN_HOSTS = (FOREIGN_HOST_RECORDED, FOREIGN_HOST_TARGET)

# The waiter of the `initialize` an era switch adds (no recorded call waits for it).
SYNTHETIC_INITIALIZE = "initialize"  # compared by identity: it is its own waiter

# Targets whose sessions live on their carrier (a process, a stream): a session starts with its handshake.
SESSION_TRANSPORTS = frozenset({STDIO, LEGACY_SSE})

# How server messages came, as the replay's trace tells it (stdio and legacy streams need no word).
TOLD_VIA = frozenset({"sse", "json", "get"})


@dataclass(frozen=True, slots=True)
class Pace:
    """How long to keep between client messages: recorded gap / `factor`, at most `max_gap`."""

    factor: float | None = None  # None: as fast as allowed
    max_gap: float | None = None

    @classmethod
    def parse(cls, text: str, max_gap: float | None = None) -> "Pace":
        text = (text or "fast").strip().lower()
        if text == "fast":
            return cls(None, max_gap)
        if text == "original":
            return cls(1.0, max_gap)
        if text.startswith("x"):
            try:
                factor = float(text[1:])
            except ValueError:
                factor = 0.0
            if 0 < factor < math.inf:
                return cls(factor, max_gap)
        raise ReplayError(f"--pace {text!r}: expected fast, original or xN with N > 0 (e.g. x2, x0.5)")

    def gap(self, recorded: float) -> float:
        if self.factor is None:
            return 0.0
        gap = max(0.0, recorded) / self.factor
        return min(gap, self.max_gap) if self.max_gap is not None else gap


@dataclass(slots=True)
class LiveCall:
    """A recorded call and what the live target did with it."""

    call: RecordedCall
    live_ids: list[Any] = field(default_factory=list)
    sent: float | None = None
    answer: Response | ErrorResponse | None = None
    answered: float | None = None
    notifications: list[dict] = field(default_factory=list)
    failure: str | None = None
    timed_out: bool = False
    skipped: str | None = None  # why the call was not sent (era)
    rounds: int = 0  # input_required rounds answered from the recording
    renewed: bool = False  # a 401 got it a new token once already
    status: int | None = None  # the HTTP status its answer or failure came with

    @property
    def done(self) -> bool:
        return self.answer is not None or self.failure is not None or self.timed_out or self.skipped is not None

    @property
    def latency(self) -> float | None:
        if self.sent is None or self.answered is None:
            return None
        return self.answered - self.sent


@dataclass(slots=True)
class SessionRun:
    plan: SessionPlan
    calls: list[LiveCall]
    version: str | None
    live_session: str | None = None
    notifications: list[dict] = field(default_factory=list)
    unrecorded_asks: list[str] = field(default_factory=list)
    aborted: str | None = None
    notes: list[str] = field(default_factory=list)
    started: float = 0.0
    finished: float = 0.0
    # A stdio server's resident memory (bytes) after the first answer (its SDK loaded) and after the last step:
    # what a fuzz `memory` finding's replay is set against.
    resident: list[int] = field(default_factory=list)

    @property
    def era_switched(self) -> bool:
        return eras_differ(self.plan.version, self.version)


@dataclass(slots=True)
class ReplayRun:
    trace: TracePlan
    target: str
    sessions: list[SessionRun]
    aborted: str | None = None
    elapsed: float = 0.0
    interrupted: bool = False  # a stop signal (Ctrl-C, SIGTERM) ended it
    notes: list[str] = field(default_factory=list)
    bridged: list[str] = field(default_factory=list)  # sessions given a handshake the recording lacked
    asked: str | None = None  # the protocol version the replay was asked to speak (`--protocol-version`)


class _SessionRunner:
    """Replays one session over one transport, through one `ClientConnection`."""

    def __init__(self, plan: SessionPlan, replayer: "Replayer") -> None:
        self.plan = plan
        self.r = replayer
        self.version = replayer.protocol_version or plan.version or LATEST_HANDSHAKE
        if rules(self.version) is None:
            self.version = LATEST_HANDSHAKE
        self.translating = not same_era(plan.version, self.version)  # recorded in the other era
        self.run = SessionRun(plan, [LiveCall(call) for call in plan.calls], self.version)
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.states: dict[Any, Any] = {}  # recorded requestState -> live
        self.asks = RecordedAsks(plan.asks, self.run.unrecorded_asks)
        self.conn: ClientConnection | None = None
        self.transport: ReplayTransport | None = None
        self.listening = False  # a GET stream was asked for
        self.heard = False  # the target has sent a JSON-RPC message
        self.initialized = False  # the era switch's own initialize has its answer
        self.bridged = False  # the session got a handshake made for the target (`_bridging`)
        self.stopping = False  # a stop signal came: nothing more is counted
        self.label = plan.id

    # ---- the main loop -----------------------------------------------------------------------

    def execute(self) -> SessionRun:
        run = self.run
        run.started = time.perf_counter()
        try:
            self.transport = self.r.open(self.queue.put, self._stderr)
            self.conn = ClientConnection(
                self.transport.kind, self.version, url=self.transport.url, policy=self.asks,
                capabilities=self.plan.client_capabilities or {}, client_info=self.plan.client_info,
                headers=self.r.headers() if self.transport.url else None,
            )
            early = self.transport.connect(self.conn)
        except TargetError as exc:
            if self.transport is not None:
                self.transport.close()
            if isinstance(exc, AuthRefused):  # the target is there and wants credentials: every call fails so
                for live in run.calls:
                    live.failure = live.failure or f"not sent: {exc}"
                return run
            run.aborted = str(exc)
            for live in run.calls:
                live.failure = live.failure or "not sent: the target could not be reached"
            return run
        try:
            if (pid := getattr(self.transport, "pid", None)) is not None:
                self._event(Kind.PROCESS, None, event="start", argv=list(self.r.target.argv), pid=pid)
            for event in early:
                self._on(event)
            self._steps()
            self._sample_resident(last=True)
        except KeyboardInterrupt:
            self._interrupted()
            raise
        finally:
            self.transport.close()
            run.live_session = self.conn.session_id
            self._drain(0.0)
            self.conn.close()
            run.finished = time.perf_counter()
            if run.aborted:
                for live in run.calls:
                    if not live.done and live.call.answer is not None:
                        live.failure = "not answered: " + run.aborted
        return run

    def _interrupted(self) -> None:
        """A stop signal broke the session off: calls in flight fail, and are written so.

        What the target sends from here on (answers to our closing, say) is written, not counted.
        """
        run = self.run
        run.aborted = run.aborted or INTERRUPTED
        self.stopping = True
        for live in run.calls:
            if live.sent is not None and not live.done:
                live.failure = f"not answered: {INTERRUPTED}"
                self._event(Kind.ERROR, None, detail=f"{live.call.label}: {INTERRUPTED} before its answer",
                            id=live.live_ids[-1] if live.live_ids else None)

    def _steps(self) -> None:
        plan, run = self.plan, self.run
        if has_handshake(self.version) and (self.translating or self._bridging()):
            self._handshake()
        last_sent: float | None = None
        last_ts: float | None = None
        paced = self.r.pace.factor is not None
        for step in plan.steps:
            if run.aborted:
                return
            # Built before the wait, while the target works on what it was sent: when the answer
            # comes, only the write is left to do.
            message, out = self._ahead(step) if step.wait_for else (_LIVE, None)
            settled = (self.conn.session_id, self.conn.negotiated) if out is not None else None
            for index in step.wait_for:
                self._await(run.calls[index])
                if run.aborted:
                    return
            if message is _LIVE:
                message = self._prepare(step.message, step.call)
            if message is None:
                continue
            if paced:
                if last_sent is not None and last_ts is not None and (gap := self.r.pace.gap(step.ts - last_ts)) > 0:
                    self._wait_until(last_sent + gap)
                last_ts = step.ts
                last_sent = time.perf_counter()
            if out is not None and settled != (self.conn.session_id, self.conn.negotiated):
                out = None  # the answers waited for changed the session (its id, its version): build it again
            self._send(message, run.calls[step.call.index] if step.call is not None else None, out)
            if message.method == "notifications/initialized":
                self._listen()
        for index in plan.final_wait:
            self._await(run.calls[index])
            if run.aborted:
                return
        if self.listening:
            deadline = time.perf_counter() + UNSOLICITED_GRACE
            while len(run.notifications) < len(plan.notifications) and not run.aborted and self._pump(deadline):
                pass

    def _listen(self) -> None:
        """Open the transport's GET stream when the recording shows the server speaking outside any call."""
        listen = getattr(self.transport, "listen", None)
        if self.plan.listens and has_get_stream(self.version) and listen is not None:
            listen()
            self.listening = True

    def _bridging(self) -> bool:
        """Whether this handshake-era session needs a handshake the recording does not have: Streamable
        HTTP traffic without one (sessionless: its `initialize` went on another connection, or none was
        sent) replayed to a target that keeps sessions (a stdio process, a legacy stream), which refuses
        calls before one."""
        plan = self.plan
        if plan.handshake or plan.transport != STREAMABLE_HTTP or not plan.steps or self.transport.kind not in SESSION_TRANSPORTS:
            return False
        self.r.bridged.append(self.plan.id)
        self.bridged = True
        return True

    def _handshake(self) -> None:
        """Open a handshake-era session for a recording that had none (era switch, sessionless traffic)."""
        self._write(self.conn.initialize(waiter=SYNTHETIC_INITIALIZE, ts=time.perf_counter()))
        timeout = self.r.timeout_for(None)
        deadline = time.perf_counter() + timeout
        while not self.initialized and not self.run.aborted:
            if not self._pump(deadline):
                self.run.aborted = f"initialize got no answer within {timeout:g} s"
                return
        self._write(self.conn.initialized(time.perf_counter()))
        self._listen()

    def _await(self, live: LiveCall) -> None:
        if live.done or live.sent is None:
            return
        # The loop an answer ends: one pass per arrival, names bound once, as the next request
        # waits on what runs here (read, decode, match) before it can be written.
        timeout = self.r.timeout_for(live.call)
        deadline = live.sent + timeout
        run, items, next_item, handle, clock = self.run, self.queue, self.transport.next_item, self._handle, time.perf_counter
        while not run.aborted:
            remaining = deadline - clock()
            item = next_item(items, remaining) if remaining > 0 else None
            if item is None:
                live.timed_out = True
                self.conn.give_up(live.live_ids[-1], f"no answer within {timeout:g} s")
                if not self.heard:  # not one message yet: every other call would wait as long
                    self.run.aborted = (f"{self.r.target_text} sent nothing within {timeout:g} s: "
                                        "not an MCP server, or not answering")
                return
            handle(item)
            if live.answer is not None or live.done:
                return

    def _pump(self, deadline: float) -> bool:
        """Handle one thing from the transport; False once `deadline` has passed."""
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return False
        item = self.transport.next_item(self.queue, remaining)
        if item is None:
            return False
        self._handle(item)
        return True

    def _drain(self, wait: float) -> None:
        while (item := self.transport.next_item(self.queue, wait)) is not None:
            self._handle(item)

    def _wait_until(self, when: float) -> None:
        while not self.run.aborted and (remaining := when - time.perf_counter()) > 0:
            item = self.transport.next_item(self.queue, remaining)
            if item is None:
                return
            self._handle(item)

    # ---- sending -------------------------------------------------------------------------------

    def _prepare(self, message: Request | Notification, call: RecordedCall | None) -> Request | Notification | None:
        """The recorded message as this replay sends it, or None when the era drops it.

        What an era switch changes in the recording itself is the core's (`versions.translate`;
        an input round dropped there is asked as server requests, answered from the recording,
        during its retry: the retry's final answer is the one to compare); the 2026-07-28 envelope
        is the connection's to add (`ClientConnection.request`).
        """
        live = self.run.calls[call.index] if call is not None else None
        method, params = message.method, message.params
        if self.bridged and method == "notifications/initialized":
            return None  # the bridge's handshake sent it
        if self.translating:
            params, dropped = translate(method, params, self.plan.version, self.version,
                                        input_round=call is not None and call.retried,
                                        input_retry=call is not None and call.retry_of is not None)
            if dropped is not None:
                if live is not None:
                    live.skipped = dropped
                return None
        elif method == "initialize" and params and self.r.protocol_version:
            params = {**params, "protocolVersion": self.version}  # the version asked for, offered
        if params and REQUEST_STATE in params and params[REQUEST_STATE] in self.states:
            params = {**params, REQUEST_STATE: self.states[params[REQUEST_STATE]]}
        if isinstance(message, Notification):
            if method == "notifications/cancelled" and params and "requestId" in params:
                params = {**params, "requestId": self._live_id_of(params["requestId"])}
            return message if params is message.params else Notification(method=method, params=params, _parsed=True)
        # A request's recorded id goes nowhere: the connection gives each request a live one.
        return message if params is message.params else Request(id=0, method=method, params=params, _parsed=True)

    def _ahead(self, step: Step) -> tuple[Request | Notification | None, Outgoing | None]:
        """`step` as it will go out, built before the answers it waits for: (message, its request
        built by the connection). `_LIVE` instead of the message when it depends on those answers
        (a `requestState` to map, a cancellation's live id), or may change the session (`initialize`)."""
        message = step.message
        params = message.params
        if (params and REQUEST_STATE in params) or message.method in _BUILT_LIVE or self.conn.negotiated is None:
            return _LIVE, None  # (no version settled yet: an `initialize` is still in flight)
        if self.translating:  # else `_prepare` has nothing left to change
            message = self._prepare(message, step.call)
        if type(message) is not Request:
            return message, None
        return message, self.conn.prepare(message.method, message.params, as_version=self._sent_in(message))

    def _sent_in(self, message: Request | Notification) -> str | None:
        """The version a recorded request was sent in, when it is not the session's: a probe (an `auto`
        client's `server/discover` before its handshake), sent again as it was, with its own headers."""
        if self.translating or type(message) is not Request:
            return None
        version = meta_version(message.params)
        return version if version is not None and not same_era(version, self.version) else None

    def _live_id_of(self, recorded_id: Any) -> Any:
        for live in self.run.calls:
            if live.call.request.id == recorded_id and live.live_ids:
                return live.live_ids[-1]
        return recorded_id

    def _send(self, message: Request | Notification, live: LiveCall | None, out: Outgoing | None = None) -> None:
        """Send `message` (`out`: the connection's request for it, built ahead)."""
        if self.r.tokens is not None:
            built = self.conn.headers_version
            problem = self._authorize()
            if problem is not None and live is not None and type(message) is Request:
                live.failure = live.failure or problem
                return
            if self.conn.headers_version != built:
                out = None  # a renewed token: built again with it
        ts = time.perf_counter()
        if type(message) is Notification:
            self._write(self.conn.send(message, ts=ts))
            return
        ahead = out is not None
        if not ahead:
            out = self.conn.request(message.method, message.params, waiter=live, ts=ts, as_version=self._sent_in(message))
        if live is not None and live.call.foreign_host is not None and out.headers is not None:
            out = self._foreign_host(live.call, out)
        if live is not None:
            # In flight before it is written: a stop signal that lands once the server may have the
            # request (another thread may send it, and this one wait for the GIL for milliseconds)
            # finds it counted as sent and reports it interrupted, not unsent.
            live.live_ids.append(out.request_id)
            if live.sent is None:
                live.sent = ts
        self._write(out)
        if ahead:
            # Built ahead: written first, and the connection told after. Nothing can be answered
            # in between: what arrives is fed to the connection on this thread, after this returns.
            self.conn.sent(out, waiter=live, ts=ts)

    def _foreign_host(self, call: RecordedCall, out: Outgoing) -> Outgoing:
        """A request recorded with a deliberately foreign `Host` (a DNS-rebinding check): sent with that
        `Host`, as the client sent it, unless `foreign_host` is `target`; the session's notes say which."""
        if self.r.foreign_host == FOREIGN_HOST_TARGET:
            self.run.notes.append(f"#{call.index} {call.label}: recorded with the foreign Host {call.foreign_host!r} "
                                  "(refused then); sent with the target's, as --foreign-host target asks")
            return out
        self.run.notes.append(f"#{call.index} {call.label}: sent with its recorded Host {call.foreign_host!r}, foreign "
                              "to the recorded upstream (a DNS-rebinding check, refused then); --foreign-host target "
                              "sends the target's")
        return replace(out, headers={**out.headers, "host": call.foreign_host})

    def _authorize(self, used: str | None = None, failed: Failed | None = None) -> str | None:
        """The connection's token renewed when due (`used`: after the server refused it); why not, when
        no token can be had (the call then fails as `auth-token-failed`)."""
        try:
            self.conn.set_headers(self.r.headers(renew=failed is not None, used=used,
                                                 challenge=failed.challenge if failed is not None else None))
        except McpbenchError as exc:
            return f"{exc} ({Failure.AUTH_TOKEN_FAILED})"
        return None

    def _write(self, out: Outgoing) -> None:
        if self.r.writer is not None:
            self.r.writer.message(self.label, "c2s", out.data.rstrip(b"\n"), now())
        self.transport.send(out)

    # ---- receiving -----------------------------------------------------------------------------

    def _handle(self, item: Item) -> None:
        if type(item) is Lost:
            self._event(Kind.ERROR, None, detail=item.reason)
            if item.fatal:
                self.run.aborted = self.run.aborted or item.reason
                return
        for event in self.transport.receive(item):
            self._on(event)

    def _on(self, event: Event) -> None:
        kind = type(event)
        if kind is Answered or kind is ServerRequest or kind is Pushed or kind is Unmatched:
            self.heard = True
            if self.r.writer is not None:
                extra = {"via": event.via} if event.via in TOLD_VIA else None
                self.r.writer.message(self.label, "s2c", jsonrpc.encode(event.message), now(), extra)
            if self.stopping:
                return
            if kind is Answered:
                self._answer(event)
            elif kind is ServerRequest:
                self._write(event.reply)
            elif kind is Pushed:
                owner = event.waiter if type(event.waiter) is LiveCall else None
                entry = {"method": event.message.method, "params": event.message.params}
                (owner.notifications if owner is not None else self.run.notifications).append(entry)
            else:
                self._unmatched(event)
        elif kind is Failed:
            self._failed(event)
        elif kind is SessionLost:
            self._lost(event)
        elif kind is Garbled:
            self._event(Kind.ERROR, None, detail=event.detail)
            self.run.notes.append(event.detail)
        elif kind is EndpointReady:
            pass  # the transport waited for it before the session began

    def _lost(self, lost: SessionLost) -> None:
        """The session is gone: a replay reports it (`plan_recovery`), the calls in flight failing with
        their class; one whose process or stream went with it ends here, the rest go on."""
        if plan_recovery(REPORTING, None, lost=lost.cause).action == NONE:
            if not self.stopping:
                self._event(Kind.ERROR, None, detail=lost.detail)
                self.run.aborted = self.run.aborted or lost.detail
        else:
            self._event(Kind.ERROR, None, detail=lost.detail)
            self.run.notes.append(f"the server lost the session: {lost.detail}")

    def _failed(self, failed: Failed) -> None:
        reason = f"{failed.detail} ({failed.failure})"
        self._event(Kind.ERROR, None, detail=reason, status=failed.status)
        if self.run.aborted or self.stopping:
            return  # what is left unanswered says why once, at the end
        live = failed.waiter
        if failed.failure == Failure.AUTH_REQUIRED and self.r.tokens is not None and type(live) is LiveCall \
                and not live.renewed and failed.request is not None:
            live.renewed = True  # once: a new token, and the call again (the server may have dropped the old one)
            problem = self._authorize(self.conn.extra.get(AUTHORIZATION), failed)
            if problem is None:
                self._send(Request(id=0, method=failed.request.method, params=failed.request.params, _parsed=True), live)
                return
            reason = problem
        if failed.status is not None and not self.heard and self._answered_then(live) and failed.failure not in AUTH_FAILURES:
            # The target's very first answer is no MCP where the recording had one: say so once,
            # not "failed" for every call.
            self.run.aborted = f"{self.r.target_text} is not an MCP server: {reason}"
            return
        if type(live) is LiveCall:
            if not live.done:
                live.failure, live.status = reason, failed.status
                live.answered = time.perf_counter()
        elif live is SYNTHETIC_INITIALIZE:
            self.run.aborted = f"initialize failed: {reason}"
        else:
            self.run.notes.append(reason)

    def _answered_then(self, live: Any) -> bool:
        """Whether the recording has a JSON-RPC answer where `live` failed: a probe, or a call that
        failed when recorded too, says nothing of the target (a difference is one changed call)."""
        if type(live) is not LiveCall:
            return live is not SYNTHETIC_INITIALIZE
        return live.call.answer is not None and self._sent_in(live.call.request) is None

    def _unmatched(self, event: Unmatched) -> None:
        if event.late:
            late = next((live for live in self.run.calls if event.answer.id in live.live_ids), None)
            label = late.call.label if late is not None else f"id {event.answer.id!r}"
            timeout = self.r.timeout_for(late.call if late is not None else None)
            self.run.notes.append(f"{label}: an answer after the {timeout:g} s timeout, not counted")
        else:
            self.run.notes.append(f"an answer to id {event.answer.id!r}, which no request in flight had")

    def _sample_resident(self, last: bool = False) -> None:
        resident = getattr(self.transport, "resident", None)
        if resident is not None and len(self.run.resident) < (2 if last else 1) and (rss := resident()) is not None:
            self.run.resident.append(rss)

    def _answer(self, event: Answered) -> None:
        answer, live = event.answer, event.waiter
        self._sample_resident()
        if live is SYNTHETIC_INITIALIZE:
            self.initialized = True
            if isinstance(answer, ErrorResponse):
                self.run.aborted = f"initialize failed: {answer.message}"
            return
        if type(live) is not LiveCall:
            return  # a request of ours no recorded call waits for
        recorded = live.call.answer
        if is_input_required(answer):
            live_state = answer.result.get(REQUEST_STATE)
            if is_input_required(recorded):
                rec_state = recorded.result.get(REQUEST_STATE)
                if rec_state is not None and live_state is not None:
                    self.states[rec_state] = live_state
            elif live.rounds < MAX_INPUT_ROUNDS and self._retry_with_input(live, answer):
                return
        live.answer, live.answered, live.status = answer, event.received, event.status

    def _retry_with_input(self, live: LiveCall, answer: Response) -> bool:
        """Answer a live `input_required` round from the recording and re-send the request."""
        wanted = answer.result.get(INPUT_REQUESTS) or {}
        responses = {}
        for key, asked in wanted.items():
            if not isinstance(asked, dict):
                return False
            found = self.asks.take(asked.get("method", ""), asked.get("params"))
            if found is None or "result" not in found:
                self.run.unrecorded_asks.append(str(asked.get("method")))
                return False
            responses[key] = found["result"]
        request = live.call.request
        params = dict(request.params or {})
        params[INPUT_RESPONSES] = responses
        if answer.result.get(REQUEST_STATE) is not None:
            params[REQUEST_STATE] = answer.result[REQUEST_STATE]
        message = self._prepare(Request(id=0, method=request.method, params=params, _parsed=True), live.call)
        if message is None:
            return False
        live.rounds += 1
        self._send(message, live)
        return True

    def _stderr(self, line: bytes) -> None:
        self._event(Kind.STDERR, S2C, text=text_or_b64(line))

    def _event(self, kind: str, direction: Any, **fields: Any) -> None:
        if self.r.writer is not None:
            self.r.writer.write({"kind": kind, "session": self.label,
                                 "dir": direction.value if direction else None, **fields})


class Replayer:
    """Replays the sessions of a trace against one target, one session at a time.

    Args:
        target: where to send.
        protocol_version: replay in this version (and era) instead of the recorded one.
        pace: how to space client messages.
        timeout: how long one request may wait for its answer (seconds); None: each call as long as
            the recording says (`timeout_for`).
        writer: where the replay's own trace goes, if anywhere.
        cwd, env: for a stdio target's process.
        access: the headers, tokens and proxies of an HTTP target (default: none, and the
            environment's proxies).
        foreign_host: a request recorded with a `Host` deliberately foreign to its upstream (a
            DNS-rebinding check, `plan.mark_foreign_hosts`) goes with that `Host` (`recorded`) or
            with the target's (`target`).
    """

    def __init__(
        self,
        target: Target,
        *,
        protocol_version: str | None = None,
        pace: Pace | None = None,
        timeout: float | None = None,
        writer: TraceWriter | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        access: ClientAccess | None = None,
        foreign_host: str = FOREIGN_HOST_RECORDED,
    ) -> None:
        if foreign_host not in FOREIGN_HOSTS:
            raise ReplayError(f"foreign_host: {foreign_host!r} is not one of {', '.join(FOREIGN_HOSTS)}")
        self.foreign_host = foreign_host
        if protocol_version is not None and rules(protocol_version) is None:
            raise ReplayError(f"unknown protocol version {protocol_version!r}")
        self.access = access if access is not None else ClientAccess.none()
        self.tokens = self.access.tokens()
        self.target = target
        self.target_text = str(target)
        self.protocol_version = protocol_version
        self.pace = pace or Pace()
        self.timeout = timeout
        self.writer = writer
        self.cwd, self.env = cwd, env
        self.bridged: list[str] = []  # sessions given a handshake made for the target

    def timeout_for(self, call: RecordedCall | None) -> float:
        """How long `call` may wait for its answer: `timeout` when given, else its recorded latency
        with a margin (`TIMEOUT_FACTOR`, `TIMEOUT_MARGIN`), at least `DEFAULT_TIMEOUT`."""
        if self.timeout is not None:
            return self.timeout
        latency = call.latency if call is not None else None
        return DEFAULT_TIMEOUT if latency is None else max(DEFAULT_TIMEOUT, latency * TIMEOUT_FACTOR + TIMEOUT_MARGIN)

    def open(self, sink, on_stderr) -> ReplayTransport:
        """The transport for the target, not yet connected (the session's connection is built for its kind)."""
        return open_transport(self.target, sink, on_stderr=on_stderr if self.writer else None, cwd=self.cwd, env=self.env,
                              direct=True, proxies=self.access.proxies)

    def headers(self, *, renew: bool = False, used: str | None = None, challenge=None) -> dict[str, str]:
        """The headers every request carries: the user's, and a token that is not due (a new one with `renew`).

        Raises:
            CredentialError, DiscoveryError, TargetError: no token can be had.
        """
        if self.tokens is None or not renew:
            return self.access.headers_now()
        return {**self.access.headers, **self.tokens.renew(used, challenge)}

    def run(self, trace: TracePlan) -> ReplayRun:
        """Replay every session of `trace`; stops at the first session the target broke off."""
        # What is loaded by now (the plan, the modules) outlives the run: frozen, it is left out of
        # the collector's full passes, each of which walked it for 5-15 ms (a 2,000-call plan),
        # a pause that landed in some call's latency.
        gc.freeze()
        try:
            return self._run(trace)
        finally:
            gc.unfreeze()

    def _run(self, trace: TracePlan) -> ReplayRun:
        started = time.perf_counter()
        self.bridged = []
        out = ReplayRun(trace, self.target_text, [], bridged=self.bridged, asked=self.protocol_version)
        for plan in trace.sessions:
            runner = _SessionRunner(plan, self)
            try:
                session = runner.execute()
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: keep what ran, the in-flight calls as failed
                session = runner.run
                session.aborted = session.aborted or INTERRUPTED
                out.sessions.append(session)
                out.aborted, out.interrupted = session.aborted, True
                break
            out.sessions.append(session)
            if session.aborted:
                out.aborted = session.aborted
                break
        out.elapsed = time.perf_counter() - started
        if self.tokens is not None and self.tokens.counts:
            asked = ", ".join(f"{count} {name}" for name, count in self.tokens.counts.items())
            out.notes.append(f"OAuth requests: {asked}")
        return out


__all__ = ["LiveCall", "Pace", "ReplayRun", "Replayer", "SessionRun"]
