"""The trace model: trace events → sessions → operations, one event at a time.

Every view of a trace takes its sessions and operations from here (`inspect`, the pandas loaders,
the live view, telemetry). Requests are paired with their answers by the protocol core's `Session`,
the same one the recorders use; the violations shown are the ones the recorder wrote, plus the
rules only whole operations show (multi round-trip requests, `protocol/rules.py`), so nothing is
counted twice.

An *operation* is one logical request: in 2026-07-28 a `tools/call`, `resources/read` or
`prompts/get` answered `input_required` is retried under a new id, and each exchange is a *round*
of the same operation (SEP-2322). Rounds are linked by the exact `requestState` first; without one
by method, name and the same `inputRequests` keys (a set: JSON objects have no order); when two
waiting operations fit, none is linked and a warning says so. An operation's latency runs from its
first request to its final answer; the time the client took between rounds (a human answering an
elicitation) is its `client_wait`, not the server's.

`Rebuild.take` takes the events of a whole trace (`inspect`) or of one that is still growing (the
live view, through `trace/follow.py`) and says what each one added: the timeline entries it made,
the requests it answered and the operations it finished. `Rebuild.take_all` takes a whole trace at
once (`inspect`, the pandas loader), a batch of events at a time: a plain call of an operating stdio
session (a request, its answer, a notification) on a hot path that makes no object, only a row of
columns (`PlainCalls`), everything else through `take`, which first makes objects of the session's
plain calls in flight and hands them to the core's `Session`; both give the same sessions and
operations, and a plain call's objects are made when a view asks for them (`PlainCalls.operation`).
"""

import json
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import batched, repeat
from operator import itemgetter
from typing import Any

import orjson

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.auth import bearer_challenge
from mcpbench.protocol.http import (
    AUTH_FAILURES,
    AUTHENTICATE,
    FOREIGN_ANSWER_ID,
    PROTOCOL_VERSION,
    classify_status,
    foreign_id_warning,
    pair_with_post,
)
from mcpbench.protocol.jsonrpc import ErrorResponse, InvalidMessage, Notification, Request, Response
from mcpbench.protocol.session import C2S, CLOSED, LOST, OPERATING, S2C, Direction, Exchange, Session, Trigger
from mcpbench.protocol.transports import LEGACY_SSE, STREAMABLE_HTTP
from mcpbench.protocol.rules import applies
from mcpbench.protocol.server import ERROR_NAMES
from mcpbench.protocol.versions import (
    CANCELLED,
    PROGRESS,
    INPUT_CAPABILITIES,
    INPUT_METHODS,
    INPUT_REQUESTS,
    INPUT_RESPONSES,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    CACHE_HINTS,
    CACHEABLE_METHODS,
    LISTEN,
    LISTEN_ACKNOWLEDGED,
    LOG_MESSAGE,
    META_LOG_LEVEL,
    META_RELATED_TASK,
    META_SUBSCRIPTION_ID,
    NAMED_METHODS,
    REQUEST_STATE,
    RESULT_TYPE,
    TASK_METHODS,
    TASK_STATUS,
    TERMINAL_TASK_STATUSES,
    asks_for_input,
    call_name,
    has_input_required,
    meta_version,
    rules,
)
from mcpbench.trace.format import Kind

# The HTTP status that says the server no longer knows a session (both HTTP transports).
SESSION_NOT_FOUND = 404
# The recorders' key of sessionless Streamable HTTP traffic: one per client connection
# (docs/trace-format-http.md). It is rebuilt as one logical stream per protocol version.
SESSIONLESS_PREFIX = "conn-"
SESSIONLESS = "sessionless"
# HTTP exchanges that are not MCP (an OAuth discovery probe, a favicon): no session of any transport.
NOT_MCP = "(not MCP)"
# mitmproxy's word for a stream its client closed: the client's own close, not a failure.
CLIENT_CLOSED = "Client disconnected."
# The outcome of a request whose HTTP exchange failed (status >= 400) before any answer.
HTTP_ERROR = "http-error"
# The outcome of a round that asks the client for input (2026-07-28): the operation goes on.
INPUT_REQUIRED = "input-required"
# Warnings of the round linking: a retry two waiting operations fit, a retry that fits none.
MRTR_AMBIGUOUS = "mrtr-ambiguous"
MRTR_UNLINKED = "mrtr-unlinked"
# A message event the model could not read as JSON-RPC (its violation's name).
INVALID_MESSAGE = "invalid-message"
# A 2026-07-28 list or read result without its freshness hints (a warning: hints, not a duty we can prove).
MISSING_CACHE_HINTS = "missing-cache-hints"


def outcome(answer: Response | ErrorResponse) -> tuple[str, str]:
    """("ok" | "tool-error" | "error" | "input-required", detail) of an answer."""
    if isinstance(answer, ErrorResponse):
        name = ERROR_NAMES.get(answer.code) if type(answer.code) is int else None
        return "error", f"{answer.code}{f' ({name})' if name else ''}: {answer.message}"
    return _result_outcome(answer.result)


def _result_outcome(result: Any) -> tuple[str, str]:
    """`outcome` of a result."""
    if asks_for_input(result):
        asked = result.get(INPUT_REQUESTS)
        return "input-required", ", ".join(sorted(asked)) if type(asked) is dict else ""
    if isinstance(result, dict) and result.get("isError") is True:
        texts = [c.get("text", "") for c in result.get("content") or () if isinstance(c, dict)]
        return "tool-error", " ".join(texts)[:120]
    return OK


@dataclass(slots=True)
class Entry:
    """One line of a session's timeline."""

    ts: float
    dir: str | None
    kind: str  # request | notification | violation | warning | stderr | http | stream | error | process
    name: str
    latency: float | None = None  # seconds, requests only
    outcome: str = ""
    detail: str = ""
    id: Any = None  # a request's JSON-RPC id
    line: int | None = None  # the trace line it came from (`inspect`; a live view does not count lines)
    op: "Operation | None" = None  # a request's operation (this entry is one of its rounds)
    flow: Any = None  # a request's HTTP exchange
    end: float | None = None  # when a request was answered
    error_code: Any = None  # a request answered by a JSON-RPC error: its code
    request_bytes: int | None = None  # filled by a reader that measures them (the pandas loader)
    answer_bytes: int | None = None


@dataclass(slots=True, eq=False)
class Task:
    """A task an operation became (2025-11-25's `CreateTaskResult`, or a handle the 2026-07-28
    extension returns unasked): its statuses as polls, cancels and notifications said them."""

    id: str
    op: "TracedOperation"
    created: float  # when the handle came back
    status: str
    statuses: list[tuple[float, str]] = field(default_factory=list)
    polls: int = 0  # tasks/get requests naming it
    done: float | None = None  # when it was first seen terminal (or its result came)
    result_at: float | None = None  # when tasks/result answered it

    @property
    def create_time(self) -> float:
        """Seconds from the request to the task handle."""
        return self.created - self.op.start

    @property
    def complete_time(self) -> float | None:
        """Seconds from the request to the task's end (None while it runs)."""
        return None if self.done is None else self.done - self.op.start


@dataclass(slots=True, eq=False)
class ListenStream:
    """A `subscriptions/listen` stream: opened, acknowledged, its notifications, closed. Never an
    unanswered call: open while it listens."""

    opened: float
    acknowledged: float | None = None
    notifications: list[tuple[float, str]] = field(default_factory=list)  # (when, method)
    closed: float | None = None
    ending: str = ""  # "result" (the server ended it), "closed", "cut" (the stream broke)


