"""A stdio trace's spool: a trace whose recorder was killed with its tee reads complete from it, and
reading changes neither file; `finish` (`mcpbench trace finish`) writes the trace complete."""

import ast
import fcntl
import gzip
import hashlib
import os
from pathlib import Path

import orjson
from click.testing import CliRunner

import mcpbench.trace
from mcpbench.cli import main
from mcpbench.trace import Redactor, TraceReader, TraceWriter
from mcpbench.trace.compress import Compressor
from mcpbench.trace.spool import C2S_DATA, S2C_DATA, START, SpoolDecoder, finish, frame, leftover, live, spool_path, start_frame
from tests.support.traces import lines, sent

SECRET = b"s3cr3t-in-a-param"


def killed_recording(tmp_path, recorded_frames: int, name: str = "t.jsonl", earlier: list[bytes] = ()):
    """A trace and its spool as a kill leaves them: the recorder wrote `recorded_frames` data frames and half a line
    (after the `earlier` lines of other sessions, which a tee appending to a shared --out finds there)."""
    trace = tmp_path / name
    writer = TraceWriter(trace, transport="stdio", redactor=Redactor(["token"]))
    if earlier:
        writer.write_lines(list(earlier))
    frames = [start_frame("s1", writer.redactor)]
    for n in range(6):  # pings both ways, split mid-line across frames
        line = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"token":"%s"}}\n' % (n, SECRET)
        kind = C2S_DATA if n % 2 == 0 else S2C_DATA
        frames += [frame(kind, 1_000_000 * (n + 1), line[:20]), frame(kind, 500_000 + 1_000_000 * (n + 1), line[20:])]
    data = b"".join(b"".join(pieces) for pieces in frames)
    torn_frame = b"".join(frame(C2S_DATA, 9_000_000, b'{"jsonrpc":"2.0","id":99,"method":"ping"}\n'))[:-7]
    spool_path(trace).write_bytes(data + torn_frame)  # the tee was killed inside its last writev
    done = b"".join(b"".join(pieces) for pieces in frames[: 1 + recorded_frames])
    _, records = SpoolDecoder(writer, "s1").take(done, len(done))
    writer.write_lines(records + [b'{"v":1,"ts":2.0,"sess'])  # ... and the recorder inside a write
    writer.close()
    return trace


def digests(*paths) -> list[str]:
    return [hashlib.sha256(path.read_bytes()).hexdigest() for path in paths]


def assert_complete(events: list[dict]) -> None:
    """The events of the killed recording, all of them: what crossed the tee, and the session's end."""
    assert [(e["dir"], e["msg"]["id"]) for e in events if e["kind"] == "message"] == [
        ("c2s" if n % 2 == 0 else "s2c", n) for n in range(6)
    ]  # all six, once each, in order; the torn frame (never forwarded) is not there
    assert [e["ts"] for e in events if e["kind"] == "message"] == [1.5 + n for n in range(6)]
    # The client's pings were never answered: ended as the recorder ends a session, one error each.
    errors = [(e["dir"], e["id"], e["ts"]) for e in events if e["kind"] == "error"]
    assert errors == [("c2s", n, 6.5) for n in (0, 2, 4)]
    assert all(e["msg"]["params"]["token"] != SECRET.decode() for e in events if e["kind"] == "message")


def test_a_killed_recording_reads_complete_and_reading_changes_no_file(tmp_path):
    trace = killed_recording(tmp_path, recorded_frames=5)
    spool = spool_path(trace)
    before = digests(trace, spool)
    reader = TraceReader(trace)
    events = list(reader)
    assert_complete(events)
    assert reader.torn is None  # the torn line the kill left is replaced by the spool's events
    assert digests(trace, spool) == before  # byte for byte: reading wrote nothing
    assert list(TraceReader(trace)) == events  # and reads the same again

    # The explicit step writes what the reader read, and removes the spool.
    added = finish(trace)
    assert added is not None and len(added.lines) == 7  # four pings, three errors
    assert not spool.exists()
    assert SECRET not in trace.read_bytes()  # redacted by the same rules as the recorder's
    reader = TraceReader(trace)
    assert list(reader) == events and reader.torn is None
    assert finish(trace) is None and leftover(trace) is None  # nothing left to finish


def test_a_live_recording_is_left_alone(tmp_path):
    trace = killed_recording(tmp_path, recorded_frames=5)
    holder = os.open(spool_path(trace), os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_SH)  # as a running tee or recorder holds it
        reader = TraceReader(trace)
        assert len([e for e in reader if e["kind"] == "message"]) == 2 and reader.torn
        assert live(trace) and finish(trace) is None
        result = CliRunner().invoke(main, ["trace", "finish", str(trace)])
        assert result.exit_code == 0 and "still being recorded" in result.output
        assert spool_path(trace).exists()
    finally:
        os.close(holder)
    assert not live(trace)
    assert len([e for e in TraceReader(trace) if e["kind"] == "message"]) == 6


