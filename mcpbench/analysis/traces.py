"""`load_trace`: trace files into tidy pandas frames (`events`, `calls`, `rounds`, `sessions`, `violations`).

One pass over each file through the trace reader (the only parser of traces) and the trace model
(`trace/model.py`, the one that pairs and groups, as `inspect` does): `calls` has one row per
operation (a 2026-07-28 multi round-trip request once, with its `rounds` and the client's wait
between them in `client_wait_ms`), `rounds` one row per request of an operation; the violations
are the ones the recorder wrote and the model's operation rules, so nothing is counted twice.
Columns are documented in docs/analysis.md.

The model's hot path takes the usual events (`Rebuild.take_all`), measuring each message once; the
columns are cut out of its objects at the end and the categorical columns built from codes (per session, or factorized once),
not inferred row by row.
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

from mcpbench.trace.format import Kind
from mcpbench.trace.model import NOT_MCP, Operation, Rebuild, SessionReport, Step
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


@dataclass
class TraceFrames:
    """What `load_trace` returns: the frames and the reader's notes (torn last lines)."""

    events: pd.DataFrame
    calls: pd.DataFrame
    sessions: pd.DataFrame
    violations: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    rounds: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ROUND_COLUMNS))


class _Calls:
    """The model's objects while reading: every file's sessions and operations, in order."""

    def __init__(self) -> None:
        self.owners: list[tuple[str, SessionReport]] = []  # (trace, session), by owner index
        self.ops: list[Operation] = []  # in the order they began
        self.op_owners: list[int] = []  # each operation's owner index (two lists: no tuple per operation)
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
        return TraceFrames(
            events=_events_frame(ev if ev is not None else {name: [] for name in EVENT_COLUMNS}),
            calls=_calls_frame(calls, columns),
            sessions=_sessions_frame(calls, columns),
            violations=_typed(pd.DataFrame(vio, columns=VIOLATION_COLUMNS), times=("ts",)),
            notes=notes,
            rounds=_rounds_frame(calls, columns),
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

    def other(event: dict, step: Step) -> None:
        nonlocal last, owner
        kind = event["kind"]
        ts = event["ts"]
        direction = event.get("dir")
        flow = event.get("flow")
        report = step.session
        if report is not last:  # most events belong to the session of the one before
            last = report
            owner = index.get(id(report))
            if owner is None:
                owner = index[id(report)] = len(owners)
                owners.append((name, report))
                per_owner.append(0)
        label = None
        for entry in step.added:
            kind_ = entry.kind
            if kind_ == "request":
                label = entry.op.method
            elif kind_ == "notification":
                label = entry.name
            elif kind_ == violation:
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
        for entry in step.answered:
            label = entry.op.method
        if kind == message_kind:
            if flow is not None and direction == "s2c" and flow not in first_sse and ("sse" in event or event.get("via") == "sse"):
                first_sse[flow] = ts
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
            ev["session"].append(event.get("session"))
            ev["transport"].append(report.transport)
            ev["dir"].append(direction)
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
    calls.ops += rebuild.opened
    calls.op_owners += [index[i] for i in map(id, rebuild.opened_in)]


def _era(report: SessionReport) -> str | None:
    return report.session.era.value if report.session.era else None


def _detail(op: Operation) -> str | None:
    """An operation's detail as the frame shows it: an error's message (its code has a column)."""
    code = op.last.error_code
    if code is not None:  # "code: message", or "code (name): message"
        return op.detail.partition(": ")[2] or None
    return op.detail or None


def _call_columns(calls: _Calls, first_sse: dict, statuses: dict) -> dict[str, Any]:
    """The operations cut into numpy columns, HTTP failures marked.

    One pass over the operations filling plain lists (a generator per column walked them a dozen
    times); a one-round operation, the usual one, reads its round directly, and gives the `rounds`
    frame its row in the same pass (`_rounds_frame`: the operations of several rounds apart).
    """
    ops = calls.ops
    dirs, methods, tools, steps = [], [], [], []
    starts, ends, request_bytes, answer_bytes, error_codes = [], [], [], [], []
    outcomes, details, rounds_, waits, first_flows, last_flows = [], [], [], [], [], []
    round_ids, round_latencies, round_outcomes, round_sent = [], [], [], []  # a one-round operation's round
    for op in ops:
        rounds = op.rounds
        first = rounds[0]
        dirs.append(op.dir)
        method = op.method
        methods.append(method)
        tools.append(op.target if method == "tools/call" else None)
        steps.append(op.name)
        starts.append(first.ts)
        end = op.end
        ends.append(NAN if end is None else end)
        outcomes.append(op.outcome or "unanswered")
        if len(rounds) == 1:
            last = first
            size = first.request_bytes
            request_bytes.append(size or 0)
            round_sent.append(NAN if size is None else size)
            size = first.answer_bytes
            answer_bytes.append(NAN if size is None else float(size))
            waits.append(0.0)
            round_ids.append(first.id)
            latency = first.latency
            round_latencies.append(NAN if latency is None else latency * 1000.0)
            round_outcomes.append(first.outcome or "unanswered")
        else:
            round_sent.append(NAN)  # filled by `_rounds_frame`
            round_ids.append(None)
            round_latencies.append(NAN)
            round_outcomes.append(None)
            last = rounds[-1]
            request_bytes.append(sum(r.request_bytes or 0 for r in rounds))
            answer_bytes.append(_answer_bytes(op))
            waits.append(op.client_wait * 1000.0)
        rounds_.append(len(rounds))
        code = last.error_code
        error_codes.append(NAN if code is None or end is None else code)
        details.append(_detail(op) if code is not None else (op.detail or None))
        first_flows.append(first.flow)
        last_flows.append(last.flow)
    start = np.array(starts, dtype="float64")
    columns: dict[str, Any] = {
        "owner": np.array(calls.op_owners, dtype=np.intp),
        "dir": dirs,
        "method": methods,
        "tool": tools,
        "step": steps,
        "start": start,
        "end": np.array(ends, dtype="float64"),
        "request_bytes": np.array(request_bytes, dtype="int64"),
        "answer_bytes": np.array(answer_bytes, dtype="float64"),
        "error_code": np.array(error_codes, dtype="float64"),
        "outcome": np.asarray(outcomes, dtype=object),
        "detail": np.asarray(details, dtype=object),
        "rounds": np.array(rounds_, dtype="int64"),
        "client_wait_ms": np.array(waits, dtype="float64"),
        "round_id": round_ids,
        "round_latency_ms": np.array(round_latencies, dtype="float64"),
        "round_outcome": round_outcomes,
        "round_request_bytes": np.array(round_sent, dtype="float64"),
    }
    # flows are only in HTTP recordings: a stdio trace skips the per-row look-ups
    sse = _per_flow(first_flows, first_sse)
    columns["ttfe_ms"] = np.where(sse >= start, (sse - start) * 1000.0, NAN)
    columns["http_status"] = _per_flow(last_flows, statuses)
    return columns


def _answer_bytes(op: Operation) -> float:
    sizes = [r.answer_bytes for r in op.rounds if r.answer_bytes is not None]
    return float(sum(sizes)) if sizes else NAN


def _session_id(report: Any) -> str | None:
    """A frame's session: the model's id, or null for what is outside any session (as the frames always had it)."""
    return None if report.id in NO_SESSION else report.id


def _per_flow(flows: list, values: dict) -> np.ndarray:
    """Each row's value for its HTTP exchange (NaN without one)."""
    if not values:
        return np.full(len(flows), NAN)
    return np.fromiter((values.get(f, NAN) if f is not None else NAN for f in flows), dtype="float64", count=len(flows))


def _calls_frame(calls: _Calls, columns: dict[str, Any]) -> pd.DataFrame:
    owners, owner = calls.owners, columns["owner"]
    start = columns["start"]
    frame = pd.DataFrame(
        {
            "trace": _category(owner, [trace for trace, _ in owners]),
            "session": _category(owner, [_session_id(o) for _, o in owners]),
            "transport": _category(owner, [o.transport for _, o in owners]),
            "era": _category(owner, [_era(o) for _, o in owners]),
            "version": _category(owner, [o.session.version for _, o in owners]),
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
            "rounds": columns["rounds"],
            "client_wait_ms": columns["client_wait_ms"],
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

    A one-round operation's row was cut with its `calls` row (`_call_columns`); the rounds of the
    others are read here and put in their places. The trace and session columns come from each
    row's owner, as in `calls`."""
    owners, ops = calls.owners, calls.ops
    sizes = columns["rounds"]
    call = np.arange(len(ops), dtype="int64")
    number = np.ones(len(ops), dtype="int64")
    ids = np.array(columns["round_id"] + [None], dtype=object)[:-1]  # (a None last: ids stay objects, never a 2-D array)
    start, latencies, outcomes = columns["start"], columns["round_latency_ms"], np.asarray(columns["round_outcome"], dtype=object)
    sent, received = columns["round_request_bytes"], columns["answer_bytes"]
    waits = np.full(len(ops), NAN)
    several = np.flatnonzero(sizes > 1)
    if len(several):  # each operation's rows in its place: repeat its one row, then fill the rounds in
        place = np.repeat(np.arange(len(ops)), sizes)
        call, ids, start, latencies, outcomes, sent, received, waits = (
            column[place] for column in (call, ids, start, latencies, outcomes, sent, received, waits))
        first_row = np.cumsum(sizes) - sizes
        number = np.arange(len(place), dtype="int64") - first_row[place] + 1
        for row in several.tolist():
            before = None
            for at, entry in enumerate(ops[row].rounds, first_row[row]):
                ids[at] = entry.id
                start[at] = entry.ts
                latencies[at] = NAN if entry.latency is None else entry.latency * 1000.0
                waits[at] = NAN if before is None or before.end is None else max(0.0, entry.ts - before.end) * 1000.0
                outcomes[at] = entry.outcome or "unanswered"
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
        "latency_ms": latencies, "wait_ms": waits, "outcome": _factorized(outcomes),
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
