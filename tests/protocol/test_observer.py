"""The observer role: stdio lines, HTTP bodies and SSE streams become messages, violations and endpoints.

Every case is fed whole, byte by byte, and with trailing bytes (the start of what comes next, or
bytes after the end), through both ways in: `receive_data` + `next_event`, and `feed`.
"""

import gzip

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpbench.protocol import sse
from mcpbench.protocol.framing import EOF, NEED_DATA
from mcpbench.protocol.jsonrpc import Batch, Notification, Request, Response
from mcpbench.protocol.observer import BodyObserver, EndpointEvent, Observed, SseObserver, StdioObserver, read_body
from mcpbench.protocol.session import C2S, S2C, Violation
from mcpbench.protocol.sse import SseComment, SseEvent

from tests.protocol.helpers import byte_by_byte, feed_all
from tests.support.fuzz import at_least

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{}}'
NOTE = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}'


def fed(factory, data: bytes, size: int | None = None) -> list:
    """The events of `data` given to `feed` in pieces of `size` bytes (None: whole), then the end."""
    observer = factory()
    size = size or max(len(data), 1)
    events = []
    for start in range(0, len(data), size):
        events += observer.feed(data[start : start + size])
    return events + observer.feed(b"")


def every_way(factory, data: bytes) -> list:
    """The events of `data`, asserting that whole, byte by byte, and through either API they are the same."""
    whole = feed_all(factory, data)
    assert byte_by_byte(factory, data) == whole
    assert fed(factory, data) == whole
    assert fed(factory, data, 1) == whole
    return whole


def unended(factory, data: bytes) -> list:
    """The events of `data` and no end, whole and byte by byte (the observer then waits: NEED_DATA)."""
    whole = feed_all(factory, data, eof=False)
    assert byte_by_byte(factory, data, eof=False) == whole
    observer = factory()
    assert observer.feed(data) == whole and observer.next_event() is NEED_DATA
    return whole


# --- stdio -------------------------------------------------------------------------------------

# (direction, bytes, events): each line is a message, or a violation with its bytes.
STDIO_CASES = [
    (S2C, PING + b"\n" + ANSWER + b"\r\n", [Observed(Request(id=1, method="ping"), PING), Observed(Response(id=1, result={}), ANSWER)]),
    (S2C, b"Server started!\r\n", [Violation("stdout-pollution", "not JSON: unexpected character, expected a JSON value: line 1 column 1 (char 0)", S2C, b"Server started!\r")]),
    (C2S, b"hello\n", [Violation("not-json", "not JSON: unexpected character, expected a JSON value: line 1 column 1 (char 0)", C2S, b"hello")]),
    (S2C, b"\n", [Violation("stdout-pollution", "not JSON: Input is a zero-length, empty document: line 1 column 1 (char 0)", S2C, b"")]),
    (C2S, b'{"a":1}\n', [Violation("invalid-message", '"jsonrpc" must be "2.0"', C2S, b'{"a":1}')]),
    (C2S, b'{"jsonrpc":"2.0","id":null,"method":"x"}\n', [Violation("invalid-message", "id must not be null", C2S, b'{"jsonrpc":"2.0","id":null,"method":"x"}')]),
    (S2C, b"\xff\xfe\n", [Violation("stdout-pollution", "not JSON: str is not valid UTF-8: surrogates not allowed: line 1 column 1 (char 0)", S2C, b"\xff\xfe")]),
    (C2S, b"[" + PING + b"]\n", [Observed(Batch(items=(Request(id=1, method="ping"),)), b"[" + PING + b"]")]),
    (C2S, b" " + NOTE + b" \n", [Observed(Notification(method="notifications/progress", params={"progress": 1}), b" " + NOTE + b" ")]),
    # Cut off by the end: the line is read, and reported as torn.
    (S2C, ANSWER + b"\r", [Observed(Response(id=1, result={}), ANSWER), Violation("unterminated-line", "the stream ended inside a line", S2C)]),
    (S2C, PING + b"\nlast junk", [Observed(Request(id=1, method="ping"), PING), Violation("stdout-pollution", "not JSON: unexpected character, expected a JSON value: line 1 column 1 (char 0)", S2C, b"last junk"), Violation("unterminated-line", "the stream ended inside a line", S2C)]),
]


