"""Trace format v2: what an HTTP event shares with its flow and session is written once.

An HTTP recording repeats itself: every event of one exchange (a mitmproxy flow) names the same
session, connection, method and path; each message of an SSE answer repeats the answer's status
and headers; the `http` event repeats them all; and a client sends nearly the same headers on
every request of a session. Version 2 leaves out of each event what a reader can restore from
the lines before it (docs/trace-format-http.md, "Version 2"), and `Expander` restores it, so every
consumer of `TraceReader` gets the events version 1 wrote.

The rules are one table, `RULES`: per kind of event, its header blocks (written against a base),
each field a line may leave out (with where the reader then finds its value) or that the flow
keeps for the lines after it, and its times (written as offsets). Each kind's rules are made ready
once (`PLANS`): the writer's side, run by `Compactor`, and the reader's, run by `Expander`; both
move the same state on from each full event, in file order. Only events with a `flow` are
touched: stdio traces are written as in version 1.
"""

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, NamedTuple

from mcpbench.trace.format import Kind

# Flows and sessions whose state is kept at once, the least recently used dropped first (writer and
# reader drop the same ones). Events of a flow come within moments of each other (a long GET stream
# keeps its flow alive by its events); 10,000 covers the open exchanges of a large load test.
MAX_FLOWS = 10_000
MAX_SESSIONS = 10_000
# The header field that records the bounds a trace was written with, `{"max_flows": N,
# "max_sessions": N}`: the reader lets go of the same flows and sessions whatever today's bounds
# are. A trace written before it (without the field) was written with these values.
BOUNDS = "compact"

# Where a version-2 event lists the fields it does not have although the reader would restore them.
ABSENT = "_absent"

_MISSING = object()  # no such field; as a default: no rule restores the field
_KEEP = object()  # as `Field.when_absent`: the flow keeps its value when the event lacks the field
_PHRASES = {status.value: status.phrase for status in HTTPStatus}
REQ, RESP = "req", "resp"  # the two sides of an exchange, each with its header block


class Flow:
    """What the events of one flow so far said (the full values)."""

    __slots__ = ("id", "session", "transport", "conn", "method", "path", "status", "req", "resp", "streamed", "stream_bytes", "stream_error")

    def __init__(self, flow_id: Any, state: "_State") -> None:
        self.id = flow_id
        # A new flow's session, connection, method and path default to the last ones named: one
        # client's exchanges follow each other.
        self.session = state.last_session
        self.transport = None
        self.conn = state.last_conn
        self.method = state.last_method
        self.path = state.last_path
        self.status = _MISSING
        self.req: dict | None = None
        self.resp: dict | None = None
        self.streamed = False
        self.stream_bytes = _MISSING
        self.stream_error = _MISSING


# ---- where a left-out field's value comes from -------------------------------------------------


class Source(NamedTuple):
    """Where the reader finds the value of a field its line left out: the flow's last value of
    `attr`, else what `compute(state, flow, event)` returns, else `value`; `_MISSING`: none (the
    field is written as it is).

    The flow's state is the one before this event; `event` is, for the writer, the full event and,
    for the reader, the event as restored so far (its header blocks and the fields before this one
    in `Rules.fields`: a field that depends on another reads that one's restored value, which is what
    the writer read).
    """

    attr: str | None = None
    compute: Callable[["_State", Flow, dict], Any] | None = None
    value: Any = _MISSING


def _last(attr: str) -> Source:
    return Source(attr=attr)


def _always(value: Any) -> Source:
    return Source(value=value)


def _computed(compute: Callable[["_State", Flow, dict], Any]) -> Source:
    return Source(compute=compute)


@_computed
def _transport(state: "_State", flow: Flow, event: dict) -> Any:
    """The flow's transport; for a new flow, the header's."""
    return flow.transport if flow.transport is not None else state.transport


