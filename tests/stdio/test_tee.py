"""The stdio tee with real processes: the official SDK client and server, junk, crashes, volume."""

import os
import platform
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from mcpbench.trace import TraceReader, read_trace
from tests.support.mcp_client import run_session
from tests.support.processes import forked_children, wait_for_exit
from tests.support.servers import serve_argv, stdio_params

TEE = [sys.executable, "-m", "mcpbench", "tee"]
BLOCK_SIGTERM_AND_EXEC = "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}); os.execv(sys.argv[1], sys.argv[1:])"
SPY = [sys.executable, str(Path(__file__).parents[1] / "support" / "spy.py")]
# A bound for any one wait in these tests; none of them is a timing assertion.
WAIT = 60.0


def trace_lines(path, direction):
    """The exact JSON text of each recorded line in one direction (messages and violations)."""
    out = []
    for event in read_trace(path):
        if event.get("dir") != direction:
            continue
        if event["kind"] == "message":
            out.append(orjson.loads(orjson.dumps(event["msg"])))
        elif event["kind"] == "violation" and "raw" in event:
            out.append(event["raw"])
    return out


def spy_lines(path):
    lines = []
    for raw in Path(path).read_bytes().splitlines():
        try:
            lines.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            lines.append(raw.decode())
    return lines


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sdk_session_through_tee_is_recorded_exactly(tmp_path, mode):
    server = serve_argv("stdio")
    direct = run_session(stdio_params(server), mode)
    trace = tmp_path / "t.jsonl"
    # client -> spy(outer) -> tee -> spy(inner) -> server: both spies see what each end saw
    argv = SPY + [str(tmp_path / "outer"), "--"] + TEE + ["--out", str(trace), "--"] + SPY + [str(tmp_path / "inner"), "--"] + server
    via_tee = run_session(stdio_params(argv), mode)

    assert via_tee == direct  # the client's results are unchanged
    assert via_tee["progress"] == [1, 2]
    for direction in ("c2s", "s2c"):
        outer, inner = spy_lines(tmp_path / f"outer.{direction}"), spy_lines(tmp_path / f"inner.{direction}")
        assert outer == inner  # bytes passed through unchanged, in order
        assert trace_lines(trace, direction) == outer  # and the trace holds exactly those messages
    methods = [e["msg"].get("method") for e in read_trace(trace) if e["kind"] == "message" and e["dir"] == "c2s"]
    if mode == "legacy":
        assert methods[:2] == ["initialize", "notifications/initialized"]
    else:  # the 2.x client and server agree on 2026-07-28: no handshake
        assert methods[0] == "server/discover" and "initialize" not in methods
        assert via_tee["protocol_version"] == "2026-07-28"
    events = list(read_trace(trace))
    assert events[-1]["kind"] == "process" and events[-1]["exit_code"] == 0
    assert [e for e in events if e["kind"] == "violation"] == []


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_inspect_shows_the_recorded_session(tmp_path):
    trace = tmp_path / "t.jsonl"
    run_session(stdio_params(TEE + ["--out", str(trace), "--"] + serve_argv("stdio")), "legacy")
    out = subprocess.run([sys.executable, "-m", "mcpbench", "inspect", "--json", str(trace)], capture_output=True, check=True, timeout=WAIT)
    summary = orjson.loads(out.stdout)
    assert summary["sessions"][0]["era"] == "handshake" and summary["sessions"][0]["handshake_ms"] > 0
    assert summary["methods"]["tools/call echo"]["outcomes"] == {"ok": 1}
    assert summary["methods"]["tools/call fail"]["outcomes"] == {"tool-error": 1}
    text = subprocess.run([sys.executable, "-m", "mcpbench", "inspect", str(trace)], capture_output=True, check=True, text=True, timeout=WAIT).stdout
    assert "tools/call add" in text and "notifications/progress" in text


JUNK_SERVER = r"""
import sys
sys.stdout.buffer.write(b"hello from print()\n\xff\xfe binary junk\n")
sys.stdout.flush()
print("server log line", file=sys.stderr, flush=True)
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(line)
    sys.stdout.flush()
"""


