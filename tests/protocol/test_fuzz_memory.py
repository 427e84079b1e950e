"""Memory stays bounded on one huge line or event: what a parser holds at its peak is a small multiple
of the line itself, however it arrives, never a copy per chunk (tracemalloc).

The size is `big_size()`: 4 MiB in the suite, 100 MiB in the long run (`--hypothesis-profile long`).
The line arrives in 64 KiB chunks, each the same object, so the input costs nothing of its own.

A parser that decodes the JSON text is allowed what `orjson.loads` of that text takes besides
(`tests/support/fuzz.py`, `check_peak`).
"""

import pytest

from mcpbench.protocol.framing import LineFramer
from mcpbench.protocol.http import PostAnswer
from mcpbench.protocol.observer import SseObserver, StdioObserver
from mcpbench.protocol.session import S2C
from mcpbench.protocol.sse import SseParser
from tests.support.fuzz import MESSAGE_HEAD, MESSAGE_TAIL, big_size, check_peak, fed_huge

pytestmark = pytest.mark.fuzz


def test_a_huge_stdio_line_is_framed_in_bounded_memory():
    size = big_size()
    check_peak(lambda: fed_huge(LineFramer(), b"", size, b"\n"), size)


def test_a_huge_stdio_message_is_observed_in_bounded_memory():
    size = big_size()
    events = []
    check_peak(lambda: events.append(fed_huge(StdioObserver(S2C), MESSAGE_HEAD, size, MESSAGE_TAIL + b"\n")), size, decoded=True)
    assert len(events[0]) == 1 and len(events[0][0].raw) == len(MESSAGE_HEAD) + size + len(MESSAGE_TAIL)


def test_a_huge_sse_event_is_parsed_in_bounded_memory():
    size = big_size()
    check_peak(lambda: fed_huge(SseParser(), b"event: message\ndata: ", size, b"\n\n"), size)


def test_a_huge_sse_answer_is_observed_and_read_in_bounded_memory():
    size = big_size()
    check_peak(lambda: fed_huge(SseObserver(), b"data: " + MESSAGE_HEAD, size, MESSAGE_TAIL + b"\n\n"), size, decoded=True)
    answers = []
    answer = PostAnswer(1, 200, "text/event-stream", has_session=True)
    check_peak(lambda: answers.append(fed_huge(answer, b"data: " + MESSAGE_HEAD, size, MESSAGE_TAIL + b"\n\n")), size, decoded=True)
    assert [type(item).__name__ for item in answers[0]] == ["Carried"]


def test_a_huge_json_answer_is_read_in_bounded_memory():
    size = big_size()
    check_peak(lambda: fed_huge(PostAnswer(1, 200, "application/json", has_session=True), MESSAGE_HEAD, size, MESSAGE_TAIL), size, decoded=True)