def _content_type(block: str) -> Source:
    """The `content-type` of the event's header block `block` (null without one)."""

    def compute(state: "_State", flow: Flow, event: dict) -> Any:
        headers = event.get(block)
        return headers.get("content-type") if type(headers) is dict else _MISSING

    return Source(compute=compute)


def _length(headers: Any) -> int:
    if type(headers) is dict:
        value = headers.get("content-length")
        if type(value) is str and value.isdigit():
            return int(value)
    return 0


@_computed
def _request_size(state: "_State", flow: Flow, event: dict) -> int:
    """The request block's `content-length` (0 without one)."""
    return _length(event.get("request_headers"))


@_computed
def _url(state: "_State", flow: Flow, event: dict) -> Any:
    """The header's `upstream` and the event's path."""
    path = event.get("path", flow.path)
    return state.upstream + path if state.upstream is not None and type(path) is str else _MISSING


# An `http` event's answer fields: only when it has response headers.


@_computed
def _reason(state: "_State", flow: Flow, event: dict) -> Any:
    """The standard phrase of the event's status."""
    if type(event.get("response_headers")) is not dict:
        return _MISSING
    status = event.get("status", flow.status)
    return _PHRASES.get(status, _MISSING) if type(status) is int else _MISSING


@_computed
def _streamed(state: "_State", flow: Flow, event: dict) -> Any:
    """True when the flow's stream opened."""
    return True if flow.streamed and type(event.get("response_headers")) is dict else _MISSING


@_computed
def _response_size(state: "_State", flow: Flow, event: dict) -> Any:
    """The stream's bytes for a streamed answer, else the response block's `content-length`."""
    headers = event.get("response_headers")
    if type(headers) is not dict:
        return _MISSING
    return flow.stream_bytes if flow.streamed else _length(headers)


@_computed
def _sse_message(state: "_State", flow: Flow, event: dict) -> Any:
    """A message of an SSE answer: `event: message`, no id (a new dict: a reader's consumer may change it)."""
    return {"event": "message"} if flow.streamed else _MISSING


# ---- the rules ----------------------------------------------------------------------------------


class Field(NamedTuple):
    """One field of an event kind: whether a line leaves it out, and whether its flow keeps it.

    Attributes:
        name: the field.
        default: where the reader finds its value when the line leaves it out (it is left out where
            it equals that value; an event that lacks it lists it in `_absent`); None: never left out.
        keep: the `Flow` attribute that keeps the field's value for the lines after it, or None.
        when_absent: what that attribute becomes when the event lacks the field; `_KEEP`: unchanged.
    """

    name: str
    default: Source | None = None
    keep: str | None = None
    when_absent: Any = _KEEP


def _carried(name: str, **kept: Any) -> Field:
    """A field carried over from the flow's earlier lines: kept, and left out where it is the same."""
    return Field(name, _last(name), name, **kept)


def _kept(name: str, attr: str | None = None, **kept: Any) -> Field:
    """A field the flow keeps (in `attr`) that this kind's lines never leave out."""
    return Field(name, None, attr or name, **kept)


@dataclass(frozen=True, slots=True)
class Rules:
    """How the events of one kind (or one variant of a kind) are written in version 2.

    Attributes:
        blocks: the header blocks, `(field, side)`: a block is written as a delta against its base
            (`_State.base`), left out when it equals it, whole when there is none; the flow keeps it.
        fields: the other fields a line may leave out or the flow keeps (`_absent` lists them in
            this order).
        times: epoch times written as `[µs after ts]`.
        kept_blocks: header blocks the flow keeps although they are written whole.
        marks: `(Flow attribute, value)` set by every such event.
        http: the rules of a message's `http` object.
    """

    blocks: tuple[tuple[str, str], ...] = ()
    fields: tuple[Field, ...] = ()
    times: tuple[str, ...] = ()
    kept_blocks: tuple[tuple[str, str], ...] = ()
    marks: tuple[tuple[str, Any], ...] = ()
    http: "Rules | None" = None


