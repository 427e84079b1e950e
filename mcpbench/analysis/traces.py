"""`load_trace`: trace files into tidy pandas frames (`events`, `calls`, `rounds`, `sessions`, `violations`).

One pass over each file through the trace reader (the only parser of traces) and the trace model
(`trace/model.py`, the one that pairs and groups, as `inspect` does): `calls` has one row per
operation (a 2026-07-28 multi round-trip request once, with its `rounds` and the client's wait
between them in `client_wait_ms`), `rounds` one row per request of an operation; the violations
are the ones the recorder wrote and the model's operation rules, so nothing is counted twice.
Columns are documented in docs/analysis.md.

The model's hot path takes the plain calls (`Rebuild.take_all`) as rows of columns (`PlainCalls`),
measuring each message once; the frames' columns are cut from those columns in bulk, from objects only
for the other operations, and the categorical columns built from codes (per session, per name, or
factorized once), not inferred row by row.
"""

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mcpbench.trace.format import Kind
from mcpbench.trace.model import NOT_MCP, EventEffect, PlainCalls, Rebuild, SessionReport, TracedOperation
from mcpbench.trace.reader import TraceReader, collector_paused

NAN = math.nan

# Column order of each frame (stable: notebooks and the report select by name).
EVENT_COLUMNS = ["trace", "ts", "session", "transport", "dir", "kind", "name", "flow"]
CALL_COLUMNS = [
    "trace", "session", "transport", "era", "version", "dir", "method", "tool", "step", "start",
    "latency_ms", "ttfe_ms", "outcome", "error_code", "http_status", "request_bytes", "answer_bytes", "detail",
    "rounds", "client_wait_ms",
]
ROUND_COLUMNS = ["trace", "session", "call", "round", "id", "start", "latency_ms", "wait_ms", "outcome", "request_bytes", "answer_bytes"]
SESSION_COLUMNS = [
    "trace", "session", "transport", "era", "version", "client", "client_version", "server", "server_version",
    "handshake_ms", "start", "end", "calls", "errors", "tool_errors", "unanswered", "violations",
]
VIOLATION_COLUMNS = ["trace", "ts", "session", "transport", "dir", "code", "detail"]
CATEGORIES = ("trace", "session", "transport", "era", "version", "dir", "kind", "name", "method", "tool", "step", "outcome", "code", "client", "server")
# Sessions of the model that are no MCP session: events outside any, HTTP exchanges that are not MCP.
NO_SESSION = ("-", NOT_MCP)


class _Built:
    """A frame built the first time it is read, then kept: a caller who reads `calls` alone (a
    dashboard's latency chart, `bench analysis`) pays for no other frame."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, frames: Any, owner: type | None = None) -> Any:
        if frames is None:
            return self
        value = getattr(frames, self.slot)
        if callable(value):  # (a DataFrame is not)
            value = value()
            setattr(frames, self.slot, value)
        return value

    def __set__(self, frames: Any, value: Any) -> None:
        setattr(frames, self.slot, value)


class TraceFrames:
    """What `load_trace` returns: the frames and the reader's notes (torn last lines).

    `calls` is built by `load_trace`; `events`, `sessions`, `violations` and `rounds` when first read
    (each a frame, or what builds it: the same frame either way)."""

    events = _Built()
    sessions = _Built()
    violations = _Built()
    rounds = _Built()

    def __init__(self, events: Any, calls: pd.DataFrame, sessions: Any, violations: Any, notes: list[str] | None = None,
                 rounds: Any = None) -> None:
        self.events, self.calls, self.sessions, self.violations = events, calls, sessions, violations
        self.notes = [] if notes is None else notes
        self.rounds = (lambda: pd.DataFrame(columns=ROUND_COLUMNS)) if rounds is None else rounds

    def __repr__(self) -> str:
        return f"TraceFrames(calls={len(self.calls)} rows, notes={self.notes!r})"


class _Calls:
    """The model's sessions and operations while reading: each file's rows (`PlainCalls`, every
    operation in the order it began) with their owner indexes, and every file's sessions."""

    def __init__(self) -> None:
        self.owners: list[tuple[str, SessionReport]] = []  # (trace, session), by owner index
        self.files: list[tuple[PlainCalls, np.ndarray]] = []  # each file's rows, and each row's owner index
        self.violations: list[int] = []  # per owner


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
        frame = _calls_frame(calls, columns)
    return TraceFrames(  # the other frames when first read (`_Built`)
        events=lambda: _events_frame(ev if ev is not None else {name: [] for name in EVENT_COLUMNS}),
        calls=frame,
        sessions=lambda: _sessions_frame(calls, columns),
        violations=lambda: _typed(pd.DataFrame(vio, columns=VIOLATION_COLUMNS), times=("ts",)),
        notes=notes,
        rounds=lambda: _rounds_frame(calls, columns),
    )


