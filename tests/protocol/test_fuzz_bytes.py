"""Hostile bytes in any chunking through every parser of the core: framing, SSE, JSON-RPC, the HTTP
answers (`PostAnswer`, `LegacyStream`) and the observers.

Each parser raises nothing but its documented errors, and what it makes of a stream does not depend on
where the stream was cut. (tests/protocol/test_framing.py and test_sse.py check the same of well-formed
streams; these feed anything.)
"""

import gzip
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.framing import Line, LineFramer, LineTooLong
from mcpbench.protocol.http import LegacyStream, PostAnswer
from mcpbench.protocol.observer import BodyObserver, SseObserver, StdioObserver, read_body
from mcpbench.protocol.session import C2S, S2C
from mcpbench.protocol.sse import SseParser
from tests.support.fuzz import chunked, cuts, hostile_bytes, json_values, messages

pytestmark = pytest.mark.fuzz


def fed(parser, chunks: list[bytes], end: bool = True) -> list:
    """Every event of `parser.feed` over `chunks`, then its end."""
    out = []
    for chunk in chunks:
        out += parser.feed(chunk)
    return out + (parser.feed(b"") if end else [])


# --- framing --------------------------------------------------------------------------------------


@given(hostile_bytes, cuts(), st.integers(min_value=1, max_value=64), st.booleans())
def test_framing_of_any_bytes_does_not_depend_on_the_chunks(data, points, max_line, keep_cr):
    whole = fed(LineFramer(max_line, keep_cr=keep_cr), [data] if data else [])
    framer = LineFramer(max_line, keep_cr=keep_cr)
    assert fed(framer, chunked(data, points)) == whole
    for event in whole:  # a line over the limit is reported, never handed out whole
        assert type(event) is LineTooLong or len(event.data) <= max_line, event
    # the line-by-line interface agrees with the fast one
    machine, events = LineFramer(max_line, keep_cr=keep_cr), []
    for chunk in [*chunked(data, points), b""]:
        machine.receive_data(chunk)
        while type(event := machine.next_event()) in (Line, LineTooLong):
            events.append(event)
    assert events == whole


# --- SSE ------------------------------------------------------------------------------------------


@given(hostile_bytes, cuts())
def test_sse_parsing_of_any_bytes_does_not_depend_on_the_chunks(data, points):
    whole = SseParser()
    events = fed(whole, [data] if data else [])
    parser = SseParser()
    assert fed(parser, chunked(data, points)) == events
    assert (parser.last_event_id, parser.retry_ms) == (whole.last_event_id, whole.retry_ms)


# --- JSON-RPC -------------------------------------------------------------------------------------


def message_or_reason(parse, value, back) -> None:
    """`parse(value)` is a message that `back` turns into what parses to it again, or InvalidMessage with a reason."""
    try:
        message = parse(value)
    except jsonrpc.InvalidMessage as exc:
        assert exc.reason
    else:
        assert parse(back(message)) == message


@given(st.binary(max_size=200) | hostile_bytes)
def test_decoding_any_bytes_gives_a_message_or_invalid_message(data):
    message_or_reason(jsonrpc.decode, data, jsonrpc.encode)


@given(json_values)
def test_any_json_value_is_a_message_or_says_why_not(value):
    message_or_reason(jsonrpc.from_obj, value, jsonrpc.to_obj)


@given(messages)
def test_encode_then_decode_gives_the_message_back(message):
    assert jsonrpc.decode(jsonrpc.encode(message)) == message
    assert jsonrpc.to_obj(jsonrpc.decode(jsonrpc.encode(message))) == jsonrpc.to_obj(message)


# --- HTTP answers ---------------------------------------------------------------------------------

statuses = st.sampled_from([200, 202, 204, 400, 404, 405, 409, 500, 502]) | st.integers(min_value=100, max_value=599)
content_types = st.sampled_from(["application/json", "text/event-stream", "text/event-stream; charset=utf-8",
                                 "application/vnd.x+json", "text/html", "", None])


@given(hostile_bytes, cuts(), statuses, content_types, st.none() | st.integers(min_value=0, max_value=3), st.booleans())
def test_a_post_answer_reads_any_body_alike_in_any_chunks(data, points, status, content_type, request_id, has_session):
    def read(chunks):
        answer = PostAnswer(request_id, status, content_type, has_session=has_session)
        return fed(answer, chunks), answer.answer, answer.last_event_id, answer.failure

    assert read(chunked(data, points)) == read([data] if data else [])


@given(hostile_bytes, cuts(), st.sampled_from(["http://127.0.0.1:8000/sse", "http://[::1]:9/sse?x=1", "not a url"]))
def test_the_legacy_stream_reads_any_bytes_alike_in_any_chunks(data, points, url):
    def read(chunks):
        stream = LegacyStream(url)
        return fed(stream, chunks), stream.endpoint

    assert read(chunked(data, points)) == read([data] if data else [])


# --- observers ------------------------------------------------------------------------------------


@given(hostile_bytes, cuts(), st.sampled_from([C2S, S2C]), st.integers(min_value=1, max_value=80))
def test_a_stdio_observer_reads_any_bytes_alike_in_any_chunks(data, points, direction, max_line):
    whole = fed(StdioObserver(direction, max_line=max_line), [data] if data else [])
    assert fed(StdioObserver(direction, max_line=max_line), chunked(data, points)) == whole


@given(hostile_bytes, cuts(), content_types, st.booleans(), st.sampled_from([C2S, S2C]))
def test_a_body_observer_reads_any_body_alike_in_any_chunks(data, points, content_type, required, direction):
    observer = BodyObserver(direction, content_type, required=required)
    events = fed(observer, chunked(data, points))
    assert events == read_body(data, direction, content_type, required=required)
    assert len(events) <= 1


ENCODINGS = {"gzip": gzip.compress, "deflate": zlib.compress, "identity": None}


@given(hostile_bytes, cuts(), st.sampled_from(sorted(ENCODINGS)))
def test_an_sse_observer_reads_any_stream_alike_in_any_chunks_compressed_or_not(data, points, encoding):
    plain = fed(SseObserver(), [data] if data else [])
    compress = ENCODINGS[encoding]
    sent = compress(data) if compress else data
    observer = SseObserver(content_encoding=None if compress is None else encoding)
    assert fed(observer, chunked(sent, points)) == plain


@given(st.binary(max_size=300), cuts(), st.sampled_from(["gzip", "deflate", "br", "zstd", "x-unknown"]))
def test_an_sse_observer_survives_any_bytes_under_any_encoding(data, points, encoding):
    observer = SseObserver(content_encoding=encoding)
    events = fed(observer, chunked(data, points))
    assert all(getattr(e, "code", "sse-undecodable") != "sse-line-too-long" for e in events)
    assert observer.broken() == []  # ended: nothing left to say


@given(st.lists(messages, max_size=5), cuts())
def test_messages_framed_as_stdio_lines_are_observed_as_sent(sent, points):
    data = b"".join(jsonrpc.encode(m) + b"\n" for m in sent)
    events = fed(StdioObserver(C2S), chunked(data, points))
    assert [e.message for e in events] == sent


@given(json_values, cuts())
def test_any_json_body_is_read_whole_or_refused_with_a_reason(value, points):
    import orjson

    data = orjson.dumps(value)
    observer = BodyObserver(C2S, "application/json", required=True)
    [event] = fed(observer, chunked(data, points))
    assert getattr(event, "code", None) in (None, "invalid-message") or event.message == jsonrpc.from_obj(value)