@dataclass(frozen=True, slots=True)
class Variants:
    """The rules of a kind whose events differ by the value of one field (`by`)."""

    by: str
    cases: dict[str, Any]  # Rules (in `RULES`) or their `_Plan`s (in `PLANS`)
    other: Any

    def of(self, event: dict) -> Any:
        value = event.get(self.by)
        return self.cases.get(value, self.other) if type(value) is str else self.other


# What every event of a flow says: its `session` and `transport` (fields every event has: null when
# absent) are the flow's from then on, and so are the `conn`, `method` and `path` it names.
_SESSION = _carried("session", when_absent=None)
_TRANSPORT = Field("transport", _transport, "transport", when_absent=None)
_FLOW = (_SESSION, _TRANSPORT, _kept("conn"), _kept("method"), _kept("path"))
# An exchange's own events (`http`, `stream`, `error`) also repeat its connection, method and path.
_EXCHANGE = (_SESSION, _TRANSPORT, Field("dir", _always(None)), _carried("conn"), _carried("method"), _carried("path"))
_STREAM_HEADERS = (("headers", RESP),)  # the answer's, on the event that opens the stream


def _message(side: str, status: bool, sse: bool) -> Rules:
    """A message's rules: its `http` object (`headers`: the block of `side`) and SSE details."""
    return Rules(
        fields=(*_FLOW, *((Field("sse", _sse_message),) if sse else ())),
        http=Rules(
            blocks=(("headers", side),),
            fields=(
                _carried("method"), _carried("path"), _carried("status") if status else _kept("status"),
                Field("content_type", _content_type("headers")),
            ),
        ),
    )


def _stream(*fields: Field, **rules: Any) -> Rules:
    """A `stream` event's rules: those of the exchange's events, its status and bytes, and `fields`."""
    return Rules(fields=(*_EXCHANGE, *fields, _kept("bytes", "stream_bytes")), **rules)


# docs/trace-format-http.md, "Version 2: what a line leaves out", as data. Kinds not named here
# (violations) leave out only what every event of a flow does (`_OTHER`).
RULES: dict[str, Rules | Variants] = {
    Kind.MESSAGE: Variants("dir", {"c2s": _message(REQ, False, False), "s2c": _message(RESP, True, True)}, _message(RESP, False, False)),
    Kind.HTTP: Rules(
        blocks=(("request_headers", REQ), ("response_headers", RESP)),
        fields=(
            *_EXCHANGE,
            Field("mcp", _always(True)),
            Field("http_version", _always("HTTP/1.1")),
            Field("url", _url),
            Field("request_content_type", _content_type("request_headers")),
            Field("request_size", _request_size),
            _carried("status"),
            Field("error", _last("stream_error")),  # a broken stream: the exchange failed the same way
            Field("content_type", _content_type("response_headers")),
            Field("reason", _reason),
            Field("streamed", _streamed),
            Field("response_size", _response_size),
        ),
        times=("started", "responded", "ended"),
    ),
    Kind.STREAM: Variants(
        "event",
        {
            "open": _stream(
                _carried("status"), Field("content_type", _content_type("headers")),
                blocks=_STREAM_HEADERS, marks=(("streamed", True),),
            ),
            "error": _stream(_kept("status"), _kept("error", "stream_error", when_absent=_MISSING), kept_blocks=_STREAM_HEADERS),
        },
        _stream(_kept("status"), kept_blocks=_STREAM_HEADERS),
    ),
    Kind.ERROR: Rules(fields=_EXCHANGE),
    Kind.SSE: Rules(fields=(_SESSION, _TRANSPORT, Field("dir", _always("s2c")), _kept("conn"), _kept("method"), _kept("path"))),
}
_OTHER = Rules(fields=_FLOW)


# ---- header blocks ------------------------------------------------------------------------------


