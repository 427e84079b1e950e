"""The MCP session lifecycle as a state machine that watches both directions.

One `Session` sees every message of one session, client→server and
server→client, and returns what it learned: answered requests (`Exchange`),
broken rules (`Violation`) and lifecycle steps (`StateChange`). It plays no
role: the recorder feeds it what passes by, the replayer and the load users
feed it what they send and receive.

Two rules keep it honest, as in h11's `_state.py`: every transition lives in
the `TRANSITIONS` table below, and nothing outside `Session._advance` changes
`Session.state`.

A session ends in one of two states: CLOSED, when its client ended it (or an
observer saw it end), and LOST, when it went without the client's word. Each
cause of a loss is a trigger of its own (`LOSSES`: the server no longer knows
the session, the stdio server's stdout closed, the legacy stream ended, the
connection broke, the legacy endpoint was refused), so the table says where a
session can be lost; what a loss means for the calls in flight and what a
client does next is `protocol/recovery.py`'s.

Lifecycle (2024-11-05 … 2025-11-25, `basic/lifecycle`): the client sends
`initialize`, the server answers, the client sends `notifications/initialized`,
then normal operation. 2026-07-28 has no handshake: every request carries its
version and capabilities in `params._meta`, so a session is operating from its
first request.
"""

import enum
from dataclasses import dataclass

from mcpbench.protocol.jsonrpc import Batch, ErrorResponse, Message, Notification, Request, Response
from mcpbench.protocol.rules import applies
from mcpbench.protocol.versions import (
    CANCELLED,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    Era,
    allows_server_requests,
    era_of,
    meta_version,
    rules,
)


class Direction(enum.Enum):
    """Which way a message travels."""

    C2S = "c2s"
    S2C = "s2c"

    # Members are singletons: hash by identity, in C. Enum's own `__hash__` is a Python-level
    # call, paid for every pending-request key on the recorders' and loaders' hot paths.
    __hash__ = object.__hash__


C2S, S2C = Direction.C2S, Direction.S2C


class SessionState(enum.Enum):
    NEW = "new"  # nothing decisive seen yet
    INITIALIZING = "initializing"  # initialize sent, no answer yet
    INITIALIZED = "initialized"  # initialize answered, notifications/initialized not yet sent
    OPERATING = "operating"
    LOST = "lost"  # gone without the client's word (`LOSSES` says how)
    CLOSED = "closed"


class Trigger(enum.Enum):
    """What moves a session: the lifecycle-relevant things a message can be, and what can end it."""

    INITIALIZE = "initialize request"
    INITIALIZE_RESULT = "initialize result"
    INITIALIZE_ERROR = "initialize error"
    INITIALIZED = "initialized notification"
    ENVELOPE_REQUEST = "request with a _meta envelope"
    JOIN = "joined mid-session"  # a recorder that began after the handshake (`Session.joined`)
    RESUME = "a cut stream resumed"  # a request of ours awaited again (`Session.resuming`)
    CLOSE = "close"  # by the client, or seen ending (stream closed, DELETE, process exit)
    # The causes of a lost session (`LOSSES`):
    SESSION_NOT_FOUND = "session not found"  # HTTP 404 for the session id, or a 400 that names the session
    STDOUT_CLOSED = "the stdio server's stdout closed"
    STREAM_ENDED = "the legacy SSE stream ended"  # the session lived on it
    CONNECTION_BROKE = "the connection broke"  # a write failed, a connection was refused
    ENDPOINT_REFUSED = "the legacy endpoint was refused"  # on another origin: the session cannot start


NEW, INITIALIZING, INITIALIZED, OPERATING, LOST, CLOSED = SessionState

LOSSES = (Trigger.SESSION_NOT_FOUND, Trigger.STDOUT_CLOSED, Trigger.STREAM_ENDED, Trigger.CONNECTION_BROKE,
          Trigger.ENDPOINT_REFUSED)


def _live(state: SessionState, **rows: SessionState) -> dict[Trigger, SessionState]:
    """The row of a state the session has not ended in: its own `rows` (by trigger name), then what
    every such state has: a cut stream resumes (the state stays), a loss of any cause, the close."""
    return {**{Trigger[name]: new for name, new in rows.items()}, Trigger.RESUME: state,
            **dict.fromkeys(LOSSES, LOST), Trigger.CLOSE: CLOSED}


