"""`load_trace`: trace files into tidy pandas frames (`events`, `calls`, `sessions`, `violations`).

One pass over each file through the trace reader (the only parser of traces).
Requests are paired with their answers by the protocol core's `Session`, one per
session key, as `mcpbench inspect` and the recorders do; the violations are the
ones the recorder wrote (and a message the core cannot read), so nothing is
counted twice. Columns are documented in docs/analysis.md.

The hot loop leaves one tuple per request and one per paired answer; the
columns are cut out of them in C and laid over each other with numpy, and the
categorical columns are built from codes (per session, or factorized once), not
inferred row by row: a million events is a million appends, not a million rows.
"""

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from mcpbench.analysis.inspect import outcome
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.jsonrpc import Batch, ErrorResponse, InvalidMessage, Notification, Request
from mcpbench.protocol.session import C2S, Direction, Exchange, Session
from mcpbench.protocol.versions import META_CLIENT_INFO, RESULT_TYPE
from mcpbench.trace.format import Kind
from mcpbench.trace.reader import TraceReader, collector_paused

NAN = math.nan
DIRECTIONS = {"c2s": Direction.C2S, "s2c": Direction.S2C}

# Column order of each frame (stable: notebooks and the report select by name).
EVENT_COLUMNS = ["trace", "ts", "session", "transport", "dir", "kind", "name", "flow"]
CALL_COLUMNS = [
    "trace", "session", "transport", "era", "version", "dir", "method", "tool", "step", "start",
    "latency_ms", "ttfe_ms", "outcome", "error_code", "http_status", "request_bytes", "answer_bytes", "detail",
]
SESSION_COLUMNS = [
    "trace", "session", "transport", "era", "version", "client", "client_version", "server", "server_version",
    "handshake_ms", "start", "end", "calls", "errors", "tool_errors", "unanswered", "violations",
]
VIOLATION_COLUMNS = ["trace", "ts", "session", "transport", "dir", "code", "detail"]
CATEGORIES = ("trace", "session", "transport", "era", "version", "dir", "kind", "name", "method", "tool", "step", "outcome", "code", "client", "server")


@dataclass
class TraceFrames:
    """What `load_trace` returns: four frames and the reader's notes (torn last lines)."""

    events: pd.DataFrame
    calls: pd.DataFrame
    sessions: pd.DataFrame
    violations: pd.DataFrame
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Open:
    """One session key of one file while it is read."""

    trace: str
    key: str | None
    transport: str
    start: float
    end: float
    index: int  # its place in `_Calls.owners`: the code of its rows' session columns
    core: Session = field(default_factory=Session)
    # request id -> row of the call, one dict per direction (keyed by id alone: no key
    # tuple to build and hash per message)
    client_waiting: dict = field(default_factory=dict)
    server_waiting: dict = field(default_factory=dict)
    violations: int = 0
    client: dict | None = None


class _Calls:
    """The `calls` rows while reading: one tuple per request and one per answer.

    One append per message instead of one per column: the columns are cut out
    of the tuples in C (`zip(*rows)`) and the answers laid over them with numpy.
    """

    def __init__(self) -> None:
        self.owners: list[_Open] = []  # every session key of every file, by `_Open.index`
        # (owner, dir, method, tool, step, start, request_bytes, flow)
        self.requests: list[tuple] = []
        # (row, end, answer_bytes, (outcome, error_code, detail)): the answer itself is not kept
        self.answers: list[tuple] = []


