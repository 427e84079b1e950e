"""Edges of reading: a trace's last line without a newline, junk, CRs; a stdio stream's torn last line.

A trace's last line without a newline is what a writer killed mid-write leaves: whatever it holds
(cut JSON, junk, JSON that is no event) it is skipped and reported as torn, and every line before
it is read. A stdio peer's last line without a newline is recorded, junk or not, and flagged
`unterminated-line`; lines that are not messages keep their bytes exactly, a CR included.
"""

import shlex
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from mcpbench.trace.reader import TraceReader
from tests.hostile.helpers import EXIT_INPUT, EXIT_OK, MCPBENCH, assert_clean_failure, assert_no_traceback, run
from tests.support.servers import REPO_ROOT
from tests.support.traces import event, header, lines, result, sent

# A bound on one command; not a timing assertion.
WAIT = 60.0

HEADER = header(command=["x"])
MESSAGE = sent(2.0, 1, "tools/list")
ANSWER = result(3.0, 1, {"tools": []})
WHOLE = lines(HEADER, MESSAGE, ANSWER)


def inspected_requests(trace: Path) -> int:
    """The request count `inspect --json` finds (the events before a torn line are all there)."""
    result = run(["inspect", "--json", str(trace)])
    assert result.returncode == EXIT_OK and "Traceback" not in result.stderr, result.stderr
    return sum(sum(m["outcomes"].values()) for m in orjson.loads(result.stdout)["methods"].values())


@pytest.mark.parametrize(
    "tail",
    [b"garbage", b"42", b'"text"', b"[1, 2]", b'{"x": 1}', orjson.dumps(MESSAGE)[:-7], b"\x00\xff\xfe"],
    ids=["junk", "number", "string", "array", "object-no-event", "cut-event", "binary"],
)
def test_last_line_without_newline_is_torn_and_reported(tmp_path: Path, tail: bytes) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(WHOLE + tail)
    result = run(["inspect", str(trace)])
    line = assert_clean_failure(result, EXIT_OK, f"{trace}:4", "torn last line", f"{len(tail)} bytes")
    assert line.startswith("mcpbench: note:")
    reader = TraceReader(trace)
    assert [e["kind"] for e in reader] == ["trace", "message", "message"]  # nothing before it lost
    assert reader.torn is not None
    assert inspected_requests(trace) == 1


