"""Trace format v2: what an HTTP event shares with its flow and session is written once.

An HTTP recording repeats itself: every event of one exchange (a mitmproxy flow) names the same
session, connection, method and path; each message of an SSE answer repeats the answer's status
and headers; the `http` event repeats them all; and a client sends nearly the same headers on
every request of a session. Version 2 leaves out of each event what a reader can restore from
the lines before it (docs/trace-format-http.md, "Version 2"), and `Expander` restores it, so every
consumer of `TraceReader` gets the events version 1 wrote.

`Compactor` (the writer's side) and `Expander` (the reader's) hold the same state, moved on by
the same function (`_State.update`) from each full event, in file order; a field is left out only
when it equals the default the reader computes (`_State.defaults`, shared). Only events with a
`flow` are touched: stdio traces are written as in version 1.
"""

from collections import OrderedDict
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

from mcpbench.trace.format import FORMAT_VERSION, Kind

# Flows and sessions whose state is kept at once, the least recently used dropped first (writer and
# reader drop the same ones). Events of a flow come within moments of each other (a long GET stream
# keeps its flow alive by its events); 10,000 covers the open exchanges of a large load test.
MAX_FLOWS = 10_000
MAX_SESSIONS = 10_000

# Where a version-2 event lists the fields it does not have although the reader would restore them.
ABSENT = "_absent"

_MISSING = object()
_PHRASES = {status.value: status.phrase for status in HTTPStatus}
_SSE_MESSAGE = {"event": "message"}
_TIMES = ("started", "responded", "ended")  # an `http` event's times, written as offsets from its `ts`
# The fields of a `stream` event (and of one that opens a stream) as the addon writes it (`Compactor._stream`).
_STREAM_FIELDS = frozenset({"session", "transport", "dir", "conn", "method", "path"})
_OPEN_FIELDS = frozenset({"status", "content_type"})
# The fields of an `http` event as the addon writes it (`Compactor._http`, its straight path).
_HTTP_FIELDS = frozenset({
    "session", "transport", "dir", "conn", "method", "path", "mcp", "http_version", "url",
    "request_content_type", "request_size", "status", "content_type", "reason", "response_size",
})
_HEAD_DIRS = {Kind.HTTP: None, Kind.STREAM: None, Kind.ERROR: None, Kind.SSE: "s2c"}
_CONN_KINDS = frozenset({Kind.HTTP, Kind.STREAM, Kind.ERROR})  # events that carry conn, method, path
# Header blocks of an event, by kind: (field, side); `side` is "req" or "resp" (messages: by `dir`).
_BLOCKS = {
    Kind.STREAM: (("headers", "resp"),),
    Kind.HTTP: (("request_headers", "req"), ("response_headers", "resp")),
}


class Flow:
    """What the events of one flow so far said once (the full values)."""

    __slots__ = ("id", "session", "transport", "conn", "method", "path", "status", "req", "resp", "streamed", "stream_bytes", "stream_error")

    def __init__(self, flow_id: Any, state: "_State") -> None:
        self.id = flow_id
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


def _content_length(headers: Any) -> int:
    if isinstance(headers, dict):
        value = headers.get("content-length")
        if isinstance(value, str) and value.isdigit():
            return int(value)
    return 0


def _content_type(headers: Any) -> Any:
    return headers.get("content-type") if isinstance(headers, dict) else _MISSING


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