def load_trace(paths: str | os.PathLike | Iterable[str | os.PathLike], *, events: bool = True) -> TraceFrames:
    """Read one or many traces (any capture path) into `TraceFrames`.

    Args:
        paths: a trace file, or several (their sessions are kept apart by the `trace` column).
        events: build the `events` frame (one row per event); leave it out for
            huge traces when only calls, sessions and violations are wanted.

    Raises:
        TraceError: a file is missing or malformed (names file and line).
    """
    files = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    calls = _Calls()
    ev: dict[str, list] | None = {name: [] for name in EVENT_COLUMNS} if events else None
    vio: dict[str, list] = {name: [] for name in VIOLATION_COLUMNS}
    first_sse: dict[str, float] = {}  # flow -> when its first SSE event arrived
    statuses: dict[str, int] = {}  # flow -> HTTP status
    notes: list[str] = []
    # The frames keep what they read, and building them keeps the rows alive: a collection
    # would walk them all and find nothing to free.
    with collector_paused():
        for path in files:
            reader = TraceReader(path)
            _read(reader, Path(path).name, calls, ev, vio, first_sse, statuses)
            if reader.torn:
                notes.append(reader.torn)
        columns = _call_columns(calls, first_sse, statuses)
        return TraceFrames(
            events=_events_frame(ev if ev is not None else {name: [] for name in EVENT_COLUMNS}),
            calls=_calls_frame(calls, columns),
            sessions=_sessions_frame(calls, columns),
            violations=_typed(pd.DataFrame(vio, columns=VIOLATION_COLUMNS), times=("ts",)),
            notes=notes,
        )


def _read(reader: TraceReader, name: str, calls: _Calls, ev: dict | None, vio: dict, first_sse: dict, statuses: dict) -> None:
    """One file's events into `calls`, `ev` and `vio`.

    The hot loop of every load: a message is decoded once by the core (`from_obj`), shown to
    its session's `Session`, and leaves one tuple per request and one per paired answer;
    everything else about it waits for the columns, built in bulk at the end.
    """
    by_key: dict[Any, _Open] = {}
    from_obj, dumps, owners, requests, answers = jsonrpc.from_obj, orjson.dumps, calls.owners, calls.requests, calls.answers
    message_kind, trace_kind = Kind.MESSAGE, Kind.TRACE
    for event in reader:
        kind = event["kind"]
        if kind == trace_kind:
            continue
        ts = event["ts"]
        key = event.get("session")
        state = by_key.get(key)
        if state is None:
            state = by_key[key] = _Open(name, key, event.get("transport") or "?", ts, ts, len(owners))
            owners.append(state)
        state.end = ts
        direction = event.get("dir")
        flow = event.get("flow")
        label = None
        if kind == message_kind:
            obj = event.get("msg")
            if flow is not None and direction == "s2c" and ("sse" in event or event.get("via") == "sse") and flow not in first_sse:
                first_sse[flow] = ts
            try:
                message = from_obj(obj)
            except InvalidMessage as exc:
                label = "invalid-message"
                _violation(vio, state, ts, direction, label, exc.reason)
            else:
                # the message's size as compact JSON (what the column means): the recorded
                # text may hold whitespace, so its length is not always that size
                size = len(dumps(obj))
                way = DIRECTIONS.get(direction, C2S)
                for item in message.items if type(message) is Batch else (message,):
                    if type(item) is Request:
                        method = label = item.method
                        params = item.params
                        tool = params.get("name") if method == "tools/call" and params else None
                        target = tool if tool is not None else _named(method, params)
                        if state.client is None and params:
                            state.client = _client_info(method, params)
                        (state.client_waiting if way is C2S else state.server_waiting)[item.id] = len(requests)
                        step = f"{method} {target}" if isinstance(target, str) else method
                        requests.append((state.index, way.value, method, tool if isinstance(tool, str) else None, step, ts, size, flow))
                    elif type(item) is Notification:
                        label = item.method
                for result in state.core.observe(way, message, ts):
                    if type(result) is Exchange:
                        row = (state.client_waiting if result.direction is C2S else state.server_waiting).pop(result.request.id, None)
                        if row is not None:
                            label = result.request.method
                            answers.append((row, result.finished, size, _answered(result.answer)))
        elif kind == Kind.VIOLATION:
            label = event.get("code") or "?"
            _violation(vio, state, ts, direction, label, event.get("detail") or "")
        elif kind == Kind.HTTP:
            if flow is not None and event.get("status") is not None:
                statuses[flow] = event["status"]
            label = f"{event.get('method')} {event.get('path')}"
        elif kind == Kind.SSE:
            if flow is not None and flow not in first_sse:
                first_sse[flow] = ts
            label = event.get("event")
        elif kind in (Kind.STREAM, Kind.PROCESS):
            label = event.get("event")
        elif kind == Kind.ERROR:
            label = event.get("code") or event.get("status") or "error"
        if ev is not None:
            ev["trace"].append(name)
            ev["ts"].append(ts)
            ev["session"].append(key)
            ev["transport"].append(state.transport)
            ev["dir"].append(direction)
            ev["kind"].append(kind)
            ev["name"].append(label if label is None or isinstance(label, str) else str(label))
            ev["flow"].append(flow)


