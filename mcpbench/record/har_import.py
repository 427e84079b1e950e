"""A HAR file (a browser's network panel, a proxy, `mcpbench export --har`) made into a trace.

HAR 1.2: http://www.softwareishard.com/blog/har-12-spec/

The exchanges are read into mitmproxy flows by mitmproxy's own HAR reader (`mitmproxy.io.har`,
what `mitmproxy -r file.har` uses) and played, in the order they happened, through the very
recording addon that records live traffic (`McpRecorder`): its hooks classify each request,
key its session, read bodies and SSE streams with the protocol core and write the events with the
trace writer. So an imported trace is what `mcpbench record` would have written, and inspect,
replay, diff and serve-trace read it as they read a recording.

What a HAR does not hold is not invented; each gap is said once, as a note:

- Times: a HAR gives each exchange's start and its `timings` (the answer's headers arrive after
  `blocked`+`dns`+`connect`+`send`+`wait`, its end after `time`), not the time of each SSE event.
  An event is stamped at the earliest moment the exchanges allow: an answer when the request it
  answers was sent (the answer to a POST's own request when that POST's stream ended), any other
  event with the one before it (the first at the stream's headers).
- Bodies a HAR left out (browsers drop some, an SSE answer still open may have none): the
  exchange is recorded without its messages.
- An exchange without an answer (status 0): recorded as failed, with the HAR's comment as cause.

The events are stamped with those times by giving the recorder's modules a clock that reads the
HAR's time of the step being played (`_played_clock`), rather than adding a clock parameter to the
proxy's hot path.
"""

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.errors import TraceError
from mcpbench.protocol.media import is_event_stream
from mcpbench.protocol.observer import Observed, SseObserver, read_body
from mcpbench.protocol.session import C2S
from mcpbench.trace.format import Kind
from mcpbench.trace.reader import TraceReader
from mcpbench.trace.writer import is_replaceable

# An SSE body is handed to the recorder one event at a time, cut after each blank line (the tap
# reads any cut; this one lets each event get its own time).
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
# The order of an exchange's steps at one instant: its request, its answer's head, its events, its end.
REQUEST, HEADERS, EVENT, END = range(4)


@dataclass(slots=True)
class Imported:
    """What an import wrote and what the HAR lacked."""

    path: Path
    entries: int = 0
    mcp_messages: int = 0
    sessions: int = 0
    calls: int = 0
    notes: list[str] = field(default_factory=list)


def _time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _ms(timings: dict, *names: str) -> float:
    return sum(max(0.0, float(timings.get(name) or 0)) for name in names) / 1000