# (era, state, trigger) -> new state. A trigger absent for a state leaves it unchanged (a second
# loss keeps the first cause; an ended session does not resume).
TRANSITIONS: dict[Era, dict[SessionState, dict[Trigger, SessionState]]] = {
    Era.HANDSHAKE: {
        NEW: _live(NEW, INITIALIZE=INITIALIZING, JOIN=OPERATING),
        INITIALIZING: _live(INITIALIZING, INITIALIZE_RESULT=INITIALIZED, INITIALIZE_ERROR=NEW),
        INITIALIZED: _live(INITIALIZED, INITIALIZED=OPERATING),
        OPERATING: _live(OPERATING),
        LOST: {Trigger.CLOSE: CLOSED},
        CLOSED: {},
    },
    Era.STATELESS: {
        NEW: _live(NEW, ENVELOPE_REQUEST=OPERATING, JOIN=OPERATING),
        OPERATING: _live(OPERATING),
        LOST: {Trigger.CLOSE: CLOSED},
        CLOSED: {},
    },
}

# Requests allowed before the handshake completes (lifecycle: "The client SHOULD
# NOT send requests other than pings before the server has responded to the
# initialize request"; the server likewise before `initialized`).
_PRE_INIT_C2S = {"initialize", "ping", "server/discover"}
_PRE_INIT_S2C = {"ping"}
# Requests whose answer changes the session (`Session.settle`).
_SETTLING = frozenset({"initialize", "server/discover"})


