import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpbench.protocol.errors import LocalProtocolError
from mcpbench.protocol.framing import EOF, NEED_DATA
from mcpbench.protocol.sse import SseComment, SseEvent, SseParser, SseTruncated, encode

from tests.protocol.helpers import byte_by_byte, feed_all
from tests.support.fuzz import at_least

# Verbatim from wire/python-sdk.md: the 2.x SDK's legacy /sse stream (CRLF) and keep-alive.
SDK_LEGACY_STREAM = (
    b"event: endpoint\r\ndata: /messages/?session_id=38c56889f2c44f75b1ab25199e03e5c9\r\n\r\n"
    b'event: message\r\ndata: {"jsonrpc":"2.0","id":3,"result":{"content":[{"text":"hi","type":"text"}],"isError":false}}\r\n\r\n'
    b": ping - 2026-12-02 09:39:06.916685+00:00\r\n\r\n"
)


def test_sdk_legacy_stream():
    expected = [
        SseEvent(event="endpoint", data="/messages/?session_id=38c56889f2c44f75b1ab25199e03e5c9"),
        SseEvent(event="message", data='{"jsonrpc":"2.0","id":3,"result":{"content":[{"text":"hi","type":"text"}],"isError":false}}'),
        SseComment("ping - 2026-12-02 09:39:06.916685+00:00"),
    ]
    assert feed_all(SseParser, SDK_LEGACY_STREAM) == expected
    assert byte_by_byte(SseParser, SDK_LEGACY_STREAM) == expected


CASES = [
    # (bytes, events) — every case is fed whole and byte by byte
    (b"data: a\ndata: b\n\n", [SseEvent(data="a\nb")]),
    (b"data:a\rdata:b\r\r", [SseEvent(data="a\nb")]),  # CR alone ends lines
    (b"data: a\r\n\r\n", [SseEvent(data="a")]),
    (b"id: 7\ndata:\n\n", [SseEvent(id="7", data="")]),  # 2025-11-25 priming event
    (b"id: 7\n\n", [SseEvent(id="7")]),  # a bare id: not dispatched by browsers, still reported
    (b"retry: 3000\n\n", [SseEvent(retry=3000)]),
    (b"retry: 3s\ndata: x\n\n", [SseEvent(data="x")]),  # non-digits ignored
    (b"id: a\0b\ndata: x\n\n", [SseEvent(data="x")]),  # id with NUL ignored
    (b"data:  two spaces\n\n", [SseEvent(data=" two spaces")]),  # only one space stripped
    (b"data\n\n", [SseEvent(data="")]),  # field name alone
    (b"foo: bar\ndata: x\n\n", [SseEvent(data="x")]),  # unknown field ignored
    (b"\xef\xbb\xbfdata: bom\n\n", [SseEvent(data="bom")]),
    (b":\n\n\n\n", [SseComment("")]),
    (b"data: \xff\n\n", [SseEvent(data="\ufffd")]),
    (b"data: cut", [SseTruncated(b"data: cut")]),
    (b"event: x\ndata: y\n", [SseTruncated(b"event: x\ndata: y")]),
]


@pytest.mark.parametrize("data,events", CASES)
def test_cases_whole_and_byte_by_byte(data, events):
    assert feed_all(SseParser, data) == events
    assert byte_by_byte(SseParser, data) == events


def test_last_event_id_and_retry_persist():
    parser = SseParser()
    parser.feed(b"id: 1\ndata: a\n\nretry: 500\ndata: b\n\n")
    assert parser.last_event_id == "1"
    assert parser.retry_ms == 500
    assert parser.next_event() is NEED_DATA
    parser.receive_data(b"")
    assert parser.next_event() is EOF


def test_crlf_split_across_chunks_gives_no_phantom_blank_line():
    parser = SseParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\ndata: b\r") == []
    assert parser.feed(b"\n\r\n") == [SseEvent(data="a\nb")]


@pytest.mark.parametrize(
    "event",
    [SseEvent(data="x"), SseEvent(data="a\nb\r\nc", event="message", id="42", retry=10), SseEvent(data="", id="p"), SseEvent(id="only")],
)
def test_encode_then_parse_round_trips(event):
    normalised = SseEvent(data=event.data.replace("\r\n", "\n") if event.data else event.data, event=event.event, id=event.id, retry=event.retry)
    assert feed_all(SseParser, encode(event)) == [normalised]
    assert feed_all(SseParser, encode(event, eol=b"\r\n")) == [normalised]


def test_encode_refuses_what_cannot_be_framed():
    with pytest.raises(LocalProtocolError):
        encode(SseEvent(data="x", id="a\nb"))
    with pytest.raises(LocalProtocolError):
        encode(SseEvent())
    assert encode(SseComment("ping")) == b": ping\n"


text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\0"), max_size=40)
events_strategy = st.lists(
    st.one_of(
        st.builds(SseEvent, data=st.one_of(st.none(), st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)),
                  event=st.one_of(st.none(), text.filter(bool)), id=st.one_of(st.none(), text),
                  retry=st.one_of(st.none(), st.integers(0, 10**6))).filter(lambda e: any(v is not None for v in (e.data, e.event, e.id, e.retry))),
        st.builds(SseComment, text),
    ),
    max_size=12,
)


@pytest.mark.fuzz
@settings(max_examples=at_least(300), deadline=None)
@given(events=events_strategy, cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=30),
       eol=st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_any_chunking_parses_to_the_same_events(events, cuts, eol):
    data = b"".join(encode(e, eol=eol) for e in events)
    whole = feed_all(SseParser, data)
    assert feed_all(SseParser, data, [c for c in cuts if c < len(data)]) == whole
    expected = [
        SseEvent(data=e.data.replace("\r\n", "\n").replace("\r", "\n"), event=e.event, id=e.id, retry=e.retry)
        if isinstance(e, SseEvent) and e.data is not None else e
        for e in events
    ]
    assert whole == expected