def _read(reader: TraceReader, name: str, calls: _Calls, ev: dict | None, vio: dict, first_sse: dict, statuses: dict) -> None:
    """One file's events through the trace model into `calls`, `ev` and `vio`.

    The model measures each message once (its size as compact JSON, what the byte columns mean:
    the recorded text may hold whitespace) and keeps the operations in the order they began. Only
    the events off its hot path (`Rebuild.take_all`) come here: the handshake, HTTP, violations.
    """
    rebuild = Rebuild(keep=False, measure=True, ordered=True)
    owners, per_owner = calls.owners, calls.violations
    index: dict[int, int] = {}  # id(session) -> owner index
    last, owner = None, -1  # the session of the event before, and its owner index
    message_kind, violation = Kind.MESSAGE, "violation"

    def other(event: dict, step: EventEffect) -> None:
        nonlocal last, owner
        report = step.session
        if report is not last:  # most events belong to the session of the one before
            last = report
            owner = index.get(id(report))
            if owner is None:
                owner = index[id(report)] = len(owners)
                owners.append((name, report))
                per_owner.append(0)
        label = None  # the event's name in the events frame (only made with `ev`)
        for entry in step.added:
            kind_ = entry.kind
            if kind_ == violation:
                per_owner[owner] += 1
                if label is None:
                    label = entry.name
                vio["trace"].append(name)
                vio["ts"].append(entry.ts)
                vio["session"].append(_session_id(report))
                vio["transport"].append(report.transport)
                vio["dir"].append(entry.dir)
                vio["code"].append(entry.name)
                vio["detail"].append(entry.detail)
            elif ev is not None:
                if kind_ == "request":
                    label = entry.op.method
                elif kind_ == "notification":
                    label = entry.name
        kind = event["kind"]
        flow = event.get("flow")
        if flow is not None:  # an HTTP exchange: when its first SSE event came, its status
            if kind == message_kind:
                if event.get("dir") == "s2c" and flow not in first_sse and ("sse" in event or event.get("via") == "sse"):
                    first_sse[flow] = event["ts"]
            elif kind == Kind.HTTP:
                if event.get("status") is not None:
                    statuses[flow] = event["status"]
            elif kind == Kind.SSE:
                if flow not in first_sse:
                    first_sse[flow] = event["ts"]
        if ev is not None:
            for entry in step.answered:
                label = entry.op.method
            if kind == Kind.HTTP:
                label = f"{event.get('method')} {event.get('path')}"
            elif kind in (Kind.SSE, Kind.STREAM, Kind.PROCESS):
                label = event.get("event")
            elif kind == Kind.ERROR:
                label = event.get("code") or event.get("status") or "error"
            ev["trace"].append(name)
            ev["ts"].append(event["ts"])
            ev["session"].append(event.get("session"))
            ev["transport"].append(report.transport)
            ev["dir"].append(event.get("dir"))
            ev["kind"].append(kind)
            ev["name"].append(label if label is None or isinstance(label, str) else str(label))
            ev["flow"].append(flow)

    if ev is None:
        rebuild.take_all(reader, other)
    else:  # a row per event: every event through `take`
        take = rebuild.take
        for event in reader:
            step = take(event)
            if step is not None:
                other(event, step)
    rebuild.finish()
    rows = rebuild.calls
    # each row's owner index: its session's (a row holds its session), found once per run of rows of
    # one session (most rows follow one of the same session)
    sessions = np.fromiter(map(id, rows.owner), dtype=np.int64, count=len(rows.owner))
    runs = np.flatnonzero(np.concatenate(([True], sessions[1:] != sessions[:-1]))) if len(sessions) else np.zeros(0, dtype=np.intp)
    per_run = np.array([index[i] for i in sessions[runs].tolist()], dtype=np.intp)
    calls.files.append((rows, np.repeat(per_run, np.diff(np.append(runs, len(sessions))))))