@pytest.mark.parametrize("direction,data,events", STDIO_CASES)
def test_stdio_cases(direction, data, events):
    assert every_way(lambda: StdioObserver(direction), data) == events
    if data.endswith(b"\n"):  # with the start of the next line after it: the same, then a wait
        assert unended(lambda: StdioObserver(direction), data + b'{"jsonrpc":"2.0","me') == events


def test_stdio_line_too_long_is_reported_with_its_head_and_reading_goes_on():
    # However it is cut, a line over the limit is reported with its size and first bytes (memory
    # stays bounded: the framer drops what it holds past the limit while no newline has come).
    data = b"x" * 100 + b"\n" + PING + b"\n"
    factory = lambda: StdioObserver(S2C, max_line=len(PING))  # noqa: E731
    for events in (byte_by_byte(factory, data), fed(factory, data, 1), fed(factory, data, 8)):
        too_long, ping = events
        assert (too_long.code, too_long.detail, too_long.direction) == ("line-too-long", "a line of 100 bytes", S2C)
        assert len(PING) < len(too_long.raw) <= 100 and set(too_long.raw) == {ord("x")}
        assert ping == Observed(Request(id=1, method="ping"), PING)


def test_stdio_next_event_says_need_data_then_eof():
    observer = StdioObserver(C2S)
    observer.receive_data(PING[:10])
    assert observer.next_event() is NEED_DATA
    observer.receive_data(PING[10:] + b"\n")
    assert observer.next_event() == Observed(Request(id=1, method="ping"), PING)
    assert observer.next_event() is NEED_DATA
    observer.receive_data(b"")
    assert observer.next_event() is EOF


@pytest.mark.fuzz
@settings(max_examples=at_least(50), deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=200), max_size=30))
def test_stdio_any_chunking_gives_the_same_events(cuts):
    data = b"".join(case[1] for case in STDIO_CASES if case[1].endswith(b"\n") and case[0] is S2C)
    assert feed_all(lambda: StdioObserver(S2C), data, [c for c in cuts if c < len(data)]) == feed_all(lambda: StdioObserver(S2C), data)


# --- HTTP bodies -------------------------------------------------------------------------------

PRETTY = b'{\n  "jsonrpc": "2.0",\n  "id": 1,\n  "result": {}\n}\n'

# (observer, body, events): `required` holds a request's body to be a message; an answer's only
# when its content type says JSON, or it looks like JSON and is one.
BODY_CASES = [
    (lambda: BodyObserver(C2S, required=True, label="POST /mcp"), PING, [Observed(Request(id=1, method="ping"), PING)]),
    (lambda: BodyObserver(C2S, required=True, label="POST /mcp"), b"", [Violation("empty-body", "POST /mcp without a body", C2S)]),
    (lambda: BodyObserver(C2S, "text/plain", required=True), b"hello", [Violation("not-json", "not JSON: unexpected character, expected a JSON value: line 1 column 1 (char 0)", C2S, b"hello")]),
    (lambda: BodyObserver(C2S, required=True), b'{"id":1}', [Violation("invalid-message", '"jsonrpc" must be "2.0"', C2S, b'{"id":1}')]),
    (lambda: BodyObserver(S2C, "application/json"), PRETTY, [Observed(Response(id=1, result={}), PRETTY)]),  # raw as sent
    (lambda: BodyObserver(S2C, "application/json"), b"", []),  # a 202
    (lambda: BodyObserver(S2C, "application/json; charset=utf-8"), b"{oops", [Violation("not-json", "application/json; charset=utf-8 body: not JSON: unexpected character, expected a string key: line 1 column 2 (char 1)", S2C, b"{oops")]),
    (lambda: BodyObserver(S2C, "text/html"), b"<html>Bad Gateway</html>", []),  # an error page: no message, no violation
    (lambda: BodyObserver(S2C, "text/plain"), b"{oops", []),  # only looks like JSON
    (lambda: BodyObserver(S2C, "text/plain"), ANSWER, [Observed(Response(id=1, result={}), ANSWER)]),
    (lambda: BodyObserver(S2C), b'  ["x"]', [Violation("invalid-message", "batch item 0: not a JSON-RPC object: a JSON str", S2C, b'  ["x"]')]),
]


