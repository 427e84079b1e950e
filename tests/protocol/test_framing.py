import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpbench.protocol.framing import EOF, NEED_DATA, Line, LineFramer, LineTooLong

from tests.protocol.helpers import byte_by_byte, feed_all
from tests.support.fuzz import at_least


def test_lines_split_on_lf_and_crlf():
    data = b'{"a":1}\n{"b":2}\r\n\n{"c":3}\n'
    expected = [Line(b'{"a":1}'), Line(b'{"b":2}'), Line(b""), Line(b'{"c":3}')]
    assert feed_all(LineFramer, data) == expected
    assert byte_by_byte(LineFramer, data) == expected
    # a CR alone is not a line ending in stdio framing: it stays in the line
    assert feed_all(LineFramer, b"a\rb\n") == [Line(b"a\rb")]


def test_lines_gives_bytes_for_complete_lines_and_objects_for_the_rest():
    framer = LineFramer(max_line=8)
    assert framer.lines(b'{"a":1}\r\nab') == [b'{"a":1}']
    assert framer.lines(b"c\n" + b"x" * 20) == [b"abc"]
    assert framer.lines(b"\ntail") == [LineTooLong(size=20, head=b"x" * 20)]
    assert framer.lines(b"") == [Line(b"tail", terminated=False)]


def test_need_data_then_eof_with_unterminated_tail():
    framer = LineFramer()
    framer.receive_data(b"abc")
    assert framer.next_event() is NEED_DATA
    assert framer.buffered == 3
    framer.receive_data(b"")
    assert framer.next_event() == Line(b"abc", terminated=False)
    assert framer.next_event() is EOF


def test_invalid_utf8_kept_byte_for_byte():
    data = b"\xff\xfe not utf-8 \xc3\n"
    assert feed_all(LineFramer, data) == [Line(data[:-1])]


def test_huge_line_in_small_chunks():
    line = b"x" * (17 * 1024 * 1024)
    framer = LineFramer()
    events = []
    for start in range(0, len(line), 65536):
        events += framer.feed(line[start : start + 65536])
    events += framer.feed(b"\nnext\n")
    assert [len(e.data) for e in events] == [len(line), 4]


def test_over_limit_line_is_reported_not_kept():
    framer = LineFramer(max_line=100)
    events = framer.feed(b"a" * 150)
    assert events == [] and framer.buffered == 0  # memory stays bounded
    events = framer.feed(b"b" * 50 + b"\nok\n")
    assert events[0] == LineTooLong(size=200, head=b"a" * 150 + b"b" * 50)  # its first bytes (up to 1 KiB), however cut
    assert events[1] == Line(b"ok")
    framer = LineFramer(max_line=10)
    framer.feed(b"z" * 20)
    assert framer.feed(b"") == [LineTooLong(size=20, head=b"z" * 20, terminated=False)]


lines_strategy = st.lists(st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")), max_size=30)


@pytest.mark.fuzz
@settings(max_examples=at_least(300), deadline=None)
@given(lines=lines_strategy, cuts=st.lists(st.integers(min_value=0, max_value=8000), max_size=40), crlf=st.booleans())
def test_any_chunking_gives_the_same_lines(lines, cuts, crlf):
    ending = b"\r\n" if crlf else b"\n"
    data = b"".join(line + ending for line in lines)
    whole = feed_all(LineFramer, data)
    assert feed_all(LineFramer, data, [c for c in cuts if c < len(data)]) == whole
    expected = [line[:-1] if not crlf and line.endswith(b"\r") else line for line in lines]
    assert [e.data for e in whole] == expected
    # feed(), the tee's fast path, agrees with receive_data()/next_event()
    framer, fed = LineFramer(), []
    bounds = [0, *sorted(c for c in cuts if c < len(data)), len(data)]
    for start, end in zip(bounds, bounds[1:]):
        fed += framer.feed(data[start:end]) if end > start else []
    assert fed + framer.feed(b"") == whole