class _State:
    """The state both sides keep; `update` moves it on from one full event."""

    def __init__(self, header: dict) -> None:
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
        # A new flow's session, connection, method and path default to the last ones named: one
        # client's exchanges follow each other.
        flow = self.flows[key] = Flow(flow_id, self)
        self.next_ordinal += 1
        if len(self.flows) > MAX_FLOWS:
            self.flows.popitem(last=False)
        return flow

    def base(self, side: str, kind: str, flow: Flow, session: Any) -> dict | None:
        """The block a delta is taken against: the flow's of that side, else the last one in its
        slot (`_slot`) in the session, else in the file."""
        inherited = flow.req if side == "req" else flow.resp
        if inherited is not None:
            return inherited
        slot = _slot(side, kind)
        blocks = self.session_blocks.get(session)
        if blocks is not None and slot in blocks:
            return blocks[slot]
        return self.last_blocks.get(slot)

    def defaults(self, kind: str, event: dict, flow: Flow) -> list[tuple[str, Any]]:
        """Top-level fields the reader restores when absent, with their values.

        Computed from the flow's state before this event and the event's header blocks (which the
        reader restores first); a field that depends on another left-out field reads the flow's
        value when the event lacks it, which is what the reader restores.
        """
        transport = flow.transport if flow.transport is not None else self.transport
        if kind == Kind.MESSAGE:
            if flow.streamed and event.get("dir") == "s2c":
                # a message in an SSE answer: `event: message`, no id
                return [("session", flow.session), ("transport", transport), ("sse", _SSE_MESSAGE)]
            return [("session", flow.session), ("transport", transport)]
        out = [("session", flow.session), ("transport", transport)]
        if kind in _HEAD_DIRS:
            out.append(("dir", _HEAD_DIRS[kind]))
        if kind not in _CONN_KINDS:
            return out
        out += (("conn", flow.conn), ("method", flow.method), ("path", flow.path))
        if kind == Kind.STREAM:
            if event.get("event") == "open":
                out += (("status", flow.status), ("content_type", _content_type(event.get("headers"))))
        elif kind == Kind.HTTP:
            path = event.get("path", flow.path)
            request = event.get("request_headers")
            out += (
                ("mcp", True),
                ("http_version", "HTTP/1.1"),
                ("url", self.upstream + path if self.upstream is not None and type(path) is str else _MISSING),
                ("request_content_type", _content_type(request)),
                ("request_size", _content_length(request)),
                ("status", flow.status),
                ("error", flow.stream_error),  # a broken stream: the exchange failed the same way
            )
            response = event.get("response_headers")
            if type(response) is dict:
                status = event.get("status", flow.status)
                out += (
                    ("content_type", response.get("content-type")),
                    ("reason", _PHRASES.get(status, _MISSING) if type(status) is int else _MISSING),
                )
                if flow.streamed:
                    out += (("streamed", True), ("response_size", flow.stream_bytes))
                else:
                    out.append(("response_size", _content_length(response)))
        return out

    @staticmethod
    def http_defaults(direction: Any, http: dict, flow: Flow) -> list[tuple[str, Any]]:
        """The same for a message's `http` object."""
        if direction == "s2c":
            return [("method", flow.method), ("path", flow.path), ("status", flow.status), ("content_type", _content_type(http.get("headers")))]
        return [("method", flow.method), ("path", flow.path), ("content_type", _content_type(http.get("headers")))]

    def update(self, event: dict, flow: Flow) -> None:
        """Move the state on from one full event of `flow`."""
        kind = event.get("kind")
        session = event.get("session")
        flow.session = self.last_session = session
        flow.transport = event.get("transport")
        for name in ("conn", "method", "path"):
            if name in event:
                setattr(flow, name, event[name])
        http = event.get("http") if kind == Kind.MESSAGE else None
        if isinstance(http, dict):
            if "method" in http:
                flow.method = http["method"]
            if "path" in http:
                flow.path = http["path"]
        self.last_conn, self.last_method, self.last_path = flow.conn, flow.method, flow.path
        if kind == Kind.MESSAGE:
            if isinstance(http, dict):
                if "status" in http:
                    flow.status = http["status"]
                if isinstance(http.get("headers"), dict):
                    self._block(session, _side(event), kind, http["headers"], flow)
        elif kind in _BLOCKS:
            if "status" in event:
                flow.status = event["status"]
            for field, side in _BLOCKS[kind]:
                if isinstance(event.get(field), dict):
                    self._block(session, side, kind, event[field], flow)
            if kind == Kind.STREAM:
                if event.get("event") == "open":
                    flow.streamed = True
                if "bytes" in event:
                    flow.stream_bytes = event["bytes"]
                if event.get("event") == "error":
                    flow.stream_error = event.get("error", _MISSING)

    def _block(self, session: Any, side: str, kind: str, block: dict, flow: Flow) -> None:
        if side == "req":
            flow.req = block
        else:
            flow.resp = block
        slot = _slot(side, kind)
        self.last_blocks[slot] = block
        blocks = self.session_blocks.get(session)
        if blocks is None:
            blocks = self.session_blocks[session] = {}
            if len(self.session_blocks) > MAX_SESSIONS:
                self.session_blocks.popitem(last=False)
        else:
            self.session_blocks.move_to_end(session)
        blocks[slot] = block


