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
- Whole operations (`operations.py`): a recorded input round is re-run live, each live
  `inputRequests` key answered with the recording's answer under that key and the live
  `requestState` echoed (a key the recording never answered is a change, named); a task is
  followed to its end with the client core's `Operation` and its end compared; a listen
  stream's changes are heard and matched to the requests that caused them.
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
    Answered, ClientConnection, EndpointReady, Event, Failed, Garbled, Outgoing, Pushed, ServerRequest, SessionLost,
    Unmatched, initialize_request, initialized_notification,
)
from mcpbench.protocol.errors import McpbenchError, ReplayError, TargetError
from mcpbench.protocol.http import AUTH_FAILURES, AUTHORIZATION, Failure
from mcpbench.protocol.listen import ACK_TIMEOUT
from mcpbench.protocol.operation import Operation, Send, Stop, task_handle
from mcpbench.protocol.reconnect import NONE
from mcpbench.protocol.recovery import REPORTING, plan_recovery
from mcpbench.protocol.jsonrpc import ErrorResponse, Notification, Request, Response
from mcpbench.protocol.session import S2C
from mcpbench.protocol.transports import LEGACY_SSE, STDIO, STREAMABLE_HTTP
from mcpbench.protocol.versions import (
    CANCELLED,
    INPUT_REQUESTS,
    INPUT_RESPONSES,
    LATEST_HANDSHAKE,
    LISTEN,
    LISTEN_ACKNOWLEDGED,
    META_SUBSCRIPTION_ID,
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
from mcpbench.replay.compare import Difference
from mcpbench.replay.operations import RoundAnswers, TaskGroup, UpdateAnswers, rename, task_groups
from mcpbench.replay.plan import RecordedCall, SendStep, SessionPlan, TracePlan, is_input_required
from mcpbench.transport.base import Item, Lost, Transport
from mcpbench.transport.threads import AuthRefused, open_transport
from mcpbench.system.target import Target
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
_BUILT_LIVE = frozenset({"initialize", CANCELLED})

# At the end of a session that listens on a GET stream, how long to wait for
# server messages the recording had outside any call and the replay has not
# seen yet: that stream races the last answer, and loopback delivery takes
# milliseconds; a server that no longer sends them costs this once a session.
UNSOLICITED_GRACE = 1.0

# At the end of a session that held a listen stream, how long to wait for the changes the recording
# shows and the replay has not heard yet: the last request's change may still be on its way on
# another stream (a busy machine takes more than a second now and then); a change the live server
# no longer sends costs this once a session.
LISTEN_GRACE = 5.0

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
    arrived: list[float] = field(default_factory=list)  # a listen stream's: when each of its notifications came
    changes: list[Difference] = field(default_factory=list)  # changes the replay named itself (an input key never answered)
    note: str | None = None  # how the replay treated it (a task followed live), for the report

    @property
    def done(self) -> bool:
        return self.answer is not None or self.failure is not None or self.timed_out or self.skipped is not None

    @property
    def latency(self) -> float | None:
        if self.sent is None or self.answered is None:
            return None
        return self.answered - self.sent


def _altered_state(issued: Any, retry_params: dict | None) -> Any:
    """The `requestState` a recorded retry carried when it was not the one the recorded round issued
    (None when it was echoed byte for byte, or one of them had none)."""
    given = issued.result.get(REQUEST_STATE) if type(issued) is Response and isinstance(issued.result, dict) else None
    sent = (retry_params or {}).get(REQUEST_STATE)
    return sent if given is not None and sent is not None and sent != given else None


def _recorded_status(plan: SessionPlan, group: TaskGroup) -> str | None:
    """How the recorded task ended, as its last poll said."""
    for index in reversed(group.polls):
        answer = plan.calls[index].answer
        if type(answer) is Response and isinstance(answer.result, dict) and isinstance(answer.result.get("status"), str):
            return answer.result["status"]
    return None


class _Waiter:
    """The waiter of a request the replay makes itself (a poll of a task it follows)."""

    __slots__ = ("answer", "failure")

    def __init__(self) -> None:
        self.answer: Response | ErrorResponse | None = None
        self.failure: str | None = None


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
        self.transport: Transport | None = None
        self.listening = False  # a GET stream was asked for
        self.heard = False  # the target has sent a JSON-RPC message
        self.initialized = False  # the era switch's own initialize has its answer
        self.bridged = False  # the session got a handshake made for the target (`_bridging`)
        self.stopping = False  # a stop signal came: nothing more is counted
        self.label = plan.id
        self.rounds = RoundAnswers(plan)
        self.tasks = task_groups(plan)
        self.task_names: dict[str, str] = {}  # live task id -> recorded
        self.task_ids: dict[str, str] = {}  # recorded task id -> live
        self.followed: set[int] = set()  # the tasks followed (their creating call's index)
        self.listen_ids: dict[Any, LiveCall] = {}  # a live listen request's id -> its call

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
            if step.call is not None and self._driven(step.call):
                # A later round or a task's call: the replay drives it from the live answers.
                for index in step.wait_for:
                    self._await(run.calls[index])
                    if run.aborted:
                        return
                self._follow(step.call)
                continue
            # Built before the wait, while the target works on what it was sent: when the answer
            # comes, only the write is left to do.
            message, out = self._ahead(step) if step.wait_for else (_LIVE, None)
            settled = (self.conn.session_id, self.conn.negotiated) if out is not None else None
            for index in step.wait_for:
                self._await(run.calls[index])
                if run.aborted:
                    return
            self._await_acknowledged(step.ts)
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
        listens = [live for live in run.calls if live.call.method == LISTEN and live.sent is not None]
        deadline = time.perf_counter() + LISTEN_GRACE
        while any(len(live.notifications) < len(live.call.notifications) for live in listens) and not run.aborted \
                and self._pump(deadline):
            pass  # a change the last request caused may still be on its way

    # ---- whole operations (operations.py) ------------------------------------------------------

    def _await_acknowledged(self, ts: float) -> None:
        """A step the recording sent after a listen stream's acknowledgement waits for the live one (at most
        `ACK_TIMEOUT`): the recorded client knew the stream was open, and a change sent before it is lost."""
        for live in self.listen_ids.values():
            if live.notifications or live.done or not any(
                    type(note) is dict and note.get("method") == LISTEN_ACKNOWLEDGED and at <= ts for at, note in live.call.server):
                continue
            deadline = time.perf_counter() + ACK_TIMEOUT
            while not live.notifications and not live.done and not self.run.aborted and self._pump(deadline):
                pass

    def _driven(self, call: RecordedCall) -> bool:
        """Whether the replay drives `call` itself: a later round of an input operation (re-run from the
        live answers), or a call of a task it follows."""
        if self.translating:
            return False  # another era: the core's `translate` and `_retry_with_input` handle rounds
        if call.retry_of is not None and is_input_required(self.plan.calls[call.retry_of].answer):
            return True
        group = self.tasks.get(call.index)
        return group is not None and group.followed and call.index != group.create

    def _follow(self, call: RecordedCall) -> None:
        """A step the replay drives, once the answers it waits for are in: a later round was sent by then
        (else the live server asked for no more input: said), and a task's first call after its creation
        follows the live task to its end."""
        live = self.run.calls[call.index]
        if call.retry_of is not None and live.sent is None and not live.done:
            earlier = self.run.calls[call.retry_of]
            live.failure = (f"not sent: the live server asked for no more input (round #{call.retry_of} "
                            f"{'failed' if earlier.answer is None else 'came out complete'})")
            return
        group = self.tasks.get(call.index)
        if group is None or group.create in self.followed:
            return
        self.followed.add(group.create)
        self._follow_task(group)

    def _follow_task(self, group: TaskGroup) -> None:
        """Follow the task the live answer to `group.create` handed back, with the client core, to its end;
        its end goes on the recording's final call, the recorded polls are noted as replaced."""
        run, created = self.run, self.run.calls[group.create]
        final_index = group.final(self.plan)
        members = [run.calls[i] for i in group.members]
        final = run.calls[final_index] if final_index is not None else None
        handle = task_handle(created.answer.result) if type(created.answer) is Response else None
        if handle is None:
            for live in members:
                live.skipped = f"a call of task {group.task_id}: the live {created.call.label} did not become a task"
            if final is not None:
                final.skipped = None
                final.failure = f"not sent: the live {created.call.label} did not become a task"
            return
        request = created.call.request
        op = Operation(request.method, request.params, self.version, answers=UpdateAnswers(self.plan, group))
        op.start()
        # (the answer as compared names the recorded task: the live one is followed)
        action = op.take(Response(id=created.answer.id, result=rename(created.answer.result, self.task_ids), _parsed=True),
                         time.perf_counter())
        started = time.perf_counter()
        recorded_took = (final.call.answered or 0) - created.call.sent if final is not None and final.call.answered else 0.0
        # A task that never ends is bounded: by `--timeout` when given, else as its recorded run with the margin.
        budget = self.r.timeout or max(self.r.timeout_for(created.call), recorded_took * TIMEOUT_FACTOR + TIMEOUT_MARGIN)
        deadline = started + budget
        last: Response | ErrorResponse | None = None
        last_sent = started
        while type(action) is Send and not run.aborted:
            if time.perf_counter() + action.wait > deadline:
                cancel = op.cancel()
                if cancel is not None:
                    self._write(self.conn.send(self.conn.prepare(cancel.method, cancel.params), waiter=_Waiter(), ts=time.perf_counter()))
                action = Stop(Failure.ANSWER_LOST, f"task {handle['taskId']} still {op.task.status if op.task else 'running'} "
                                               f"after {budget:g} s: cancelled")
                break
            self._wait_until(time.perf_counter() + action.wait)
            waiter = _Waiter()
            last_sent = time.perf_counter()
            self._write(self.conn.send(self.conn.prepare(action.method, action.params), waiter=waiter, ts=last_sent))
            # A poll has the whole bound of its own: one sent just before the task's deadline is not
            # lost for having had a millisecond (the loop's next turn sees the deadline and cancels).
            bound = last_sent + budget
            while waiter.answer is None and waiter.failure is None and not run.aborted:
                if not self._pump(bound):
                    waiter.failure = f"{action.method} got no answer within {budget:g} s"
            if waiter.answer is None:
                action = op.broke(Failure.ANSWER_LOST, waiter.failure or "no answer")
                continue
            last = waiter.answer
            action = op.take(last, time.perf_counter())
        statuses = " → ".join(op.task.statuses) if op.task is not None else "?"
        said = f"task followed live in {(time.perf_counter() - started) * 1000:.0f} ms: {op.polls} poll(s), {statuses}"
        for live in members:
            if live is not final:
                what = "a poll" if live.call.method == "tasks/get" else f"a {live.call.method}"
                live.skipped = f"{what} of the task, replaced by the replay's own (#{final_index if final is not None else group.create})"
        if final is None:
            created.note = said
            return
        # Its latency is its last request's, as the recorded one's is: the whole task's time is in the note.
        final.sent, final.answered, final.note = last_sent, time.perf_counter(), said
        if type(action) is Stop and (last is None or action.failure == Failure.ANSWER_LOST):
            final.failure = action.detail
        else:
            final.answer = self._recorded_names(last)
        if type(action) is Stop:
            final.changes.append(Difference("task", "changed", _recorded_status(self.plan, group) or "ended",
                                        f"{action.failure}: {action.detail}"))

    def _next_round(self, live: LiveCall, answer: Response) -> None:
        """Answer the live `input_required` round on `live` from the recording, by key, and send the next round."""
        index = live.call.index
        retry = self.rounds.next_round.get(index)
        target = self.run.calls[retry] if retry is not None else live  # more live rounds than recorded: on the last
        if target is live and live.rounds >= MAX_INPUT_ROUNDS:
            live.failure = f"the live server asked for input {live.rounds + 1} times; the bound is {MAX_INPUT_ROUNDS} rounds"
            return
        wanted = answer.result.get(INPUT_REQUESTS) or {}
        responses: dict[str, Any] = {}
        for key, asked in (wanted.items() if isinstance(wanted, dict) else ()):
            found, value = self.rounds.answer(index, retry, key)
            if not found:
                method = asked.get("method") if isinstance(asked, dict) else None
                change = Difference(f"inputRequests[{key!r}]", "added", None,
                                f"{method or 'input'} asked live under key {key!r}, which the recording never answered")
                holder = live if target is live else target
                holder.changes.append(change)
                holder.failure = holder.failure or f"not sent: the live server asks for input {key!r} ({method}), " \
                                                   "which the recording never answered"
                if target is live:
                    live.answer = answer
                return
            responses[key] = value
        params = {k: v for k, v in (target.call.request.params or {}).items() if k not in (INPUT_RESPONSES, REQUEST_STATE)}
        if responses or isinstance(wanted, dict):
            params[INPUT_RESPONSES] = responses
        if answer.result.get(REQUEST_STATE) is not None:
            params[REQUEST_STATE] = answer.result[REQUEST_STATE]  # the live state, as it came
        if target is not live and (altered := _altered_state(live.call.answer, target.call.request.params)) is not None:
            # The recording's client sent a state other than the one it was given (a fuzzer's tampered
            # retry): what it sent is the point of the recording, so it goes again as recorded.
            params[REQUEST_STATE] = altered
            self.run.notes.append(f"#{target.call.index} {target.call.label}: the requestState sent as recorded, "
                                  "not the live one: the recording's client altered the one it was given")
        if target is live:
            live.rounds += 1
            self.run.notes.append(f"#{index} {live.call.label}: the live server asked for input once more than recorded "
                                  f"(round {live.rounds + 1})")
        self._send(Request(id=0, method=target.call.request.method, params=params, _parsed=True), target)

    def _recorded_names(self, answer: Any) -> Any:
        """A live answer with the live task ids read as the recorded ones."""
        if not self.task_names or answer is None:
            return answer
        if type(answer) is Response:
            return Response(id=answer.id, result=rename(answer.result, self.task_names), _parsed=True)
        return ErrorResponse(id=answer.id, code=answer.code, message=rename(answer.message, self.task_names),
                             data=rename(answer.data, self.task_names), _parsed=True)

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
        self._write(self.conn.send(initialize_request(self.conn), waiter=SYNTHETIC_INITIALIZE, ts=time.perf_counter()))
        timeout = self.r.timeout_for(None)
        deadline = time.perf_counter() + timeout
        while not self.initialized and not self.run.aborted:
            if not self._pump(deadline):
                self.run.aborted = f"initialize got no answer within {timeout:g} s"
                return
        self._write(self.conn.send(initialized_notification(), ts=time.perf_counter()))
        self._listen()

    def _await(self, live: LiveCall) -> None:
        if live.done or live.sent is None:
            return
        if live.call.method == LISTEN and live.call.server:
            return  # a listen stream that was acknowledged lasts until its client closes it: not waited for
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
                self.conn.fail(f"no answer within {timeout:g} s", gave_up=live.live_ids[-1])
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
        is the connection's to add (`ClientConnection.prepare`).
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
        if params and self.task_ids and params.get("taskId") in self.task_ids:  # a task sent as recorded (cancelled)
            params = {**params, "taskId": self.task_ids[params["taskId"]]}
        if isinstance(message, Notification):
            if method == CANCELLED and params and "requestId" in params:
                params = {**params, "requestId": self._live_id_of(params["requestId"])}
            return message if params is message.params else Notification(method=method, params=params, _parsed=True)
        # A request's recorded id goes nowhere: the connection gives each request a live one.
        return message if params is message.params else Request(id=0, method=method, params=params, _parsed=True)

    def _ahead(self, step: SendStep) -> tuple[Request | Notification | None, Outgoing | None]:
        """`step` as it will go out, built before the answers it waits for: (message, its request
        built by the connection). `_LIVE` instead of the message when it depends on those answers
        (a `requestState` to map, a cancellation's live id), or may change the session (`initialize`)."""
        message = step.message
        params = message.params
        if (params and (REQUEST_STATE in params or "taskId" in params)) or message.method in _BUILT_LIVE \
                or self.conn.negotiated is None:
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
            out = self.conn.send(self.conn.prepare(message.method, message.params, as_version=self._sent_in(message)), waiter=live, ts=ts)
        if live is not None and live.call.foreign_host is not None and out.headers is not None:
            out = self._foreign_host(live.call, out)
        if live is not None and message.method == LISTEN:
            self.listen_ids[out.request_id] = live  # its notifications carry this id (stdio has no stream to tell)
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
            self.conn.send(out, waiter=live, ts=ts)

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
                owner = event.waiter if type(event.waiter) is LiveCall else self._listen_of(event.message)
                entry = {"method": event.message.method, "params": event.message.params}
                (owner.notifications if owner is not None else self.run.notifications).append(entry)
                if owner is not None and owner.call.method == LISTEN:
                    owner.arrived.append(time.perf_counter())
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

    def _listen_of(self, message: Notification) -> "LiveCall | None":
        """The listen stream a notification is tagged for (`io.modelcontextprotocol/subscriptionId`)."""
        params = message.params
        meta = params.get("_meta") if isinstance(params, dict) else None
        tag = meta.get(META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        return self.listen_ids.get(tag) if tag is not None else None

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
        elif type(live) is _Waiter:
            live.failure = reason
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
        if type(live) is _Waiter:
            live.answer = answer
            return
        if type(live) is not LiveCall:
            return  # a request of ours no recorded call waits for
        recorded = live.call.answer
        if is_input_required(answer):
            live_state = answer.result.get(REQUEST_STATE)
            if not self.translating and (is_input_required(recorded) or live.call.retry_of is not None):
                if is_input_required(recorded):  # a round as recorded: compared, and the next one sent
                    live.answer, live.answered, live.status = answer, event.received, event.status
                    if live.call.index in self.rounds.next_round:
                        self._next_round(live, answer)
                    return
                self._next_round(live, answer)  # a round more than recorded: answered by key, sent again on this call
                return
            if is_input_required(recorded):
                rec_state = recorded.result.get(REQUEST_STATE)
                if rec_state is not None and live_state is not None:
                    self.states[rec_state] = live_state
            elif live.rounds < MAX_INPUT_ROUNDS and self._retry_with_input(live, answer):
                return
        if type(answer) is Response and type(recorded) is Response and live.call.index in self.tasks \
                and (handle := task_handle(answer.result)) is not None and (was := task_handle(recorded.result)) is not None:
            self.task_names[handle["taskId"]] = was["taskId"]
            self.task_ids[was["taskId"]] = handle["taskId"]
        live.answer, live.answered, live.status = self._recorded_names(answer), event.received, event.status

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

    def open(self, sink, on_stderr) -> Transport:
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