def test_stdout_junk_passes_through_and_is_recorded(tmp_path):
    trace = tmp_path / "t.jsonl"
    request = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    proc = subprocess.run(TEE + ["--out", str(trace), "--", sys.executable, "-c", JUNK_SERVER], input=request, capture_output=True, timeout=WAIT)
    assert proc.stdout == b"hello from print()\n\xff\xfe binary junk\n" + request
    assert b"server log line" in proc.stderr
    events = list(read_trace(trace))
    pollution = [e for e in events if e["kind"] == "violation" and e["code"] == "stdout-pollution"]
    assert [p["raw"] for p in pollution] == ["hello from print()", {"b64": "//4gYmluYXJ5IGp1bms="}]
    assert [e["text"] for e in events if e["kind"] == "stderr"] == ["server log line"]


def test_exit_code_and_missing_command(tmp_path):
    trace = tmp_path / "t.jsonl"
    proc = subprocess.run(TEE + ["--out", str(trace), "--", sys.executable, "-c", "import sys; sys.exit(3)"], capture_output=True, timeout=WAIT)
    assert proc.returncode == 3
    assert list(read_trace(trace))[-1]["exit_code"] == 3
    proc = subprocess.run(TEE + ["--out", str(tmp_path / "x.jsonl"), "--", "/nonexistent/server"], capture_output=True, text=True, timeout=WAIT)
    assert proc.returncode == 127
    assert proc.stderr.strip().splitlines()[-1] == "mcpbench: cannot start /nonexistent/server: No such file or directory"
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("host_blocks_sigterm", [False, True], ids=["plain", "host-blocks-sigterm"])
def test_sigterm_is_forwarded_to_the_server(tmp_path, host_blocks_sigterm):
    trace = tmp_path / "t.jsonl"
    # The server reports the signal mask it started with (the host's, not the
    # tee's), then takes SIGTERM whatever that mask was.
    server = (
        "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
        "blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})\n"
        "print('ready', signal.SIGTERM in blocked, file=sys.stderr, flush=True)\ntime.sleep(60)\n"
    )
    # A host that blocks SIGTERM: a mask survives exec (no preexec_fn, which is unsafe with threads).
    host = [sys.executable, "-c", BLOCK_SIGTERM_AND_EXEC] if host_blocks_sigterm else []
    proc = subprocess.Popen(
        host + TEE + ["--out", str(trace), "--", sys.executable, "-c", server], stdin=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert f"ready {host_blocks_sigterm}".encode() in read_until(proc.stderr, b"ready")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT) == 7
    finally:
        proc.kill()
        proc.wait()
    assert [e["exit_code"] for e in read_trace(trace) if e["kind"] == "process" and e["event"] == "exit"] == [7]


def read_until(stream, marker, limit=100):
    seen = b""
    for _ in range(limit):
        line = stream.readline()
        seen += line
        if marker in line or not line:
            break
    return seen


def sched_field(pid, name):
    """A field of /proc/PID/sched, or None where this kernel does not show it."""
    with open(f"/proc/{pid}/sched") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key.strip() == name:
                return int(float(value))
    return None


def kernel_version() -> tuple[int, int]:
    """Linux's major and minor version ("6.12.0-rc3-generic" -> (6, 12))."""
    major, minor = re.match(r"(\d+)\.(\d+)", platform.release()).groups()
    return int(major), int(minor)