def _era(report: SessionReport) -> str | None:
    return report.session.era.value if report.session.era else None


def _detail(op: TracedOperation) -> str | None:
    """An operation's detail as the frame shows it: an error's message (its code has a column)."""
    code = op.last.error_code
    if code is not None:  # "code: message", or "code (name): message"
        return op.detail.partition(": ")[2] or None
    return op.detail or None


def _call_columns(calls: _Calls, first_sse: dict, statuses: dict) -> dict[str, Any]:
    """The operations cut into numpy columns, HTTP failures marked: each file's, end to end."""
    files = [_file_columns(rows, owner, first_sse, statuses) for rows, owner in calls.files]
    if len(files) == 1:
        return files[0]
    if not files:
        return _file_columns(PlainCalls(), np.zeros(0, dtype=np.intp), first_sse, statuses)
    columns: dict[str, Any] = {}
    for name, first in files[0].items():
        if name == "objects":
            offsets = np.cumsum([0] + [len(f["owner"]) for f in files])
            columns[name] = {row + int(offset): op for f, offset in zip(files, offsets) for row, op in f[name].items()}
        elif name == "outcome_code":  # codes into each file's values: into the values of all, in one list
            merged: dict[str, int] = {}
            parts = []
            for f in files:
                remap = np.array([merged.setdefault(value, len(merged)) for value in f["values"]], dtype=np.intp)
                parts.append(remap[f[name]])
            columns[name], columns["values"] = np.concatenate(parts), list(merged)
        elif name == "values":
            continue  # with outcome_code
        elif isinstance(first, list):
            columns[name] = [value for f in files for value in f[name]]
        else:
            columns[name] = np.concatenate([f[name] for f in files])
    return columns


def _file_columns(rows: PlainCalls, owner: np.ndarray, first_sse: dict, statuses: dict) -> dict[str, Any]:
    """One file's operations cut into numpy columns.

    The plain calls (a row of columns each, no object: a request, its answer) are cut in bulk from
    the model's columns; the other operations (objects) one by one over plain lists, each in its
    place. What only the `rounds` frame reads is left to it (`_rounds_frame`): the plain rows' ids,
    the objects, and the outcomes' codes.
    """
    n = len(rows.owner)
    objects = rows.objects
    # dir and outcome as codes into a few values (most rows "c2s" and "ok"): the categorical columns
    # are made of the codes, with no object per row to hash (`_category`)
    values: list[str] = ["c2s", "ok"]
    code_of = {value: code for code, value in enumerate(values)}

    def coded(value: str) -> int:
        code = code_of.get(value)
        if code is None:
            code = code_of[value] = len(values)
            values.append(value)
        return code

    if len(objects) < n:  # plain rows (`take_all`): each from its request's and its answer's events (an object's set below)
        times = np.fromiter(rows.times, dtype="float64", count=len(rows.times))  # (the model's lists, once each)
        sizes = np.fromiter(rows.sizes, dtype=np.int64, count=len(rows.sizes))  # (measured: `Rebuild(measure=True)`)
        at, answered = np.fromiter(rows.at, dtype=np.int64, count=n), np.fromiter(rows.answers, dtype=np.int64, count=n)
        start, end = times[at], times[answered]  # (a plain row's call is answered: one still open became an object)
        request_bytes, answer_bytes = sizes[at], sizes[answered].astype("float64")
    else:  # every row an object (or none)
        start, end = np.full(n, NAN), np.full(n, NAN)
        request_bytes, answer_bytes = np.zeros(n, dtype=np.int64), np.full(n, NAN)
    dirs = np.zeros(n, dtype=np.intp)  # "c2s"
    outcomes = np.ones(n, dtype=np.intp)  # "ok"
    details = np.full(n, None, dtype=object)
    for row, (outcome_, detail) in rows.outcomes.items():
        if row not in objects:
            outcomes[row], details[row] = coded(outcome_), detail or None
    error_codes = np.full(n, NAN)
    rounds_ = np.ones(n, dtype="int64")
    waits = np.zeros(n)
    first_flows: dict[int, Any] = {}  # by row: flows are an object's (HTTP)
    last_flows: dict[int, Any] = {}
    for row, op in objects.items():
        rounds = op.rounds
        first, last = rounds[0], rounds[-1]
        dirs[row] = coded(op.dir)
        start[row] = first.ts
        end[row] = NAN if op.end is None else op.end
        outcomes[row] = coded(op.outcome or "unanswered")
        request_bytes[row] = sum(r.request_bytes or 0 for r in rounds)
        answer_bytes[row] = _answer_bytes(op)
        if len(rounds) > 1:
            rounds_[row] = len(rounds)
            waits[row] = op.client_wait * 1000.0
        code = last.error_code
        error_codes[row] = NAN if code is None or op.end is None else code
        details[row] = _detail(op) if code is not None else (op.detail or None)
        if first.flow is not None:
            first_flows[row] = first.flow
        if last.flow is not None:
            last_flows[row] = last.flow
    method, tool, step = _names(rows)
    sse = _per_flow(first_flows, first_sse, n)
    return {
        "owner": owner,
        "dir": _category(dirs, values),
        "method": method,
        "tool": tool,
        "step": step,
        "start": start,
        "end": end,
        "ttfe_ms": np.where(sse >= start, (sse - start) * 1000.0, NAN) if first_flows else sse,
        "request_bytes": request_bytes,
        "answer_bytes": answer_bytes,
        "error_code": error_codes,
        "http_status": _per_flow(last_flows, statuses, n),
        "outcome": _category(outcomes, values),
        "outcome_code": outcomes,  # codes into `values`: the `rounds` frame's, for a row of one round
        "values": values,
        "detail": details,
        "rounds": rounds_,
        "client_wait_ms": waits,
        "ids": rows.ids,  # a plain row's request id (the `rounds` frame's)
        "objects": objects,  # the other operations, by row (the `rounds` frame reads their rounds)
    }