def header_delta(base: dict, block: dict) -> list:
    """The v2 delta that makes `block` from `base`, order included (see `apply_delta`).

    Names after the longest run that both keep in the same order are removed and set again, so
    they come back in `block`'s order.
    """
    names = list(block)
    if names == list(base):  # the usual case: the same names in the same order, some values new
        return [{name: value for name, value in block.items() if base[name] != value}]
    kept = [name for name in base if name in block]
    same = 0
    for name, other in zip(kept, names):
        if name != other:
            break
        same += 1
    removed = [name for name in base if name not in block] + kept[same:]
    changed = {name: block[name] for name in names[:same] if base[name] != block[name]}
    changed.update((name, block[name]) for name in names[same:])
    return [changed, removed] if removed else [changed]


def apply_delta(base: dict, delta: list) -> dict:
    """A header block from `base` and a v2 delta `[set]` or `[set, removed names]`."""
    block = dict(base)
    if len(delta) > 1:
        for name in delta[1]:
            block.pop(name, None)
    block.update(delta[0])
    return block


def _slot(side: str, kind: Any) -> tuple:
    """Where the last block of a side is kept: a client sends much the same request headers on
    every exchange, while a server's headers differ by answer (JSON, SSE, a bare status)."""
    return (side,) if side == REQ else (side, kind)


# ---- the rules run ------------------------------------------------------------------------------
#
# Each `Rules` is flattened once into a `_Plan`: the fields a line may leave out, each with where the
# reader finds its value (`Source`), and the fields and blocks its flow keeps; the writer's `compact`
# and the reader's `expand` run over them. (They were compiled into Python source and `exec`'d once:
# that saved 1-2 µs an event, 5.0-5.8 µs against 6.2-7.7 µs in-process on a loaded 2-core machine,
# where `mcpbench bench proxy` measures some 2-4 ms of the proxy's CPU an exchange: within its noise.)