def test_a_spool_that_does_not_continue_its_trace_is_not_read(tmp_path):
    trace = killed_recording(tmp_path, recorded_frames=5)
    other = killed_recording(tmp_path, recorded_frames=1, name="other.jsonl")
    spool_path(trace).write_bytes(spool_path(other).read_bytes().replace(b'"s1"', b'"s2"'))  # another session's
    reader = TraceReader(trace)
    assert len([e for e in reader if e["kind"] == "message"]) == 2 and reader.torn
    assert leftover(trace) is None and finish(trace) is None and spool_path(trace).exists()


def test_a_compressed_killed_recording_reads_complete_and_is_finished_anew(tmp_path):
    plain = killed_recording(tmp_path, recorded_frames=3)
    expected = list(TraceReader(plain))
    trace = tmp_path / "t.jsonl.gz"
    compressor = Compressor("gzip")
    trace.write_bytes(compressor.data(plain.read_bytes()))  # flushed, never ended: as a killed writer leaves it
    spool_path(plain).rename(spool_path(trace))
    before = digests(trace, spool_path(trace))
    reader = TraceReader(trace)
    assert list(reader) == expected and reader.torn is None  # the stream stopping short is the kill's, made good
    assert digests(trace, spool_path(trace)) == before
    assert finish(trace) is not None and not spool_path(trace).exists()
    assert gzip.decompress(trace.read_bytes()).count(b"\n") == len(expected)  # an ended stream, a line per event
    assert list(TraceReader(trace)) == expected
    assert oct(trace.stat().st_mode & 0o777) == "0o600"


def test_trace_finish_command(tmp_path):
    trace = killed_recording(tmp_path, recorded_frames=5)
    events = list(TraceReader(trace))
    result = CliRunner().invoke(main, ["trace", "finish", str(trace)])
    assert result.exit_code == 0 and result.output == f"mcpbench: finished {trace} (7 events from its spool)\n"
    assert not spool_path(trace).exists() and list(TraceReader(trace)) == events
    result = CliRunner().invoke(main, ["trace", "finish", str(trace)])
    assert result.exit_code == 0 and result.output == f"mcpbench: {trace}: complete (no spool beside it)\n"

    foreign = killed_recording(tmp_path, recorded_frames=5, name="foreign.jsonl")
    spool_path(foreign).write_bytes(b"".join(frame(START, 0, b"{not json")))  # a START frame the tee did not write
    result = CliRunner().invoke(main, ["trace", "finish", str(foreign)])
    assert result.exit_code == 2 and "does not continue it" in result.output and len(result.output.splitlines()) == 1
    result = CliRunner().invoke(main, ["trace", "finish", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2 and "cannot read trace" in result.output


def test_trace_imports_nothing_from_capture_use_or_the_lab():
    """Reading a trace needs no capture code: `trace/` sits below stdio, record, replay, load and lab."""
    above = {"mcpbench.stdio", "mcpbench.record", "mcpbench.replay", "mcpbench.load", "mcpbench.lab"}
    imported = set()
    for path in Path(mcpbench.trace.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {(path.name, alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add((path.name, node.module))
    assert ("spool.py", "mcpbench.protocol.observer") in imported  # the walk saw the imports
    assert [(name, module) for name, module in imported if ".".join(module.split(".")[:2]) in above] == []


def test_a_killed_recording_appended_to_a_shared_trace_reads_complete_beside_the_other_sessions(tmp_path):
    other = lines(sent(0.5, 7, "ping", session="s0", v=2))
    trace = killed_recording(tmp_path, recorded_frames=5, earlier=[other, other])
    events = list(TraceReader(trace))
    assert [e["session"] for e in events[1:3]] == ["s0", "s0"]  # the earlier session's lines, kept
    assert_complete([e for e in events if e.get("session") == "s1"])
    added = finish(trace)
    assert added is not None and len(added.lines) == 7 and list(TraceReader(trace)) == events


def test_a_request_its_client_cancelled_is_not_ended_unanswered(tmp_path):
    """The TypeScript SDK closes a stdio listen stream with `notifications/cancelled` and the server
    answers nothing, as the specification wants: the session's end reports only what still awaited
    an answer (before: "subscriptions/listen: the session ended before its answer")."""
    writer = TraceWriter(tmp_path / "t.jsonl", transport="stdio")
    decoder = SpoolDecoder(writer, "s1")
    sent_lines = [b'{"jsonrpc":"2.0","id":"listen:0","method":"subscriptions/listen","params":{}}\n',
                  b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}\n',
                  b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"listen:0"}}\n',
                  # a cancellation of an id the client never sent, and one the server sends of the client's id
                  b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":8}}\n']
    data = b"".join(b"".join(frame(C2S_DATA, 1_000_000 * (n + 1), line)) for n, line in enumerate(sent_lines))
    data += b"".join(frame(S2C_DATA, 9_000_000, b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}\n'))
    decoder.take(data, len(data))
    errors = [orjson.loads(line) for line in decoder.finish()]
    assert [(e["kind"], e["id"], e["detail"]) for e in errors] == [("error", 7, "tools/call: the session ended before its answer")]
