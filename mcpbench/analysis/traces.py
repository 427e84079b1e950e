"""`load_trace`: trace files into tidy pandas frames (`events`, `calls`, `sessions`, `violations`).

One pass over each file through the trace reader (the only parser of traces).
Requests are paired with their answers by the protocol core's `Session`, one per
session key, as `mcpbench inspect` and the recorders do; the violations are the
ones the recorder wrote (and a message the core cannot read), so nothing is
counted twice. Columns are documented in docs/analysis.md.

The hot loop appends plain values to per-column lists and builds each frame
once at the end: a million events is a million appends, not a million rows.
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
from mcpbench.protocol.jsonrpc import ErrorResponse, InvalidMessage, Notification, Request
from mcpbench.protocol.session import C2S, Direction, Exchange, Session
from mcpbench.protocol.versions import META_CLIENT_INFO
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
    core: Session = field(default_factory=Session)
    # request id -> row of the call, one dict per direction (keyed by id alone: hashing the
    # Direction enum is a Python-level call, a tenth of the loop's time on small messages)
    client_waiting: dict = field(default_factory=dict)
    server_waiting: dict = field(default_factory=dict)
    rows: list[int] = field(default_factory=list)
    violations: int = 0
    client: dict | None = None


class _Calls:
    """The `calls` columns as lists while reading."""

    def __init__(self) -> None:
        self.trace: list[str] = []
        self.session: list[str | None] = []
        self.transport: list[str] = []
        self.dir: list[str] = []
        self.method: list[str] = []
        self.tool: list[str | None] = []
        self.step: list[str] = []
        self.start: list[float] = []
        self.end: list[float] = []
        self.outcome: list[str] = []
        self.error_code: list[float] = []
        self.request_bytes: list[int] = []
        self.answer_bytes: list[float] = []
        self.flow: list[str | None] = []
        self.detail: list[str | None] = []
        self.owner: list[_Open] = []


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
    sessions: list[_Open] = []
    first_sse: dict[str, float] = {}  # flow -> when its first SSE event arrived
    statuses: dict[str, int] = {}  # flow -> HTTP status
    notes: list[str] = []
    for path in files:
        name = Path(path).name
        reader = TraceReader(path)
        with collector_paused():  # the frames keep what they read: a collection would find nothing
            _read(reader, name, calls, ev, vio, sessions, first_sse, statuses)
        if reader.torn:
            notes.append(reader.torn)
    frames = TraceFrames(
        events=_events_frame(ev if ev is not None else {name: [] for name in EVENT_COLUMNS}),
        calls=_calls_frame(calls, first_sse, statuses),
        sessions=_sessions_frame(sessions, calls),
        violations=_typed(pd.DataFrame(vio, columns=VIOLATION_COLUMNS), times=("ts",)),
        notes=notes,
    )
    return frames


def _read(reader: TraceReader, name: str, calls: _Calls, ev: dict | None, vio: dict, sessions: list, first_sse: dict, statuses: dict) -> None:
    by_key: dict[Any, _Open] = {}
    from_obj, dumps, observe_ok = jsonrpc.from_obj, orjson.dumps, Exchange
    for event in reader:
        kind = event["kind"]
        if kind == Kind.TRACE:
            continue
        ts = event["ts"]
        key = event.get("session")
        state = by_key.get(key)
        if state is None:
            state = by_key[key] = _Open(name, key, event.get("transport") or "?", ts, ts)
            if key is not None:
                sessions.append(state)
        state.end = ts
        direction = event.get("dir")
        flow = event.get("flow")
        label = None
        if kind == Kind.MESSAGE:
            obj = event.get("msg")
            if flow is not None and direction == "s2c" and ("sse" in event or event.get("via") == "sse") and flow not in first_sse:
                first_sse[flow] = ts
            try:
                message = from_obj(obj)
            except InvalidMessage as exc:
                label = "invalid-message"
                _violation(vio, state, ts, direction, label, exc.reason)
            else:
                size = len(dumps(obj))
                label = _message(state, message, DIRECTIONS.get(direction, Direction.C2S), ts, size, flow, calls, observe_ok)
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


def _message(state: _Open, message: jsonrpc.Message, direction: Direction, ts: float, size: int, flow: str | None, calls: _Calls, exchange_type: type) -> str | None:
    """Open a call for each request, close the ones the core pairs; the event's name."""
    items = message.items if isinstance(message, jsonrpc.Batch) else (message,)
    label = None
    for item in items:
        if isinstance(item, Request):
            label = item.method
            params = item.params
            tool = params.get("name") if item.method == "tools/call" and params else None
            target = tool if tool is not None else _named(item.method, params)
            if state.client is None and params:
                state.client = _client_info(item.method, params)
            row = len(calls.start)
            calls.trace.append(state.trace)
            calls.session.append(state.key)
            calls.transport.append(state.transport)
            calls.dir.append(direction.value)
            calls.method.append(item.method)
            calls.tool.append(tool if isinstance(tool, str) else None)
            calls.step.append(f"{item.method} {target}" if isinstance(target, str) else item.method)
            calls.start.append(ts)
            calls.end.append(NAN)
            calls.outcome.append("unanswered")
            calls.error_code.append(NAN)
            calls.request_bytes.append(size)
            calls.answer_bytes.append(NAN)
            calls.flow.append(flow)
            calls.detail.append(None)
            calls.owner.append(state)
            (state.client_waiting if direction is C2S else state.server_waiting)[item.id] = row
            state.rows.append(row)
        elif isinstance(item, Notification):
            label = item.method
    for result in state.core.observe(direction, message, ts):
        if type(result) is exchange_type:
            row = (state.client_waiting if result.direction is C2S else state.server_waiting).pop(result.request.id, None)
            if row is None:
                continue
            answer = result.answer
            label = result.request.method
            calls.end[row] = result.finished
            calls.answer_bytes[row] = size
            if isinstance(answer, ErrorResponse):
                calls.outcome[row], calls.error_code[row], calls.detail[row] = "error", answer.code, answer.message
            elif type(answer.result) is dict and (answer.result.get("isError") is True or "resultType" in answer.result):
                calls.outcome[row], detail = outcome(answer)
                calls.detail[row] = detail or None
            else:
                calls.outcome[row] = "ok"
    return label


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


