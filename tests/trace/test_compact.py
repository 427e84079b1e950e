"""Trace format v2: HTTP events written lean read back as the events version 1 wrote.

The v1 files in `data/` are real recordings made by the v1 writer (mcpbench record, official SDK
client in `legacy` and `auto` mode against the reference server, with JSON and with SSE answers),
and `v1-mixed.jsonl` a made-up one with odd shapes (`recordings.py`); each `v2-*.jsonl` is what the
v2 writer made of it.
"""

from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpbench.protocol.errors import TraceError
from mcpbench.trace import FORMAT_VERSION, TraceReader, TraceWriter
from mcpbench.trace.compact import Compactor, apply_delta, header_delta

DATA = Path(__file__).with_name("data")
V1_FILES = sorted(DATA.glob("v1-http-*.jsonl"))
HEAD = ("v", "ts", "session", "transport", "dir", "kind", "mcpbench", "started")

# The goal of issue 15: an HTTP trace takes at most this many bytes per JSON-RPC message.
MAX_BYTES_PER_MESSAGE = 600


def rewrite_as_v2(v1: Path, out: Path) -> list[dict]:
    """Write the events of a v1 file with today's writer; returns the v1 events."""
    events = [orjson.loads(line) for line in v1.read_bytes().splitlines()]
    header = events[0]
    with TraceWriter(out, transport=header["transport"], header={k: v for k, v in header.items() if k not in HEAD}) as writer:
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
    path.write_bytes(b'{"v":2,"ts":1,"kind":"trace","transport":"streamable-http"}\n' + line + b"\n")
    with pytest.raises(TraceError) as info:
        list(TraceReader(path))
    assert str(path) in str(info.value) and message in str(info.value)


NAMES = st.sampled_from(["host", "accept", "content-type", "content-length", "mcp-session-id", "date", "x"])
BLOCKS = st.dictionaries(NAMES, st.sampled_from(["1", "2", "application/json"]), max_size=7)


@given(BLOCKS, BLOCKS)
def test_a_header_delta_rebuilds_the_block_in_its_order(base: dict, block: dict) -> None:
    assert list(apply_delta(base, header_delta(base, block)).items()) == list(block.items())


# Each v1 file here beside the v2 file that mcpbench's writer made of it: the bytes written must stay
# those, line for line.
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


@pytest.mark.parametrize("v1", V1_FILES, ids=lambda p: p.stem)
def test_the_fast_paths_write_what_the_general_one_writes(v1: Path) -> None:
    events = [orjson.loads(line) for line in v1.read_bytes().splitlines()]
    fast, general = Compactor(events[0]), Compactor(events[0])
    general.fast = False
    for event in events[1:]:
        assert orjson.dumps(fast.compact(orjson.loads(orjson.dumps(event)))) == orjson.dumps(general.compact(orjson.loads(orjson.dumps(event))))


def _addon_message_parts(event: dict) -> tuple | None:
    """`Compactor.message`'s arguments for a message event of the addon's shape, else None."""
    http = event.get("http")
    if event.get("kind") != "message" or "flow" not in event or type(http) is not dict:
        return None
    status = http.get("status") if event["dir"] == "s2c" else None
    parts = (http["method"], http["path"], status, http["content_type"], http["headers"])
    return (event["ts"], event["flow"], event["session"], event["transport"], event["dir"], parts, event.get("sse"))




# `Compactor.http`'s arguments, by name, in order; `streamed` False and `responded`/`ended` None when absent.
_HTTP_PARTS = (
    "ts", "flow", "session", "transport", "conn", "mcp", "method", "url", "path", "http_version",
    "request_content_type", "request_headers", "request_size", "started", "status", "reason", "content_type",
    "response_headers", "responded", "ended", "streamed", "response_size",
)
# What an `http` event of the addon's direct path holds beyond those (the general path takes the rest).
_HTTP_KEYS = frozenset(_HTTP_PARTS) | {"v", "dir", "kind"}


def _addon_http_parts(event: dict) -> tuple | None:
    """`Compactor.http`'s arguments for an `http` event with an answer and no free text, else None."""
    if event.get("kind") != "http" or "flow" not in event or "response_headers" not in event or not event.keys() <= _HTTP_KEYS:
        return None
    defaults = {"responded": None, "ended": None, "streamed": False}
    return tuple(event[name] if name in event else defaults[name] for name in _HTTP_PARTS)


_STREAM_HEAD = ("ts", "flow", "session", "transport", "event", "conn", "method", "path")
# The rest of a `stream` event as the addon writes it, by its `event` (`Compactor.stream`'s `tail`).
_STREAM_TAILS = {"open": ("status", "content_type", "headers"), "close": ("events", "bytes")}


def _addon_stream_parts(event: dict) -> tuple | None:
    """`Compactor.stream`'s arguments for a `stream` event that opens or closes an SSE answer, else None."""
    tail = _STREAM_TAILS.get(event.get("event"))
    if event.get("kind") != "stream" or tail is None or event.keys() != {"v", "dir", "kind", *_STREAM_HEAD, *tail}:
        return None
    return (*(event[name] for name in _STREAM_HEAD), {name: event[name] for name in tail})


@pytest.mark.parametrize("v1", V1_FILES, ids=lambda p: p.stem)
@pytest.mark.parametrize(
    ("direct_path", "parts_of"), [("message", _addon_message_parts), ("http", _addon_http_parts), ("stream", _addon_stream_parts)],
)
def test_the_direct_paths_write_what_the_general_one_writes(v1: Path, direct_path: str, parts_of) -> None:
    """`Compactor.message`, `.http` and `.stream` (events made from values) against `compact`'s general path."""
    events = [orjson.loads(line) for line in v1.read_bytes().splitlines()]
    direct, general = Compactor(events[0]), Compactor(events[0])
    general.fast = False
    used = 0
    for event in events[1:]:
        event = {"v": FORMAT_VERSION} | {k: v for k, v in event.items() if k != "v"}
        expected = general.compact(orjson.loads(orjson.dumps(event)))
        parts = parts_of(event)
        made = getattr(direct, direct_path)(*orjson.loads(orjson.dumps(parts))) if parts is not None else None
        if made is None:
            made = direct.compact(orjson.loads(orjson.dumps(event)))
        else:
            used += 1
            expected.pop("msg", None)  # a message's `msg` is spliced in after (`encode_flow_message`)
        assert orjson.dumps(made) == orjson.dumps(expected)
    assert used > 10 or (direct_path == "stream" and used > 0)  # the JSON recording has one stream