def test_whole_last_event_without_newline_is_read(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(WHOLE[:-1])
    reader = TraceReader(trace)
    assert len(list(reader)) == 3 and reader.torn is None
    result = run(["inspect", str(trace)])
    assert result.returncode == EXIT_OK and result.stderr == ""


@pytest.mark.parametrize("tail", [b"\r", b"\r\n", b"  \n\r\n"], ids=["cr", "crlf", "blank-lines"])
def test_trailing_whitespace_is_neither_an_event_nor_torn(tmp_path: Path, tail: bytes) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(WHOLE + tail)
    reader = TraceReader(trace)
    assert len(list(reader)) == 3 and reader.torn is None
    assert run(["inspect", str(trace)]).stderr == ""


def test_crlf_trace_and_a_bare_crlf_line_read_whole(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(WHOLE.replace(b"\n", b"\r\n").replace(b'\r\n{"v":1,"ts":3.0', b'\r\n\r\n{"v":1,"ts":3.0'))
    reader = TraceReader(trace)
    assert [e["ts"] for e in reader] == [1.0, 2.0, 3.0] and reader.torn is None
    assert inspected_requests(trace) == 1


def test_only_a_torn_line_is_an_empty_trace(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(orjson.dumps(HEADER)[:20])
    result = run(["inspect", str(trace)])
    assert_clean_failure(result, EXIT_INPUT, str(trace), "empty trace", "torn")


def test_junk_line_inside_the_trace_names_its_line(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(WHOLE.replace(b'\n{"v":1,"ts":3.0', b'\njunk\n{"v":1,"ts":3.0'))
    result = run(["inspect", str(trace)])
    assert_clean_failure(result, EXIT_INPUT, f"{trace}:3", "not JSON")


def tee(tmp_path: Path, server_code: str, stdin: bytes = b"") -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Run `server_code` behind the tee; return the run and the trace's events."""
    trace = tmp_path / "t.jsonl"
    proc = subprocess.run(
        [*MCPBENCH, "tee", "--out", str(trace), "--", sys.executable, "-c", server_code],
        input=stdin, capture_output=True, cwd=REPO_ROOT, timeout=WAIT,
    )
    assert_no_traceback(proc.stderr.decode(errors="replace"))
    return proc, list(TraceReader(trace))


def test_stdio_junk_last_line_without_newline_is_recorded_and_flagged(tmp_path: Path) -> None:
    proc, events = tee(tmp_path, "import sys; sys.stdout.buffer.write(b'{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\\nlast junk')")
    assert proc.returncode == EXIT_OK and b"Traceback" not in proc.stderr
    assert proc.stdout.endswith(b"\nlast junk")  # passed through as is
    s2c = [e for e in events if e["dir"] == "s2c"]
    assert [(e["kind"], e.get("code")) for e in s2c] == [("message", None), ("violation", "stdout-pollution"), ("violation", "unterminated-line")]
    assert s2c[1]["raw"] == "last junk"


@pytest.mark.parametrize("direction", ["s2c", "c2s"])
def test_stdio_lines_keep_their_crs_exactly(tmp_path: Path, direction: str) -> None:
    lines = b'junk\r\n\r\n{"jsonrpc":"2.0","method":"x"}\r\n\xff\r\n'
    if direction == "s2c":
        proc, events = tee(tmp_path, f"import sys; sys.stdout.buffer.write({lines!r})")
        assert proc.stdout == lines
    else:
        proc, events = tee(tmp_path, "import sys; sys.stdin.buffer.read()", stdin=lines)
    assert proc.returncode == EXIT_OK and b"Traceback" not in proc.stderr
    recorded = [e for e in events if e["dir"] == direction and e["kind"] in ("message", "violation")]
    assert [e.get("raw") for e in recorded] == ["junk\r", "\r", None, {"b64": "/w0="}]
    assert recorded[2]["msg"] == {"jsonrpc": "2.0", "method": "x"}


def test_stdio_stderr_lines_keep_their_crs(tmp_path: Path) -> None:
    proc, events = tee(tmp_path, "import sys; sys.stderr.write('50%\\r100%\\r\\ndone\\n')")
    assert proc.returncode == EXIT_OK and proc.stderr.endswith(b"50%\r100%\r\ndone\n")
    assert [e["text"] for e in events if e["kind"] == "stderr"] == ["50%\r100%\r", "done"]


def test_export_says_a_torn_last_line_was_skipped(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    http = event(2.0, None, None, kind="http", transport="streamable-http", flow="f", method="GET", url="http://127.0.0.1:1/",
                 status=200)
    trace.write_bytes(lines(header("streamable-http", command=["x"]), http) + b'{"v":1,"ts":3')  # torn last line
    result = run(["export", "--har", str(trace)])
    assert_clean_failure(result, EXIT_OK, f"{trace}:3", "torn last line")
    log = orjson.loads(result.stdout)["log"]
    assert len(log["entries"]) == 1 and "torn last line" in log["comment"]


@pytest.mark.parametrize("command", ["diff", "replay"])
def test_diff_and_replay_say_a_torn_last_line_was_skipped(tmp_path: Path, command: str) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(WHOLE + b'{"v":1,"ts":4.0,"session":"s1","transport":"stdio","dir":"c2s","kind":"mess')
    if command == "diff":
        result = run(["diff", str(trace), str(trace)])
    else:  # a server that answers tools/list with no tools, as recorded
        server = tmp_path / "server.py"
        server.write_text(f"import sys\nfor line in sys.stdin:\n    print({orjson.dumps(ANSWER['msg']).decode()!r}, flush=True)\n")
        result = run(["replay", str(trace), "--target", f"stdio:{shlex.join([sys.executable, str(server)])}"])
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == EXIT_OK, result.stdout + result.stderr  # the calls before it replay unchanged
    assert f"{trace}:4: torn last line" in result.stdout + result.stderr


def test_a_trace_saved_with_a_byte_order_mark_reads_whole(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b"\xef\xbb\xbf" + WHOLE.replace(b"\n", b"\r\n"))  # as a Windows editor saves it
    reader = TraceReader(trace)
    assert [e["ts"] for e in reader] == [1.0, 2.0, 3.0] and reader.torn is None
    assert inspected_requests(trace) == 1