@dataclass(slots=True, eq=False)
class TracedOperation:
    """One logical request: its rounds (one, or a multi round-trip's retries), its outcome once final."""

    dir: str
    method: str
    name: str  # `tools/call echo`: method and what it names
    target: str | None  # what it names (tool, prompt, uri): with the method, what links its rounds
    rounds: list[Entry]
    capabilities: Any = None  # the client's declared capabilities when it asked
    outcome: str = ""  # "" while open
    detail: str = ""
    end: float | None = None  # its final answer
    state: Any = None  # the `requestState` the next round must echo (None: none sent)
    asked: frozenset | None = None  # the `inputRequests` keys the next round must answer (None: not waiting)
    notifications: int = 0  # progress notifications tied to it by their token
    inner: list["TracedOperation"] = field(default_factory=list)  # server requests made while it ran (handshake era)
    outer: "Operation | None" = None  # a server request: the client's operation it was made in (its `inner`)
    task: Task | None = None  # the task it became, or (tasks/get, tasks/result, …) the task it names
    stream: ListenStream | None = None  # a `subscriptions/listen` request: its stream
    log_level: Any = None  # the log level its request asked for (2026-07-28 `_meta`)
    cancelled: str | None = None  # its sender cancelled it (`notifications/cancelled`): the reason given, or ""

    @property
    def start(self) -> float:
        return self.rounds[0].ts

    @property
    def first(self) -> Entry:
        return self.rounds[0]

    @property
    def last(self) -> Entry:
        return self.rounds[-1]

    @property
    def latency(self) -> float | None:
        """First request to final answer, seconds (None while open)."""
        return None if self.end is None else self.end - self.rounds[0].ts

    @property
    def client_wait(self) -> float:
        """Seconds the client took between a round's answer and its next request (not the server's)."""
        total = 0.0
        rounds = self.rounds
        for before, after in zip(rounds, rounds[1:]):
            if before.end is not None:
                total += max(0.0, after.ts - before.end)
        return total

    @property
    def server_time(self) -> float | None:
        """The rounds' own latencies added: the operation's time without the client's waits."""
        latencies = [r.latency for r in self.rounds if r.latency is not None]
        return sum(latencies) if latencies else None

    @property
    def open(self) -> bool:
        return not self.outcome


@dataclass
class SessionReport:
    id: str
    transport: str
    start: float
    entries: list[Entry] = field(default_factory=list)
    session: Session = field(default_factory=Session)
    exit_code: int | None = None
    requests: int = 0  # requests seen (kept or not)
    open_calls: dict[tuple[str, Any], Entry] = field(default_factory=dict)
    sessionless: bool = False  # sessionless Streamable HTTP: a logical stream of one protocol version
    operations: list[TracedOperation] = field(default_factory=list)  # kept with the timeline (`Rebuild(keep=True)`)
    client: dict | None = None  # the client's name and version (initialize, or the `_meta` envelope)
    end: float = 0.0  # its last event
    awaiting: list[TracedOperation] = field(default_factory=list)  # answered `input_required`: waiting for a retry
    running: list[TracedOperation] = field(default_factory=list)  # the client's operations not answered yet
    progress: dict[Any, TracedOperation] = field(default_factory=dict)  # progress token -> its open operation
    states: dict[str, Entry] = field(default_factory=dict)  # a `requestState` in flight -> its round
    tasks: dict[str, Task] = field(default_factory=dict)  # task id -> the task
    streams: dict[Any, TracedOperation] = field(default_factory=dict)  # subscription id -> its open listen operation
    shadowed: list[TracedOperation] = field(default_factory=list)  # open when a later request took their id
    # `Rebuild.take_all`'s plain calls in flight, as rows of its `PlainCalls` (no objects yet): id -> row,
    # progress token -> row. Made objects (`open_calls`, `running`, `progress`) before `take` looks at the session.
    hot: dict[Any, int] = field(default_factory=dict)
    hot_progress: dict[Any, int] = field(default_factory=dict)
    # What `take_all` may do without `take`, as the session stands after its last event through `take`:
    # a plain request (`plain`: operating, not sessionless), a notification (`quiet`: no task or
    # listen stream to claim it), an answer (`plain_answers`: no `requestState` in flight, a version
    # whose results are not checked).
    plain: bool = False
    quiet: bool = False
    plain_answers: bool = False

    @property
    def calls(self) -> list[Entry]:
        """Every request (each round of an operation)."""
        return [e for e in self.entries if e.kind == "request"]

    def of_kind(self, kind: str) -> list[Entry]:
        return [e for e in self.entries if e.kind == kind]


OK = ("ok", "")


class PlainCalls:
    """`Rebuild.take_all`'s plain calls as columns, a row each, objects only when asked (`operation`).

    A plain call is an operation of one round: a client's request and its answer, in an operating
    stdio session. A row holds its session (`owner`), the position of its request's event (`at`: its
    time in `times`, its size in `sizes`), its id, its shared (method, target, name), the client's
    capabilities when it asked, and the position of its answer (`answers`, -1 while open); what most
    rows lack is kept by row apart (`outcomes` other than ok, progress `notified`). A row that became
    an object (`objects`) is that object's from then on: its columns are left as they were.
    `Rebuild(ordered=True)` adds every other operation as a row of its object, so the rows are every
    operation in the order it began (the pandas loader reads the columns, not objects).
    """

    __slots__ = ("owner", "at", "ids", "names", "distinct", "capabilities", "answers", "outcomes", "notified", "objects",
                 "times", "sizes", "bases")

    def __init__(self) -> None:
        self.owner: list[SessionReport] = []
        # Plain lists, not `array`s of machine numbers: an array converts each number it takes with
        # `PyArg_Parse`, about 600 machine instructions; these columns take one or two numbers an event,
        # which cost a tenth of the hot path (a million-event trace: 0.17 s). The loader converts each
        # list to numpy once (`analysis/traces._file_columns`, `np.fromiter`): 10-20 ns a number.
        self.at: list[int] = []
        self.ids: list[Any] = []
        self.names: list[int] = []  # its (method, target, name) in `distinct` (-1: an object's row)
        self.distinct: list[tuple[str, str | None, str]] = []  # each (method, target, name) once, while few (`_names`)
        self.capabilities: list[Any] = []
        self.answers: list[int] = []
        self.outcomes: dict[int, tuple[str, str]] = {}  # row -> (outcome, detail), where not ok
        self.notified: dict[int, int] = {}  # row -> progress notifications tied to it
        self.objects: dict[int, TracedOperation] = {}  # row -> its object
        self.times: list[float] = []  # by position: each event's `ts`
        self.sizes: list[int] = []  # by position (`Rebuild(measure=True)`): each event's message as compact JSON
        self.bases: list[tuple[int, int]] = []  # (first position, its line minus its position) per `take_all`

    def add(self, op: TracedOperation, report: SessionReport, position: int) -> None:
        """A row for an operation `take` began (an object from the start)."""
        self.objects[len(self.owner)] = op
        self.owner.append(report)
        self.at.append(position)
        self.ids.append(None)
        self.names.append(-1)
        self.capabilities.append(None)
        self.answers.append(-1)

    def line(self, position: int) -> int:
        """The trace line of the event at `position`."""
        bases = self.bases
        return position - bases[bisect_right(bases, (position, float("inf"))) - 1][1]

    def operation(self, row: int) -> TracedOperation:
        """The row's operation, made once: what `take` would have made of its request and answer."""
        op = self.objects.get(row)
        if op is not None:
            return op
        position, sizes = self.at[row], self.sizes
        ts = self.times[position]
        method, target, name = self.distinct[self.names[row]]
        entry = Entry(ts, C2S_VALUE, "request", name, id=self.ids[row], line=self.line(position))
        op = TracedOperation(C2S_VALUE, method, name, target, [entry], self.capabilities[row])
        entry.op = op
        op.notifications = self.notified.get(row, 0)
        if sizes:
            entry.request_bytes = sizes[position]
        answer = self.answers[row]
        if answer >= 0:
            end = self.times[answer]
            entry.latency, entry.end = end - ts, end
            entry.outcome, entry.detail = op.outcome, op.detail = self.outcomes.get(row, OK)
            op.end = end
            if sizes:
                entry.answer_bytes = sizes[answer]
        self.objects[row] = op
        return op