def _times_as_offsets(event: dict) -> None:
    """An `http` event's times as `[µs after ts]` (negative: before) when they read back exactly."""
    ts = event["ts"]
    for name in _TIMES:
        value = event.get(name)
        if type(value) is float:
            offset = round((value - ts) * 1e6)
            if round(ts + offset / 1e6, 6) == value:
                event[name] = [offset]


def _time_as_offset(value: float, ts: float) -> Any:
    """`_times_as_offsets` for one time of an event made from values (`Compactor.http`)."""
    if type(value) is not float:
        return value
    offset = round((value - ts) * 1e6)
    return [offset] if round(ts + offset / 1e6, 6) == value else value


def _times_from_offsets(event: dict) -> None:
    ts = event["ts"]
    for name in _TIMES:
        value = event.get(name)
        if type(value) is list:
            event[name] = round(ts + value[0] / 1e6, 6)


def _same(value: Any, default: Any) -> bool:
    """Whether a field equals its default as the reader restores it (the same type too: 1 is not True)."""
    return value is default or (value == default and type(value) is type(default))


def _slot(side: str, kind: str) -> tuple:
    """Where the last block of a side is kept: a client sends much the same request headers on
    every exchange, while a server's headers differ by answer (JSON, SSE, a bare status)."""
    return (side,) if side == "req" else (side, kind)


def _side(event: dict) -> str:
    """Which header block a message's `http.headers` is: the request's (c2s) or the response's."""
    return "req" if event.get("dir") == "c2s" else "resp"


def _blocks(kind: Any, event: dict) -> tuple[tuple[str, str], ...]:
    if kind == Kind.MESSAGE:
        return (("headers", _side(event)),)
    if kind == Kind.STREAM and event.get("event") != "open":
        return ()
    return _BLOCKS.get(kind, ())