def _calls_frame(calls: _Calls, first_sse: dict, statuses: dict) -> pd.DataFrame:
    start = np.asarray(calls.start, dtype="float64")
    end = np.asarray(calls.end, dtype="float64")
    eras = {id(s): (_era(s), s.core.version) for s in {id(o): o for o in calls.owner}.values()} if calls.owner else {}
    owner_era = [eras[id(o)] for o in calls.owner]
    sse = np.fromiter((first_sse.get(f, NAN) if f is not None else NAN for f in calls.flow), dtype="float64", count=len(calls.flow))
    status = _statuses(calls, statuses)
    frame = pd.DataFrame(
        {
            "trace": calls.trace,
            "session": calls.session,
            "transport": calls.transport,
            "era": [e for e, _ in owner_era],
            "version": [v for _, v in owner_era],
            "dir": calls.dir,
            "method": calls.method,
            "tool": calls.tool,
            "step": calls.step,
            "start": start,
            "latency_ms": (end - start) * 1000.0,
            "ttfe_ms": np.where(sse >= start, (sse - start) * 1000.0, NAN),
            "outcome": calls.outcome,
            "error_code": pd.array(calls.error_code, dtype="float64").astype("Int64") if calls.error_code else pd.array([], dtype="Int64"),
            "http_status": pd.array(status, dtype="float64").astype("Int64"),
            "request_bytes": np.asarray(calls.request_bytes, dtype="int64"),
            "answer_bytes": pd.array(calls.answer_bytes, dtype="float64").astype("Int64") if calls.answer_bytes else pd.array([], dtype="Int64"),
            "detail": calls.detail,
        },
        columns=CALL_COLUMNS,
    )
    return _typed(frame, times=("start",))


def _statuses(calls: _Calls, statuses: dict) -> np.ndarray:
    """Each call's HTTP status (NaN when none); an unanswered call whose exchange failed becomes `http-error`."""
    status = np.fromiter((statuses.get(f, NAN) if f is not None else NAN for f in calls.flow), dtype="float64", count=len(calls.flow))
    if statuses:
        outcomes = calls.outcome
        for row in np.flatnonzero(status >= 400).tolist():
            if outcomes[row] == "unanswered":
                outcomes[row] = "http-error"
    return status


def _sessions_frame(sessions: list[_Open], calls: _Calls) -> pd.DataFrame:
    rows = []
    outcomes = calls.outcome
    for s in sessions:
        core = s.core
        counts = {"error": 0, "tool-error": 0, "unanswered": 0, "http-error": 0}
        for row in s.rows:
            o = outcomes[row]
            if o in counts:
                counts[o] += 1
        server = core.server_info if isinstance(core.server_info, dict) else {}
        client = s.client or {}
        rows.append(
            {
                "trace": s.trace, "session": s.key, "transport": s.transport, "era": _era(s), "version": core.version,
                "client": client.get("name"), "client_version": client.get("version"),
                "server": server.get("name"), "server_version": server.get("version"),
                "handshake_ms": NAN if core.handshake_time is None else core.handshake_time * 1000.0,
                "start": s.start, "end": s.end, "calls": len(s.rows), "errors": counts["error"] + counts["http-error"],
                "tool_errors": counts["tool-error"], "unanswered": counts["unanswered"], "violations": s.violations,
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
        if column in CATEGORIES:
            frame[column] = frame[column].astype("category")
    return frame