def _plain_flags(report: SessionReport) -> None:
    """What `take_all` may take of the session without `take`, as it stands now (`SessionReport.plain`)."""
    report.plain = plain = report.session.state is OPERATING and not report.sessionless
    report.quiet = plain and not report.tasks and not report.streams
    known = rules(report.session.version)
    report.plain_answers = plain and not report.states and not (known is not None and known.input_required)


_TS = itemgetter("ts")


def _plain_request(method: str) -> tuple[str | None, dict | None]:
    """`Rebuild._requests`' entry for `method`: what names its target, and its names by target; no
    names for a method that may not begin a plain call (the handshake, a task, a listen stream, a
    notification's name)."""
    if method in _UNUSUAL_REQUESTS or method.startswith("notifications/"):
        return None, None
    return NAMED_METHODS.get(method), {}


def _target_names(targets: dict, method: str, target: Any, distinct: list) -> int:
    """The (method, target, name) of a request naming `target` (None unless a string) as its place in
    `distinct`, kept in `targets` while the names shared are few (`_names`)."""
    if type(target) is not str:
        target = None
    shared = _names(method, target)
    distinct.append(shared)
    if _NAMES.get((method, target)) is shared:
        targets[target] = len(distinct) - 1
    return len(distinct) - 1
# A request's `_meta` with more than a progress token: not a plain call (`take` reads it).
_NOT_PLAIN = object()


def _size(msg: Any) -> int:
    """A message's size as compact JSON, also nested deeper than orjson writes."""
    try:
        return len(orjson.dumps(msg))
    except orjson.JSONEncodeError:
        return len(json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode())


@dataclass(slots=True)
class _Flow:
    """What the rebuild learned of one HTTP exchange: its request's version, id and label, and an
    error answer under another id that the POST paired (`http.pair_with_post`)."""

    version: str | None = None
    request_id: Any = None
    label: str = ""
    foreign: str | None = None  # the warning an `unknown-answer` violation of this flow really is
    op: Any = None  # the operation of its request: the notifications on its stream are that request's


@dataclass(slots=True)
class EventEffect:
    """What one trace event did to its session: the entries it added, the requests it answered
    (their `latency` and `outcome` now set)."""

    session: SessionReport
    added: list[Entry]
    answered: list[Entry]
    finished: list[TracedOperation] = field(default_factory=list)  # operations whose final outcome this event gave
    opened: list[TracedOperation] = field(default_factory=list)  # operations this event began
    # The answers themselves, beside `answered` (`Rebuild(answers=True)`: a replay needs them; a view does not).
    answers: list[Response | ErrorResponse] | None = None
    # `Rebuild(answers=True)`: a message event's message as the core read it (a replay sends its requests).
    message: Any = None


