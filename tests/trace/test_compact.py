"""Trace format v2: HTTP events written lean read back as the events version 1 wrote.

The v1 files in `data/` are real recordings made by the v1 writer (mcpbench record, official SDK
client in `legacy` and `auto` mode against the reference server, with JSON and with SSE answers),
and `v1-mixed.jsonl` a made-up one with odd shapes (`recordings.py`); each `v2-*.jsonl` is what the
v2 writer made of it before its rules became one table.
"""

import hashlib
import random
from collections import Counter
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpbench.protocol.errors import TraceError
from mcpbench.trace import FORMAT_VERSION, TraceReader, TraceWriter
from mcpbench.trace import compact
from mcpbench.trace.compact import Compactor, Expander, apply_delta, header_delta
from tests.support import traces
from tests.trace.recordings import recording

DATA = Path(__file__).with_name("data")
V1_FILES = sorted(DATA.glob("v1-http-*.jsonl"))
HEAD = ("v", "ts", "session", "transport", "dir", "kind", "mcpbench", "started")

# The goal of issue 15: an HTTP trace takes at most this many bytes per JSON-RPC message.
MAX_BYTES_PER_MESSAGE = 600


def _writer(v1_header: dict, out: Path) -> TraceWriter:
    """Today's writer, with the header fields of a v1 file."""
    return TraceWriter(out, transport=v1_header["transport"], header={k: v for k, v in v1_header.items() if k not in HEAD})


def rewrite_as_v2(v1: Path, out: Path) -> list[dict]:
    """Write the events of a v1 file with today's writer; returns the v1 events."""
    events = [orjson.loads(line) for line in v1.read_bytes().splitlines()]
    with _writer(events[0], out) as writer:
        for event in events[1:]:
            writer.write({k: v for k, v in event.items() if k != "v"})
    return events


@pytest.mark.parametrize("v1", V1_FILES, ids=lambda p: p.stem)
def test_v1_files_still_read(v1: Path) -> None:
    reader = TraceReader(v1)
    events = list(reader)
    assert {e["v"] for e in events} == {1} and reader.torn is None
    assert events == [orjson.loads(line) for line in v1.read_bytes().splitlines()]


@pytest.mark.parametrize("v1", V1_FILES, ids=lambda p: p.stem)
def test_v2_reads_back_the_events_v1_wrote_in_half_the_bytes(v1: Path, tmp_path: Path) -> None:
    out = tmp_path / "v2.jsonl"
    before = rewrite_as_v2(v1, out)
    after = list(TraceReader(out))
    assert FORMAT_VERSION == 2 and {e["v"] for e in after} == {2}
    assert len(after) == len(before)
    for old, new in zip(before[1:], after[1:]):
        assert new == old | {"v": 2}
    messages = sum(1 for e in before if e["kind"] == "message")
    assert out.stat().st_size / messages <= MAX_BYTES_PER_MESSAGE < v1.stat().st_size / messages
    assert out.stat().st_size * 2 < v1.stat().st_size


def test_a_consumer_changing_an_event_does_not_change_the_next(tmp_path: Path) -> None:
    out = tmp_path / "v2.jsonl"
    before = rewrite_as_v2(V1_FILES[0], out)
    after = []
    for event in TraceReader(out):
        after.append(orjson.loads(orjson.dumps(event)))
        for value in (event.get("http"), event.get("request_headers"), event.get("response_headers"), event.get("headers")):
            if isinstance(value, dict):
                value.clear()
    assert after[1:] == [e | {"v": 2} for e in before[1:]]