def _names(rows: PlainCalls) -> tuple[pd.Categorical, pd.Categorical, pd.Categorical]:
    """The method, tool and step columns, from the codes of the plain rows' names (each distinct
    (method, target, name) once) and the objects' own, each with a code after those."""
    codes = np.fromiter(rows.names, dtype=np.intp, count=len(rows.names))  # (the objects' codes are set in it)
    ops = list(rows.objects.values())
    codes[list(rows.objects)] = np.arange(len(rows.distinct), len(rows.distinct) + len(ops))
    named = rows.distinct + [(op.method, op.target, op.name) for op in ops]
    method = [m for m, _, _ in named]
    tool = [target if m == "tools/call" else None for m, target, _ in named]
    step = [name for _, _, name in named]
    return tuple(_categories(codes, method, tool, step))


def _answer_bytes(op: TracedOperation) -> float:
    sizes = [r.answer_bytes for r in op.rounds if r.answer_bytes is not None]
    return float(sum(sizes)) if sizes else NAN


def _session_id(report: Any) -> str | None:
    """A frame's session: the model's id, or null for what is outside any session (as the frames always had it)."""
    return None if report.id in NO_SESSION else report.id


def _per_flow(flows: dict[int, Any], values: dict, count: int) -> np.ndarray:
    """Each row's value for its HTTP exchange (`flows`: by row), NaN without one."""
    column = np.full(count, NAN)
    if flows and values:
        column[np.fromiter(flows, dtype=np.intp, count=len(flows))] = [values.get(flow, NAN) for flow in flows.values()]
    return column