class Rebuild:
    """Sessions rebuilt from trace events as they come.

    Args:
        keep: keep each session's timeline in `SessionReport.entries` (`inspect`); without it the
            caller keeps what `take` returns for as long as it wants (a live view, bounded).
        answers: give each step the answer messages of the requests it answered (`EventEffect.answers`),
            as the replay's plan needs them; the views keep none (`take_all` leaves them out).
        measure: set each request's `request_bytes` and `answer_bytes`: the size of its event's
            message as compact JSON (what the frames' byte columns mean; a batch's whole size).
        ordered: keep every operation in the order it began, in `opened`, and its session in
            `opened_in` (the pandas loader's rows, whatever `keep` says).
    """

    def __init__(self, *, keep: bool = True, answers: bool = False, measure: bool = False, ordered: bool = False) -> None:
        self.keep = keep
        self.answers = answers
        self.measure = measure
        self.ordered = ordered
        self.sessions: dict[str, SessionReport] = {}
        self.flows: dict[Any, _Flow] = {}  # HTTP exchanges by flow (bounded by `forget_flow`)
        self.calls = PlainCalls()  # `take_all`'s plain calls as columns; `ordered`: every operation, as a row
        self._marked: dict[int, SessionReport] = {}  # `keep`: sessions whose timelines hold rows to make objects of
        self._pointed: list[tuple[Entry, int]] = []  # `keep`: progress notifications whose operation is a row
        # method -> (the params key naming its target, its (method, target, name) by target), or (None, None)
        # for a method that begins no plain call (`_plain_request`)
        self._requests: dict[str, tuple[str | None, dict | None]] = {}
        self._plain_calls = False  # `take_all` has begun: sessions say what the hot path may take (`_plain_flags`)

    @property
    def opened(self) -> list[TracedOperation]:
        """`ordered`: every operation, in the order it began (made objects, if they were rows)."""
        calls = self.calls
        return [calls.operation(row) for row in range(len(calls.owner))] if self.ordered else []

    @property
    def opened_in(self) -> list[SessionReport]:
        """`ordered`: each operation's session, as `opened`."""
        return list(self.calls.owner) if self.ordered else []

    def take_all(self, events: Iterable[dict[str, Any]], other: Callable[[dict[str, Any], EventEffect], None] | None = None) -> None:
        """Take every event of a whole trace, numbering the entries with their trace line (a line per
        event, the header too); `other(event, step)` for each event but the plain calls.

        A plain call (a client's request that begins an operation of one round in an operating stdio
        session, its answer, a notification no task or stream may claim) takes the hot path: a row of
        `self.calls`, no object, nothing but what `take` would do to it. Everything else goes through
        `take`, which first makes objects of the session's plain calls in flight (`_objectify`): the
        core's `Session` is handed them and pairs from there, so both give the same sessions and
        operations. `keep`: the timelines' rows become objects at the end.
        """
        calls = self.calls
        times, sizes = calls.times, calls.sizes
        position = len(times)  # of the next event; its line is `position - base`
        calls.bases.append((position, position - 1))
        self._plain_calls = True  # `take` says from now on what the hot path may take of each session
        batches = events.batches() if hasattr(events, "batches") else batched(events, 1024)  # a `TraceReader`, or any
        for batch in batches:
            times.extend(map(_TS, batch))  # C-level passes over the batch: what the rows read back by position
            if self.measure:
                try:
                    sizes.extend(map(len, map(orjson.dumps, map(dict.get, batch, repeat("msg")))))
                except orjson.JSONEncodeError:  # deeper than orjson writes: the batch again, one at a time
                    del sizes[position:]
                    sizes.extend([_size(event.get("msg")) for event in batch])
            position = self._plain(batch, position, other)
        for report in self.sessions.values():
            if report.hot or report.hot_progress:
                self._objectify(report)
        if self.keep:
            self._make_objects()

    def _plain(self, batch: Any, position: int, other: Callable[[dict[str, Any], EventEffect], None] | None) -> int:
        """One batch of `take_all`: each plain call on the hot path, the rest through `take`. Returns
        the position after it. One loop with its look-ups in locals, subscripts rather than `get`
        where a key is tested first: it runs once per event.

        What it reads of the session (its flags, its rows in flight, the client's capabilities) is
        held in locals from the session's first event of a run on: only `take` changes them, and
        after `take` they are read again. The session's `end` (its last event's time) is set once
        per run of its events, before anything else may read it (`take`, the next session)."""
        calls, keep, pointed, marked = self.calls, self.keep, self._pointed, self._marked
        owners, at, ids, names, capabilities, answers = calls.owner, calls.at, calls.ids, calls.names, calls.capabilities, calls.answers
        own, place, identify, name_, capable, answer_ = owners.append, at.append, ids.append, names.append, capabilities.append, answers.append
        outcomes, notified, requests = calls.outcomes, calls.notified, self._requests
        take, sessions = self.take, self.sessions
        base = calls.bases[-1][1]
        message, c2s, s2c, progress, task_status, cancelled, version = Kind.MESSAGE, C2S_VALUE, S2C_VALUE, PROGRESS, TASK_STATUS, CANCELLED, jsonrpc.JSONRPC_VERSION
        last_key, last = None, None  # the session of the event before (most events are of the one before)
        ended = None  # the last event of `last` the hot path took: its time is `last.end` once the run ends
        # `last`'s state, as locals (see above)
        hot: dict = {}
        hot_progress: dict = {}
        plain = plain_answers = quiet = False
        declared = None
        for event in batch:
            try:  # (zero cost unless raised: a message event as every writer writes it has all four)
                kind, msg, key, direction = event["kind"], event["msg"], event["session"], event["dir"]
            except KeyError:
                kind = None
            if kind == message and "flow" not in event:
                if key != last_key or last is None:
                    if ended is not None:
                        last.end = ended["ts"]
                        ended = None
                    last_key, last = key, sessions.get(key)
                    if last is not None:
                        hot, hot_progress, plain, plain_answers, quiet = last.hot, last.hot_progress, last.plain, last.plain_answers, last.quiet
                        declared = last.session.client_capabilities
                report = last
                if report is not None and plain and type(msg) is dict and "jsonrpc" in msg and msg["jsonrpc"] == version:
                    if "method" not in msg:  # an answer: to a plain call in flight, a result of no kind the model checks
                        if direction == s2c and plain_answers and "id" in msg and "result" in msg and "error" not in msg and "http" not in event:
                            ident = msg["id"]
                            if (type(ident) is int or type(ident) is str) and (row := hot.get(ident, -1)) >= 0:
                                result = msg["result"]
                                if type(result) is dict:
                                    if RESULT_TYPE in result or "task" in result:
                                        row = -1
                                    elif "isError" in result and result["isError"] is True:
                                        outcomes[row] = _result_outcome(result)
                                if row >= 0:
                                    del hot[ident]
                                    answers[row] = position
                                    ended = event
                                    if hot_progress:
                                        for token in [t for t, held in hot_progress.items() if held == row]:
                                            del hot_progress[token]
                                    position += 1
                                    continue
                    else:
                        method = msg["method"]
                        params = msg["params"] if "params" in msg else None
                        if type(method) is not str or (params is not None and type(params) is not dict):
                            pass  # no valid message: `take` says why
                        elif "id" not in msg:  # a notification
                            if quiet and method != task_status and method != cancelled and (direction == c2s or direction == s2c):
                                ended = event
                                op: Any = None
                                if method == progress and (hot_progress or report.progress):
                                    token = _token(params)
                                    op = hot_progress.get(token)
                                    if op is not None:
                                        notified[op] = notified.get(op, 0) + 1
                                    elif (op := report.progress.get(token)) is not None:
                                        op.notifications += 1
                                if keep:
                                    entry = Entry(event["ts"], direction, "notification", method, line=position - base)
                                    if type(op) is int:
                                        pointed.append((entry, op))
                                    else:
                                        entry.op = op
                                    report.entries.append(entry)
                                position += 1
                                continue
                        elif direction == c2s:
                            try:
                                name_key, targets = requests[method]
                            except KeyError:
                                name_key, targets = requests[method] = _plain_request(method)
                            ident = msg["id"]
                            token = None
                            if params and "_meta" in params and type(meta := params["_meta"]) is dict and meta:
                                # a progress token is all a plain call's `_meta` holds
                                token = meta["progressToken"] if len(meta) == 1 and "progressToken" in meta else _NOT_PLAIN
                                if token is not _NOT_PLAIN and type(token) is not str and type(token) is not int:
                                    token = None  # no token the model follows (`_opened`)
                            if (targets is not None and (type(ident) is int or type(ident) is str) and token is not _NOT_PLAIN
                                    and ident not in hot and (not report.open_calls or (c2s, ident) not in report.open_calls)
                                    and (params is None or (REQUEST_STATE not in params and INPUT_RESPONSES not in params))):
                                target = params[name_key] if name_key is not None and params and name_key in params else None
                                try:
                                    shared = targets[target]
                                except (KeyError, TypeError):  # a new name, or one no string
                                    shared = _target_names(targets, method, target, calls.distinct)
                                row = len(owners)
                                own(report)
                                place(position)
                                identify(ident)
                                name_(shared)
                                capable(declared)
                                answer_(-1)
                                hot[ident] = row
                                if token is not None:
                                    hot_progress[token] = row
                                report.requests += 1
                                ended = event
                                if keep:
                                    marked[id(report)] = report
                                    report.entries.append(row)
                                    report.operations.append(row)
                                position += 1
                                continue
            if ended is not None:  # `take` may read the session's end, or end it
                last.end = ended["ts"]
                ended = None
            step = take(event, position)
            if step is not None:
                for entry in step.added:
                    entry.line = position - base
                if other is not None:
                    other(event, step)
            sessions = self.sessions  # a legacy stream's alias renames the sessions, and a new one is in it
            last = None
            position += 1
        if ended is not None:
            last.end = ended["ts"]
        return position

    def _objectify(self, report: SessionReport) -> None:
        """The session's plain calls in flight made objects, where `take` looks for them: its open
        calls and running operations, the progress tokens, and the core's requests in flight (a plain
        call's answer is the core's to pair from now on)."""
        calls, session = self.calls, report.session
        for ident, row in report.hot.items():
            op = calls.operation(row)
            entry = op.rounds[0]
            report.open_calls[(C2S_VALUE, ident)] = entry
            report.running.append(op)
            session.asking(Request(id=ident, method=op.method, params=None, _parsed=True), entry.ts)
        report.hot.clear()
        for token, row in report.hot_progress.items():
            report.progress[token] = calls.operation(row)
        report.hot_progress.clear()

    def _make_objects(self) -> None:
        """`keep`: the rows in the timelines made the entries and operations they stand for."""
        operation = self.calls.operation
        for report in self._marked.values():
            report.entries[:] = [operation(item).rounds[0] if type(item) is int else item for item in report.entries]
            report.operations[:] = [operation(item) if type(item) is int else item for item in report.operations]
        for entry, row in self._pointed:
            entry.op = operation(row)
        self._marked.clear()
        self._pointed.clear()

    def take(self, event: dict[str, Any], position: int = -1) -> EventEffect | None:
        """Take one trace event; None for the header. `position`: its place in `take_all`'s columns."""
        kind = event["kind"]
        if kind == Kind.TRACE:
            return None
        sessions = self.sessions
        key = event.get("session")
        report = sessions.get(key) if key is not None else None
        if report is None:  # a new session, or a key the rebuild renames (sessionless, not MCP, an alias)
            report = self._session(event, kind, key or "-")
        if report.hot or report.hot_progress:
            self._objectify(report)
        report.end = event["ts"]
        step = EventEffect(report, [], [])
        if self.answers:
            step.answers = []
        _take(step, event, self.flows)
        if kind == Kind.HTTP:
            self.flows.pop(event.get("flow"), None)  # the exchange is over
        if self.measure:
            _measure(step, event)
        if self.ordered and step.opened:
            for op in step.opened:
                self.calls.add(op, report, position)
        if self.keep:
            if step.added:
                report.entries += step.added
            if step.opened:
                report.operations += step.opened
        if self._plain_calls:
            _plain_flags(report)
        return step

    def _session(self, event: dict[str, Any], kind: str, key: str) -> SessionReport:
        """The session of an event whose key is not a known session's."""
        sessions = self.sessions
        alias = event.get("conn_session")
        if alias and alias != key and key not in sessions and alias in sessions:
            # A legacy GET /sse stream opens under its connection's key; its `endpoint` event
            # names the session: one session, not an empty one per stream.
            self.sessions = sessions = {key if name == alias else name: value for name, value in sessions.items()}
            sessions[key].id = key
        transport = event.get("transport", "?")
        version = None
        if key.startswith(SESSIONLESS_PREFIX) and transport == STREAMABLE_HTTP:
            version = _sessionless_version(event, self.flows)
            key = f"{SESSIONLESS} {version or '-'}"
        elif event.get("session") is None and kind == Kind.HTTP and event.get("mcp") is False:
            key, transport = NOT_MCP, "http"
        report = sessions.get(key)
        if report is None:
            report = sessions[key] = SessionReport(key, transport, event["ts"], sessionless=key.startswith(SESSIONLESS))
            if report.sessionless:
                report.session = Session(version, transport)
        return report

    def forget(self, key: str) -> None:
        """Drop a session (a live view keeps a bounded number)."""
        self.sessions.pop(key, None)

    def finish(self) -> list[TracedOperation]:
        """The trace is read to its end: the calls still open were never answered, an operation
        still waiting for its retry ends asking for input. Returns the operations this finished."""
        done: list[TracedOperation] = []
        for report in self.sessions.values():
            if report.hot or report.hot_progress:
                self._objectify(report)
            for op in [entry.op for entry in report.open_calls.values()] + report.awaiting + [task.op for task in report.tasks.values()] + report.shadowed:
                if op is not None and op.open:
                    op.outcome = open_outcome(op)
                    if op.outcome == INPUT_REQUIRED:
                        op.detail, op.end = op.last.detail, op.last.end
                    elif op.outcome == CANCELLED_OUTCOME:
                        op.detail = op.cancelled
                    done.append(op)
            for entry in report.open_calls.values():
                op = entry.op
                if op is not None and op.outcome in (LISTENING, CANCELLED_OUTCOME):
                    entry.outcome, entry.detail = op.outcome, op.detail
                else:
                    entry.outcome = "unanswered"
            report.open_calls.clear()
            report.awaiting.clear()
            report.running.clear()
        return done