class Compactor(_State):
    """The writer's side: `compact(event)` gives the v2 form of a full event (the same object when it has no flow)."""

    def __init__(self, header: dict) -> None:
        super().__init__(header)
        # (id(base), id(block)) -> (base, block, delta): the addon shares block dicts between
        # exchanges with the same raw headers, so a delta is computed once per pair.
        self._deltas: dict[tuple[int, int], tuple] = {}
        self.fast = True  # the straight-line paths for the addon's common events (tests turn them off to compare)

    def compact(self, event: dict) -> dict:
        """The v2 form of `event`, made in place: the caller hands over a dict of its own."""
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
        if self.fast and (
            (kind == Kind.MESSAGE and self._message(event, flow))
            or (kind == Kind.HTTP and self._http(event, flow))
            or (kind == Kind.STREAM and self._stream(event, flow))
        ):
            if alias is not None:
                event["flow"] = alias
            return event
        absent: list[str] = []
        drop: list[str] = []
        small = None
        if kind == Kind.MESSAGE:
            http = event.get("http")
            if type(http) is dict:
                small = dict(http)
                http_absent = self._compact_blocks(small, http, kind, (("headers", _side(event)),), flow, event.get("session"))
                if small.get("headers") is _MISSING:
                    del small["headers"]
                self._omit(http, self.http_defaults(event.get("dir"), http, flow), small, http_absent)
                if http_absent:
                    small[ABSENT] = http_absent
            else:
                absent.append("http")
        else:
            fields = _blocks(kind, event)
            if fields:
                small = {}
                absent += self._compact_blocks(small, event, kind, fields, flow, event.get("session"))
        self._omit(event, self.defaults(kind, event, flow), drop, absent)
        self.update(event, flow)
        # Only now the event loses fields: `update` read the full values.
        for name in drop:
            del event[name]
        if kind == Kind.MESSAGE:
            if small:
                event["http"] = small
            elif small is not None:
                del event["http"]
        elif small:
            for field, value in small.items():
                if value is _MISSING:
                    del event[field]
                else:
                    event[field] = value
        if kind == Kind.HTTP:
            _times_as_offsets(event)
        if alias is not None:
            event["flow"] = alias
        if absent:
            event[ABSENT] = absent
        return event

    def _message(self, event: dict, flow: Flow) -> bool:
        """`compact` for a message as the addon writes it, in straight lines (its hot path).

        The same decisions as the general path (a test holds them equal); False, and nothing
        changed, for a message of another shape.
        """
        http = event.get("http")
        direction = event.get("dir")
        if type(http) is not dict or len(http) != (4 if direction == "c2s" else 5 if direction == "s2c" else 0):
            return False
        headers = http.get("headers")
        if type(headers) is not dict or "method" not in http or "path" not in http or "content_type" not in http:
            return False
        if direction == "s2c":
            if "status" not in http:
                return False
            side, status_default = "resp", flow.status
        else:
            side, status_default = "req", _MISSING
        session = event.get("session", _MISSING)
        transport = event.get("transport", _MISSING)
        if session is _MISSING or transport is _MISSING:
            return False
        base = self.base(side, Kind.MESSAGE, flow, session)
        small = {}
        for name, value in http.items():
            if name == "headers":
                if base is None:
                    small[name] = value
                elif base is not value and base != value:
                    small[name] = self._delta(base, value)
                continue
            if name == "method":
                default = flow.method
            elif name == "path":
                default = flow.path
            elif name == "status":
                default = status_default
            else:
                default = headers.get("content-type")
            if not (value is default or (value == default and type(value) is type(default))):
                small[name] = value
        drop_session = session is flow.session or (session == flow.session and type(session) is type(flow.session))
        default_transport = flow.transport if flow.transport is not None else self.transport
        drop_transport = transport is default_transport or (transport == default_transport and type(transport) is type(default_transport))
        sse = _MISSING
        if flow.streamed and direction == "s2c":
            sse = event.get("sse", _MISSING)
            if sse is _MISSING:
                return False  # the general path notes it `_absent`
        self.update(event, flow)
        if drop_session:
            del event["session"]
        if drop_transport:
            del event["transport"]
        if small:
            event["http"] = small
        else:
            del event["http"]
        if sse is not _MISSING and sse == _SSE_MESSAGE and type(sse) is dict:
            del event["sse"]
        return True

    def _head(self, ts: float, flow: Flow, session: Any, transport: Any) -> dict[str, Any]:
        """The start of a v2 event of `flow` made from values: `v`, `ts`, and `session` and
        `transport` where they differ from what the reader restores."""
        event: dict[str, Any] = {"v": FORMAT_VERSION, "ts": ts}
        if not _same(session, flow.session):
            event["session"] = session
        if not _same(transport, flow.transport if flow.transport is not None else self.transport):
            event["transport"] = transport
        return event

    def _named(self, flow_id: Any, flow: Flow | None) -> tuple[Flow, Any]:
        """The flow `flow_id` (`flow`: its state, None when new) and what a line names it by: its id
        the first time, its ordinal after."""
        if flow is None:
            return self._new_flow(flow_id, self.next_ordinal), flow_id
        self.flows.move_to_end(flow_id)
        return flow, flow.id

    def message(
        self, ts: float, flow_id: str, session: Any, transport: str, direction: str,
        http: tuple[str, str, Any, Any, dict], sse: dict | None,
    ) -> dict | None:
        """The v2 event, less its `msg`, of a message as the addon records it, built directly.

        The addon's hot path: `compact` of the event `{v, ts, session, transport, dir, kind, flow,
        http: {method, path, [status (s2c)], content_type, headers}, [sse]}` would take it apart
        again; this makes the same decisions as `_message` from the values (a test holds them
        equal). `http` is (method, path, status, content_type, headers). None, and nothing changed,
        when the flow's state asks for the general path (an SSE answer's message without `sse`).
        """
        flow = self.flows.get(flow_id)
        s2c = direction == "s2c"
        if flow is not None and sse is None and flow.streamed and s2c:
            return None  # the general path notes the missing `sse` as `_absent`
        flow, ref = self._named(flow_id, flow)
        method, path, status, content_type, headers = http
        side = "resp" if s2c else "req"
        base = self.base(side, Kind.MESSAGE, flow, session)
        event = self._head(ts, flow, session, transport)
        event["dir"] = direction
        event["kind"] = Kind.MESSAGE
        event["flow"] = ref
        small: dict[str, Any] = {}
        if not _same(method, flow.method):
            small["method"] = method
        if not _same(path, flow.path):
            small["path"] = path
        if s2c and not _same(status, flow.status):
            small["status"] = status
        if not _same(content_type, headers.get("content-type")):
            small["content_type"] = content_type
        written = self._written(base, headers)
        if written is not _MISSING:
            small["headers"] = written
        if small:
            event["http"] = small
        if sse is not None and not (flow.streamed and s2c and sse == _SSE_MESSAGE):
            event["sse"] = sse
        # `update`, for this kind
        flow.session = self.last_session = session
        flow.transport = transport
        flow.method, flow.path = method, path
        self.last_conn, self.last_method, self.last_path = flow.conn, method, path
        if s2c:
            flow.status = status
        self._block(session, side, Kind.MESSAGE, headers, flow)
        return event

    def http(
        self, ts: float, flow_id: str, session: Any, transport: str, conn: str, mcp: bool, method: str,
        url: str, path: str, http_version: str, request_content_type: Any, req: dict, request_size: int,
        started: float, status: Any, reason: str, content_type: Any, resp: dict, responded: float | None,
        ended: float | None, streamed: bool, response_size: int,
    ) -> dict | None:
        """The v2 `http` event of an exchange with an answer, as the addon records it, built directly.

        The addon's hot path: `compact` of the full event (`dir` None, no `error`; `responded` and
        `ended` left out when None, `streamed` when False) would build it and take it apart again;
        this makes `_http`'s decisions from the values (a test holds them equal). None, and nothing
        changed, when the flow's state asks for the general path (a broken stream, a stream's flow
        answered without `streamed`).
        """
        flow = self.flows.get(flow_id)
        if flow is not None and (flow.stream_error is not _MISSING or (flow.streamed and not streamed)):
            return None  # the general path notes the missing `error` / `streamed` as `_absent`
        flow, ref = self._named(flow_id, flow)
        req_base = self.base("req", Kind.HTTP, flow, session)
        resp_base = self.base("resp", Kind.HTTP, flow, session)
        event = self._head(ts, flow, session, transport)
        event["kind"] = Kind.HTTP
        event["flow"] = ref
        if not _same(conn, flow.conn):
            event["conn"] = conn
        if mcp is not True:
            event["mcp"] = mcp
        if not _same(method, flow.method):
            event["method"] = method
        if not (self.upstream is not None and type(path) is str and _same(url, self.upstream + path)):
            event["url"] = url
        if not _same(path, flow.path):
            event["path"] = path
        if not _same(http_version, "HTTP/1.1"):
            event["http_version"] = http_version
        if not _same(request_content_type, req.get("content-type")):
            event["request_content_type"] = request_content_type
        written = self._written(req_base, req)
        if written is not _MISSING:
            event["request_headers"] = written
        if not _same(request_size, _content_length(req)):
            event["request_size"] = request_size
        event["started"] = _time_as_offset(started, ts)
        if flow.status is _MISSING or not _same(status, flow.status):
            event["status"] = status
        phrase = _PHRASES.get(status, _MISSING) if type(status) is int else _MISSING
        if phrase is _MISSING or not _same(reason, phrase):
            event["reason"] = reason
        if not _same(content_type, resp.get("content-type")):
            event["content_type"] = content_type
        written = self._written(resp_base, resp)
        if written is not _MISSING:
            event["response_headers"] = written
        if responded is not None:
            event["responded"] = _time_as_offset(responded, ts)
        if ended is not None:
            event["ended"] = _time_as_offset(ended, ts)
        if flow.streamed:
            size = flow.stream_bytes
        else:
            if streamed:
                event["streamed"] = True
            size = _content_length(resp)
        if size is _MISSING or not _same(response_size, size):
            event["response_size"] = response_size
        self._exchange_moved(flow, session, transport, conn, method, path)  # `update`, for this kind
        flow.status = status
        self._block(session, "req", Kind.HTTP, req, flow)
        self._block(session, "resp", Kind.HTTP, resp, flow)
        return event

    def stream(
        self, ts: float, flow_id: str, session: Any, transport: str, name: str, conn: str, method: str, path: str,
        tail: dict,
    ) -> dict:
        """The v2 `stream` event of an SSE answer opening (`tail`: status, content_type, headers) or
        closing (events, bytes), as the addon records it, built directly.

        The addon's hot path: `compact` of the full event (`dir` None, `event` = `name`, then conn,
        method, path and `tail`) would build it and take it apart again; this makes `_stream`'s
        decisions from the values (a test holds them equal). `tail` is taken over.
        """
        flow, ref = self._named(flow_id, self.flows.get(flow_id))
        opened = name == "open"
        headers = tail.get("headers") if opened else None
        base = self.base("resp", Kind.STREAM, flow, session) if opened else None
        event = self._head(ts, flow, session, transport)
        event["kind"] = Kind.STREAM
        event["flow"] = ref
        event["event"] = name
        if not _same(conn, flow.conn):
            event["conn"] = conn
        if not _same(method, flow.method):
            event["method"] = method
        if not _same(path, flow.path):
            event["path"] = path
        if opened:
            status = tail["status"]
            if flow.status is not _MISSING and _same(status, flow.status):
                del tail["status"]
            if _same(tail["content_type"], headers.get("content-type")):
                del tail["content_type"]
            written = self._written(base, headers)
            if written is _MISSING:
                del tail["headers"]
            else:
                tail["headers"] = written
            flow.status = status
            self._block(session, "resp", Kind.STREAM, headers, flow)
            flow.streamed = True
        elif "bytes" in tail:
            flow.stream_bytes = tail["bytes"]
        event.update(tail)
        self._exchange_moved(flow, session, transport, conn, method, path)  # `update`, for this kind
        return event

    def _http(self, event: dict, flow: Flow) -> bool:
        """`compact` for an `http` event as the addon writes it, in straight lines (one per exchange).

        The decisions of `defaults`, `_omit` and `update` for this kind, field by field (a test holds
        the output equal to the general path's): the addon's event has every field a default exists
        for, but `error` and `streamed`, so nothing is noted `_absent`. False, and nothing changed,
        for another shape.
        """
        req = event.get("request_headers")
        resp = event.get("response_headers")
        if type(req) is not dict or type(resp) is not dict or not _HTTP_FIELDS <= event.keys():
            return False
        if ("error" not in event and flow.stream_error is not _MISSING) or ("streamed" not in event and flow.streamed):
            return False  # the general path notes them `_absent`
        session, path, status = event["session"], event["path"], event["status"]
        req_base = self.base("req", Kind.HTTP, flow, session)
        resp_base = self.base("resp", Kind.HTTP, flow, session)
        drop = self._exchange_drops(event, flow)
        if event["mcp"] is True:
            drop.append("mcp")
        if _same(event["http_version"], "HTTP/1.1"):
            drop.append("http_version")
        if self.upstream is not None and type(path) is str and _same(event["url"], self.upstream + path):
            drop.append("url")
        if _same(event["request_content_type"], req.get("content-type")):
            drop.append("request_content_type")
        if _same(event["request_size"], _content_length(req)):
            drop.append("request_size")
        if flow.status is not _MISSING and _same(status, flow.status):
            drop.append("status")
        if flow.stream_error is not _MISSING and _same(event["error"], flow.stream_error):
            drop.append("error")
        if _same(event["content_type"], resp.get("content-type")):
            drop.append("content_type")
        reason = _PHRASES.get(status, _MISSING) if type(status) is int else _MISSING
        if reason is not _MISSING and _same(event["reason"], reason):
            drop.append("reason")
        if flow.streamed:
            if _same(event["streamed"], True):
                drop.append("streamed")
            size = flow.stream_bytes
        else:
            size = _content_length(resp)
        if size is not _MISSING and _same(event["response_size"], size):
            drop.append("response_size")
        # `update`, for this kind
        self._exchange_update(event, flow)
        flow.status = status
        self._block(session, "req", Kind.HTTP, req, flow)
        self._block(session, "resp", Kind.HTTP, resp, flow)
        for name in drop:
            del event[name]
        for field, block, base in (("request_headers", req, req_base), ("response_headers", resp, resp_base)):
            if base is None:
                continue
            if base is block or base == block:
                del event[field]
            else:
                event[field] = self._delta(base, block)
        _times_as_offsets(event)
        return True

    def _exchange_drops(self, event: dict, flow: Flow) -> list[str]:
        """The first fields of an `http` or `stream` event (all present) that equal their defaults
        (`defaults`, for these kinds), read before `_exchange_update` moves the flow on."""
        drop = []
        if _same(event["session"], flow.session):
            drop.append("session")
        if _same(event["transport"], flow.transport if flow.transport is not None else self.transport):
            drop.append("transport")
        if event["dir"] is None:
            drop.append("dir")
        if _same(event["conn"], flow.conn):
            drop.append("conn")
        if _same(event["method"], flow.method):
            drop.append("method")
        if _same(event["path"], flow.path):
            drop.append("path")
        return drop

    def _exchange_update(self, event: dict, flow: Flow) -> None:
        """`update`'s first part for an `http` or `stream` event (all fields present)."""
        self._exchange_moved(flow, event["session"], event["transport"], event["conn"], event["method"], event["path"])

    def _exchange_moved(self, flow: Flow, session: Any, transport: Any, conn: Any, method: Any, path: Any) -> None:
        """`_exchange_update` from the values."""
        flow.session = self.last_session = session
        flow.transport = transport
        flow.conn, flow.method, flow.path = conn, method, path
        self.last_conn, self.last_method, self.last_path = conn, method, path

    def _stream(self, event: dict, flow: Flow) -> bool:
        """`compact` for a `stream` event, in straight lines (an SSE answer opens and closes one).

        The decisions of `defaults`, `_omit` and `update` for this kind, field by field, for an
        event with every field a default exists for (as the addon writes them); False, and nothing
        changed, for another shape (the general path notes what is missing `_absent`).
        """
        opened = event.get("event") == "open"
        headers = event.get("headers")
        if not _STREAM_FIELDS <= event.keys() or (opened and (type(headers) is not dict or not _OPEN_FIELDS <= event.keys())):
            return False
        session = event["session"]
        base = self.base("resp", Kind.STREAM, flow, session) if opened else None
        drop = self._exchange_drops(event, flow)
        if opened:
            if flow.status is not _MISSING and _same(event["status"], flow.status):
                drop.append("status")
            if _same(event["content_type"], headers.get("content-type")):
                drop.append("content_type")
        # `update`, for this kind
        self._exchange_update(event, flow)
        if "status" in event:
            flow.status = event["status"]
        if isinstance(headers, dict):
            self._block(session, "resp", Kind.STREAM, headers, flow)
        if opened:
            flow.streamed = True
        if "bytes" in event:
            flow.stream_bytes = event["bytes"]
        if event.get("event") == "error":
            flow.stream_error = event.get("error", _MISSING)
        for name in drop:
            del event[name]
        if base is not None:
            if base is headers or base == headers:
                del event["headers"]
            else:
                event["headers"] = self._delta(base, headers)
        return True

    def _written(self, base: dict | None, block: dict) -> Any:
        """`block` as an event holds it against `base`: whole (no base), `_MISSING` (left out: it
        equals the base) or a delta."""
        if base is None:
            return block
        if base is block or base == block:
            return _MISSING
        return self._delta(base, block)

    def _delta(self, base: dict, block: dict) -> Any:
        """`block` as written against `base`: a delta (cached per pair), or the block itself."""
        key = (id(base), id(block))
        cached = self._deltas.get(key)
        if cached is None or cached[0] is not base or cached[1] is not block:
            if len(self._deltas) >= MAX_SESSIONS:
                self._deltas.clear()
            # header_delta keeps the order exactly (tests/trace/test_compact.py holds it to that)
            cached = self._deltas[key] = (base, block, header_delta(base, block))
        return cached[2]

    @staticmethod
    def _omit(full: dict, defaults: Iterable[tuple[str, Any]], out, absent: list[str]) -> None:
        """Note what equals its default: removed from `out` (a dict) or listed in it (a list);
        the names of defaults `full` does not have go to `absent`."""
        for name, value in defaults:
            if value is _MISSING:
                continue
            have = full.get(name, _MISSING)
            if have is _MISSING:
                if name not in full:
                    absent.append(name)
            elif have == value and (have is value or type(have) is type(value)):
                if type(out) is list:
                    out.append(name)
                else:
                    del out[name]

    def _compact_blocks(self, out: dict, full: dict, kind: str, fields, flow: Flow, session: Any) -> list[str]:
        """The header blocks as written: in `out`, `_MISSING` for a block left out (it equals its
        base), a delta where that reads back exactly; the names of blocks `full` lacks returned."""
        absent = []
        for field, side in fields:
            block = full.get(field, _MISSING)
            base = self.base(side, kind, flow, session)
            if type(block) is not dict:
                if block is _MISSING and base is not None:
                    absent.append(field)
                continue
            if base is None:
                continue
            if base is block or base == block:
                out[field] = _MISSING
                continue
            out[field] = self._delta(base, block)
        return absent


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
        session = full.get("session", flow.session)
        absent = full.pop(ABSENT, ())
        if kind == Kind.MESSAGE:
            if "http" not in absent:
                http = full["http"] = dict(full.get("http") or {})
                http_absent = http.pop(ABSENT, ())
                self._expand_blocks(http, kind, _blocks(kind, full), flow, session, http_absent)
                self._restore(http, self.http_defaults(full.get("dir"), http, flow), http_absent)
        else:
            self._expand_blocks(full, kind, _blocks(kind, full), flow, session, absent)
            if kind == Kind.HTTP:
                _times_from_offsets(full)
        self._restore(full, self.defaults(kind, full, flow), absent)
        self.update(full, flow)
        return _detached(full)

    @staticmethod
    def _restore(full: dict, defaults: list[tuple[str, Any]], absent) -> None:
        # Defaults are computed before any is restored (`defaults` says how dependencies read).
        for name, value in defaults:
            if value is not _MISSING and name not in full and name not in absent:
                full[name] = value

    def _expand_blocks(self, full: dict, kind: str, fields, flow: Flow, session: Any, absent) -> None:
        for field, side in fields:
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


def _detached(event: dict) -> dict:
    """`event` with its own copies of the dicts the state keeps (header blocks, `http`, `sse`).

    A consumer may change the events it gets; the state read by later lines must not change.
    """
    for name in ("headers", "request_headers", "response_headers", "sse"):
        if type(event.get(name)) is dict:
            event[name] = dict(event[name])
    http = event.get("http")
    if type(http) is dict:
        http = event["http"] = dict(http)
        if type(http.get("headers")) is dict:
            http["headers"] = dict(http["headers"])
    return event