def _calls_frame(calls: _Calls, columns: dict[str, Any]) -> pd.DataFrame:
    """The `calls` frame of the columns, each made in its final type: pandas takes them as they are
    (`copy=False`: no copy of each, no stacking of the same-typed ones into one block). The lazy
    frames read some of the same columns (`outcome`, `request_bytes`, `rounds`): the frame holds
    copies of those, so that changing it changes no other frame."""
    owners, owner = calls.owners, columns["owner"]
    start = columns["start"]
    trace, session, transport, era, version = _categories(
        owner, [trace for trace, _ in owners], [_session_id(o) for _, o in owners], [o.transport for _, o in owners],
        [_era(o) for _, o in owners], [o.session.version for _, o in owners])
    return pd.DataFrame(
        {
            "trace": trace,
            "session": session,
            "transport": transport,
            "era": era,
            "version": version,
            "dir": _factorized(columns["dir"]),
            "method": _factorized(columns["method"]),
            "tool": _factorized(columns["tool"]),
            "step": _factorized(columns["step"]),
            "start": _times(start),
            "latency_ms": (columns["end"] - start) * 1000.0,
            "ttfe_ms": columns["ttfe_ms"],
            "outcome": _factorized(columns["outcome"]).copy(),
            "error_code": pd.array(columns["error_code"], dtype="Int64"),
            "http_status": pd.array(columns["http_status"], dtype="Int64"),
            "request_bytes": columns["request_bytes"].copy(),
            "answer_bytes": pd.array(columns["answer_bytes"], dtype="Int64"),
            "detail": _texts(columns["detail"]),
            "rounds": columns["rounds"].copy(),
            "client_wait_ms": columns["client_wait_ms"],
        },
        columns=CALL_COLUMNS,
        copy=False,
    )


def _times(seconds: np.ndarray) -> Any:
    """A column of UTC timestamps from seconds since the epoch (NaN: NaT)."""
    return pd.to_datetime(np.asarray(seconds, dtype="float64"), unit="s", utc=True).array


# The type pandas infers for a column of strings: its string type (pandas 3), or objects (before).
_STRINGS = pd.Series(np.array(["text"], dtype=object)).dtype


def _texts(values: np.ndarray) -> Any:
    """A column of objects (text or None: `detail`) as pandas makes it: of its string type where it
    infers that, else the objects as they are. The type is found in one pass over the rows, not in
    pandas' two (an inference, then a conversion that checks every row again)."""
    if not len(values):
        return []  # (as pandas infers an empty column: float64)
    if _STRINGS != np.dtype(object) and pd.api.types.infer_dtype(values, skipna=True) == "string":
        return pd.array(values, dtype=_STRINGS, copy=False)
    return values


def _category(codes: np.ndarray, values: Any) -> pd.Categorical:
    """The categorical column of `values[code]` for each code (-1: null), in bulk."""
    return _categories(codes, values)[0]


def _categories(codes: np.ndarray, *columns: Any) -> list[pd.Categorical]:
    """Categorical columns of one set of codes: for each list of values, `values[code]` for each
    code (-1: null), in bulk.

    Each dtype is the one `astype("category")` gives a column of those values (pandas infers
    the categories' type from the values): found on the few distinct values used, not on every row.
    Each column's codes are cut in one pass, in the integer type pandas keeps them in, valid already.
    """
    null = len(codes) > 0 and codes.min() < 0
    used = np.flatnonzero(np.bincount(codes[codes >= 0] if null else codes, minlength=max(map(len, columns))))  # (sorted)
    made = []
    for values in columns:
        distinct = [values[i] for i in used.tolist()] + ([None] if null else [])
        small = pd.DataFrame({"c": distinct})["c"].astype("category")
        known = small.cat.codes.to_numpy()
        lookup = np.full(len(values) + 1, -1, dtype=known.dtype)  # the last place answers code -1
        lookup[used] = known[: len(used)]
        made.append(pd.Categorical.from_codes(lookup[codes], dtype=small.dtype, validate=False))
    return made


def _factorized(values: Any) -> pd.Categorical:
    """A categorical column of per-row values (strings or None), or the one already made."""
    if isinstance(values, pd.Categorical):
        return values
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
    for i, (trace, s) in enumerate(calls.owners):
        if s.id in NO_SESSION:  # events outside any session, exchanges that are not MCP: no session row
            continue
        core = s.session
        server = core.server_info if isinstance(core.server_info, dict) else {}
        client = s.client or {}
        rows.append(
            {
                "trace": trace, "session": s.id, "transport": s.transport, "era": _era(s), "version": core.version,
                "client": _text(client.get("name")), "client_version": _text(client.get("version")),
                "server": _text(server.get("name")), "server_version": _text(server.get("version")),
                "handshake_ms": NAN if core.handshake_time is None else core.handshake_time * 1000.0,
                "start": s.start, "end": s.end, "calls": made[i], "errors": errors[i],
                "tool_errors": tool_errors[i], "unanswered": unanswered[i], "violations": calls.violations[i],
            }
        )
    frame = pd.DataFrame(rows, columns=SESSION_COLUMNS)
    frame = frame.astype({"handshake_ms": "float64", "calls": "int64", "errors": "int64", "tool_errors": "int64", "unanswered": "int64", "violations": "int64"})
    return _typed(frame, times=("start", "end"))