def _measure(step: EventEffect, event: dict[str, Any]) -> None:
    """`Rebuild(measure=True)`: the requests the event began or answered carry its message's size."""
    size = -1
    for entry in step.added:
        if entry.kind == "request":
            if size < 0:
                size = len(orjson.dumps(event.get("msg")))
            entry.request_bytes = size
    for entry in step.answered:
        if size < 0:
            size = len(orjson.dumps(event.get("msg")))
        entry.answer_bytes = size


# Requests the hot path leaves to `take`: what changes the session (the handshake) or makes more
# than a running operation (a task, a listen stream).
_UNUSUAL_REQUESTS = frozenset({"initialize", LISTEN, *TASK_METHODS})


def open_outcome(op: TracedOperation) -> str:
    """The outcome of an operation still open when its trace (or session) ends: a listen stream still
    listening, a task as last seen, a request that asked for input and was never retried, one its
    sender cancelled, or unanswered."""
    if op.stream is not None:
        return LISTENING
    if op.task is not None and op.task.op is op:
        return f"task-{op.task.status}"
    if op.asked is not None and op.last.end is not None:
        return INPUT_REQUIRED
    if op.cancelled is not None:
        return CANCELLED_OUTCOME
    return "unanswered"


def _sessionless_version(event: dict[str, Any], flows: dict[Any, _Flow]) -> str | None:
    """The protocol version a sessionless event belongs to: its request's (the envelope's, the
    `MCP-Protocol-Version` header's, or what `initialize` offers), else its exchange's."""
    flow = event.get("flow")
    if event["kind"] == Kind.MESSAGE and event.get("dir") == "c2s" and isinstance(msg := event.get("msg"), dict):
        params = msg.get("params") if isinstance(msg.get("params"), dict) else None
        http = event.get("http") if isinstance(event.get("http"), dict) else {}
        headers = http.get("headers") if isinstance(http.get("headers"), dict) else {}
        version = meta_version(params) or headers.get(PROTOCOL_VERSION)
        if version is None and msg.get("method") == "initialize" and params:
            version = params.get("protocolVersion") if isinstance(params.get("protocolVersion"), str) else None
        if flow is not None:
            flows.setdefault(flow, _Flow()).version = version
        return version
    known = flows.get(flow)
    return known.version if known is not None else None


def _take(step: EventEffect, event: dict[str, Any], flows: dict[Any, _Flow]) -> None:
    report, added = step.session, step.added
    kind, ts, direction = event["kind"], event["ts"], event.get("dir")
    flow = event.get("flow")
    if kind == Kind.MESSAGE:
        try:
            message = jsonrpc.from_obj(event.get("msg"))
        except InvalidMessage as exc:
            added.append(Entry(ts, direction, "violation", INVALID_MESSAGE, detail=exc.reason))
            return
        if step.answers is not None:
            step.message = message
        http = event.get("http")
        _message(step, message, DIRECTIONS.get(direction) or Direction(direction), ts, flow, http if type(http) is dict else {}, flows)
    elif kind == Kind.VIOLATION:
        code = event.get("code", "?")
        known = flows.get(flow) if flow is not None else None
        if code == "unknown-answer" and known is not None and known.foreign is not None:
            # A recorder before `pair_with_post` took a refusal's foreign id for a stray answer.
            added.append(Entry(ts, direction, "warning", FOREIGN_ANSWER_ID, detail=known.foreign))
            return
        added.append(Entry(ts, direction, "violation", code, detail=event.get("detail", "")))
    elif kind == Kind.WARNING:
        added.append(Entry(ts, direction, "warning", event.get("code", "?"), detail=event.get("detail", "")))
    elif kind == Kind.STDERR:
        text = event.get("text")
        added.append(Entry(ts, direction, "stderr", "stderr", detail=text if isinstance(text, str) else "<binary>"))
    elif kind == Kind.PROCESS:
        if event.get("event") == "exit":
            report.exit_code = event.get("exit_code")
            report.session.close("the server process exited")
        added.append(Entry(ts, None, "process", event.get("event", "?"), detail=str(event.get("exit_code", event.get("argv", "")))))
    elif kind == Kind.HTTP:
        status = event.get("status")
        if status is not None and status >= 400:
            outcome_, detail = str(status), ""
            challenge = bearer_challenge((event.get("response_headers") or {}).get(AUTHENTICATE))
            failure = classify_status(status, has_session=False, challenge=challenge)
            if failure in AUTH_FAILURES:  # the request it refused: that is its outcome, with what the server asked for
                outcome_, detail = f"{status} {failure}", challenge.summary() if challenge else "no challenge"
                _refused(step, flow, flows.get(flow), failure, detail)
            else:  # a request its exchange failed before any answer came
                _refused(step, flow, flows.get(flow), HTTP_ERROR, f"HTTP {status}")
            added.append(Entry(ts, direction, "http", f"{event.get('method')} {event.get('path')}", outcome=outcome_, detail=detail))
            if status == SESSION_NOT_FOUND and event.get("session") and not report.sessionless:
                report.session.lose(Trigger.SESSION_NOT_FOUND, f"HTTP {status}")
        elif status is not None and event.get("method") == "DELETE":
            report.session.close("DELETE")
    elif kind == Kind.STREAM:
        step_ = event.get("event", "?")
        detail = event.get("error") or event.get("reason") or ""
        by_client = step_ == "error" and detail == CLIENT_CLOSED  # the client closed it: its normal end
        if by_client:
            step_, detail = "close", ""
        known = flows.get(flow) if flow is not None else None
        if known is not None and known.op is not None and known.op.stream is not None and step_ in ("close", "error"):
            _stream_ended(step, known.op, ts, "closed" if step_ == "close" else "cut", detail)
        if event.get("method") == "POST" and step_ in ("open", "close"):
            return  # one per SSE answer: the request line already shows it
        if report.transport == LEGACY_SSE and event.get("method") == "GET" and step_ in ("close", "error"):
            report.session.lose(Trigger.STREAM_ENDED, step_)  # a legacy session lives on its stream
            for op in list(report.streams.values()):  # and its listen streams ride that one stream
                _stream_ended(step, op, ts, "closed" if step_ == "close" else "cut", detail)
        name = f"{event.get('method', '')} {event.get('path', '')} stream {step_}".strip()
        added.append(Entry(ts, direction, kind, name + (" (by the client)" if by_client else ""), detail=detail))
    elif kind == Kind.ERROR:
        added.append(Entry(ts, direction, kind, event.get("code") or kind, detail=event.get("detail") or event.get("error") or ""))