class _Plan:
    """One `Rules` made ready to run: the writer's `compact` and the reader's `expand`."""

    __slots__ = ("blocks", "defaults", "keeps", "marks", "times", "carried_blocks", "http")

    def __init__(self, rules: Rules) -> None:
        self.blocks = rules.blocks
        # (name, Flow attribute, compute, value) of each field a line may leave out, in `_absent`'s
        # order: where the reader finds its value (`Source`)
        self.defaults = tuple((f.name, *f.default) for f in rules.fields if f.default is not None)
        # (name, Flow attribute, its value when the event lacks the field): what the flow keeps
        self.keeps = tuple((f.name, f.keep, f.when_absent) for f in rules.fields if f.keep is not None)
        self.marks = rules.marks
        self.times = rules.times
        self.carried_blocks = (*rules.blocks, *rules.kept_blocks)
        self.http = None if rules.http is None else _Plan(rules.http)

    # -- the writer

    def compact(self, state: "Compactor", flow: Flow, event: dict, kind: Any, absent: list[str]) -> None:
        """Make `event` lean in place (a message's `http` in a copy: the caller's object stays whole),
        listing in `absent` what it lacks although the reader would restore it."""
        session = event.get("session")
        http = self.http
        lean_http = None
        if http is not None:
            full_http = event.get("http")
            if type(full_http) is dict:
                http_absent: list[str] = []
                written, drop = http._lean(state, flow, full_http, kind, session, http_absent)
                lean_http = dict(full_http)
                _apply(lean_http, written, drop)
                if http_absent:
                    lean_http[ABSENT] = http_absent
            else:
                absent.append("http")
        written, drop = self._lean(state, flow, event, kind, session, absent)
        self._carry(state, flow, event, kind)  # before the event loses fields: it reads the full values
        _apply(event, written, drop)
        if lean_http is not None:
            if lean_http:
                event["http"] = lean_http
            else:
                del event["http"]
        for name in self.times:
            value = event.get(name)
            if type(value) is float:  # as an offset only where it reads back exactly
                offset = round((value - event["ts"]) * 1e6)
                if round(event["ts"] + offset / 1e6, 6) == value:
                    event[name] = [offset]

    def _lean(self, state: "Compactor", flow: Flow, event: dict, kind: Any, session: Any, absent: list[str]) -> tuple[list, list]:
        """What `event` loses: each block as it is written (`Compactor._written`) and the fields left
        out; each field it lacks although the reader would restore it goes in `absent`."""
        written = [
            (field, state._written(event.get(field, _MISSING), side, kind, flow, session, field, absent))
            for field, side in self.blocks
        ]
        drop = []
        for name, attr, compute, value in self.defaults:
            default = getattr(flow, attr) if attr is not None else compute(state, flow, event) if compute is not None else value
            if default is _MISSING:
                continue
            have = event.get(name, _MISSING)
            if have is _MISSING:
                absent.append(name)
            elif have is default or (have == default and type(have) is type(default)):
                drop.append(name)
        return written, drop

    # -- the reader

    def expand(self, state: "Expander", flow: Flow, full: dict, kind: Any, session: Any, absent: Any) -> None:
        """Put back into `full` (a copy of the line's event) what its line left out."""
        http = self.http
        if http is not None and "http" not in absent:
            restored = full["http"] = dict(full.get("http") or {})
            http._restore(state, flow, restored, kind, session, restored.pop(ABSENT, ()))
        self._restore(state, flow, full, kind, session, absent)
        self._carry(state, flow, full, kind)
        # A consumer may change the events it gets: the header blocks the state keeps are its copies.
        for field, _side in self.carried_blocks:
            if type(full.get(field)) is dict:
                full[field] = dict(full[field])
        if http is not None:
            restored = full.get("http")
            if type(restored) is dict:
                for field, _side in http.blocks:
                    if type(restored.get(field)) is dict:
                        restored[field] = dict(restored[field])

    def _restore(self, state: "Expander", flow: Flow, event: dict, kind: Any, session: Any, absent: Any) -> None:
        """Put back into `event` what its line left out (blocks first: other fields read them)."""
        for field, side in self.blocks:
            state._restore_block(event, field, side, kind, flow, session, absent)
        for name in self.times:
            value = event.get(name)
            if type(value) is list:
                event[name] = round(event["ts"] + value[0] / 1e6, 6)
        for name, attr, compute, value in self.defaults:
            if name not in event and name not in absent:
                if attr is not None:
                    value = getattr(flow, attr)
                elif compute is not None:
                    value = compute(state, flow, event)
                if value is not _MISSING:
                    event[name] = value

    # -- both sides

    def _carry(self, state: "_State", flow: Flow, event: dict, kind: Any) -> None:
        """Move the state on from the full `event`: the fields and blocks its flow keeps, and the
        file's last session, connection, method and path (a new flow starts from them)."""
        self._keep(flow, event)
        session = state.last_session = flow.session
        for field, side in self.carried_blocks:
            block = event.get(field)
            if type(block) is dict:
                state._block(session, side, kind, block, flow)
        http = self.http
        if http is not None:
            nested = event.get("http")
            if type(nested) is dict:
                http._keep(flow, nested)
                for field, side in http.blocks:
                    block = nested.get(field)
                    if type(block) is dict:
                        state._block(session, side, kind, block, flow)
        state.last_conn, state.last_method, state.last_path = flow.conn, flow.method, flow.path

    def _keep(self, flow: Flow, event: dict) -> None:
        for name, attr, when_absent in self.keeps:
            if when_absent is _KEEP:
                value = event.get(name, _KEEP)
                if value is not _KEEP:
                    setattr(flow, attr, value)
            else:
                setattr(flow, attr, event.get(name, when_absent))
        for attr, value in self.marks:
            setattr(flow, attr, value)


def _apply(event: dict, written: list, drop: list) -> None:
    """Take out of `event` what `_Plan._lean` decided."""
    for name in drop:
        del event[name]
    for field, block in written:
        if block is not _KEEP:
            if block is _MISSING:
                del event[field]
            else:
                event[field] = block