@dataclass(slots=True)  # one per answer on the recorders' hot path: not frozen (see jsonrpc.Message)
class Exchange:
    """A request and the answer that paired with it."""

    request: Request
    answer: Response | ErrorResponse
    direction: Direction  # the request's direction
    started: float
    finished: float
    waiter: object = None  # what the request's sender left with it (`Pending.waiter`)

    @property
    def latency(self) -> float:
        return self.finished - self.started


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken rule. `code` is stable (documented in docs/trace-format.md); `raw` holds the
    offending bytes when there are some to keep (an observer's framing violations, `observer.py`)."""

    code: str
    detail: str
    direction: Direction | None = None
    raw: bytes | None = None


@dataclass(frozen=True, slots=True)
class StateChange:
    old: SessionState
    new: SessionState
    era: Era


@dataclass(frozen=True, slots=True)
class Ending:
    """How a session ended: `cause` is the trigger that took it to LOST or CLOSED, `detail` what happened."""

    cause: Trigger
    detail: str


@dataclass(slots=True)
class Pending:
    """A request in flight. `waiter` is whatever its sender wants back with the answer
    (the client core's shells keep their futures here: one table of requests in flight)."""

    request: Request
    started: float
    waiter: object = None
    # Its sender cancelled it (`notifications/cancelled`): the receiver should send no answer now, so
    # a session that ends without one lost nothing (an answer that still comes pairs as usual).
    cancelled: bool = False


SessionEvent = Exchange | Violation | StateChange


class Session:
    """Lifecycle, request pairing and rule checks of one MCP session.

    Args:
        version: the protocol version when the transport already knows it
            (for example from an `MCP-Protocol-Version` header); otherwise it is
            learned from `initialize` or from a `_meta` envelope.
        transport: the transport the session runs on ("stdio", "sse",
            "streamable-http"); a violation is reported only where its rule
            holds (`rules.RULES`). None: any.
    """

    def __init__(self, version: str | None = None, transport: str | None = None) -> None:
        self.state = NEW
        self.version = version
        self.transport = transport
        self.era: Era | None = era_of(version)
        self.requested_version: str | None = None
        self.client_capabilities: dict | None = None
        self.server_capabilities: dict | None = None
        self.server_info: dict | None = None
        self.pending: dict[tuple[Direction, object], Pending] = {}
        self.handshake_started: float | None = None
        self.handshake_finished: float | None = None
        self.ending: Ending | None = None  # set once, as the session becomes LOST or CLOSED

    @classmethod
    def joined(cls, version: str | None = None, transport: str | None = None) -> "Session":
        """A session first seen after its handshake: it starts operating.

        For a recorder that began mid-session, or dropped an idle session's
        state: its next request must not read as one sent before `initialize`.
        A session with a session id is handshake-era unless `version` says otherwise.
        """
        session = cls(version, transport)
        session.era = session.era or Era.HANDSHAKE
        session._advance(Trigger.JOIN, [])
        return session

    def observe(self, direction: Direction, message: Message, ts: float = 0.0) -> list[SessionEvent]:
        """Take one message that travelled in `direction` at time `ts`.

        Returns:
            What the message completed or broke, in order; often empty.
        """
        out: list[SessionEvent] = []
        if self.state is CLOSED:
            out.append(Violation("message-after-close", "a message after the session closed", direction))
        if isinstance(message, Batch):
            known = rules(self.version)
            if known is not None and not known.batches:
                out.append(Violation("batch-not-allowed", f"a JSON-RPC batch in protocol version {self.version}", direction))
            for item in message.items:
                out.extend(self.observe(direction, item, ts))
            return self._holding(out)
        if isinstance(message, Request):
            self._request(direction, message, ts, out)
        elif isinstance(message, Notification):
            if direction is C2S and message.method == "notifications/initialized":
                self._advance(Trigger.INITIALIZED, out)
                if self.state is OPERATING and self.handshake_finished is None:
                    self.handshake_finished = ts
            elif message.method == CANCELLED and type(message.params) is dict:
                # the request's own sender cancels it: its key is in the cancellation's direction
                request_id = message.params.get("requestId")
                if type(request_id) in (str, int) and (pending := self.pending.get((direction, request_id))) is not None:
                    pending.cancelled = True
        else:
            self._answer(direction, message, ts, out)
        return self._holding(out) if out else out

    def _holding(self, out: list[SessionEvent]) -> list[SessionEvent]:
        """`out` without the violations of rules that do not hold here: one filter for every check."""
        if len(out) == 1 and type(out[0]) is not Violation:  # a plain answer: nothing to filter
            return out
        return [item for item in out if type(item) is not Violation or applies(item.code, self.transport, self.version)]

    def close(self, detail: str = "closed") -> list[SessionEvent]:
        """The session ended (stream closed, DELETE, process exit): CLOSED, from any state.

        A lost session keeps its `ending`: the loss, not the closing, says why it is gone.
        """
        return self._end(Trigger.CLOSE, detail)

    def lose(self, cause: Trigger, detail: str) -> list[SessionEvent]:
        """The session went without the client's word, for `cause` (one of `LOSSES`): LOST.

        Returns:
            Its state change; empty when it had ended already (the first cause stays).
        """
        return self._end(cause, detail)

    def _end(self, trigger: Trigger, detail: str) -> list[SessionEvent]:
        out: list[SessionEvent] = []
        if self.era is None:
            self.era = Era.HANDSHAKE
        if self._advance(trigger, out) and self.ending is None:
            self.ending = Ending(trigger, detail)
        return out

    def resuming(self, request: Request, started: float, waiter: object = None) -> bool:
        """A request of ours whose stream was cut is awaited again (its stream resumed), in flight
        from `started` as before, if the session still stands (False: it was lost or closed)."""
        if not self._advance(Trigger.RESUME, []):
            return False
        self.pending[(C2S, request.id)] = Pending(request, started, waiter)
        return True

    @property
    def handshake_time(self) -> float | None:
        if self.handshake_started is None or self.handshake_finished is None:
            return None
        return self.handshake_finished - self.handshake_started

    def _request(self, direction: Direction, request: Request, ts: float, out: list) -> None:
        method = request.method
        key = (direction, request.id)
        if key in self.pending:
            out.append(Violation("duplicate-id", f"id {request.id!r} is already in flight ({method})", direction))
        self.pending[key] = Pending(request, ts)
        if method.startswith("notifications/"):
            # A malformed notification, not a request: one violation says it all.
            out.append(Violation("notification-with-id", f"{method} carries id {request.id!r}", direction))
            return
        if direction is C2S:
            if method == "initialize":
                if self.era is Era.HANDSHAKE and self.state is not NEW:
                    out.append(Violation("initialize-repeated", f"initialize in state {self.state.value}", direction))
                    return
                self._start_handshake(request, ts, out)
                return
            # Only a new session, or a 2026-07-28 one, asks for the envelope: look at it only then.
            envelope_version = meta_version(request.params) if self.state is NEW or self.era is Era.STATELESS else None
            if envelope_version is not None and self.state is NEW and era_of(envelope_version) is Era.STATELESS:
                self.era, self.version = Era.STATELESS, envelope_version
                self.client_capabilities = request.params["_meta"].get(META_CLIENT_CAPABILITIES)
                self._advance(Trigger.ENVELOPE_REQUEST, out)
                return
            if self.era is Era.STATELESS and envelope_version is None and method != "server/discover":
                out.append(Violation("missing-envelope", f"{method} without _meta {META_PROTOCOL_VERSION}", direction))
            elif self.era is not Era.STATELESS and self.state in (NEW, INITIALIZING) and method not in _PRE_INIT_C2S:
                # Without an envelope a request can only be handshake-era, however early.
                out.append(Violation("request-before-initialized", f"{method} before the handshake completed", direction))
        else:
            if not allows_server_requests(self.version):
                out.append(Violation("server-request-forbidden", f"server sent request {method} in {self.version}", direction))
            elif self.era is Era.HANDSHAKE and self.state is not OPERATING and method not in _PRE_INIT_S2C:
                out.append(Violation("request-before-initialized", f"server sent {method} before initialized", direction))

    def _start_handshake(self, request: Request, ts: float, out: list) -> None:
        params = request.params or {}
        if self.era is not Era.HANDSHAKE and self.ending is None:
            # An `auto` client probes server/discover, then falls back to initialize: the probe's
            # version is not the session's, which the handshake settles (a session that ended
            # stays ended: the table has no way back from LOST or CLOSED).
            self.era, self.state, self.version = Era.HANDSHAKE, NEW, None
        offered = params.get("protocolVersion")
        self.requested_version = offered if isinstance(offered, str) else None  # a version is a string, whatever a peer sends
        self.client_capabilities = params.get("capabilities")
        self.handshake_started = ts
        self._advance(Trigger.INITIALIZE, out)

    def _answer(self, direction: Direction, answer: Response | ErrorResponse, ts: float, out: list) -> None:
        if answer.id is None:
            return  # an error about a request whose id the peer could not read
        asked = S2C if direction is C2S else C2S  # the requests went the other way
        pending = self.pending.pop((asked, answer.id), None)
        if pending is None:
            out.append(Violation("unknown-answer", f"answer to id {answer.id!r}, which no request in flight has", direction))
            return
        out.append(Exchange(pending.request, answer, asked, pending.started, ts, pending.waiter))
        self.settle(pending.request, answer, direction, out)

    def asking(self, request: Request, ts: float, waiter: object = None) -> None:
        """A client's lean `observe` of its own request: in flight from `ts`, `waiter` kept with it.

        A request of an operating session changes nothing else, and a client has no violations to
        report: it skips the checks. Any other (the handshake's, the first with an envelope) is observed."""
        if self.state is OPERATING and request.method != "initialize":
            self.pending[(C2S, request.id)] = Pending(request, ts, waiter)
            return
        self.observe(C2S, request, ts)
        if waiter is not None and (pending := self.pending.get((C2S, request.id))) is not None:
            pending.waiter = waiter

    def answered(self, answer: Response | ErrorResponse) -> Pending | None:
        """A client's lean `observe` of an answer from the server: the request it answers (now no
        longer in flight), or None when none of ours is. The state moves on as `observe` moves it;
        nothing is checked, for a client has no violations to report."""
        pending = self.pending.pop((C2S, answer.id), None)
        if pending is not None and pending.request.method in _SETTLING:
            self.settle(pending.request, answer, S2C, [])
        return pending

    def settle(self, request: Request, answer: Response | ErrorResponse, direction: Direction, out: list) -> None:
        """What an answer to `request` changes: `initialize` settles the version and the handshake,
        `server/discover` the server's capabilities."""
        if request.method == "initialize" and direction is S2C and self.state is INITIALIZING:
            if isinstance(answer, Response) and isinstance(answer.result, dict):
                settled = answer.result.get("protocolVersion")
                self.version = settled if isinstance(settled, str) and settled else self.requested_version
                self.server_capabilities = answer.result.get("capabilities")
                self.server_info = answer.result.get("serverInfo")
                self._advance(Trigger.INITIALIZE_RESULT, out)
            else:
                self._advance(Trigger.INITIALIZE_ERROR, out)
        elif request.method == "server/discover" and isinstance(answer, Response) and isinstance(answer.result, dict):
            self.server_capabilities = answer.result.get("capabilities")
            meta = answer.result.get("_meta") or {}
            self.server_info = meta.get(META_SERVER_INFO, self.server_info)

    def _advance(self, trigger: Trigger, out: list) -> bool:
        """Move as the table says; False when it has no row for `trigger` in this state."""
        era = self.era or Era.HANDSHAKE
        new = TRANSITIONS[era].get(self.state, {}).get(trigger)
        if new is None:
            if trigger is Trigger.INITIALIZED:
                out.append(Violation("unexpected-initialized", f"notifications/initialized in state {self.state.value}", C2S))
            return False
        if new is not self.state:
            out.append(StateChange(self.state, new, era))
            self.state = new
        return True