def _refused(step: EventEffect, flow: Any, known: _Flow | None, failure: str, detail: str) -> None:
    """The request of exchange `flow` got no answer but `failure` (an authentication refusal, an HTTP error)."""
    report = step.session
    if known is not None and known.request_id is not None:
        entry = report.open_calls.pop((C2S.value, _call_id(report, flow, known.request_id)), None)
        if entry is not None:
            entry.outcome, entry.detail = failure, detail
            if entry.op is not None:
                _finished(report, entry.op, failure, detail, None)
                step.finished.append(entry.op)


def _message(step: EventEffect, message: jsonrpc.Message, direction: Direction, ts: float, flow: Any,
             http: dict[str, Any], flows: dict[Any, _Flow]) -> None:
    report = step.session
    way = C2S_VALUE if direction is C2S else S2C_VALUE
    items = message.items if type(message) is jsonrpc.Batch else (message,)
    for item in items:
        kind = type(item)
        if kind is Request:
            method, target, name = _names(item.method, call_name(item.method, item.params))
            entry = Entry(ts, way, "request", name, id=item.id, flow=flow)
            step.added.append(entry)
            report.requests += 1
            key = (way, (flow, item.id) if report.sessionless else item.id)
            shadowed = report.open_calls.get(key)
            if shadowed is not None and shadowed.op is not None:  # an id reused in flight: the earlier request
                report.shadowed.append(shadowed.op)  # can no longer be paired, and stays open
            report.open_calls[key] = entry
            carrier = known.op if direction is S2C and flow is not None and (known := flows.get(flow)) is not None else None
            _operation(step, report, item, entry, direction, method, target, flow, carrier)
            if direction is C2S and flow is not None:
                known = flows.setdefault(flow, _Flow())
                known.request_id, known.label, known.op = item.id, f"{item.method} (id {item.id!r})", entry.op
        elif kind is Notification:
            entry = Entry(ts, way, "notification", item.method)
            step.added.append(entry)
            if item.method == PROGRESS and report.progress:
                op = report.progress.get(_token(item.params))
                if op is not None:
                    op.notifications += 1
                    entry.op = op
            elif report.tasks or item.method == TASK_STATUS:
                _task_notification(step, report, item, entry)
            if entry.op is None and direction is S2C:
                _scoped(step, report, item, entry, flows.get(flow) if flow is not None else None, flow)
            if item.method == CANCELLED and type(item.params) is dict and type(cancelled := item.params.get("requestId")) in (str, int):
                _cancelled(step, report, item.params, cancelled, way, flow, ts)
    known = flows.get(flow) if flow is not None else None
    if direction is S2C and type(message) is ErrorResponse:
        status = http.get("status")
        paired = pair_with_post(message, known.request_id, status) if known is not None else None
        if paired is not None:
            if message.id is not None:
                known.foreign = foreign_id_warning(message.id, status, known.label)
            message = paired
        elif message.id is not None and isinstance(status, int) and status >= 400 and (known is None or known.request_id is None):
            refused = f"{http.get('method') or 'the request'} {http.get('path') or ''}".strip()
            flows.setdefault(flow, _Flow()).foreign = foreign_id_warning(message.id, status, refused, paired=False)
            return  # it refused a request that carried none: an answer to nothing
    if report.sessionless:  # ids are the client's own, and many clients share the stream: keep them apart
        message = _by_flow(message, flow)
    for result in report.session.observe(direction, message, ts):
        if type(result) is Exchange:
            entry = report.open_calls.pop((C2S_VALUE if result.direction is C2S else S2C_VALUE, result.request.id), None)
            if entry is not None:
                entry.latency, entry.end = result.latency, result.finished
                entry.outcome, entry.detail = outcome(result.answer)
                if type(result.answer) is ErrorResponse:
                    entry.error_code = result.answer.code
                step.answered.append(entry)
                if step.answers is not None:
                    step.answers.append(result.answer)
                if entry.op is not None:
                    _answered(step, report, entry, result.answer, result.finished)


# A request's method, what it names and its timeline name, one string each shared by every request
# that has them: a big trace keeps an operation per request, and a string per field each (parsed
# anew from every line) took a fifth of the file's size again. Bounded: a trace of ever new names
# (a fuzzer's) stops sharing, nothing else changes.
_NAMES: dict[tuple[str, str | None], tuple[str, str | None, str]] = {}
NAMES_SHARED = 4096


def _names(method: str, target: str | None) -> tuple[str, str | None, str]:
    """(method, target, "method target") of a request, the strings shared with earlier requests'."""
    key = (method, target)
    known = _NAMES.get(key)
    if known is None:
        known = (method, target, f"{method} {target}" if target else method)
        if len(_NAMES) < NAMES_SHARED and type(method) is str:
            _NAMES[key] = known
    return known


def _call_id(report: SessionReport, flow: Any, request_id: Any) -> Any:
    return (flow, request_id) if report.sessionless else request_id


def _by_flow(message: jsonrpc.Message, flow: Any) -> jsonrpc.Message:
    """`message` with its id made that of its HTTP exchange too: (flow, id)."""
    kind = type(message)
    if kind is Request:
        return Request(id=(flow, message.id), method=message.method, params=message.params, _parsed=True)
    if kind is Response:
        return Response(id=(flow, message.id), result=message.result, _parsed=True)
    if kind is ErrorResponse:
        return ErrorResponse(id=(flow, message.id), code=message.code, message=message.message, data=message.data, _parsed=True)
    return message


def ended(report: SessionReport) -> bool:
    """Whether the session is over: closed, or lost."""
    return report.session.state in (CLOSED, LOST)


C2S_VALUE, S2C_VALUE = C2S.value, S2C.value
DIRECTIONS = {C2S_VALUE: C2S, S2C_VALUE: S2C}


def _token(params: Any) -> Any:
    """A progress notification's token (hashable, else None)."""
    token = params.get("progressToken") if isinstance(params, dict) else None
    return token if isinstance(token, (str, int)) else None


def _violation(step: EventEffect, report: SessionReport, entry: Entry, code: str, detail: str, version: str | None) -> None:
    """A rule the operation broke, where the rule holds (`protocol/rules.py`)."""
    if applies(code, report.transport, version):
        step.added.append(Entry(entry.ts if entry.end is None else entry.end, entry.dir, "violation", code, detail=detail, line=entry.line))


def _warning(step: EventEffect, entry: Entry, code: str, detail: str) -> None:
    step.added.append(Entry(entry.ts, entry.dir, "warning", code, detail=detail))


def _version(report: SessionReport, params: Any) -> str | None:
    return meta_version(params) if isinstance(params, dict) and "_meta" in params else report.session.version


def _operation(step: EventEffect, report: SessionReport, item: Request, entry: Entry, direction: Direction, method: str,
               target: str | None, flow: Any = None, carrier: "Operation | None" = None) -> None:
    """The operation `item` begins, or the one whose next round it is (`method`: its method, shared).
    `carrier`: a server request's, the client operation whose HTTP response stream carried it."""
    params = item.params if type(item.params) is dict else None
    if direction is not C2S:
        # A server request belongs to the request whose response stream carried it (Streamable HTTP:
        # "SHOULD relate to the originating client request"), else to the client's one running operation.
        op = TracedOperation(direction.value, method, entry.name, None, [entry])
        entry.op = op
        outer = carrier if carrier is not None and carrier.dir == C2S_VALUE else (report.running[0] if len(report.running) == 1 else None)
        if outer is not None:
            outer.inner.append(op)
            op.outer = outer
        step.opened.append(op)
        return
    if params is not None and method in INPUT_METHODS and (INPUT_RESPONSES in params or REQUEST_STATE in params):
        op = _link(step, report, item, params, entry)
        if op is not None:
            entry.op = op
            op.rounds.append(entry)
            _in_flight(step, report, params, entry)
            report.running.append(op)
            return
    named = _named_task(step, report, method, params, entry) if method in TASK_METHODS else None
    op = _opened(report, entry, method, target, params)
    step.opened.append(op)
    if named is not None:
        op.task = named
        if method == "tasks/get":
            named.polls += 1
    if method == LISTEN:  # a stream, not a call waiting for its answer
        op.stream = ListenStream(entry.ts)
        report.streams[(flow, item.id) if report.sessionless else item.id] = op
        _stopped(report, op)
    if params is not None and REQUEST_STATE in params:
        _in_flight(step, report, params, entry)