def test_stdio_lines_are_unchanged_but_for_the_version(tmp_path: Path) -> None:
    with TraceWriter(tmp_path / "t.jsonl", transport="stdio") as writer:
        writer.message("s1", "c2s", b'{"jsonrpc":"2.0","id":1,"method":"ping"}', 1.5)
    line = (tmp_path / "t.jsonl").read_bytes().splitlines()[1]
    assert line == b'{"v":2,"ts":1.5,"session":"s1","transport":"stdio","dir":"c2s","kind":"message","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}'


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"v":2,"ts":2,"kind":"http","flow":7}', ":2: bad version-2 event: flow #7 was not named before"),
        (b'{"v":2,"ts":2,"kind":"stream","flow":"f","event":"open","headers":[{"a":"b"}]}', ":2: bad version-2 event: headers: a header delta"),
    ],
)
def test_bad_v2_lines_name_file_and_line(tmp_path: Path, line: bytes, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(traces.lines(traces.header("streamable-http", v=2)) + line + b"\n")
    with pytest.raises(TraceError) as info:
        list(TraceReader(path))
    assert str(path) in str(info.value) and message in str(info.value)


NAMES = st.sampled_from(["host", "accept", "content-type", "content-length", "mcp-session-id", "date", "x"])
BLOCKS = st.dictionaries(NAMES, st.sampled_from(["1", "2", "application/json"]), max_size=7)


@pytest.mark.fuzz
@given(BLOCKS, BLOCKS)
def test_a_header_delta_rebuilds_the_block_in_its_order(base: dict, block: dict) -> None:
    assert list(apply_delta(base, header_delta(base, block)).items()) == list(block.items())


# Each v1 file here beside the v2 file that mcpbench's writer made of it before its rules became one
# table (trace/compact.py): the bytes written must stay those, line for line.
V2_PAIRS = [(DATA / f"v1-{name}.jsonl", DATA / f"v2-{name}.jsonl") for name in ("http-json-answers", "http-sse-answers", "mixed")]


def _events(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@pytest.mark.parametrize(("v1", "v2"), V2_PAIRS, ids=lambda p: p.stem)
def test_the_writer_writes_the_v2_lines_it_always_wrote(v1: Path, v2: Path, tmp_path: Path) -> None:
    out = tmp_path / "v2.jsonl"
    rewrite_as_v2(v1, out)
    assert out.read_bytes().splitlines()[1:] == v2.read_bytes().splitlines()[1:]  # the header has today's time


@pytest.mark.parametrize(("v1", "v2"), V2_PAIRS, ids=lambda p: p.stem)
def test_v2_lines_written_before_read_back_as_the_v1_events(v1: Path, v2: Path) -> None:
    assert [e | {"v": 2} for e in _events(v1)[1:]] == list(TraceReader(v2))[1:]


def _addon_message_parts(event: dict) -> tuple | None:
    """`TraceWriter.encode_flow_message`'s arguments for a message event of the addon's shape, else None."""
    http = event.get("http")
    if event.get("kind") != "message" or "flow" not in event or type(http) is not dict:
        return None
    if event.keys() - {"sse"} != {"v", "ts", "session", "transport", "dir", "kind", "flow", "http", "msg"}:
        return None
    if http.keys() != ({"method", "path", "content_type", "headers"} | ({"status"} if event["dir"] == "s2c" else set())):
        return None
    parts = (http["method"], http["path"], http.get("status"), http["content_type"], http["headers"])
    transport = None if event["transport"] == "streamable-http" else event["transport"]
    return (event["session"], event["dir"], orjson.dumps(event["msg"]), event["ts"], event["flow"], parts, transport, event.get("sse"))


_STREAM_HEAD = ("ts", "flow", "session", "transport", "event", "conn", "method", "path")
# The rest of a `stream` event as the addon writes it, by its `event` (`encode_flow_stream`'s `tail`).
_STREAM_TAILS = {"open": ("status", "content_type", "headers"), "close": ("events", "bytes")}


def _addon_stream_parts(event: dict) -> tuple | None:
    """`TraceWriter.encode_flow_stream`'s arguments for a `stream` event that opens or closes an SSE answer, else None."""
    tail = _STREAM_TAILS.get(event.get("event"))
    if event.get("kind") != "stream" or tail is None or event.keys() != {"v", "dir", "kind", *_STREAM_HEAD, *tail}:
        return None
    return (*(event[name] for name in _STREAM_HEAD), {name: event[name] for name in tail})


@pytest.mark.parametrize(("v1", "v2"), V2_PAIRS[:2], ids=lambda p: p.stem)  # the addon's recordings
def test_the_addons_calls_write_the_v2_lines_it_always_wrote(v1: Path, v2: Path, tmp_path: Path) -> None:
    """The recording addon's entry points (a message and a stream event from their parts; the `http`
    event and the rest as a full event in the line's order) write what `write` writes."""
    events = _events(v1)
    used: Counter = Counter()
    lines = []
    with _writer(events[0], tmp_path / "v2.jsonl") as writer:
        for event in events[1:]:
            event = {"v": FORMAT_VERSION} | {k: v for k, v in event.items() if k != "v"}
            if (parts := _addon_message_parts(event)) is not None:
                lines.append(writer.encode_flow_message(*parts))
                used["message"] += 1
            elif (parts := _addon_stream_parts(event)) is not None:
                lines.append(writer.encode_flow_stream(*parts))
                used["stream"] += 1
            else:
                text = event["kind"] != "http" or "body" in event or "error" in event  # as the addon says
                lines.append(writer.encode_flow_event(event, text=text))
                used[event["kind"]] += 1
    assert b"".join(lines).splitlines() == v2.read_bytes().splitlines()[1:]
    assert used["message"] > 10 and used["http"] > 10 and used["stream"] > 0  # the JSON recording has one stream


def _round_trip(events: list[dict], rng) -> None:
    """Each event, compacted and written as JSON, reads back as it was."""
    compactor, expander = Compactor(events[0]), Expander(orjson.loads(orjson.dumps(events[0])))
    for event in events[1:]:
        if rng.random() < 0.05:  # a field every event has, missing (`encode_flow_event` takes the event as it is)
            event.pop(rng.choice(["session", "transport", "dir"]), None)
        line = orjson.dumps(compactor.compact(orjson.loads(orjson.dumps(event))))
        assert expander.expand(orjson.loads(line)) == event, line


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.fuzz
@settings(deadline=None)
@given(st.randoms(use_true_random=False), st.integers(min_value=1, max_value=12))
def test_any_recording_reads_back_as_it_was_written(rng, exchanges: int) -> None:
    """Interleaved exchanges of every kind, with odd shapes mixed in (fields missing or changed, header
    blocks repeated, changed or reordered): compact, then expand, gives back each event."""
    _round_trip(recording(rng, exchanges), rng)


def test_flows_and_sessions_let_go_of_alike_on_both_sides(monkeypatch: pytest.MonkeyPatch) -> None:
    """More flows and sessions than the state keeps (`MAX_FLOWS`, `MAX_SESSIONS`: made small here)."""
    monkeypatch.setattr(compact, "MAX_FLOWS", 3)
    monkeypatch.setattr(compact, "MAX_SESSIONS", 2)
    rng = random.Random(23)
    events = recording(rng, 200, odd=False)
    assert len({e["session"] for e in events[1:]}) > 2
    _round_trip(events, rng)


# What the writer made of 200 seeded recordings (`recordings.py`: 10,766 flow events, odd shapes
# included) while its rules ran as Python source generated from the table and `exec`'d: the SHA-256
# of the lines, with today's bounds and with tiny ones (flows and sessions let go of all the time).
# The rules now run as a loop over the table; the bytes must be these still.
WRITTEN_BEFORE = {
    (10_000, 10_000): "ac52e8677d08f21d5386ec9a467fdabd81c53e8cef96fa0c50bd714f9a20f83e",
    (3, 2): "4977fed668748381c57ccd74411b8b2374f99e94b8548759e2c6987f34fc045d",
}


@pytest.mark.parametrize(("flows", "sessions"), sorted(WRITTEN_BEFORE))
def test_the_writer_writes_the_bytes_the_generated_code_wrote(monkeypatch: pytest.MonkeyPatch, flows: int, sessions: int) -> None:
    monkeypatch.setattr(compact, "MAX_FLOWS", flows)
    monkeypatch.setattr(compact, "MAX_SESSIONS", sessions)
    digest, lines = hashlib.sha256(), 0
    for seed in range(200):
        events = recording(random.Random(seed), 12)
        compactor = Compactor(events[0])
        for event in events[1:]:
            digest.update(orjson.dumps(compactor.compact(event)) + b"\n")
            lines += 1
    assert (lines, digest.hexdigest()) == (10_766, WRITTEN_BEFORE[(flows, sessions)])


def test_the_reader_lets_go_of_flows_and_sessions_by_the_bounds_the_header_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace written while the bounds were small reads back right once they are today's again; read
    with today's instead (as a header without them is), it would restore wrong values, silently."""
    rng = random.Random(23)
    events = recording(rng, 200, odd=False)
    monkeypatch.setattr(compact, "MAX_FLOWS", 3)
    monkeypatch.setattr(compact, "MAX_SESSIONS", 2)
    header = {**events[0], compact.BOUNDS: compact.header_bounds()}
    compactor = Compactor(header)
    lines = [orjson.dumps(compactor.compact(orjson.loads(orjson.dumps(event)))) for event in events[1:]]
    monkeypatch.undo()
    assert header[compact.BOUNDS] == {"max_flows": 3, "max_sessions": 2}
    expander = Expander(header)
    assert [expander.expand(orjson.loads(line)) for line in lines] == events[1:]
    today = Expander(events[0])
    assert [today.expand(orjson.loads(line)) for line in lines] != events[1:]


def test_a_new_trace_records_todays_bounds_and_an_old_one_reads_with_them(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, transport="streamable-http"):
        pass
    assert orjson.loads(path.read_bytes().splitlines()[0])["compact"] == {"max_flows": 10_000, "max_sessions": 10_000}
    assert compact.bounds({"kind": "trace"}) == (compact.MAX_FLOWS, compact.MAX_SESSIONS) == (10_000, 10_000)
    for v2 in DATA.glob("v2-*.jsonl"):  # written before the header recorded them
        assert b'"compact"' not in v2.read_bytes().splitlines()[0]


@pytest.mark.parametrize("given", [None, [1, 2], {"max_flows": 0, "max_sessions": 5}, {"max_flows": 5}, {"max_flows": 5, "max_sessions": True}])
def test_bounds_a_header_gives_wrongly_are_one_line_naming_file_and_line(tmp_path: Path, given) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(traces.lines(traces.header("streamable-http", v=2, compact=given)))
    if given is None:  # null: as if absent
        assert list(TraceReader(path))[0]["compact"] is None
        return
    with pytest.raises(TraceError, match=rf"^{path}:1: header field 'compact': max_flows and max_sessions must be whole numbers >= 1"):
        list(TraceReader(path))