def _plans(table: dict[str, Rules | Variants]) -> dict[str, Any]:
    """`RULES` made ready: a `_Plan` per kind, or `Variants` of plans."""
    plans: dict[str, Any] = {}
    for kind, rules in table.items():
        if type(rules) is Variants:
            plans[kind] = Variants(rules.by, {value: _Plan(case) for value, case in rules.cases.items()}, _Plan(rules.other))
        else:
            plans[kind] = _Plan(rules)  # type: ignore[arg-type]
    return plans


PLANS = _plans(RULES)
_OTHER_PLAN = _Plan(_OTHER)


# ---- the two sides ------------------------------------------------------------------------------


def header_bounds() -> dict[str, int]:
    """What a writer's header says under `BOUNDS`: the bounds it keeps, today's."""
    return {"max_flows": MAX_FLOWS, "max_sessions": MAX_SESSIONS}


def bounds(header: dict) -> tuple[int, int]:
    """The (flows, sessions) a trace was written with: its header's, else (an older trace) today's.

    Raises:
        ValueError: the header names them, but not as two whole numbers >= 1.
    """
    given = header.get(BOUNDS)
    if given is None:
        return MAX_FLOWS, MAX_SESSIONS
    flows, sessions = (given.get("max_flows"), given.get("max_sessions")) if type(given) is dict else (None, None)
    if not (type(flows) is int and flows >= 1 and type(sessions) is int and sessions >= 1):
        raise ValueError(f"header field {BOUNDS!r}: max_flows and max_sessions must be whole numbers >= 1, not {repr(given)[:80]}")
    return flows, sessions


class _State:
    """The state both sides keep, moved on from each full event (`_Plan._carry`).

    Raises:
        ValueError: the header's bounds (`BOUNDS`) are not two whole numbers >= 1.
    """

    def __init__(self, header: dict) -> None:
        self.max_flows, self.max_sessions = bounds(header)
        self.transport = header.get("transport")
        upstream = header.get("upstream")
        self.upstream = upstream.rstrip("/") if isinstance(upstream, str) else None
        self.flows: OrderedDict[Any, Flow] = OrderedDict()  # by flow id (writer) or ordinal (reader)
        self.next_ordinal = 1
        self.session_blocks: OrderedDict[Any, dict[tuple, dict]] = OrderedDict()
        self.last_blocks: dict[tuple, dict] = {}
        self.last_session: Any = None
        self.last_conn: Any = _MISSING
        self.last_method: Any = _MISSING
        self.last_path: Any = _MISSING

    def _new_flow(self, key: Any, flow_id: Any) -> Flow:
        """A flow named for the first time; it takes the next ordinal, its alias in later lines."""
        flow = self.flows[key] = Flow(flow_id, self)
        self.next_ordinal += 1
        if len(self.flows) > self.max_flows:
            self.flows.popitem(last=False)
        return flow

    def base(self, side: str, kind: Any, flow: Flow, session: Any) -> dict | None:
        """The block a delta is taken against: the flow's of that side, else the last one in its
        slot (`_slot`) in the session, else in the file."""
        inherited = flow.req if side == REQ else flow.resp
        if inherited is not None:
            return inherited
        slot = _slot(side, kind)
        blocks = self.session_blocks.get(session)
        if blocks is not None and slot in blocks:
            return blocks[slot]
        return self.last_blocks.get(slot)

    def _block(self, session: Any, side: str, kind: Any, block: dict, flow: Flow) -> None:
        """`block`, the full header block of `side`, is the flow's, its session's and the file's last."""
        if side == REQ:
            flow.req = block
        else:
            flow.resp = block
        slot = _slot(side, kind)
        self.last_blocks[slot] = block
        blocks = self.session_blocks.get(session)
        if blocks is None:
            blocks = self.session_blocks[session] = {}
            if len(self.session_blocks) > self.max_sessions:
                self.session_blocks.popitem(last=False)
        else:
            self.session_blocks.move_to_end(session)
        blocks[slot] = block