def _opened(report: SessionReport, entry: Entry, method: str, target: str | None, params: dict | None) -> TracedOperation:
    """The operation a client's request `entry` begins, running: its capabilities, log level and
    progress token, and the session's client when the request names it (both paths of `Rebuild`)."""
    meta = params.get("_meta") if params is not None else None
    if type(meta) is not dict:
        meta = None
    capabilities = meta.get(META_CLIENT_CAPABILITIES) if meta is not None else None
    op = TracedOperation(C2S_VALUE, method, entry.name, target,
                   [entry], capabilities if capabilities is not None else report.session.client_capabilities)
    entry.op = op
    report.running.append(op)
    if meta is not None:
        if META_LOG_LEVEL in meta:
            op.log_level = meta[META_LOG_LEVEL]
        token = meta.get("progressToken")
        if token is not None and type(token) in (str, int):
            report.progress[token] = op
    if report.client is None and params is not None:
        info = params.get("clientInfo") if method == "initialize" else (meta.get(META_CLIENT_INFO) if meta is not None else None)
        if isinstance(info, dict):
            report.client = info
    return op


def _in_flight(step: EventEffect, report: SessionReport, params: dict, entry: Entry) -> None:
    """One `requestState` carried by two requests at once: it belongs to one retry only."""
    state = params.get(REQUEST_STATE)
    if isinstance(state, str):
        other = report.states.get(state)
        if other is not None and other.end is None and other is not entry:
            _violation(step, report, entry, "mrtr-state-shared",
                       f"{entry.name} (id {entry.id!r}) carries the requestState that {other.name} (id {other.id!r}) still carries",
                       _version(report, params))
        report.states[state] = entry


def _link(step: EventEffect, report: SessionReport, item: Request, params: dict, entry: Entry) -> "Operation | None":
    """The waiting operation a retry continues, by its exact `requestState`, else by method, name and
    the `inputRequests` keys; None when none fits or two do (a warning), never a guess."""
    state = params.get(REQUEST_STATE)
    responses = params.get(INPUT_RESPONSES)
    keys = frozenset(responses) if isinstance(responses, dict) else frozenset()
    target = call_name(item.method, params)
    version = _version(report, params)
    waiting = report.awaiting
    same = [op for op in waiting if op.method == item.method and op.target == target]
    fits = [op for op in same if op.asked == keys]
    chosen: TracedOperation | None = None
    if state is not None:
        exact = [op for op in waiting if op.state is not None and op.state == state]
        if len(exact) > 1:
            _warning(step, entry, MRTR_AMBIGUOUS, f"{entry.name} (id {item.id!r}): {len(exact)} waiting operations sent this requestState; linked to none")
            return None
        if exact:
            chosen = exact[0]
            if chosen.method != item.method or chosen.target != target:
                _violation(step, report, entry, "mrtr-state-changed",
                           f"{entry.name} (id {item.id!r}) echoes the requestState of {chosen.name}: a retry repeats the same method and params", version)
        elif len(fits) == 1:
            chosen = fits[0]
            what = "changes the requestState it was sent" if chosen.state is not None else "invents a requestState the server never sent"
            _violation(step, report, entry, "mrtr-state-changed", f"{entry.name} (id {item.id!r}) {what}", version)
    elif len(fits) == 1:
        chosen = fits[0]
        if chosen.state is not None:
            _violation(step, report, entry, "mrtr-state-changed",
                       f"{entry.name} (id {item.id!r}) drops the requestState it was sent (echoed byte for byte on a retry)", version)
    if chosen is None:
        if len(fits) > 1 or (not fits and len(same) > 1):
            _warning(step, entry, MRTR_AMBIGUOUS, f"{entry.name} (id {item.id!r}): {len(fits) or len(same)} waiting operations fit this retry; linked to none")
            return None
        if len(same) == 1 and not fits:
            chosen = same[0]
        else:
            _warning(step, entry, MRTR_UNLINKED, f"{entry.name} (id {item.id!r}) answers input no waiting operation asked for")
            return None
    if chosen.asked != keys:
        _violation(step, report, entry, "mrtr-keys-mismatch",
                   f"{entry.name} (id {item.id!r}) answers {sorted(keys)}, the server asked {sorted(chosen.asked or ())}", version)
    if any(r.id == item.id for r in chosen.rounds):
        _violation(step, report, entry, "mrtr-id-reused", f"{entry.name}: a retry reuses the id {item.id!r} of an earlier round (each round is a new request)", version)
    waiting.remove(chosen)
    chosen.asked = None
    return chosen


def _answered(step: EventEffect, report: SessionReport, entry: Entry, answer: Response | ErrorResponse, ts: float) -> None:
    """A round's answer: the operation waits for its retry, or ends."""
    op = entry.op
    assert op is not None
    if op.dir != C2S_VALUE:
        _finished(report, op, entry.outcome, entry.detail, ts)
        step.finished.append(op)
        return
    result = answer.result if type(answer) is Response else None
    if report.states:  # the round's requestState is no longer in flight
        for key in [key for key, held in report.states.items() if held is entry]:
            del report.states[key]
    version = report.session.version
    if op.task is not None and (type(result) is dict or op.method == "tasks/result"):
        _task_answer(step, report, op, entry, answer, result or {}, ts)
    elif type(result) is dict and type(handle := result.get("task")) is dict and type(handle.get("taskId")) is str:
        _task_created(step, report, op, entry, handle, ts)
        return
    elif type(result) is dict and result.get(RESULT_TYPE) == TASK_RESULT_TYPE and type(result.get("taskId")) is str:
        _task_created(step, report, op, entry, result, ts)  # 2026-07-28's extension: the task's fields beside resultType
        return
    if op.stream is not None:
        op.stream.closed, op.stream.ending = ts, "result"
        _forget_stream(report, op)
    elif type(result) is dict and op.method in CACHEABLE_METHODS and has_input_required(version):
        missing = [hint for hint in CACHE_HINTS if hint not in result]
        if missing:
            _warning(step, entry, MISSING_CACHE_HINTS, f"{entry.name} (id {entry.id!r}): a {version} result without {' and '.join(missing)}")
    if type(result) is dict and RESULT_TYPE not in result and has_input_required(version):
        _violation(step, report, entry, "missing-result-type", f"{entry.name} (id {entry.id!r}): a {version} result without resultType", version)
    if entry.outcome == INPUT_REQUIRED and type(result) is dict:
        if op.method not in INPUT_METHODS:
            _violation(step, report, entry, "input-required-method",
                       f"{entry.name} answered input_required: only {', '.join(sorted(INPUT_METHODS))} may", version)
        asks = result.get(INPUT_REQUESTS)
        asks = asks if isinstance(asks, dict) else {}
        declared = op.capabilities if isinstance(op.capabilities, dict) else {}
        for key, ask in asks.items():
            method = ask.get("method") if type(ask) is dict else None
            wanted = INPUT_CAPABILITIES.get(method) if type(method) is str else None
            if wanted is not None and wanted not in declared:
                _violation(step, report, entry, "input-capability-missing",
                           f"{entry.name} asks {key!r} by {ask.get('method')}, but the client declared no {wanted} capability", version)
        op.state, op.asked = result.get(REQUEST_STATE), frozenset(asks)
        _stopped(report, op)
        report.awaiting.append(op)
        return
    _finished(report, op, entry.outcome, entry.detail, ts)
    step.finished.append(op)


