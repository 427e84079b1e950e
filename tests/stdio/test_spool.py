"""The tee's spool: a trace whose recorder was killed with its tee is finished from it when read."""

import fcntl
import os

from mcpbench.trace import Redactor, TraceReader, TraceWriter
from mcpbench.trace.spool import C2S_DATA, S2C_DATA, SpoolDecoder, frame, spool_path, start_frame

SECRET = b"s3cr3t-in-a-param"


def killed_recording(tmp_path, recorded_frames: int):
    """A trace and its spool as a kill leaves them: the recorder wrote `recorded_frames` data frames and half a line."""
    trace = tmp_path / "t.jsonl"
    writer = TraceWriter(trace, transport="stdio", redactor=Redactor(["token"]))
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


def test_a_killed_recording_is_finished_on_reading(tmp_path):
    trace = killed_recording(tmp_path, recorded_frames=5)
    reader = TraceReader(trace)
    events = list(reader)
    assert [(e["dir"], e["msg"]["id"]) for e in events if e["kind"] == "message"] == [
        ("c2s" if n % 2 == 0 else "s2c", n) for n in range(6)
    ]  # all six, once each, in order; the torn frame (never forwarded) is not there
    assert reader.torn is None and not spool_path(trace).exists()
    assert SECRET not in trace.read_bytes()  # redacted by the same rules as the recorder's
    assert [e["ts"] for e in events if e["kind"] == "message"] == [1.5 + n for n in range(6)]
    # The client's pings were never answered: finished as the recorder ends a session, one error each.
    errors = [(e["dir"], e["id"], e["ts"]) for e in events if e["kind"] == "error"]
    assert errors == [("c2s", n, 6.5) for n in (0, 2, 4)]


def test_a_live_recording_is_left_alone(tmp_path):
    trace = killed_recording(tmp_path, recorded_frames=5)
    holder = os.open(spool_path(trace), os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_SH)  # as a running tee or recorder holds it
        reader = TraceReader(trace)
        assert len([e for e in reader if e["kind"] == "message"]) == 2 and reader.torn
        assert spool_path(trace).exists()
    finally:
        os.close(holder)
    assert len([e for e in TraceReader(trace) if e["kind"] == "message"]) == 6
