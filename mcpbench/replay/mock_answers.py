"""`serve-trace`'s recorded answers: what the mock says to each request, with no I/O.

`TraceAnswers` files every recorded call under a key, the canonical JSON of its
method and params without `_meta` (so ids, progress tokens and the 2026-07-28
envelope do not matter). Each client session is answered from the start of the
recording, in the era it speaks (a handshake client from the handshake-era
sessions, a 2026-07-28 client from the others; an error when the recording has
none): repeated identical calls get their answers in recorded order, and once a
key runs dry its last answer is reused. `initialize` and `server/discover` are
keyed on the method alone (their params describe the client), so any client
gets the recorded capabilities. A call recorded without its answer (a failed exchange) still gets
what the server sent for it (an elicitation, progress), then an error. An unrecorded request gets a JSON-RPC error
naming the nearest recorded request (same method, most similar params), or,
with a `Forwarder` (`--on-miss forward URL`), the answer of a live server.

A 2026-07-28 retry is matched on the keys of its `inputResponses` (the client's answers need not be
the recording's), and the `requestState` a recorded `input_required` result carried is replaced by one
the mock seals itself and checks on the retry (`mock_state.py`: a forged or missing one is refused).

A task is served as one of the mock's (`mock_tasks.py`: its recorded statuses poll by poll, its end,
a cancel honoured), and a `subscriptions/listen` stream is held open, its recorded changes played
after the live requests that caused them (`mock_listen.py`).

A reply keeps what the server sent for the call in recorded order, each
message with its time after the first (`RecordedReply.timeline`), so the
shells can keep the recorded spacing (`mock_play.py`).
"""

import difflib
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.jsonrpc import ErrorResponse, Notification, Request
from mcpbench.protocol.versions import LISTEN, REQUEST_STATE, Era, call_name, era_title, progress_token, request_era
from mcpbench.replay.forward import Forwarder
from mcpbench.replay.mock_listen import HeldListen, MockListens, tagged
from mcpbench.replay.mock_state import MockStates, retry_key
from mcpbench.replay.mock_tasks import MockTasks
from mcpbench.replay.plan import Ask, RecordedCall, TracePlan

# JSON-RPC error for a request the recording has no answer to (JSON-RPC "method not found"
# fits a method never recorded; the same code keeps clients' handling simple for both cases).
NOT_RECORDED = -32601

# Requests whose params describe the client, not what it asks: matched on the method alone.
CLIENT_DESCRIBING = frozenset({"initialize", "server/discover"})

# JSON-RPC error for a client whose era the recording has no session of (-32600, invalid
# request: the request is fine, but not for this recording).
WRONG_ERA = -32600

# JSON-RPC error for a call recorded without its answer (its exchange failed, or the session ended
# first), sent after what the server did send for it: the mock serves what it recorded, the server
# requests (an elicitation) and notifications included, and fails the call as it failed.
UNANSWERED = jsonrpc.INTERNAL_ERROR

# How much of the nearest recorded params an error message shows.
NEAREST_CHARS = 200
# How much of two requests' params `nearest` compares.
NEAREST_COMPARE = 4096


def match_key(method: str, params: Any) -> bytes:
    """The key a request is matched on: method + params, without `_meta`; a 2026-07-28 retry by the keys
    of its `inputResponses`, without its `requestState` (`mock_state.retry_key`)."""
    if method in CLIENT_DESCRIBING:
        return orjson.dumps([method])
    if isinstance(params, dict) and "_meta" in params:
        params = {k: v for k, v in params.items() if k != "_meta"}
    return orjson.dumps([method, retry_key(params) or None], option=orjson.OPT_SORT_KEYS)


@dataclass(slots=True)
class RecordedReply:
    """What the mock sends for one request: the server's messages for it in recorded order, then the answer.

    `timeline` holds `(offset, message)`: a `Notification` or an `Ask`, `offset` seconds after the
    call's first server message (the answer's is `answer_at`).
    """

    answer: dict  # {"result": …} or {"error": …}
    timeline: list[tuple[float, Notification | Ask]] = field(default_factory=list)
    answer_at: float = 0.0
    via: str | None = None  # how the recording carried the answer: "sse", "json", "stdio"
    relay: Callable | None = None  # not recorded: `relay(request, send, ask)` answers live instead
    hold: HeldListen | None = None  # a listen stream: held open after `timeline`, its changes played as they come
    after: Callable[[], None] | None = None  # called once the answer is written (a change it caused is told)


class _Cursor:
    """Where one client session is in the recording: per match key, how many answers it has had."""

    __slots__ = ("era", "index", "taken")

    def __init__(self, era: Era | None, index: dict[bytes, tuple[RecordedCall, ...]] | None) -> None:
        self.era = era
        self.index = index  # None: the recording has no session in this client's era
        self.taken: dict[bytes, int] = {}