def _stopped(report: SessionReport, op: TracedOperation) -> None:
    """The operation no longer waits for the server."""
    try:
        report.running.remove(op)
    except ValueError:
        pass


def _finished(report: SessionReport, op: TracedOperation, outcome_: str, detail: str, end: float | None) -> None:
    op.outcome, op.detail, op.end = outcome_, detail, end
    _stopped(report, op)
    if report.progress:
        for token in [t for t, held in report.progress.items() if held is op]:
            del report.progress[token]


# 2026-07-28's `io.modelcontextprotocol/tasks` extension (SEP-2663): a result that is a task handle.
TASK_RESULT_TYPE = "task"
# An operation that became a task ends with its task: how each terminal status ends it.
CANCELLED_OUTCOME = "cancelled"  # an operation its sender cancelled, that no answer ended (a task's too)
TASK_OUTCOMES = {"completed": "ok", "failed": "failed", "cancelled": CANCELLED_OUTCOME}


def _named_task(step: EventEffect, report: SessionReport, method: str, params: dict | None, entry: Entry) -> Task | None:
    """The task a tasks/get, tasks/result, tasks/cancel or tasks/update names; a violation when no
    operation of the session became it."""
    task_id = params.get("taskId") if params is not None else None
    if type(task_id) is not str:
        return None
    task = report.tasks.get(task_id)
    if task is None:
        _violation(step, report, entry, "task-unknown", f"{method} names task {task_id!r}, which no request of this session created",
                   _version(report, params))
    return task


def _task_created(step: EventEffect, report: SessionReport, op: TracedOperation, entry: Entry, handle: dict, ts: float) -> None:
    """The answer is a task handle: the operation stays open until its task ends."""
    status = handle.get("status") if type(handle.get("status")) is str else "working"
    task = Task(handle["taskId"], op, ts, status, [(ts, status)])
    op.task = task
    report.tasks[task.id] = task
    entry.outcome, entry.detail = "task", f"task {task.id} {status}"
    _stopped(report, op)
    if status in TERMINAL_TASK_STATUSES:
        _task_status(step, report, task, status, ts, entry)


def _task_answer(step: EventEffect, report: SessionReport, op: TracedOperation, entry: Entry, answer: Response | ErrorResponse,
                 result: dict, ts: float) -> None:
    """A tasks/get, tasks/cancel (a status) or tasks/result (the operation's real result) answered."""
    task = op.task
    assert task is not None
    if op.method == "tasks/result":
        task.result_at = ts
        owner = task.op
        owner.outcome, owner.detail = outcome(answer)
        if owner.end is None:
            owner.end, task.done = ts, ts
            step.finished.append(owner)
        return
    status = result.get("status")
    if type(status) is str:
        _task_status(step, report, task, status, ts, entry)
        final = result.get("result")
        if type(final) is dict and task.op.end == ts and status == "completed":  # 2026-07-28: the result rides the poll
            task.op.outcome, task.op.detail = outcome(Response(id=entry.id, result=final, _parsed=True))


def _task_status(step: EventEffect, report: SessionReport, task: Task, status: str, ts: float, entry: Entry) -> None:
    """A status the task was seen in: a change, an end, or a broken rule."""
    version = report.session.version
    if task.status in TERMINAL_TASK_STATUSES and status != task.status:
        _violation(step, report, entry, "task-status-regressed", f"task {task.id} went from {task.status} to {status}: a terminal status is final", version)
    elif status not in TERMINAL_TASK_STATUSES and task.result_at is not None:
        _violation(step, report, entry, "task-result-early", f"task {task.id} is {status} after tasks/result answered: a result before completion", version)
    if status != task.status:
        task.status = status
        task.statuses.append((ts, status))
    owner = task.op
    if status in TERMINAL_TASK_STATUSES and owner.open:
        owner.outcome, owner.end = TASK_OUTCOMES[status], ts
        task.done = ts
        step.finished.append(owner)


def _task_notification(step: EventEffect, report: SessionReport, item: Notification, entry: Entry) -> None:
    """`notifications/tasks/status` and any notification whose `_meta` names a related task: tied to
    the task's operation."""
    params = item.params if type(item.params) is dict else {}
    if item.method == TASK_STATUS:
        task_id = params.get("taskId")
    else:
        meta = params.get("_meta")
        related = meta.get(META_RELATED_TASK) if type(meta) is dict else None
        task_id = related.get("taskId") if type(related) is dict else None
    if type(task_id) is not str:
        return
    task = report.tasks.get(task_id)
    if task is None:
        if item.method == TASK_STATUS:
            _violation(step, report, entry, "task-unknown", f"{TASK_STATUS} names task {task_id!r}, which no request of this session created", report.session.version)
        return
    entry.op = task.op
    task.op.notifications += 1
    if item.method == TASK_STATUS and type(params.get("status")) is str:
        _task_status(step, report, task, params["status"], entry.ts, entry)


# The outcome of a listen stream still open when the trace ends.
LISTENING = "listening"


def _forget_stream(report: SessionReport, op: TracedOperation) -> None:
    for key in [key for key, held in report.streams.items() if held is op]:
        del report.streams[key]


def _stream_ended(step: EventEffect, op: TracedOperation, ts: float, ending: str, detail: str) -> None:
    """A listen stream's HTTP response ended without its result: the client closed it, or it broke."""
    report, stream = step.session, op.stream
    assert stream is not None
    if not op.open:
        return
    stream.closed, stream.ending = ts, ending
    entry = op.first
    report.open_calls.pop((C2S_VALUE, (entry.flow, entry.id) if report.sessionless else entry.id), None)
    entry.outcome = op.outcome = ending
    entry.detail = op.detail = detail
    op.end = ts
    _forget_stream(report, op)
    step.finished.append(op)


def _cancelled(step: EventEffect, report: SessionReport, params: dict, request_id: Any, way: str, flow: Any, ts: float) -> None:
    """A `notifications/cancelled` from `way`, of that side's own request `request_id`: the client
    closing its listen stream, or either side giving up on a request (an answer may still come, and
    pairs; none is owed)."""
    op = None
    if way == C2S_VALUE and report.streams:
        op = report.streams.get((flow, request_id) if report.sessionless else request_id)
    if op is not None:
        _stream_ended(step, op, ts, "closed", "cancelled by the client")
    elif not report.sessionless and (asked := report.open_calls.get((way, request_id))) is not None and asked.op is not None:
        reason = params.get("reason")
        asked.op.cancelled = reason if type(reason) is str else ""


def _scoped(step: EventEffect, report: SessionReport, item: Notification, entry: Entry, known: "_Flow | None", flow: Any) -> None:
    """A server notification's operation: the listen stream its subscription id names, or the request
    whose response stream carried it (HTTP); a log message for a request that asked no level."""
    params = item.params if type(item.params) is dict else None
    meta = params.get("_meta") if params is not None else None
    subscription = meta.get(META_SUBSCRIPTION_ID) if type(meta) is dict else None
    if subscription is not None and report.streams and type(subscription) in (str, int):
        op = report.streams.get((flow, subscription) if report.sessionless else subscription)
        if op is not None and op.stream is not None:
            entry.op = op
            op.notifications += 1
            op.stream.notifications.append((entry.ts, item.method))
            if item.method == LISTEN_ACKNOWLEDGED and op.stream.acknowledged is None:
                op.stream.acknowledged = entry.ts
            return
    op = known.op if known is not None else None
    if op is None:
        return
    entry.op = op
    op.notifications += 1
    if item.method == LOG_MESSAGE and op.log_level is None and op.stream is None:
        _violation(step, report, entry, "log-not-requested",
                   f"{LOG_MESSAGE} on the stream of {op.name} (id {op.first.id!r}), which asked no log level", report.session.version)
