"""The trace writer and reader under random recordings and hostile files.

What is written reads back as the same events, in format v2 (the writer's, HTTP events compacted)
and v1 (whole events), compressed or not; any file, whatever its bytes, reads as events or fails
with a `TraceError` naming it. (tests/trace/test_compact.py checks compaction itself, event by event.)
"""

import gzip
import random

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mcpbench.protocol.errors import TraceError
from mcpbench.trace import TraceReader, TraceWriter
from mcpbench.trace.compress import Compressor
from tests.support.fuzz import MESSAGE_HEAD, MESSAGE_TAIL, big_size, check_peak, hostile_bytes, json_values
from tests.support.traces import event, lines, tool_call
from tests.support.traces import header as trace_header
from tests.trace.recordings import recording

pytestmark = pytest.mark.fuzz

HEAD = ("v", "ts", "session", "transport", "dir", "kind", "mcpbench", "started")
SUFFIXES = [".jsonl", ".jsonl.gz", ".jsonl.zst"]


def stdio_events(rng: random.Random, count: int) -> list[dict]:
    """A stdio recording's events after its header: messages, stderr lines, junk and process events."""
    out = []
    for number in range(count):
        roll = rng.random()
        ts, session = 1796300422.5 + number, "1606c084002a"
        if roll < 0.6:
            arguments = {"t": "é\u2028" * rng.randint(0, 3)}
            out.append(tool_call(ts, number, "echo", arguments, session=session, direction=rng.choice(["c2s", "s2c"])))
        elif roll < 0.8:
            out.append(event(ts, session, "s2c", kind="stderr", text=rng.choice(["ready", "", "\ttabs", "ü"])))
        elif roll < 0.9:
            out.append(event(ts, session, "s2c", kind="violation", code="stdout-pollution", detail="not JSON", raw="junk"))
        else:
            out.append(event(ts, session, None, kind="process", event="exit", exit_code=rng.choice([0, 1, None]), signal=None))
    return out


def write(path, header: dict, events: list[dict]) -> None:
    with TraceWriter(path, transport=header["transport"], header={k: v for k, v in header.items() if k not in HEAD}) as writer:
        for event in events:
            writer.write({k: v for k, v in event.items() if k != "v"})


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@given(st.randoms(use_true_random=False), st.integers(min_value=0, max_value=8), st.sampled_from(SUFFIXES), st.booleans())
def test_what_is_written_reads_back_the_same(tmp_path_factory, rng, size, suffix, http):
    """v2 as the writer writes it (compressed or not): the events read back are those written."""
    if http:
        header, *events = recording(rng, size, odd=False)
    else:
        header = trace_header(ts=1796300422.25, command=["python", "-m", "server"])
        events = stdio_events(rng, size * 3)
    path = tmp_path_factory.mktemp("trace") / f"t{suffix}"
    write(path, header, events)
    read = list(TraceReader(path))
    assert read[0]["kind"] == "trace" and read[0]["transport"] == header["transport"]
    assert read[1:] == [e | {"v": 2} for e in events]


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@given(st.randoms(use_true_random=False), st.integers(min_value=1, max_value=8), st.sampled_from(["plain", "gzip", "zstd"]),
       st.integers(min_value=1, max_value=4096))
def test_a_v1_trace_reads_back_whole_compressed_or_not(tmp_path_factory, rng, size, compression, block):
    """v1 lines as the v1 writer wrote them (every field in every event), flushed in blocks of any size."""
    events = recording(rng, size)
    data = lines(*events)
    if compression != "plain":
        compressor = Compressor(compression)
        data = b"".join(compressor.data(data[i:i + block]) for i in range(0, len(data), block)) + compressor.end()
    path = tmp_path_factory.mktemp("trace") / "v1.jsonl"
    path.write_bytes(data)
    assert list(TraceReader(path)) == events


HEADER_LINE = lines(trace_header("streamable-http", v=2))
files = st.one_of(
    hostile_bytes,
    hostile_bytes.map(lambda data: HEADER_LINE + data),
    st.lists(json_values, max_size=5).map(lambda values: HEADER_LINE + b"".join(orjson.dumps(v) + b"\n" for v in values)),
    st.lists(st.fixed_dictionaries({"v": st.sampled_from([1, 2, 3, "2"]), "ts": json_values, "kind": st.sampled_from(["message", "http", "sse", "stream", "error", "x"])},
                                   optional={"session": json_values, "dir": json_values, "msg": json_values, "flow": json_values,
                                             "status": json_values, "data": json_values, "headers": json_values}), max_size=5)
    .map(lambda events: HEADER_LINE + b"".join(orjson.dumps(e) + b"\n" for e in events)),
)
# Found by the long run: an unhashable `dir` raised TypeError in the slow path's check.
LIST_DIR = HEADER_LINE + b'{"v":1,"ts":0,"kind":"message","dir":[]}\n'


@given(files, st.booleans())
@example(LIST_DIR, False)
def test_any_file_reads_as_events_or_fails_naming_it(tmp_path_factory, data, compressed):
    path = tmp_path_factory.mktemp("trace") / "any.jsonl"
    path.write_bytes(gzip.compress(data) if compressed else data)
    reader = TraceReader(path)
    try:
        events = list(reader)
    except TraceError as exc:
        assert str(path) in str(exc)
    else:
        assert all(type(e) is dict for e in events) and reader.header is not None


@given(files)
@example(LIST_DIR)
def test_a_followed_trace_takes_any_lines_or_fails_naming_the_line(tmp_path_factory, data):
    """`TraceReader.feed` (what `inspect --follow` reads a growing trace with) on whole lines."""
    whole = data[: data.rfind(b"\n") + 1]
    reader = TraceReader(tmp_path_factory.mktemp("trace") / "followed.jsonl")
    try:
        list(reader.feed(whole))
    except TraceError as exc:
        assert "followed.jsonl:" in str(exc)


def test_a_huge_event_is_written_and_read_back_in_bounded_memory(tmp_path):
    """A message of `big_size()` (100 MiB in the long run): the writer and the reader hold a small
    multiple of it (tests/support/fuzz.py, `check_peak`)."""
    size = big_size()
    path = tmp_path / "big.jsonl"
    raw = MESSAGE_HEAD + b"a" * size + MESSAGE_TAIL
    with TraceWriter(path, transport="stdio") as writer:
        check_peak(lambda: writer.message("s1", "s2c", raw, 1.0), size)
    del raw
    read = []
    check_peak(lambda: read.extend(TraceReader(path)), size, decoded=True)
    assert len(read[1]["msg"]["result"]["content"][0]["text"]) == size