class Compactor(_State):
    """The writer's side: `compact(event)` gives the v2 form of a full event (the same object when it has no flow)."""

    def __init__(self, header: dict) -> None:
        super().__init__(header)
        # (id(base), id(block)) -> (base, block, delta): the addon shares block dicts between
        # exchanges with the same raw headers, so a delta is computed once per pair.
        self._deltas: dict[tuple[int, int], tuple] = {}

    def compact(self, event: dict) -> dict:
        """The v2 form of `event`, made in place: the caller hands over a dict of its own (a
        message's `http` object is copied, not changed)."""
        flow_id = event.get("flow")
        if flow_id is None:
            return event
        flow = self.flows.get(flow_id)
        if flow is None:
            flow = self._new_flow(flow_id, self.next_ordinal)  # the writer's `id`: the alias it writes
            alias = None
        else:
            self.flows.move_to_end(flow_id)
            alias = flow.id
        kind = event.get("kind")
        plan = PLANS.get(kind, _OTHER_PLAN)
        if type(plan) is Variants:
            plan = plan.of(event)
        absent: list[str] = []
        plan.compact(self, flow, event, kind, absent)
        if alias is not None:
            event["flow"] = alias
        if absent:
            event[ABSENT] = absent
        return event

    def _written(self, block: Any, side: str, kind: Any, flow: Flow, session: Any, field: str, absent: list[str]) -> Any:
        """How a header block is written: `_KEEP` (as it is: whole, or not a block), `_MISSING`
        (left out: it equals its base) or a delta; a block the event lacks although it has a
        base is noted in `absent`."""
        base = self.base(side, kind, flow, session)
        if type(block) is not dict:
            if block is _MISSING and base is not None:
                absent.append(field)
            return _KEEP
        if base is None:
            return _KEEP
        if base is block or base == block:
            return _MISSING
        key = (id(base), id(block))
        cached = self._deltas.get(key)
        if cached is None or cached[0] is not base or cached[1] is not block:
            if len(self._deltas) >= self.max_sessions:
                self._deltas.clear()
            # header_delta keeps the order exactly (tests/trace/test_compact.py holds it to that)
            cached = self._deltas[key] = (base, block, header_delta(base, block))
        return cached[2]


class Expander(_State):
    """The reader's side: `expand(event)` gives back the full (v1-shaped) event of a v2 event.

    Raises:
        ValueError: the event names a flow or a header base that no line before it had.
    """

    def expand(self, event: dict) -> dict:
        ref = event.get("flow")
        if ref is None:
            return event
        if type(ref) is int:
            flow = self.flows.get(ref)
            if flow is None:
                raise ValueError(f"flow #{ref} was not named before (or too long ago)")
            self.flows.move_to_end(ref)
        else:
            flow = self._new_flow(self.next_ordinal, ref)
        full = dict(event)
        full["flow"] = flow.id
        kind = full.get("kind")
        plan = PLANS.get(kind, _OTHER_PLAN)
        if type(plan) is Variants:
            plan = plan.of(full)
        absent = full.pop(ABSENT, ())
        # The session the writer took header bases from: the full event's (null when it had none).
        session = full["session"] if "session" in full else None if "session" in absent else flow.session
        plan.expand(self, flow, full, kind, session, absent)
        return full

    def _restore_block(self, full: dict, field: str, side: str, kind: Any, flow: Flow, session: Any, absent: Any) -> None:
        """Put back a header block its line left out (its base) or wrote as a delta."""
        value = full.get(field, _MISSING)
        if value is _MISSING:
            base = self.base(side, kind, flow, session)
            if base is not None and field not in absent:
                full[field] = base
        elif type(value) is list:
            base = self.base(side, kind, flow, session)
            if base is None or not value or not isinstance(value[0], dict):
                raise ValueError(f"{field}: a header delta without a block before it")
            full[field] = apply_delta(base, value)