class TraceAnswers:
    """The recorded answers of a trace, by match key, replayed from the start for each client session.

    Each client session (`session` key: the stdio process, an `Mcp-Session-Id`, a legacy
    stream) has a cursor of its own, so the same client run twice gets the same answers. A
    session speaks an era: `initialize` opens a handshake-era one, `server/discover` or a
    request with the 2026-07-28 `_meta` envelope a stateless one, and it is answered only
    from the recorded sessions of that era (plus those whose era the recording does not
    show). Stateless HTTP clients send no session id: they share one cursor, which
    `server/discover` (how such a client starts) moves back to the start. Thread-safe.
    """

    # Client sessions remembered at once; the oldest is forgotten past this (a long-running mock
    # serving many short clients that never say goodbye must not grow without bound).
    MAX_SESSIONS = 10_000

    def __init__(self, trace: TracePlan, *, reuse: bool = True, states: MockStates | None = None) -> None:
        self.reuse = reuse
        self.states = states or MockStates()  # the mock's own requestState, in place of the recorded server's
        self.tasks = MockTasks(trace)
        self.listens = MockListens(trace)
        by_era: dict[Era | None, dict[bytes, list[RecordedCall]]] = {}
        self._recorded: list[RecordedCall] = []
        self._eras: list[Era] = []  # the eras the recording shows, in order of first appearance
        self._lock = threading.Lock()
        self._cursors: OrderedDict[Any, _Cursor] = OrderedDict()
        for session in trace.sessions:
            era = session.era
            if era is not None and era not in self._eras:
                self._eras.append(era)
            for call in session.calls:
                if call.answer is None and not call.server:
                    continue  # nothing recorded to serve
                by_era.setdefault(era, defaultdict(list))[match_key(call.method, call.request.params)].append(call)
                self._recorded.append(call)
        unknown = by_era.pop(None, {})
        self._index: dict[Era | None, dict[bytes, tuple[RecordedCall, ...]]] = {}
        for era in [*self._eras, None]:
            merged = {key: list(calls) for key, calls in by_era.get(era, {}).items()}
            for key, calls in unknown.items():  # a recording whose era is unknown serves every era
                merged.setdefault(key, []).extend(calls)
            self._index[era] = {key: tuple(calls) for key, calls in merged.items()}

    def _cursor(self, session: Any, request: Request) -> _Cursor:
        """The cursor of `session`; a session's first request, `initialize` or `server/discover` starts one."""
        cursor = self._cursors.get(session)
        starts = request.method in CLIENT_DESCRIBING
        if cursor is not None and not starts:
            self._cursors.move_to_end(session)
            return cursor
        wanted = request_era(request.method, request.params)
        if wanted is None:  # a client that does not say: the recording's first era
            era = self._eras[0] if self._eras else None
        else:
            era = wanted
        index = self._index.get(era)
        if index is None and (self._index.get(None) or not self._eras):
            index = self._index[None]  # only sessions of unknown era were recorded: they serve anyone
        cursor = self._cursors[session] = _Cursor(era, index)
        self._cursors.move_to_end(session)
        while len(self._cursors) > self.MAX_SESSIONS:
            self._cursors.popitem(last=False)
        return cursor

    def end(self, session: Any) -> None:
        """Forget a client session (it ended: stdin EOF, `DELETE`, its legacy stream closed); its listen streams end."""
        with self._lock:
            self._cursors.pop(session, None)
        self.listens.end(session)

    def cancelled(self, session: Any, params: Any) -> None:
        """The client sent `notifications/cancelled`: a listen stream it names ends."""
        if isinstance(params, dict) and "requestId" in params:
            self.listens.cancel(session, params["requestId"])

    def lookup(self, request: Request, session: Any = None) -> RecordedReply | None:
        served = self.tasks.serve(request.method, request.params)
        if served is not None:
            return RecordedReply(served)
        key = match_key(request.method, request.params)
        with self._lock:
            cursor = self._cursor(session, request)
            if cursor.index is None:
                return None if request.method == "ping" else RecordedReply({"error": self._wrong_era(cursor.era)})
            calls = cursor.index.get(key)
            if not calls:
                return None
            taken = cursor.taken.get(key, 0)
            if taken >= len(calls) and not self.reuse:
                return None
            call = calls[min(taken, len(calls) - 1)]
            recorded = call.request.params
            refused = self.states.check(request.method, request.params, isinstance(recorded, dict) and REQUEST_STATE in recorded)
            if refused is not None:  # a state forged, altered or missing: refused, and the round is not used up
                return RecordedReply({"error": refused})
            cursor.taken[key] = taken + 1
        if call.method == LISTEN and (script := self.listens.script(call)) is not None:
            answer = jsonrpc.to_obj(call.answer) if call.answer is not None else {}
            answer.pop("jsonrpc", None)
            answer.pop("id", None)
            timeline = [(at, tagged(note, request.id)) for at, note in script.opening]
            # Held when the recorded stream was acknowledged (an error after that is how it ended: its client
            # left), or never answered; a listen refused outright is refused again.
            held = script.acknowledged or "error" not in answer
            return RecordedReply(answer, timeline, timeline[-1][0] if timeline else 0.0, call.via,
                                 hold=self.listens.open(session, request.id, script) if held else None)
        if call.answer is None:
            failed = f"HTTP {call.status}" if call.status is not None else "no answer"
            answer = {"error": {"code": UNANSWERED, "message": f"mcpbench serve-trace: the recorded call failed ({failed}) "
                                                                "after what the mock sent for it"}}
        else:
            answer = jsonrpc.to_obj(call.answer)
            answer.pop("jsonrpc", None)
            answer.pop("id", None)
            answer = self.tasks.created(self.states.issue(request.method, request.params, answer))
        after = (lambda: self.listens.served(call)) if self.listens.causes(call) else None
        return RecordedReply(answer, *_timeline(call, progress_token(request.params)), call.via, after=after)

    def _wrong_era(self, era: Era | None) -> dict:
        """The error a client gets when the recording has no session in the era it speaks."""
        wanted = era_title(era, span=True)
        has = " and ".join(era_title(e) for e in self._eras) or "none"
        return {"code": WRONG_ERA, "message": f"mcpbench serve-trace: the recording has no {wanted} session "
                                              f"(it has {has} only); connect in the era it was recorded in"}

    def nearest(self, request: Request) -> RecordedCall | None:
        """The recorded request most like `request`: same method first, then the closest params."""
        same = [call for call in self._recorded if call.method == request.method]
        if not same:
            methods = sorted({call.method for call in self._recorded})
            close = difflib.get_close_matches(request.method, methods, n=1, cutoff=0.0)
            same = [call for call in self._recorded if close and call.method == close[0]]
        if len(same) <= 1:
            return same[0] if same else None
        # Compared on their first NEAREST_COMPARE characters: matching costs the product of the two
        # lengths, and an 8 MiB request (a fuzzer's) held its answer, and on legacy SSE every answer
        # queued behind it on the one stream, for seconds.
        want = match_key(request.method, request.params).decode()[:NEAREST_COMPARE]
        return max(same, key=lambda call: difflib.SequenceMatcher(
            None, want, match_key(call.method, call.request.params).decode()[:NEAREST_COMPARE], autojunk=False).ratio())

    def miss(self, request: Request) -> ErrorResponse:
        """The error an unrecorded request gets."""
        name = call_name(request.method, request.params)
        what = f"{request.method} {name}" if name else request.method
        nearest = self.nearest(request)
        if nearest is None:
            return ErrorResponse(id=request.id, code=NOT_RECORDED,
                                 message=f"mcpbench serve-trace: {what} is not in the recording (it has no requests)")
        params = {k: v for k, v in (nearest.request.params or {}).items() if k != "_meta"}
        shown = orjson.dumps(params).decode()
        if len(shown) > NEAREST_CHARS:
            shown = shown[: NEAREST_CHARS - 1] + "…"
        return ErrorResponse(
            id=request.id, code=NOT_RECORDED,
            message=f"mcpbench serve-trace: {what} with these params is not in the recording; "
                    f"nearest recorded request: {nearest.method} {shown}",
            data={"nearest": {"method": nearest.method, "params": params}},
        )