@pytest.mark.parametrize("factory,body,events", BODY_CASES)
def test_body_cases(factory, body, events):
    assert every_way(factory, body) == events
    observer = factory()
    if body:
        assert observer.feed(body[:1]) == [] and observer.next_event() is NEED_DATA  # nothing before the end
    assert observer.feed(body[1:]) + observer.feed(b"") == events
    assert observer.feed(b"trailing bytes after the end") == [] and observer.next_event() is EOF


def test_read_body_reads_a_whole_body():
    assert read_body(PING, C2S, required=True) == [Observed(Request(id=1, method="ping"), PING)]
    assert read_body(b"", C2S, required=True, label="POST /messages/") == [Violation("empty-body", "POST /messages/ without a body", C2S)]
    assert read_body(b"", S2C, "application/json") == []


# --- SSE streams -------------------------------------------------------------------------------

# Verbatim from wire/python-sdk.md: the 2.x SDK's legacy /sse stream (CRLF) and keep-alive.
SDK_LEGACY_STREAM = (
    b"event: endpoint\r\ndata: /messages/?session_id=38c56889f2c44f75b1ab25199e03e5c9\r\n\r\n"
    b'event: message\r\ndata: {"jsonrpc":"2.0","id":3,"result":{"content":[{"text":"hi","type":"text"}],"isError":false}}\r\n\r\n'
    b": ping - 2026-12-02 09:39:06.916685+00:00\r\n\r\n"
)
SDK_ANSWER = b'{"jsonrpc":"2.0","id":3,"result":{"content":[{"text":"hi","type":"text"}],"isError":false}}'

SSE_CASES = [
    (SDK_LEGACY_STREAM, [
        EndpointEvent(data="/messages/?session_id=38c56889f2c44f75b1ab25199e03e5c9", sse=SseEvent(event="endpoint", data="/messages/?session_id=38c56889f2c44f75b1ab25199e03e5c9")),
        Observed(Response(id=3, result={"content": [{"text": "hi", "type": "text"}], "isError": False}), SDK_ANSWER, SseEvent(event="message", data=SDK_ANSWER.decode())),
        SseComment("ping - 2026-12-02 09:39:06.916685+00:00"),
    ]),
    (b"id: 42\ndata: " + NOTE + b"\n\n", [Observed(Notification(method="notifications/progress", params={"progress": 1}), NOTE, SseEvent(id="42", data=NOTE.decode()))]),
    (b'data: {"jsonrpc":"2.0",\ndata: "id":1,"result":{}}\n\n', [Observed(Response(id=1, result={}), b'{"jsonrpc":"2.0",\n"id":1,"result":{}}', SseEvent(data='{"jsonrpc":"2.0",\n"id":1,"result":{}}'))]),
    (b"data: [" + PING + b"]\n\n", [Observed(Batch(items=(Request(id=1, method="ping"),)), b"[" + PING + b"]", SseEvent(data="[" + PING.decode() + "]"))]),
    (b"data: nope\n\n", [Violation("not-json", "not JSON: invalid literal, expected 'null': line 1 column 1 (char 0)", S2C, b"nope")]),
    (b'event: message\ndata: {"id":1}\n\n', [Violation("invalid-message", '"jsonrpc" must be "2.0"', S2C, b'{"id":1}')]),
    # Events that carry no message come as the parser gives them.
    (b"id: 7\ndata:\n\n", [SseEvent(id="7", data="")]),  # 2025-11-25's priming event
    (b"retry: 3000\n\n", [SseEvent(retry=3000)]),
    (b"event: custom\ndata: " + PING + b"\n\n", [SseEvent(event="custom", data=PING.decode())]),
    (b"event: endpoint\n\n", [SseEvent(event="endpoint")]),  # no URI: no endpoint
    # Cut off by the end: its bytes are kept.
    (b"data: " + PING + b"\n\nevent: message\ndata: {", [Observed(Request(id=1, method="ping"), PING, SseEvent(data=PING.decode())), Violation("sse-truncated", "the stream ended inside an SSE event", S2C, b"event: message\ndata: {")]),
]