def _answered(answer: jsonrpc.Message) -> tuple[str, float, str | None]:
    """(outcome, error code or NaN, detail) of a paired answer."""
    if type(answer) is ErrorResponse:
        return "error", answer.code, answer.message
    result = answer.result
    if type(result) is dict and (result.get("isError") is True or RESULT_TYPE in result):
        kind, detail = outcome(answer)
        return kind, NAN, detail or None
    return "ok", NAN, None


def _named(method: str, params: dict | None) -> Any:
    if params and method in ("prompts/get", "resources/read"):
        return params.get("name" if method == "prompts/get" else "uri")
    return None


def _client_info(method: str, params: dict) -> dict | None:
    if method == "initialize":
        info = params.get("clientInfo")
        return info if isinstance(info, dict) else None
    meta = params.get("_meta")
    info = meta.get(META_CLIENT_INFO) if isinstance(meta, dict) else None
    return info if isinstance(info, dict) else None


def _violation(vio: dict, state: _Open, ts: float, direction: str | None, code: str, detail: str) -> None:
    state.violations += 1
    vio["trace"].append(state.trace)
    vio["ts"].append(ts)
    vio["session"].append(state.key)
    vio["transport"].append(state.transport)
    vio["dir"].append(direction)
    vio["code"].append(code)
    vio["detail"].append(detail)


def _era(state: _Open) -> str | None:
    return state.core.era.value if state.core.era else None


def _call_columns(calls: _Calls, first_sse: dict, statuses: dict) -> dict[str, Any]:
    """The rows cut into numpy columns, answers laid over them, HTTP failures marked."""
    n = len(calls.requests)
    owner, dirs, methods, tools, steps, start, request_bytes, flows = zip(*calls.requests) if n else ((),) * 8
    columns: dict[str, Any] = {
        "owner": np.asarray(owner, dtype=np.intp), "dir": dirs, "method": methods, "tool": tools, "step": steps,
        "start": np.asarray(start, dtype="float64"), "request_bytes": np.asarray(request_bytes, dtype="int64"),
        "end": np.full(n, NAN), "answer_bytes": np.full(n, NAN), "error_code": np.full(n, NAN),
        "outcome": np.full(n, "unanswered", dtype=object), "detail": np.full(n, None, dtype=object),
    }
    if calls.answers:
        rows, ends, sizes, verdicts = zip(*calls.answers)
        outcomes, codes, details = zip(*verdicts)
        rows = np.asarray(rows, dtype=np.intp)
        columns["end"][rows] = ends
        columns["answer_bytes"][rows] = sizes
        columns["error_code"][rows] = codes
        columns["outcome"][rows] = np.asarray(outcomes, dtype=object)
        columns["detail"][rows] = np.asarray(details, dtype=object)
    # flows are only in HTTP recordings: a stdio trace skips the per-row look-ups
    sse = _per_flow(flows, first_sse)
    columns["ttfe_ms"] = np.where(sse >= columns["start"], (sse - columns["start"]) * 1000.0, NAN)
    columns["http_status"] = status = _per_flow(flows, statuses)
    if statuses:  # an unanswered call whose exchange failed
        outcome_ = columns["outcome"]
        outcome_[(status >= 400) & (outcome_ == "unanswered")] = "http-error"
    return columns


def _per_flow(flows: tuple, values: dict) -> np.ndarray:
    """Each row's value for its HTTP exchange (NaN without one)."""
    if not values:
        return np.full(len(flows), NAN)
    return np.fromiter((values.get(f, NAN) if f is not None else NAN for f in flows), dtype="float64", count=len(flows))