def answer_for(answers: TraceAnswers, request: Request, forward: Forwarder | None = None, session: Any = None) -> RecordedReply:
    """The recorded reply to `request`; when there is none, a live one (`forward`) or an error.

    `session` is the client session's key for `forward`.
    """
    if forward is not None:
        forward.remember(session, request)
    reply = answers.lookup(request, session)
    if reply is None:
        if request.method == "ping":
            return RecordedReply({"result": {}})
        if forward is not None:
            return RecordedReply({}, relay=lambda req, send, ask: forward.forward(session, req, send, ask))
        error = jsonrpc.to_obj(answers.miss(request))
        return RecordedReply({"error": error["error"]})
    return reply


def _timeline(call: RecordedCall, token: Any) -> tuple[list[tuple[float, Notification | Ask]], float]:
    """The server's messages for `call` with their offsets, progress tokens made the client's; the answer's offset."""
    start = call.server[0][0] if call.server else (call.answered or 0.0)
    timeline: list[tuple[float, Notification | Ask]] = []
    for ts, item in call.server:
        if isinstance(item, dict):
            params = item.get("params")
            if token is not None and isinstance(params, dict) and "progressToken" in params:
                params = {**params, "progressToken": token}
            item = Notification(method=item["method"], params=params, _parsed=True)
        timeline.append((max(0.0, ts - start), item))
    return timeline, max(0.0, (call.answered or start) - start)