@pytest.mark.parametrize("data,events", SSE_CASES)
def test_sse_cases(data, events):
    assert every_way(SseObserver, data) == events
    if data.endswith(b"\n\n"):  # with the start of the next event after it: the same, then a wait
        assert unended(SseObserver, data + b'data: {"jsonrpc":') == events


def test_sse_counts_events_and_keeps_the_last_event_id():
    observer = SseObserver()
    observer.feed(b"id: 1\ndata: " + PING + b"\n\n: ping\n\nid: 2\ndata:\n\nevent: endpoint\ndata: /m\n\n")
    assert observer.events == 3 and observer.last_event_id == "2"


def test_sse_compressed_stream_reads_as_the_plain_one():
    data = b"".join(case[0] for case in SSE_CASES[:4])
    packed = gzip.compress(data)
    expected = every_way(SseObserver, data)
    assert fed(lambda: SseObserver(content_encoding="gzip"), packed, 7) == expected
    assert feed_all(lambda: SseObserver(content_encoding="gzip"), packed, range(1, len(packed), 3)) == expected


def test_sse_stream_in_an_unknown_encoding_is_said_at_once_and_not_read():
    observer = SseObserver(content_encoding="compress")
    assert observer.next_event() == Violation("sse-undecodable", "an event stream with Content-Encoding compress, which this recorder cannot decode", S2C)
    assert observer.feed(b"data: " + PING + b"\n\n") == [] and observer.feed(b"") == []
    assert observer.next_event() is EOF


def test_sse_stream_that_fails_to_decode_is_read_no_further_but_its_cut_event_is_kept():
    packed = gzip.compress(b"data: " + PING + b"\n\ndata: {")
    observer = SseObserver(content_encoding="gzip")
    first = observer.feed(packed[: len(packed) - 8])  # the stream, without gzip's trailer
    assert first == [Observed(Request(id=1, method="ping"), PING, SseEvent(data=PING.decode()))]
    (broken,) = observer.feed(b"\x00not gzip at all")
    assert broken.code == "sse-undecodable" and broken.detail.startswith("the compressed event stream failed to decode: ")
    assert observer.feed(gzip.compress(b"data: more\n\n")) == []
    assert observer.feed(b"") == [Violation("sse-truncated", "the stream ended inside an SSE event", S2C, b"data: {")]


def test_sse_line_too_long_stops_reading(monkeypatch):
    monkeypatch.setattr(sse, "MAX_LINE_BYTES", 16)
    observer = SseObserver()
    assert observer.feed(b"data: " + PING + b"\n\n") == [Observed(Request(id=1, method="ping"), PING, SseEvent(data=PING.decode()))]
    assert observer.feed(b"data: " + b"x" * 32) == [Violation("sse-line-too-long", "SSE line longer than 16 bytes", S2C)]
    assert observer.feed(b"\n\ndata: " + PING + b"\n\n") == [] and observer.feed(b"") == []


def test_sse_broken_stream_keeps_the_event_it_cut():
    observer = SseObserver()
    assert observer.feed(b"data: " + PING + b"\n\nid: 9\ndata: {") == [Observed(Request(id=1, method="ping"), PING, SseEvent(data=PING.decode()))]
    assert observer.broken() == [Violation("sse-truncated", "the stream broke inside an SSE event", S2C, b"id: 9\ndata: {")]
    assert observer.feed(b"data: late\n\n") == [] and observer.next_event() is EOF


@pytest.mark.fuzz
@settings(max_examples=at_least(50), deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=400), max_size=30))
def test_sse_any_chunking_gives_the_same_events(cuts):
    data = b"".join(case[0] for case in SSE_CASES)
    assert feed_all(SseObserver, data, [c for c in cuts if c < len(data)]) == feed_all(SseObserver, data)