def _calls_frame(calls: _Calls, columns: dict[str, Any]) -> pd.DataFrame:
    owners, owner = calls.owners, columns["owner"]
    start = columns["start"]
    frame = pd.DataFrame(
        {
            "trace": _category(owner, [o.trace for o in owners]),
            "session": _category(owner, [o.key for o in owners]),
            "transport": _category(owner, [o.transport for o in owners]),
            "era": _category(owner, [_era(o) for o in owners]),
            "version": _category(owner, [o.core.version for o in owners]),
            "dir": _factorized(columns["dir"]),
            "method": _factorized(columns["method"]),
            "tool": _factorized(columns["tool"]),
            "step": _factorized(columns["step"]),
            "start": start,
            "latency_ms": (columns["end"] - start) * 1000.0,
            "ttfe_ms": columns["ttfe_ms"],
            "outcome": _factorized(columns["outcome"]),
            "error_code": pd.array(columns["error_code"], dtype="float64").astype("Int64"),
            "http_status": pd.array(columns["http_status"], dtype="float64").astype("Int64"),
            "request_bytes": columns["request_bytes"],
            "answer_bytes": pd.array(columns["answer_bytes"], dtype="float64").astype("Int64"),
            "detail": columns["detail"].tolist(),  # a list: pandas infers the column's type as it did per row
        },
        columns=CALL_COLUMNS,
    )
    return _typed(frame, times=("start",))


def _category(codes: np.ndarray, values: Any) -> pd.Categorical:
    """The categorical column of `values[code]` for each code (-1: null), in bulk.

    Its dtype is the one `astype("category")` gives a column of those values (pandas infers
    the categories' type from the values): found on the few distinct values used, not on every row.
    """
    used = np.unique(codes[codes >= 0])
    distinct = [values[i] for i in used.tolist()] + ([None] if (codes < 0).any() else [])
    small = pd.DataFrame({"c": distinct})["c"].astype("category")
    lookup = np.full(len(values) + 1, -1, dtype=np.intp)  # the last place answers code -1
    lookup[used] = small.cat.codes.to_numpy()[: len(used)]
    return pd.Categorical.from_codes(lookup[codes], dtype=small.dtype)


def _factorized(values: Any) -> pd.Categorical:
    """A categorical column of per-row values (strings or None)."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))
    return _category(codes, uniques)


def _sessions_frame(calls: _Calls, columns: dict[str, Any]) -> pd.DataFrame:
    owner, outcomes, count = columns["owner"], columns["outcome"], len(calls.owners)

    def per_owner(mask: Any = None) -> list[int]:
        return np.bincount(owner if mask is None else owner[mask], minlength=count).tolist()

    made = per_owner()
    errors = per_owner((outcomes == "error") | (outcomes == "http-error"))
    tool_errors = per_owner(outcomes == "tool-error")
    unanswered = per_owner(outcomes == "unanswered")
    rows = []
    for s in calls.owners:
        if s.key is None:  # events outside any session: no session row
            continue
        core, i = s.core, s.index
        server = core.server_info if isinstance(core.server_info, dict) else {}
        client = s.client or {}
        rows.append(
            {
                "trace": s.trace, "session": s.key, "transport": s.transport, "era": _era(s), "version": core.version,
                "client": client.get("name"), "client_version": client.get("version"),
                "server": server.get("name"), "server_version": server.get("version"),
                "handshake_ms": NAN if core.handshake_time is None else core.handshake_time * 1000.0,
                "start": s.start, "end": s.end, "calls": made[i], "errors": errors[i],
                "tool_errors": tool_errors[i], "unanswered": unanswered[i], "violations": s.violations,
            }
        )
    frame = pd.DataFrame(rows, columns=SESSION_COLUMNS)
    frame = frame.astype({"handshake_ms": "float64", "calls": "int64", "errors": "int64", "tool_errors": "int64", "unanswered": "int64", "violations": "int64"})
    return _typed(frame, times=("start", "end"))


def _events_frame(ev: dict) -> pd.DataFrame:
    return _typed(pd.DataFrame(ev, columns=EVENT_COLUMNS), times=("ts",))


def _typed(frame: pd.DataFrame, times: tuple[str, ...]) -> pd.DataFrame:
    """UTC timestamps and categoricals, the same dtypes whatever the data (even empty)."""
    for column in times:
        frame[column] = pd.to_datetime(np.asarray(frame[column], dtype="float64"), unit="s", utc=True)
    for column in frame.columns:
        if column in CATEGORIES and not isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype("category")
    return frame