def _text(value: Any) -> str | None:
    """A peer's name or version as a column holds it (a peer may send any JSON there)."""
    return value if value is None or type(value) is str else str(value)


def _rounds_frame(calls: _Calls, columns: dict[str, Any]) -> pd.DataFrame:
    """One row per request of an operation: `call` is the operation's row in `calls`, `wait_ms` the
    client's time between the previous round's answer and this request (NaN on a first round).

    A plain call's row is its `calls` row (one round: a request, its answer); the rounds of the
    other operations (objects) are read from them here and put in their places. The trace and
    session columns come from each row's owner, as in `calls`."""
    owners, objects = calls.owners, columns["objects"]
    sizes = columns["rounds"]
    count = len(sizes)
    call = np.arange(count, dtype="int64")
    number = np.ones(count, dtype="int64")
    ids = np.array(columns["ids"] + [None], dtype=object)[:-1]  # (a None last: ids stay objects, never a 2-D array)
    start = columns["start"]
    latencies = (columns["end"] - start) * 1000.0
    outcomes = columns["outcome_code"]
    values = list(columns["values"])  # the outcomes' codes are places in it (`_file_columns`)
    code_of = {value: code for code, value in enumerate(values)}
    sent, received = columns["request_bytes"].astype("float64"), columns["answer_bytes"]
    waits = np.full(count, NAN)
    first_row = call
    if (sizes > 1).any():  # each operation's rows in its place: repeat its one row (the rounds filled in below)
        place = np.repeat(np.arange(count), sizes)
        call, ids, start, latencies, outcomes, sent, received, waits = (
            column[place] for column in (call, ids, start, latencies, outcomes, sent, received, waits))
        first_row = np.cumsum(sizes) - sizes
        number = np.arange(len(place), dtype="int64") - first_row[place] + 1
    else:  # (the columns of `calls` the rounds are written in: copies)
        start, outcomes, received = start.copy(), outcomes.copy(), received.copy()
    for row, op in objects.items():
        before = None
        for at, entry in enumerate(op.rounds, int(first_row[row])):
            ids[at] = entry.id
            start[at] = entry.ts
            latencies[at] = NAN if entry.latency is None else entry.latency * 1000.0
            waits[at] = NAN if before is None or before.end is None else max(0.0, entry.ts - before.end) * 1000.0
            outcome_ = entry.outcome or "unanswered"
            if outcome_ not in code_of:
                code_of[outcome_] = len(values)
                values.append(outcome_)
            outcomes[at] = code_of[outcome_]
            sent[at] = NAN if entry.request_bytes is None else entry.request_bytes
            received[at] = NAN if entry.answer_bytes is None else entry.answer_bytes
            before = entry
    if not set(map(type, ids)) <= _ID_TYPES:  # a JSON-RPC id is a string or an integer: anything else as text
        ids = np.array([ident if ident is None or type(ident) in (int, str) else str(ident) for ident in ids] + [None], dtype=object)[:-1]
    owner = np.repeat(columns["owner"], sizes)
    frame = pd.DataFrame({
        "trace": _category(owner, [trace for trace, _ in owners]),
        "session": _category(owner, [_session_id(o) for _, o in owners]),
        "call": call, "round": number, "id": pd.Series(ids, dtype=object), "start": start,
        "latency_ms": latencies, "wait_ms": waits, "outcome": _category(outcomes, values),
        "request_bytes": pd.array(sent, dtype="float64").astype("Int64"),
        "answer_bytes": pd.array(received, dtype="float64").astype("Int64"),
    }, columns=ROUND_COLUMNS)
    return _typed(frame, times=("start",))


_ID_TYPES = frozenset({int, str, type(None)})


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