def read_har(path: str | os.PathLike) -> list[dict]:
    """The entries of the HAR file `path`.

    Raises:
        TraceError: not a HAR (not JSON, cut short, no `log.entries`), naming the file.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it: {exc.strerror}") from None
    try:
        har = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        cut = " (cut short: truncated?)" if exc.pos >= len(data.rstrip()) else ""
        raise TraceError(f"{path}: not a HAR file: not JSON at byte {exc.pos}{cut}") from None
    entries = har.get("log", {}).get("entries") if isinstance(har, dict) and isinstance(har.get("log"), dict) else None
    if not isinstance(entries, list):
        raise TraceError(f"{path}: not a HAR file: no log.entries")
    return entries


@dataclass(slots=True)
class _Exchange:
    index: int
    flow: Any
    started: float
    responded: float
    ended: float
    status: int
    comment: str
    chunks: list[bytes] = field(default_factory=list)  # an SSE body, one event each
    request_id: Any = None  # the JSON-RPC request it POSTed, if any
    reply_id: Any = None  # the server's request whose answer it POSTed, if any


def _exchanges(path, entries: list[dict], notes: list[str]) -> list[_Exchange]:
    from mitmproxy.exceptions import MitmproxyException
    from mitmproxy.io.har import request_to_flow

    exchanges = []
    dropped_requests = dropped_bodies = unanswered = misread = bodiless_streams = 0
    for index, entry in enumerate(entries):
        try:
            flow = request_to_flow(entry)
            started = _time(entry["startedDateTime"])
            timings = entry.get("timings") or {}
            total = max(0.0, float(entry.get("time") or 0)) / 1000
        except (KeyError, TypeError, ValueError, AttributeError, MitmproxyException) as exc:
            raise TraceError(f"{path}: entry {index + 1}: not a HAR entry ({type(exc).__name__}: {exc})") from None
        request, response = entry["request"], entry["response"]
        responded = started + min(total, _ms(timings, "blocked", "dns", "connect", "send", "wait"))
        ended = started + total
        flow.request.timestamp_start, flow.request.timestamp_end = started, started
        connection = str(entry.get("connection") or "")
        if connection:  # one client connection's exchanges share a key (sessionless traffic)
            flow.client_conn.id = connection.removeprefix("conn-")
        status = int(response.get("status") or 0)
        content = response.get("content") or {}
        # MCP bodies are UTF-8 (JSON, and so SSE data); mitmproxy's reader encodes a text without
        # a charset as its content type's default (latin-1 for text/event-stream): keep UTF-8.
        if isinstance(text := (request.get("postData") or {}).get("text"), str):
            flow.request.data.content = text.encode("utf-8", "surrogateescape")
        if isinstance(text := content.get("text"), str) and content.get("encoding") != "base64" and flow.response is not None:
            body, repaired = _utf8_body(text, flow.response.headers.get("content-type", ""))
            flow.response.data.content = body
            misread += repaired
        if request.get("method") == "POST" and "postData" not in request and (request.get("bodySize") or 0) > 0:
            dropped_requests += 1
        asked_stream = "text/event-stream" in (flow.request.headers.get("accept", "") + str(content.get("mimeType", "")))
        # A stream that carried nothing is no gap (its HAR says 0 bytes); one that was cut off, or
        # whose size the HAR gives or does not know, held events the HAR did not keep.
        carried = status == 0 or (content.get("size") or 0) > 0 or response.get("bodySize", -1) != 0
        if request.get("method") == "GET" and asked_stream and not content.get("text") and carried:
            bodiless_streams += 1
        if status == 0:
            unanswered += 1
            flow.response = None
        else:
            flow.response.timestamp_start, flow.response.timestamp_end = responded, ended
            if "text" not in content and (content.get("size") or 0) > 0:
                dropped_bodies += 1
        ex = _Exchange(index, flow, started, responded, ended, status, entry.get("comment") or "")
        if flow.response is not None and is_event_stream(flow.response.headers.get("content-type")):
            body = flow.response.content or b""
            ex.chunks = [part for part in _cut_events(body) if part]
        body = flow.request.content or b""
        if body and request.get("method") == "POST":
            for item in read_body(body, C2S, flow.request.headers.get("content-type")):
                if type(item) is Observed and type(item.message) is jsonrpc.Request:
                    ex.request_id = item.message.id
                elif type(item) is Observed and type(item.message) in (jsonrpc.Response, jsonrpc.ErrorResponse):
                    ex.reply_id = item.message.id
        exchanges.append(ex)
    if dropped_requests:
        notes.append(f"{dropped_requests} POST(s) whose body the HAR left out: recorded without their message")
    if dropped_bodies:
        notes.append(f"{dropped_bodies} answer(s) whose body the HAR left out: recorded without their messages")
    if bodiless_streams:
        notes.append(f"{bodiless_streams} GET event stream(s) without a body in the HAR (a browser keeps none for an "
                     "EventSource; a stream still open has none yet): the messages they carried are missing, and the "
                     "POSTs of a legacy HTTP+SSE session cannot be tied to it (its `endpoint` event was in that body)")
    if misread:
        notes.append(f"{misread} answer body(ies) the HAR's writer had decoded as latin-1 (no charset in their "
                     "content type; Chromium's DevTools does so for text/event-stream): read as the UTF-8 MCP sends")
    if unanswered:
        notes.append(f"{unanswered} exchange(s) without an answer in the HAR (status 0): recorded as failed")
    return exchanges


def _utf8_body(text: str, content_type: str) -> tuple[bytes, bool]:
    """The bytes of a HAR body's `text`, and whether it had been misread as latin-1.

    MCP's bodies are UTF-8 JSON, but a HAR writer decodes a body by its content type's charset, and
    for `text/event-stream` without one Chromium takes latin-1: "é" comes out as "Ã©". Such a text
    is all latin-1 characters whose bytes are valid UTF-8: those bytes are the body that was sent.
    """
    data = text.encode("utf-8", "surrogateescape")
    if "charset" in content_type.lower() or text.isascii():
        return data, False
    try:
        raw = text.encode("latin-1")
        raw.decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return data, False
    return raw, True


def _cut_events(body: bytes) -> Iterator[bytes]:
    start = 0
    for match in _EVENT_END.finditer(body):
        yield body[start:match.end()]
        start = match.end()
    yield body[start:]


class _Step(NamedTuple):
    """One thing that happened to an exchange; steps sort by (at, kind, exchange's index, n)."""

    at: float
    kind: int  # REQUEST, HEADERS, EVENT or END
    index: int
    n: int  # an SSE event's place in its answer
    exchange: _Exchange
    chunk: bytes | None = None  # an SSE event's bytes


def _steps(exchanges: list[_Exchange]) -> list[_Step]:
    """Every step of every exchange, in the order they happened."""
    steps = []
    posted: dict[tuple, list[_Exchange]] = {}  # request id -> the POSTs that sent it
    replied: dict[tuple, list[_Exchange]] = {}  # id of a server's request -> the POSTs that answered it
    for ex in exchanges:
        steps.append(_Step(ex.started, REQUEST, ex.index, 0, ex))
        if ex.flow.response is not None:
            steps.append(_Step(ex.responded, HEADERS, ex.index, 0, ex))
        steps.append(_Step(ex.ended, END, ex.index, 0, ex))
        if ex.request_id is not None:
            posted.setdefault(_id_key(ex.request_id), []).append(ex)
        if ex.reply_id is not None:
            replied.setdefault(_id_key(ex.reply_id), []).append(ex)
    used: set[int] = set()
    for ex in exchanges:
        if ex.chunks:
            for n, (at, chunk) in enumerate(zip(_event_times(ex, posted, replied, used), ex.chunks, strict=True)):
                steps.append(_Step(at, EVENT, ex.index, n, ex, chunk))
    steps.sort(key=lambda step: step[:4])
    return steps


def _event_times(stream: _Exchange, posted: dict, replied: dict, used: set[int]) -> list[float]:
    """A time for each event of an SSE answer, never before the event ahead of it.

    A POST's own stream: its answer when the stream ended, every other event when the stream's
    headers came (what the HAR knows). A shared stream (legacy `GET /sse`, the Streamable HTTP
    `GET`): an answer when the POST of its request ended; a notification or a server's request
    with the next answer (it came before it), a server's request also before the POST that
    answers it; anything else (the `endpoint` event, comments) with the event ahead of it.
    """
    observer = SseObserver()
    answers: list[float | None] = []
    pending: list[bool] = []  # a message that waits for the next answer
    limits: list[float | None] = []
    at = stream.responded
    own = stream.request_id is not None
    for chunk in stream.chunks:
        answer = limit = None
        waits = False
        for item in observer.feed(chunk):
            if type(item) is not Observed:
                continue
            message = item.message
            if type(message) in (jsonrpc.Response, jsonrpc.ErrorResponse):
                at = answer = max(at, _answered_at(stream, message.id, posted, used))
            elif type(message) is jsonrpc.Request:
                waits = not own
                if (by := _first_after(replied, message.id, stream, used)) is not None:
                    limit = by.started - 1e-6 if limit is None else min(limit, by.started - 1e-6)
            elif type(message) is jsonrpc.Notification:
                waits = not own
        answers.append(answer)
        pending.append(waits)
        limits.append(limit)
    times = []
    previous = stream.responded
    for n, answer in enumerate(answers):
        if answer is None:
            answer = previous
            if pending[n]:
                answer = next((later for later in answers[n + 1:] if later is not None), previous)
            if limits[n] is not None:
                answer = min(answer, limits[n])
        previous = min(max(previous, answer), stream.ended)
        times.append(previous)
    return times


def _id_key(message_id: Any) -> tuple[str, Any]:
    return (type(message_id).__name__, message_id)


def _first_after(by_id: dict, message_id: Any, stream: _Exchange, used: set[int]) -> "_Exchange | None":
    """The first POST of `message_id` not yet paired, sent after `stream` began (and not by it)."""
    for candidate in by_id.get(_id_key(message_id), ()):
        if candidate.index not in used and candidate.started >= stream.started and candidate is not stream:
            used.add(candidate.index)
            return candidate
    return None


def _answered_at(stream: _Exchange, message_id: Any, posted: dict, used: set[int]) -> float:
    """When the request an SSE answer answers was sent whole: its own POST's end for the POST's
    own stream, else the end of the POST that sent it."""
    if stream.request_id is not None and _id_key(stream.request_id) == _id_key(message_id):
        return stream.ended
    request = _first_after(posted, message_id, stream, used)
    return stream.responded if request is None else request.ended


@contextlib.contextmanager
def _played_clock(clock) -> Iterator[None]:
    """The recorder's modules read `clock` for "now" while the HAR is played (see the docstring)."""
    from mcpbench.record import addon, classify, output, streams
    from mcpbench.trace import writer

    modules = (addon, classify, output, streams, writer)
    saved = [module.now for module in modules]
    for module in modules:
        module.now = clock
    try:
        yield
    finally:
        for module, now in zip(modules, saved, strict=True):
            module.now = now


def import_har(har: str | os.PathLike, out: str | os.PathLike, redact: tuple[str, ...] = ()) -> Imported:
    """Write the trace of the MCP exchanges in the HAR file `har` to `out` (whole, or not at all).

    Raises:
        TraceError: not a HAR, or no MCP exchange in it (nothing written).
    """
    from mcpbench.record.addon import McpRecorder

    if not is_replaceable(Path(out)):  # the trace is made beside it and renamed over it: check first
        raise TraceError(f"{out}: exists and is not a trace: refusing to overwrite it; choose another path")
    entries = read_har(har)
    result = Imported(Path(out), entries=len(entries))
    exchanges = _exchanges(har, entries, result.notes)
    if not exchanges:
        raise TraceError(f"{har}: no exchanges in this HAR: nothing to import")
    steps = _steps(exchanges)
    if any(ex.chunks for ex in exchanges):
        result.notes.append(f"{sum(1 for ex in exchanges if ex.chunks)} SSE answer(s): a HAR keeps no time per event; "
                            "each event is stamped at the earliest moment the exchanges allow (see docs/trace-format-http.md)")
    temp = Path(out).with_name(f".importing-{Path(out).name}")  # its suffix kept: .gz, .zst compress
    recorder = McpRecorder()
    clock = [steps[0].at]
    with _played_clock(lambda: round(clock[0], 6)):
        recorder.output.open(str(temp), redact, {"recorder": "har", "har": os.path.basename(har)})
        try:
            for step in steps:
                clock[0] = step.at
                _play(recorder, step)
            clock[0] = max(step.at for step in steps)
            recorder.done()
        except BaseException:
            recorder.output.close()
            temp.unlink(missing_ok=True)
            raise
    _count(temp, result)
    if not result.mcp_messages:
        temp.unlink(missing_ok=True)
        raise TraceError(f"{har}: no MCP exchange in this HAR ({len(entries)} entries): nothing to import")
    os.replace(temp, out)
    return result


def _play(recorder, step: _Step) -> None:
    """Hand one step to the recorder's hooks, as mitmproxy would have."""
    from mitmproxy.flow import Error

    ex, flow = step.exchange, step.exchange.flow
    open_ex = recorder.exchanges.get(flow.id)
    if step.kind == REQUEST:
        recorder.request(flow)
    elif step.kind == HEADERS:
        recorder.responseheaders(flow)
    elif step.kind == EVENT:
        if open_ex is not None and open_ex.tap is not None:
            open_ex.tap(step.chunk)  # the stream callable mitmproxy calls with each chunk
    elif flow.response is None:
        flow.error = Error(ex.comment.removeprefix("error: ") or "no answer in the HAR")
        if open_ex is not None:
            recorder._failed(flow)  # not `error`: that would answer the client a 502 the HAR never had
    else:
        if open_ex is not None and open_ex.tap is not None and not open_ex.tap.closed:
            open_ex.tap(b"")  # the stream's end, as mitmproxy signals it
        recorder.response(flow)


def _count(path: Path, result: Imported) -> None:
    sessions = set()
    for event in TraceReader(path):
        if event["kind"] == Kind.MESSAGE:
            result.mcp_messages += 1
            sessions.add(event["session"])
            if event["dir"] == "c2s" and "method" in event["msg"] and "id" in event["msg"]:
                result.calls += 1
    result.sessions = len(sessions)