def test_recorder_is_background_work(tmp_path):
    """The recorder runs 10 nicer than the tee, on the longest scheduler slice the kernel has:
    then a session process waking up preempts it at once instead of waiting out its slice."""
    from mcpbench.stdio.recorder import RECORDER_NICENESS, RECORDER_SLICE_NS

    trace = tmp_path / "t.jsonl"
    proc = subprocess.Popen(TEE + ["--out", str(trace), "--", "cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"ping","id":1}\n')
        proc.stdin.flush()
        assert proc.stdout.readline()
        [recorder] = forked_children(proc.pid)
        # The recorder sets itself up before it records anything: wait (bounded) for the ping's line.
        deadline = time.monotonic() + WAIT
        while b'"ping"' not in trace.read_bytes():
            assert time.monotonic() < deadline, "the recorder wrote nothing"
            time.sleep(0.01)
        assert os.getpriority(os.PRIO_PROCESS, recorder) == min(os.getpriority(os.PRIO_PROCESS, proc.pid) + RECORDER_NICENESS, 19)
        tee_slice, recorder_slice = sched_field(proc.pid, "se.slice"), sched_field(recorder, "se.slice")
        if tee_slice is None or kernel_version() < (6, 12):
            pytest.skip("this kernel has no per-task scheduler slices (Linux 6.12+)")
        assert recorder_slice == RECORDER_SLICE_NS > tee_slice
    finally:
        proc.stdin.close()
        assert proc.wait(WAIT) == 0


def test_kill_9_mid_session_loses_nothing_written(tmp_path):
    trace = tmp_path / "t.jsonl"
    proc = subprocess.Popen(TEE + ["--out", str(trace), "--", "cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    received = 0
    try:
        for i in range(1, 2001):
            proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"n":%d,"pad":"%s"}}\n' % (i, b"x" * 500))
            proc.stdin.flush()
            if i % 100 == 0:  # read back what came through so far
                for _ in range(100):
                    assert proc.stdout.readline()
                received = i
            if i == 1500:
                recorders = forked_children(proc.pid)
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait()
    # The recorder outlives the tee: it drains what the tee sent, then exits.
    assert len(recorders) == 1
    wait_for_exit(recorders[0], WAIT)
    reader = TraceReader(trace)
    events = list(reader)  # every complete line reads back
    echoed = [e for e in events if e["kind"] == "message" and e["dir"] == "s2c"]
    # each line was recorded before it was forwarded: all that came back is in the trace
    assert len(echoed) >= received == 1500
    assert [e["msg"]["params"]["n"] for e in echoed] == list(range(1, len(echoed) + 1))
    with open(trace, "ab") as handle:  # a writer killed mid-line leaves a torn tail
        handle.write(b'{"v":1,"ts":1,"kind":"mess')
    reader = TraceReader(trace)
    assert len(list(reader)) == len(events) and "torn last line" in reader.torn


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_10000_messages_10_bytes_to_8_mib_pass_unchanged(tmp_path):
    rng = random.Random(7)
    sizes = [rng.randint(10, 4096) for _ in range(9990)] + [1 << 20, 2 << 20, 3 << 20, 4 << 20, 5 << 20, 6 << 20, 7 << 20, 8 << 20, 10, 8 << 20]
    rng.shuffle(sizes)
    lines = []
    for i, size in enumerate(sizes):
        head = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"i":%d,"p":"' % i
        pad = max(0, size - len(head) - 3)
        lines.append(head + b"y" * pad + b'"}}\n' if size > 64 else b"x" * (size - 1) + b"\n")
    payload = b"".join(lines)
    trace = tmp_path / "t.jsonl"
    proc = subprocess.Popen(TEE + ["--out", str(trace), "--", "cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    out = bytearray()

    def reader():
        while chunk := proc.stdout.read1(1 << 20):
            out.extend(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        proc.stdin.write(payload)
        proc.stdin.close()
        thread.join(WAIT * 3)
        assert proc.wait(WAIT) == 0
    finally:
        proc.kill()
        proc.wait()
    assert bytes(out) == payload  # none lost, none reordered, bytes identical
    for direction in ("c2s", "s2c"):
        recorded = [e for e in read_trace(trace) if e.get("dir") == direction and e["kind"] in ("message", "violation")]
        assert len(recorded) == 10_000
        assert [e["msg"]["params"]["i"] for e in recorded if e["kind"] == "message"] == [
            i for i, line in enumerate(lines) if line.startswith(b"{")
        ]
