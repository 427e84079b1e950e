"""The load users' MCP client: the client core, a transport shell and a `request_event`, nothing else.

`McpClient` asks the client core (`protocol.client.ClientConnection`) for every
message, moves it through a `Transport`, waits on the waiter it left in the
core's table, and reports each step exactly once through
`request_event.fire(...)` (Locust's `events.request`, or any object with a
`fire(**kw)` method)::

    request_type  the transport ("stdio", "sse", "streamable-http"), or a label set by the user
    name          the step: connect, initialize, notifications/initialized, tools/list,
                  tools/call <tool>, resources/read, prompts/get, ping, DELETE, …
    response_time ms from the intended start (open model) or the send, to the final answer
    exception     McpFailure(kind) when the step failed, else None
    context       {"failure": kind, "ttfe": ms to the first SSE event, "uncorrected": ms, "late": bool,
                   "session": the client session's tag, "instance": the server instance a lab balancer named,
                   "challenge": a 401's or 403's {resource_metadata, scope, error};
                   a whole operation (`operation`) adds "rounds", "rounds_ms", "polls", "wait", "asked"}

Server→client requests are answered by the connection's policy (`protocol.asks`), the
same way on every transport; so is the input a 2026-07-28 server asks for in a result, through
`operation` (`protocol.operation`: the rounds, the task, one step from the first request to the
end). A 2026-07-28 session may hold a `subscriptions/listen` stream (`listen_for`, `protocol.listen`).
Credentials: the user's headers go on every request; with OAuth (`auth.oauth.TokenSource`) a
token is fetched before it is needed and renewed when due, a call answered 401 gets one new token
and goes again, and each discovery or token request is a step of its own (`request_type`
"oauth"). It never imports Locust; gevent only through the transport.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import Any

import gevent
import gevent.event

from mcpbench.auth.oauth import TokenSource
from mcpbench.transport.base import Transport
from mcpbench.transport.green import CallTimeout, McpFailure
from mcpbench.protocol.asks import AskPolicy, Refuse
from mcpbench.protocol.client import (
    Answered, ClientConnection, Event, Failed, Outgoing, Pushed, ServerRequest, SessionLost, Unmatched,
    initialize_request, initialized_notification, notification,
)
from mcpbench.protocol.errors import McpbenchError
from mcpbench.protocol.http import AUTHORIZATION, Failure, classify_status
from mcpbench.protocol.jsonrpc import ErrorResponse, Message
from mcpbench.protocol.listen import ACK_TIMEOUT, Acknowledged, Change, Listen
from mcpbench.protocol.operation import MAX_ROUNDS, Operation, Send, Stop
from mcpbench.protocol.reconnect import (NONE, REINITIALIZE, REISSUE, REPORT, RESUME, RETRY, ReconnectPolicy, Recovery,
                                         Reissues)
from mcpbench.protocol.recovery import plan_recovery
from mcpbench.protocol.session import C2S, S2C
from mcpbench.protocol.transports import STREAMABLE_HTTP
from mcpbench.protocol.versions import CANCELLED, LATEST_HANDSHAKE, LISTEN, has_get_stream, has_handshake, step_name

# Sends that did not finish (the call's time ran out, a user was stopped mid-call), as `on_message`
# tells them: they may be in the trace, once at most (the soak's ledger reads them so).
UNFINISHED = "c2s-unfinished"

# Tags every session of this process apart in the samples ("<pid>-<n>"), so a run's steps can be
# grouped by session (the lab's sticky-session analysis).
_SESSION_TAGS = itertools.count(1)

# When the latest step of this process began (perf_counter): what a listen stream's change is timed from.
_latest_step: list[float | None] = [None]

# A user whose session broke under reconnect policy `none` reports each later call as failed after
# this pause, so that it does not spin.
DEAD_PAUSE = 0.2

# How many times a reply to a server's request is sent before the call it belongs to fails (`_send_reply`).
REPLY_SENDS = 2

# How much of an error answer's message a failure's detail keeps (the failures are grouped by detail).
DETAIL_CHARS = 160

# The core's events that carry a message from the server.
_CARRYING = (Answered, ServerRequest, Pushed, Unmatched)
# Statuses an intermediary answers with (Bad Gateway, Gateway Timeout): its body is not the server's.
GATEWAY_STATUSES = frozenset({502, 504})

# Seconds a `tasks/cancel` is waited for when a step gives up on its task: a courtesy, not a measurement.
CANCEL_TIMEOUT = 2.0

STEP_CONNECT = "connect"
STEP_INITIALIZE = "initialize"
STEP_DELETE = "DELETE"
# The `request_type` of the discovery and token requests a user makes (one row per kind in Locust's table).
OAUTH = "oauth"


def timed_out(bound: float, sent: float) -> str:
    """What a call whose time ran out says: its bound and how long it waited (whole seconds, so that
    the failures still group): a bound that ends a call early shows as such."""
    return f"no answer within {round(bound, 2):g} s (waited {time.perf_counter() - sent:.0f} s)"


def _recovery_words(sample: dict, outcome: Failed) -> str:
    """What a recovery that did not save the call did, for its failure's message: the first failure
    when it differs, each way tried, and why the call was not sent again."""
    said = [] if (sample["noticed"], sample["detail"]) == (outcome.failure, outcome.detail) else [
        f"first {sample['noticed']}: {sample['detail']}"]
    if sample.get("resume"):
        said.append(f"resume given up: {sample['resume']}")
    if sample["action"] == REINITIALIZE:
        tries = sample["attempts"]
        said.append(f"{tries} new session{'s' * (tries != 1)} tried" + (", none started" if not sample["ok"] else ""))
    if sample["action"] == REISSUE:
        tries = sample["resent"]
        said.append(f"reissued {tries} time{'s' * (tries != 1)} with a new id" if tries else "not reissued")
    elif sample["resent"] and sample["step"] != STEP_INITIALIZE:  # a handshake's new sessions are its sends
        said.append("sent again")
    elif sample["uncertain"]:
        said.append("not sent again: it may have run and the tool is not idempotent")
    if sample["budget_denied"]:
        said.append("the retry budget spent")
    return "; ".join(said) or "nothing tried"



def _request(conn: ClientConnection, method: str, params: dict | None, **sending: Any) -> Outgoing:
    """A request built and sent by `conn` (bound now: a recovered session's new connection is not this one)."""
    return conn.send(conn.prepare(method, params), **sending)

class McpClient:
    """One user's MCP sessions over one transport kind.

    Args:
        make_transport: builds a fresh, unopened `Transport` (called for every new connection).
        request_event: where steps are reported (`fire(**kw)`).
        request_type: the `request_type` of every report (usually the transport name).
        version: protocol version; 2026-07-28 means no handshake and a `_meta` envelope.
        timeout: seconds a step may take before it fails as answer-lost/timeout.
        discover: 2026-07-28: start each session with `server/discover`.
        policy: answers server→client requests (`protocol.asks`; refuses them by default).
        reconnect: what to do when a call's session or stream breaks (`protocol.reconnect`); None:
            nothing during the call (a long-lived user starts a new session at its next task).
        on_reconnect: receives one record per break (the `reconnect` samples).
        rng: the backoff's random draws (seeded in tests).
        headers: the user's headers, sent on every HTTP request.
        tokens: OAuth's token source (this user's, or shared by the process's users), or None.
        get_stream: Streamable HTTP, handshake era: open the session's `GET` stream once it has
            started (for what the server sends outside requests), and again when it ends while
            the session stands.
        on_message: sees every message this client sends (`"c2s"`; `"c2s-unfinished"` when its
            send did not finish) and receives (`"s2c"`, a replayed or late one too), with the
            `ClientConnection` it belongs to: a ledger of the client's own (`mcpbench bench soak`
            checks a trace against it).
        capabilities: client capabilities declared besides the policy's (the tasks extension's, say).
        max_rounds: input rounds an operation answers before it fails as input-rounds-exceeded.
        answer_think: (least, most) seconds a user thinks before each answer to input it is asked for.
        listen_for: 2026-07-28: (types, resource URIs) each session's `subscriptions/listen` stream asks for.
    """

    def __init__(
        self,
        make_transport,
        request_event: Any,
        *,
        request_type: str,
        version: str = LATEST_HANDSHAKE,
        timeout: float = 30.0,
        discover: bool = False,
        policy: AskPolicy | None = None,
        reconnect: ReconnectPolicy | None = None,
        on_reconnect: Callable[[dict], None] | None = None,
        rng: random.Random | None = None,
        headers: dict[str, str] | None = None,
        tokens: TokenSource | None = None,
        get_stream: bool = False,
        on_message: Callable[[str, Message, ClientConnection], None] | None = None,
        capabilities: dict | None = None,
        max_rounds: int = MAX_ROUNDS,
        answer_think: tuple[float, float] = (0.0, 0.0),
        listen_for: tuple[tuple[str, ...], tuple[str, ...]] | None = None,
    ) -> None:
        self._make_transport = make_transport
        self.request_event = request_event
        self.request_type = request_type
        self.version = version
        self.timeout = timeout
        self.discover = discover
        self.policy = policy
        self.transport: Transport | None = None
        self.conn: ClientConnection | None = None
        self.ready = False  # a session is set up and usable
        self.session_tag: str | None = None
        self._fresh = False  # the transport was just opened for a session that has not started
        self._unowned: Failed | None = None  # a notification's failure (no waiter)
        self._replies: dict[Any, Failed | None] = {}  # per greenlet sending a reply: its POST's failure
        self.recovery = Recovery(reconnect, rng) if reconnect is not None else None
        self.on_reconnect = on_reconnect
        self.dead: str | None = None  # reconnect policy `none`: the failure class that broke the session
        self.duplicates = 0  # answers that came twice
        self._recovering = False
        self._redoing = False  # a handshake is being recovered (`_redo_handshake`): its sends are not recovered again
        self._recovered_at = 0.0
        self.headers = dict(headers or {})
        self.tokens = tokens
        self._token: dict[str, str] | None = None  # the token headers the connection has
        self.get_stream = get_stream
        self.on_message = on_message
        self.capabilities = capabilities
        self.max_rounds = max_rounds
        self.answer_think = answer_think
        self.listen_for = listen_for
        self._listen: Listen | None = None
        self._listener: gevent.Greenlet | None = None
        self._acked = gevent.event.Event()

    @property
    def stateless(self) -> bool:
        return self.conn.stateless if self.conn is not None else not has_handshake(self.version)

    @property
    def session_id(self) -> str | None:
        return self.conn.session_id if self.conn is not None else None

    # --- reporting ----------------------------------------------------------------------------

    def _record(self, name: str, start: float, size: int, failure: McpFailure | None, context: dict | None = None,
                latency: float | None = None) -> None:
        """Fire the request event once for one step (ms from `start`, a perf_counter time, unless `latency` says)."""
        now = time.perf_counter()
        ctx = context if context is not None else {}
        if failure is not None:
            ctx["failure"] = failure.kind
        if self.session_tag is not None:
            ctx["session"] = self.session_tag
        if self.transport is not None and self.transport.instance is not None:
            ctx["instance"], self.transport.instance = self.transport.instance, None
        self.request_event.fire(
            request_type=self.request_type,
            name=name,
            response_time=(now - start) * 1000.0 if latency is None else latency,
            response_length=size,
            exception=failure,
            context=ctx,
            start_time=time.time() - (now - start),
        )

    # --- what the core says ---------------------------------------------------------------------

    def _heard(self, events: list[Event]) -> None:
        """Every message the server sent, to `on_message`: what the events carry, and a refusal's body;
        not a gateway's (a 502's or 504's body is the words of a proxy in between, such as the JSON-RPC
        error the recorder answers for an upstream that failed, which its trace holds as an `error`)."""
        if self.on_message is not None:
            for event in events:
                if getattr(event, "status", None) in GATEWAY_STATUSES:
                    continue
                if type(event) in _CARRYING:
                    self.on_message(S2C.value, event.message, self.conn)
                elif type(event) is Failed and event.refusal is not None:
                    self.on_message(S2C.value, event.refusal, self.conn)

    def _dispatch(self, events: list[Event]) -> None:
        """The core's events, from whichever greenlet read them: wake waiters, answer the server."""
        self._heard(events)
        for event in events:
            kind = type(event)
            if kind is Answered or kind is Failed:
                if event.waiter is not None:
                    event.waiter.set(event)
                elif kind is Failed and (replying := gevent.getcurrent()) in self._replies:
                    self._replies[replying] = event  # a reply's POST failed (`_send_reply` reads it)
                elif kind is Failed:
                    self._unowned = event
                if kind is Answered:
                    self._recovered_at = event.received  # the last successful answer: what ends a recovery
            elif kind is Unmatched:
                self.duplicates += event.duplicate
            elif kind is ServerRequest and event.reply is not None:
                # Answered from its own greenlet: on HTTP the reply is a POST while this stream stays open.
                gevent.spawn(self._send_reply, event)
            elif kind is SessionLost:
                self.ready = False
            elif kind is Pushed and self._listen is not None and event.request_id in (None, self._listen.request_id):
                self._heard_on_listen(event)

    def _send_reply(self, asked: ServerRequest) -> None:
        """Answer a server's request. The server waits for the reply, and the call that carried its
        request with it: a reply whose POST failed (refused, or a proxy's 502 when the upstream closed
        an idle connection as the reply came) goes once more, on a new connection, and one that
        still fails is that call's outcome, saying so (the call still waits out its time when its
        answer stream stays open: its reader is not interrupted)."""
        me = gevent.getcurrent()
        failed: Failed | None = None
        try:
            for _ in range(REPLY_SENDS):
                transport = self.transport
                if transport is None:
                    return
                self._replies[me] = None
                try:
                    self._send(transport, asked.reply)
                except McpFailure as exc:
                    self._replies[me] = Failed(None, None, exc.kind, exc.detail)
                if (failed := self._replies[me]) is None:
                    return
        finally:
            self._replies.pop(me, None)
        conn = self.conn
        if conn is not None and asked.carrier is not None:
            detail = f"the reply to the server's {asked.request.method} was not delivered: {failed.failure}: {failed.detail}"
            for lost in conn.fail(detail, gave_up=asked.carrier):
                if lost.waiter is not None:
                    lost.waiter.set(replace(lost, failure=failed.failure))  # classed as what failed: the reply's POST

    def _send(self, transport: Transport, out: Outgoing) -> int:
        """Every message leaves here. The ledger hears of it once the send is over, as `UNFINISHED`
        when it did not finish (the call's time ran out, the user was stopped mid-call): whether it
        left is not known then."""
        if self.on_message is None:
            return transport.send(out)
        conn, direction = self.conn, UNFINISHED
        try:
            size = transport.send(out)
            direction = C2S.value
            return size
        finally:
            self.on_message(direction, out.message, conn)

    # --- connection and session ---------------------------------------------------------------

    def _new_conn(self) -> ClientConnection:
        url = getattr(self.transport, "url", None)
        return ClientConnection(self.transport.kind, self.version, url=url, policy=self.policy, headers=self._sent_headers(),
                                capabilities=self.capabilities)

    # --- credentials ----------------------------------------------------------------------------

    def _sent_headers(self) -> dict[str, str]:
        return {**self.headers, **self._token} if self._token else self.headers

    def _authorize(self) -> McpFailure | None:
        """Give the connection a token that is not due (fetched or renewed now if needed); the failure
        when none can be had (the step then fails as auth-token-failed, unsent)."""
        if self.tokens is None:
            return None
        try:
            token = self.tokens.headers()
        except McpbenchError as exc:
            return McpFailure(Failure.AUTH_TOKEN_FAILED, str(exc))
        if token is not self._token:
            self._token = token
            if self.conn is not None:
                self.conn.set_headers(self._sent_headers())
        return None

    def _renew(self, failed: Failed | None = None) -> McpFailure | None:
        """After a 401 (`failed`, with its challenge, if a request's): a new token (unless another user of a
        shared source got one since); the failure if none."""
        try:
            self._token = self.tokens.renew((self._token or {}).get(AUTHORIZATION), failed.challenge if failed else None)
        except McpbenchError as exc:
            return McpFailure(Failure.AUTH_TOKEN_FAILED, str(exc))
        if self.conn is not None:
            self.conn.set_headers(self._sent_headers())
        return None

    def oauth_sample(self, name: str, seconds: float, error: McpbenchError | None) -> None:
        """A discovery or token request, as a step of its own (`TokenSource.on_request`)."""
        failure = McpFailure(Failure.AUTH_TOKEN_FAILED, str(error)) if error is not None else None
        self.request_event.fire(request_type=OAUTH, name=name, response_time=seconds * 1000.0, response_length=0,
                                exception=failure, context={"failure": failure.kind} if failure else {},
                                start_time=time.time() - seconds)

    def connect(self) -> bool:
        """Open a fresh transport. Reports `connect` for transports with a connect step (legacy SSE).

        Returns:
            whether the transport is open.
        """
        self.close_transport()
        self.transport = self._make_transport()
        self.conn = self._new_conn()
        self.transport.attach(self.conn, self._dispatch, self._heard)
        start = time.perf_counter()
        failure = self._authorize()  # legacy SSE: the stream's GET carries the token too
        try:
            if failure is None:
                with gevent.Timeout(self.timeout + 1.0, CallTimeout):
                    self.transport.open()
        except McpFailure as exc:
            failure = exc
        except CallTimeout:
            failure = McpFailure(Failure.ANSWER_LOST, "connect timed out")
        # Only legacy SSE has a protocol step here (GET → endpoint event). Others report failures
        # (a stdio command that cannot start), so that they are seen.
        if self.transport.kind == "sse" or failure is not None:
            self._record(STEP_CONNECT, start, 0, failure)
        if failure is not None:
            self.close_transport()
            return False
        self._fresh = True
        return True

    def start_session(self) -> bool:
        """Connect if needed and run the handshake (handshake era) or server/discover (2026-07-28, if asked).

        Returns:
            whether the session is usable.
        """
        self.ready = False
        self.session_tag = f"{os.getpid()}-{next(_SESSION_TAGS)}"
        if not self._open_conn():
            return False
        if self.conn.stateless:
            if self.discover and self.call("server/discover") is None:
                return False
            self.ready = True
            self.start_listening()
            return True
        # `self.conn`, not a copy: a handshake recovered under the reconnect policy has a new one.
        if self._exchange(STEP_INITIALIZE, lambda **kw: self.conn.send(initialize_request(self.conn), **kw), handshake=True) is None:
            return False
        if not self._notify("notifications/initialized", lambda **kw: self.conn.send(initialized_notification(), **kw)):
            return False
        self.ready = True
        if self.get_stream and has_get_stream(self.conn.negotiated):
            self.transport.listen()
        return True

    def _open_conn(self) -> bool:
        """A connection for a new session: a new transport where a session lives as long as its
        process or stream (stdio, legacy SSE) or the old one is gone, else a new core on the same."""
        transport = self.transport
        if transport is None or not transport.alive or (not self._fresh and not transport.has_session_header):
            if not self.connect():
                return False
        elif not self._fresh:
            self.conn = self._new_conn()
            self.transport.attach(self.conn, self._dispatch, self._heard)
        self._fresh = False
        return True

    def end_session(self) -> None:
        """End the session: DELETE on Streamable HTTP (handshake era), close the transport otherwise."""
        self.ready = False
        self.stop_listening()
        transport, conn = self.transport, self.conn
        if transport is not None and transport.has_session_header:
            self._authorize()  # a DELETE with a token that is not due (a failure shows in the DELETE's step)
            transport.stop_listening()
            headers = conn.headers("delete") if conn is not None else None
            if headers is not None:
                start = time.perf_counter()
                size, failure = self._delete(transport, headers)
                if failure is not None and failure.kind == Failure.AUTH_REQUIRED and self.tokens is not None:
                    # once, as every step: the token may have expired on its way (renewed ahead, yet late on a busy machine)
                    failure = self._renew()
                    if failure is None:
                        size, failure = self._delete(transport, conn.headers("delete"))
                self._record(STEP_DELETE, start, size, failure)
            if conn is not None:
                conn.close()
        else:
            self.close_transport()

    def _delete(self, transport: Transport, headers: dict[str, str]) -> tuple[int, McpFailure | None]:
        """One DELETE of the session: the bytes it took, or its failure."""
        try:
            with gevent.Timeout(self.timeout, CallTimeout):
                return transport.end_session(headers), None
        except McpFailure as exc:
            return 0, exc
        except CallTimeout:
            return 0, McpFailure(Failure.ANSWER_LOST, "no answer to DELETE")

    # --- a listen stream (2026-07-28) -------------------------------------------------------------

    def start_listening(self) -> None:
        """Hold a `subscriptions/listen` stream for this session in a greenlet of its own (`listen_for`).

        Its step, `subscriptions/listen`, is reported once, when the stream ends (the session's end, a
        drop): latency to its acknowledgement, `listen-dropped` when it was never acknowledged (within
        `ACK_TIMEOUT`), refused, or cut while the session stood. Each change it brings is a step of its
        own, `listen <method>`, whose latency is the delay from the latest step this process began
        before it (the cause, when the mix's calls are what change the server).
        """
        if self.listen_for is None or self.transport is None or self.conn is None or not self.conn.stateless:
            return
        self.stop_listening()
        self._acked = gevent.event.Event()  # before the greenlet runs: whoever waits for this stream's acknowledgement
        self._listener = gevent.spawn(self._hold_listen, self.conn, self.transport)

    def stop_listening(self) -> None:
        """End the listen stream (the session ends): HTTP closes its response, stdio sends `notifications/cancelled`."""
        listener, self._listener = self._listener, None
        listen = self._listen
        if listener is None or listener.dead or listen is None:
            return
        conn, transport = self.conn, self.transport
        if conn is not None and listen.ended is None:
            conn.fail("the client closed the listen stream", gave_up=listen.request_id)
            if transport is not None and not transport.has_session_header and transport.alive:
                try:  # stdio and legacy SSE: the stream is the session's; closing the request is a cancellation
                    self._send(transport, conn.send(notification(CANCELLED, listen.cancel_params())))
                except McpFailure:
                    pass
            listen.closed()
        listener.kill(block=False)

    def _hold_listen(self, conn: ClientConnection, transport: Transport) -> None:
        types, resources = self.listen_for
        listen = self._listen = Listen(types, resources)
        acked = self._acked
        waiter = gevent.event.AsyncResult()
        start = time.perf_counter()
        out = conn.send(conn.prepare(LISTEN, listen.params()), waiter=waiter, ts=start)
        listen.opened(out.request_id, start)
        sender = gevent.spawn(self._send_quietly, transport, out)  # HTTP: holds the response stream until it ends
        try:
            gevent.wait([acked, waiter], timeout=ACK_TIMEOUT, count=1)  # acknowledged, or the stream over already
            if listen.acknowledged is None and not waiter.ready():
                conn.fail("the listen stream was not acknowledged", gave_up=out.request_id)
                listen.unacknowledged(ACK_TIMEOUT)
            else:
                outcome = waiter.get()
                if listen.ended is None:
                    listen.answered(outcome.answer) if type(outcome) is Answered else listen.broke(outcome.detail)
        finally:
            sender.kill(block=False)
            ended = listen.ended or listen.closed()
            ack = listen.acknowledged
            failure = McpFailure(ended.failure, ended.detail) if ended.failure else None
            self._record(LISTEN, start, 0, failure, {"changes": listen.changes},
                         latency=ack.after * 1000.0 if ack is not None else None)

    def _send_quietly(self, transport: Transport, out: Outgoing) -> None:
        try:
            self._send(transport, out)
        except McpFailure as exc:
            self._dispatch(self.conn.fail(exc.detail, exc.kind, out=out) if self.conn is not None else [])

    def _heard_on_listen(self, pushed: Pushed) -> None:
        now = time.perf_counter()
        event = self._listen.take(pushed.message, now)
        if type(event) is Acknowledged:
            self._acked.set()
        elif type(event) is Change:
            since = _latest_step[0]
            delay = (now - since) * 1000.0 if since is not None and since <= now else 0.0
            self._record(f"listen {event.method}", now, 0, None, latency=delay)

    def close_transport(self) -> None:
        self.ready = False
        self.stop_listening()
        if self.transport is not None:
            transport, self.transport = self.transport, None
            transport.close()

    @contextmanager
    def session(self):
        """`with client.session(): …` — handshake on entry, close or DELETE on exit.

        Yields whether the handshake succeeded (calls inside still report, and fail, if it did not).
        """
        ok = self.start_session()
        try:
            yield ok
        finally:
            self.end_session()

    def ensure_session(self) -> bool:
        """Long-lived mode: (re)establish the session if it is gone.

        With a reconnect policy, a session that broke between calls is left to the next call,
        whose failure the policy handles (and records).
        """
        if self.ready and self.transport is not None and self.transport.alive and self.conn.usable:
            return True
        if self.recovery is not None and self.session_tag is not None and self.conn is not None and self.conn.negotiated:
            return True  # (a handshake that never completed is no session: its calls would go without one)
        return self.start_session()

    # --- calls --------------------------------------------------------------------------------

    def call(self, method: str, params: dict | None = None, *, name: str | None = None, intended_start: float | None = None) -> Any:
        """Send one request and wait for its answer; report it as one step.

        With a reconnect policy, a call whose session or stream broke is recovered as the policy
        says before it is reported (one `reconnect` sample per break).

        Returns:
            the result, or None when the step failed (the failure is reported, not raised).
        """
        name = name or step_name(method, params)
        if self.dead is not None:  # reconnect policy `none`: the session broke earlier, nothing is tried
            gevent.sleep(DEAD_PAUSE)
            self._record(name, time.perf_counter(), 0, McpFailure(self.dead, "the session broke earlier (reconnect: none)"))
            return None
        if self.conn is None:
            self._record(name, time.perf_counter(), 0, McpFailure(Failure.STREAM_CLOSED, "not connected"))
            return None
        return self._exchange(name, lambda **kw: self.conn.send(self.conn.prepare(method, params), **kw), intended_start,
                              method=method, params=params)

    def call_tool(self, tool: str, arguments: dict | None = None, **kw: Any) -> Any:
        return self.call("tools/call", {"name": tool, "arguments": arguments or {}}, **kw)

    def list_tools(self, **kw: Any) -> Any:
        return self.call("tools/list", **kw)

    def read_resource(self, uri: str, **kw: Any) -> Any:
        return self.call("resources/read", {"uri": uri}, **kw)

    def get_prompt(self, prompt: str, arguments: dict | None = None, **kw: Any) -> Any:
        params: dict = {"name": prompt}
        if arguments:
            params["arguments"] = arguments
        return self.call("prompts/get", params, **kw)

    def ping(self, **kw: Any) -> Any:
        return self.call("ping", **kw)

    def _exchange(self, name: str, build, intended_start: float | None = None, *, method: str | None = None,
                  params: dict | None = None, handshake: bool = False) -> Any:
        """Build a request with the core (`build(waiter=, ts=)`), send it, wait for its outcome, report it.

        With a reconnect policy a call (`method`) is recovered as `_recover` says, and a `handshake`
        whose answer was lost as `_redo_handshake` says, before the step is reported, once."""
        sent = _latest_step[0] = time.perf_counter()
        start = intended_start if intended_start is not None else sent
        outcome, size, first_event = self._attempt(name, build, sent, method, params, handshake=handshake)
        context = self._timing(sent, intended_start, first_event)
        failure, result = self._judge(outcome, context)
        self._record(name, start, size, failure, context)
        return result if failure is None else None

    def _attempt(self, name: str, build, sent: float, method: str | None, params: dict | None,
                 timeout: float | None = None, *, handshake: bool = False) -> tuple[Answered | Failed, int, float | None]:
        """One request sent and waited for, with one token renewal after a 401 and the reconnect policy's
        recovery after a break (a call's by `_recover`, a lost `handshake`'s by `_redo_handshake`): its
        outcome, the bytes exchanged, its first SSE event."""
        if self.transport is None or self.conn is None:  # closed by an earlier break: the policy may reconnect
            outcome: Answered | Failed = Failed(None, None, Failure.CONNECT, "not sent: not connected")
            size, first_event = 0, None
        else:
            outcome, size, first_event = self._send_and_wait(build, sent, timeout)
        if type(outcome) is Failed and outcome.failure == Failure.AUTH_REQUIRED and self.tokens is not None:
            refused = self._renew(outcome)  # once: the server may have dropped the token (a restart, a revocation)
            if refused is None:
                outcome, more, first_event = self._send_and_wait(build, time.perf_counter(), timeout)
                size += more
            else:
                outcome = Failed(outcome.request, None, refused.kind, refused.detail)
        if type(outcome) is Answered and self.recovery is not None:
            outcome = _dropped(outcome)  # a proxy's 502 with a JSON-RPC error is a drop like a bare 502
        if type(outcome) is Failed and self.recovery is not None:
            if method is not None and not self._recovering:
                outcome, more = self._recover(outcome, name, method, params)
                size += more
            elif handshake and not self._redoing:  # a recovery's own new session too: its handshake is one
                outcome, more = self._redo_handshake(outcome, name, build)
                size += more
        return outcome, size, first_event

    def _judge(self, outcome: Answered | Failed, context: dict) -> tuple[McpFailure | None, Any]:
        """(the failure, None) or (None, the result) of one request's outcome; a failure is also the session's."""
        if type(outcome) is Failed:
            if outcome.challenge is not None:
                context["challenge"] = outcome.challenge.to_json()
            failure = McpFailure(outcome.failure, outcome.detail)
            self._fail(failure)
            return failure, None
        answer = outcome.answer
        if outcome.status is not None and outcome.status >= 400 and (kind := classify_status(outcome.status, has_session=False)):
            return McpFailure(kind, _status_detail(outcome)), None  # the status decides
        if isinstance(answer, ErrorResponse):
            return McpFailure(Failure.JSONRPC_ERROR, f"code {answer.code}"), None
        return _tool_error(answer.result), answer.result

    # --- whole operations (input rounds, tasks) --------------------------------------------------

    def operation(self, method: str, params: dict | None = None, *, name: str | None = None,
                  intended_start: float | None = None, as_task: bool = False) -> Any:
        """One request followed to its end (`protocol.operation`), reported as one step: its input rounds
        answered by the policy (after the user's think time), the task it becomes polled to its result.

        The step's latency runs from the first request to the final result; its sample holds the
        requests it took (`rounds`), their latencies (`rounds_ms`), the task's polls and the client's
        wait (think time, backoff, poll intervals: `wait_ms`). The step timeout bounds the whole of it;
        a task still running then is cancelled.

        Returns:
            the final result, or None when the step failed (the failure is reported, not raised).
        """
        name = name or step_name(method, params)
        if self.dead is not None or self.conn is None:
            return self.call(method, params, name=name, intended_start=intended_start)
        op = Operation(method, params, self.version, answers=self.policy or Refuse(), max_rounds=self.max_rounds,
                       as_task=as_task)
        sent = _latest_step[0] = time.perf_counter()
        start = intended_start if intended_start is not None else sent
        deadline = sent + self.timeout
        size, waited, first_event, took = 0, 0.0, None, []
        broke: dict = {}  # what a broken request says (a 401's challenge)
        action = op.start()
        while type(action) is Send:
            pause = action.wait + (self._answer_think() if action.answers else 0.0)
            if time.perf_counter() + pause >= deadline:
                action = self._give_up(op, f"{timed_out(self.timeout, sent)}; {_progress(op)}")
                break
            if pause > 0:
                gevent.sleep(pause)
                waited += pause
            begun = time.perf_counter()
            outcome, more, first = self._attempt(name, partial(_request, self.conn, action.method, action.params), begun,
                                                 action.method, action.params, timeout=deadline - begun)
            size += more
            first_event = first_event if first_event is not None else first
            if action.kind in ("call", "retry"):
                took.append((time.perf_counter() - begun) * 1000.0)
            if type(outcome) is Failed:
                failure, _ = self._judge(outcome, broke)
                if op.task is None:
                    action = op.broke(failure.kind, failure.detail)
                else:  # a poll that broke or ran out of time: the task is given up on
                    action = self._give_up(op, f"{failure.detail}; {_progress(op)}", failure.kind)
                continue
            action = op.take(outcome.answer, time.perf_counter())
            if type(action) is Stop and action.failure == Failure.JSONRPC_ERROR and (outcome.status or 0) >= 400:
                action = replace(action, failure=classify_status(outcome.status, has_session=False))  # the status decides
        context = self._timing(sent, intended_start, first_event)
        context.update(broke)
        context.update(rounds=len(took), polls=op.polls, wait=waited * 1000.0)
        if len(took) > 1:
            context["rounds_ms"] = took
        if op.asked:
            context["asked"] = sorted(op.asked)
        if type(action) is Stop:
            failure = McpFailure(action.failure, action.detail)
            self._record(name, start, size, failure, context)
            return None
        failure = _tool_error(action.result)
        self._record(name, start, size, failure, context)
        return action.result if failure is None else None

    def _give_up(self, op: Operation, detail: str, failure: str = Failure.ANSWER_LOST) -> Stop:
        """The operation's time ran out (or a poll broke): a running task is cancelled (best effort, briefly)."""
        cancel = op.cancel()
        if cancel is not None and self.conn is not None:
            self._send_and_wait(partial(_request, self.conn, cancel.method, cancel.params), time.perf_counter(), CANCEL_TIMEOUT)
            detail += "; the task cancelled"
        return op.broke(failure, detail)

    def _answer_think(self) -> float:
        low, high = self.answer_think
        return low if low == high else random.uniform(low, high)

    def _send_and_wait(self, build, sent: float, timeout: float | None = None) -> tuple[Answered | Failed, int, float | None]:
        """One request through the current transport: its outcome, the bytes exchanged, its first SSE event
        (`timeout`: the bound on this one, when less than a step's)."""
        if (refused := self._authorize()) is not None:
            gevent.sleep(DEAD_PAUSE)  # a token endpoint that says no at once must not be asked in a loop
            return Failed(None, None, refused.kind, refused.detail), 0, None
        transport, conn = self.transport, self.conn
        waiter = gevent.event.AsyncResult()
        out = build(waiter=waiter, ts=sent)
        if self.recovery is not None:
            self.recovery.count(1, extra=self._recovering)
        size = 0
        # A Timeout of its own for each call: a libev timer that is stopped keeps only the time it had
        # left, so one Timeout started again call after call was a budget for all of a user's calls
        # together (a call failed after 1.5 s once its user's calls had taken 30 s in all).
        bound = self.timeout if timeout is None else max(0.0, timeout)
        timer = gevent.Timeout.start_new(bound, CallTimeout)
        try:
            size = self._send(transport, out)
            outcome = waiter.get()
        except CallTimeout:
            lost = conn.fail(timed_out(bound, sent), gave_up=out.request_id)
            outcome = lost[0] if lost else waiter.get(block=False)
        finally:
            timer.close()
        return outcome, size, transport.first_event

    def _count(self, n: int = 1) -> None:
        if self.recovery is not None:
            self.recovery.count(n, extra=self._recovering)

    # --- recovery -----------------------------------------------------------------------------

    def _recover(self, failed: Failed, name: str, method: str, params: dict | None) -> tuple[Answered | Failed, int]:
        """Do what `plan_recovery` says about `failed` under the reconnect policy; the call's final outcome and extra bytes."""
        recovery, conn, transport = self.recovery, self.conn, self.transport
        tool = params.get("name") if method == "tools/call" and isinstance(params, dict) else None
        resumable = transport is not None and transport.kind == STREAMABLE_HTTP and bool(failed.last_event_id)
        plan = plan_recovery(recovery.policy, failed.failure, lost=conn.lost_by, resumable=resumable, tool=tool,
                             status=failed.status, method=method, stateless=conn.stateless)
        action = plan.action
        if action == REPORT:
            return failed, 0
        broke = time.perf_counter()
        sample, seen = self._break_record(failed, name, action)
        if (action == REINITIALIZE and recovery.policy.mode == RESUME and failed.failure == Failure.STREAM_CLOSED and not resumable
                and transport is not None and transport.kind == STREAMABLE_HTTP):
            sample["resume"] = "no event id came before the stream closed"  # nothing to resume from: a new session
        outcome: Answered | Failed = failed
        size = 0
        self._recovering = True
        try:
            if action == NONE:
                self.dead = failed.failure
                self.ready = False
            if action == RESUME:
                resumed, size = self._resume(failed, sample)
                if type(resumed) is Answered:
                    outcome = resumed
                    sample.update(ok=True, recovered=1)
                else:
                    action = sample["action"] = REINITIALIZE  # no answer on the resumed stream (a restart): start over
            if action == REISSUE:
                outcome, size = self._reissue(failed, sample, method, params)
            if action == REINITIALIZE and self._reinitialize(sample, failed.retry_ms):
                sample["ok"] = True
            if action in (RETRY, REINITIALIZE) and (action == RETRY or sample["ok"]):
                if not plan.resend:
                    sample["uncertain"] = 1  # it may have run: never silently repeated
                elif recovery.allows(1, time.monotonic()):
                    sample["resent"] = 1
                    outcome, more, _ = self._send_and_wait(lambda **kw: self.conn.send(self.conn.prepare(method, params), **kw), time.perf_counter())
                    outcome = _dropped(outcome) if type(outcome) is Answered else outcome  # a second 502 is no recovery
                    size += more
                    sample["ok"] = sample["ok"] or type(outcome) is Answered
            if sample["ok"]:
                sample["recover_ms"] = round((self._recovered_at - broke) * 1000.0, 3)
        finally:
            self._recovering = False
        outcome = self._break_recorded(sample, seen, outcome, conn)
        if action != NONE and not sample["ok"] and not self._usable():
            # Nothing left to send on and no attempt left (or no budget): wait as a last backoff
            # would, so that the calls that follow cannot spin.
            gevent.sleep(recovery.delay(recovery.policy.attempts))
        return outcome, size

    def _redo_handshake(self, failed: Failed, name: str, build) -> tuple[Answered | Failed, int]:
        """A handshake whose answer was lost (its stream cut, its connection broken, a proxy's 5xx) is
        a break like a call's: under the policy `initialize` goes again on a fresh connection (it runs
        no tool, so it is always safe to send again), with backoff, within the attempts and the budget;
        the step is then reported once, with its final outcome. A refusal (a JSON-RPC error, 404, 401)
        or a time-out is the outcome, as for a call; so is any break under policy `none`."""
        recovery = self.recovery
        plan = plan_recovery(recovery.policy, failed.failure, lost=self.conn.lost_by if self.conn else None, status=failed.status)
        if plan.action in (REPORT, NONE):
            return failed, 0
        broke = time.perf_counter()
        # A 5xx on the way is retried as a call's is; any other break starts the session over.
        sample, seen = self._break_record(failed, name, RETRY if plan.action == RETRY else REINITIALIZE)
        outcome: Answered | Failed = failed
        size = 0
        recovering, self._recovering, self._redoing = self._recovering, True, True
        try:
            for attempt in range(recovery.policy.attempts):
                if not recovery.allows(1, time.monotonic()):
                    break
                self._wait(recovery.wait(attempt, outcome.retry_ms), sample)
                sample["attempts"] += 1
                if not self._open_conn():
                    continue  # connect reported why (a stdio server that would not start)
                sample["resent"] += 1  # each `initialize` sent again: every extra request is one
                outcome, more, _ = self._send_and_wait(build, time.perf_counter())
                size += more
                if type(outcome) is Answered:
                    sample.update(ok=True, recovered=1, recover_ms=round((self._recovered_at - broke) * 1000.0, 3))
                    break
                if plan_recovery(recovery.policy, outcome.failure, lost=self.conn.lost_by, status=outcome.status).action == REPORT:
                    break  # refused or timed out this time: that is the outcome
        finally:
            self._recovering, self._redoing = recovering, False
        # Inside a recovery (its new session's handshake) the recovery's own record counts these
        # requests: a record of its own too would count them twice in the sums.
        return self._break_recorded(sample, seen, outcome, None, report=not recovering), size

    def _break_record(self, failed: Failed, name: str, action: str) -> tuple[dict, tuple[int, int, int, int]]:
        """The `reconnect` record of one break, as it begins; and the counts it is measured from."""
        sample = {
            "t": time.time(), "type": self.request_type, "session": self.session_tag, "step": name,
            "noticed": failed.failure, "detail": failed.detail, "action": action, "ok": False, "attempts": 0,
            "recover_ms": None, "resent": 0, "recovered": 0, "lost": 0, "uncertain": 0,
            "retry_ms": failed.retry_ms, "waits_ms": [],  # the stream's `retry:`, and each wait before a reopen
        }
        conn, recovery = self.conn, self.recovery
        return sample, (self.duplicates, conn.replayed if conn is not None else 0, recovery.extra, recovery.denied)

    def _break_recorded(self, sample: dict, seen: tuple[int, int, int, int], outcome: Answered | Failed,
                        conn: ClientConnection | None, *, report: bool = True) -> Answered | Failed:
        """Finish and hand on the break's record; the outcome, a failure saying what the recovery did."""
        recovery = self.recovery
        sample["lost"] = int(type(outcome) is Failed)
        sample["duplicated"] = self.duplicates - seen[0]
        sample["replayed"] = (self.conn.replayed - seen[1]) if conn is not None and self.conn is conn else 0
        sample["extra_requests"] = recovery.extra - seen[2]
        sample["budget_denied"] = recovery.denied - seen[3]
        sample["new_session"] = self.session_tag
        if self.on_reconnect is not None and report:
            self.on_reconnect(sample)
        if type(outcome) is Failed and sample["action"] != NONE:
            outcome = replace(outcome, detail=f"{outcome.detail} ({_recovery_words(sample, outcome)})")
        return outcome

    def _usable(self) -> bool:
        return self.transport is not None and self.conn is not None and self.conn.usable

    def _reinitialize(self, sample: dict, retry_ms: int | None = None) -> bool:
        """A new session, with backoff between attempts (at least the cut stream's `retry:`), within the retry budget."""
        recovery = self.recovery
        for attempt in range(recovery.policy.attempts):
            if not recovery.allows(2, time.monotonic()):  # initialize + notifications/initialized
                return False
            self._wait(recovery.wait(attempt, retry_ms), sample)
            sample["attempts"] += 1
            if self.start_session():
                return True
        return False

    def _reissue(self, failed: Failed, sample: dict, method: str, params: dict | None) -> tuple[Answered | Failed, int]:
        """2026-07-28: the request again with a new id (an input round's retry with the state it
        carried, a task's poll as it was), on a new process or stream first when the old one went
        with the break; again, with backoff, while each reissue breaks too or finds no server yet, as
        `Reissues` says, within the budget. The break's record lists the ids (`ids`: the first, then
        each reissue's); `attempts` counts the reissues, `resent` every send."""
        recovery = self.recovery
        sample["ids"] = [failed.request.id if failed.request is not None else None]
        outcome: Answered | Failed = failed
        size = 0
        reissues = Reissues(recovery.policy.attempts)
        while reissues.step is not None:
            if not recovery.allows(1, time.monotonic()):
                break
            self._wait(recovery.wait(reissues.step, outcome.retry_ms), sample)
            sample["attempts"] = reissues.attempt
            if not self._usable() and not self.start_session():
                reissues.failed(Failure.CONNECT)  # stdio's process or legacy SSE's stream would not come back (yet)
                continue
            sample["resent"] += 1
            outcome, more, _ = self._send_and_wait(lambda **kw: self.conn.send(self.conn.prepare(method, params), **kw), time.perf_counter())
            size += more
            sample["ids"].append(outcome.request.id if outcome.request is not None else None)
            if type(outcome) is Answered:
                sample.update(ok=True, recovered=1)
                break
            again = plan_recovery(recovery.policy, outcome.failure, lost=self.conn.lost_by, status=outcome.status,
                                  method=method, stateless=True).action
            if again not in (REISSUE, RETRY):
                break  # refused or timed out this time: that is the outcome
            reissues.failed(outcome.failure)
        return outcome, size

    def _resume(self, failed: Failed, sample: dict) -> tuple[Answered | Failed, int]:
        """Reopen the cut stream with Last-Event-ID and wait there for the call's answer.

        A resumed stream may end before the answer (a server replays what it has, then closes):
        it is reopened from its last event, with backoff, until the answer comes, the call's
        timeout or the attempts run out, or the server no longer knows the session.
        """
        conn, transport, recovery = self.conn, self.transport, self.recovery
        deadline = time.perf_counter() + self.timeout
        size = 0
        for attempt in range(recovery.policy.attempts):
            wait = recovery.wait(attempt, failed.retry_ms)
            if not recovery.allows(1, time.monotonic()):
                sample["resume"] = "the retry budget spent"
                break
            if deadline - time.perf_counter() <= wait:
                sample["resume"] = "past the call's time"
                break  # the server's `retry:` is never cut short: past the call's time, the resume is given up
            self._wait(wait, sample)
            left = deadline - time.perf_counter()
            sample["attempts"] = attempt + 1
            waiter = gevent.event.AsyncResult()
            self._authorize()
            headers = conn.resume(failed, waiter=waiter)
            if headers is None:
                sample["resume"] = f"the session was lost ({conn.lost})"
                break  # nothing to resume
            self._count()
            last = retry = None
            try:
                with gevent.Timeout(left, CallTimeout):
                    got, last, retry = transport.resume(headers, waiter.ready)
                    size += got
            except CallTimeout:
                pass
            if waiter.ready():
                return waiter.get(block=False), size
            conn.fail("the resumed stream ended without the answer", gave_up=failed.request.id)
            sample["resume"] = "the resumed stream ended without the answer"
            if not conn.usable:
                sample["resume"] += f", the session lost ({conn.lost})"
                break  # the session is gone (a restart): nothing to resume
            failed = replace(failed, last_event_id=last or failed.last_event_id, retry_ms=retry or failed.retry_ms)
        return failed, size

    @staticmethod
    def _wait(seconds: float, sample: dict) -> None:
        """Wait before a reopen, and say so in the break's record."""
        sample["waits_ms"].append(round(seconds * 1000.0, 3))
        gevent.sleep(seconds)

    @staticmethod
    def _timing(sent: float, intended: float | None, first_event: float | None) -> dict:
        context: dict = {}
        if first_event is not None:
            context["ttfe"] = (first_event - sent) * 1000.0
        if intended is not None:
            context["uncorrected"] = (time.perf_counter() - sent) * 1000.0
            context["lag"] = max(0.0, sent - intended) * 1000.0  # how late it left: the schedule falling behind
        return context

    def _notify(self, name: str, build) -> bool:
        transport = self.transport
        start = time.perf_counter()
        self._unowned = None
        if (refused := self._authorize()) is not None:
            self._record(name, start, 0, refused)
            return False
        out = build(ts=start)
        self._count()
        failure = None
        size = 0
        try:
            with gevent.Timeout(self.timeout, CallTimeout):
                size = self._send(transport, out)
        except CallTimeout:
            failure = McpFailure(Failure.ANSWER_LOST, timed_out(self.timeout, start))
        if failure is None and self._unowned is not None:
            failure = McpFailure(self._unowned.failure, self._unowned.detail)
        if failure is not None:
            self._fail(failure)
        self._record(name, start, size, failure)
        return failure is None

    def _fail(self, exc: McpFailure) -> None:
        """What a failure means for the session: after these, a long-lived user starts a new one."""
        if exc.kind in (Failure.SESSION_NOT_FOUND, Failure.STREAM_CLOSED, Failure.CONNECT) or (self.conn is not None and not self.conn.usable):
            # Streamable HTTP: "the client MUST start a new session by sending a new InitializeRequest".
            self.ready = False
            if self.transport is not None and not self.transport.has_session_header:
                self.close_transport()


def _status_detail(outcome: Answered) -> str:
    """What an error status's answer said: the error's message says what happened (a proxy's 502
    names its upstream's failure)."""
    answer = outcome.answer
    said = f" {answer.message[:DETAIL_CHARS]}" if isinstance(answer, ErrorResponse) and answer.message else ""
    return f"HTTP {outcome.status}: JSON-RPC {getattr(answer, 'code', '')}{said}"


def _dropped(outcome: Answered) -> Answered | Failed:
    """A 5xx answer as the reconnect policy sees it: a request dropped on the way (`Failure.HTTP_5XX`),
    whether the proxy said so with a bare status or, as `mcpbench record` does for an upstream that
    closed the connection before it answered, with a JSON-RPC error under the request's id. Taken for
    an answer, it was never retried (the soak's `both` path: an `echo`, idempotent, failed on the
    first 502). Any other answer as it is."""
    if outcome.status is None or classify_status(outcome.status, has_session=False) != Failure.HTTP_5XX:
        return outcome
    refusal = outcome.answer if isinstance(outcome.answer, ErrorResponse) else None
    return Failed(outcome.request, outcome.waiter, Failure.HTTP_5XX, _status_detail(outcome), outcome.status, sent=outcome.sent,
                  refusal=refusal)


def _tool_error(result: Any) -> McpFailure | None:
    """A tool's own failure (`isError: true`): the step failed, the server did not."""
    if isinstance(result, dict) and result.get("isError") is True:
        return McpFailure(Failure.TOOL_ERROR, "isError")
    return None


def _progress(op: Operation) -> str:
    """How far an operation got, for a timeout's detail."""
    if op.task is not None:
        return f"its task still {op.task.status} after {op.polls} polls"  # no id: the details of a run group
    return f"after {op.rounds} input rounds"
