"""Following a trace without a terminal (one line per event), the follower's edges, bounded memory."""

import contextlib
import gzip
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpbench.analysis.inspect import summarize
from mcpbench.live import feed as live_feed
from mcpbench.live.feed import LiveFeed, LiveStats
from mcpbench.protocol.errors import TraceError
from mcpbench.measures.stats import LogHistogram, percentile
from mcpbench.trace.follow import TraceTail
from mcpbench.trace.writer import TraceWriter
from tests.support.processes import descendants, forked_children
from tests.support.servers import REPO_ROOT, serve_argv
from tests.support.traces import header, lines, result, sent

MCPBENCH = [sys.executable, "-m", "mcpbench"]
WAIT = 30.0
INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
ECHO = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}\n'


class Lines:
    """A process's stdout lines as they come, awaited with a bound."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.queue: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=lambda: [self.queue.put(line.rstrip("\n")) for line in proc.stdout], daemon=True).start()

    def until(self, text: str) -> list[str]:
        deadline = time.monotonic() + WAIT
        while not any(text in line for line in self.seen):
            try:
                self.seen.append(self.queue.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                pytest.fail(f"no line with {text!r} within {WAIT:g} s; lines: {self.seen}")
        return self.seen


def follow(trace: Path) -> subprocess.Popen:
    return subprocess.Popen([*MCPBENCH, "inspect", "--follow", str(trace)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO_ROOT)


def tee(trace: Path) -> subprocess.Popen:
    proc = subprocess.Popen([*MCPBENCH, "tee", "--out", str(trace), "--", *serve_argv("stdio")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO_ROOT, start_new_session=True)
    deadline = time.monotonic() + WAIT
    while not (trace.exists() and trace.stat().st_size):  # the tee writes the header before it starts the server
        assert time.monotonic() < deadline and proc.poll() is None, "the tee wrote no trace header"
        time.sleep(0.01)
    return proc


@contextlib.contextmanager
def watched_tee(trace: Path) -> Iterator[tuple[subprocess.Popen, subprocess.Popen, Lines]]:
    """A tee recording the reference server to `trace`, and `inspect --follow` on it in a pipe: both stopped at the end."""
    server = tee(trace)
    viewer = follow(trace)
    try:
        yield server, viewer, Lines(viewer)
    finally:
        for proc in (server, viewer):
            proc.kill()
            proc.wait()


def ask(proc: subprocess.Popen, line: bytes) -> bytes:
    proc.stdin.write(line)
    proc.stdin.flush()
    return proc.stdout.readline() if b'"id"' in line else b""


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_a_pipe_gets_a_line_per_event_as_the_tee_records_and_ends_with_the_recording(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with watched_tee(trace) as (server, viewer, lines):
        assert b'"id":1' in ask(server, INITIALIZE)
        lines.until("← initialize #1")
        ask(server, INITIALIZED)
        assert b'"id":2' in ask(server, ECHO % 2)
        seen = lines.until("← tools/call echo #2")
        server.stdin.close()  # the client goes: the server exits, the recording completes
        assert server.wait(WAIT) == 0
        seen = lines.until("process exit: 0")
        assert viewer.wait(WAIT) == 0
        assert "the recording is complete" in viewer.stderr.read()
    assert seen[0].endswith("process start: " + str(serve_argv("stdio")))
    body = [line.split(" ", 2)[2] for line in seen[1:]]
    assert body[:3] == ["→ initialize #1", body[1], "→ notifications/initialized"] and body[1].startswith("← initialize #1  ")
    assert body[1].endswith(" ok") and body[3] == "→ tools/call echo #2" and body[4].startswith("← tools/call echo #2  ")
    assert len(seen) == len(summarize(trace).sessions[0].entries) + 2  # an entry a line, and the two answers


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_a_spool_left_by_a_kill_is_read_and_the_pipe_ends(tmp_path: Path) -> None:
    trace = tmp_path / "k.jsonl"
    with watched_tee(trace) as (server, viewer, lines):
        ask(server, INITIALIZE)
        ask(server, INITIALIZED)
        lines.until("→ notifications/initialized")
        recorder = forked_children(server.pid)[0]
        os.kill(recorder, signal.SIGSTOP)  # what the tee copies now stays in its spool
        assert b'"id":2' in ask(server, ECHO % 2)
        for pid in [server.pid, *descendants(server.pid)]:  # the whole tree, at once, as a host's kill
            os.kill(pid, signal.SIGKILL)
        server.wait(WAIT)
        assert (tmp_path / "k.jsonl.spool").exists()
        seen = lines.until("← tools/call echo #2")
        assert viewer.wait(WAIT) == 0
        assert "the recording was killed" in viewer.stderr.read()
    assert sum(1 for line in seen if "tools/call echo #2" in line) == 2
    assert (tmp_path / "k.jsonl.spool").exists()  # reading changed nothing


def test_a_compressed_trace_is_printed_whole(tmp_path: Path, recordings) -> None:
    packed = tmp_path / "s.jsonl.gz"
    packed.write_bytes(gzip.compress(recordings["legacy"].read_bytes()))
    plain = subprocess.run([*MCPBENCH, "inspect", "--follow", str(recordings["legacy"])], capture_output=True, text=True, cwd=REPO_ROOT, timeout=WAIT)
    result = subprocess.run([*MCPBENCH, "inspect", "--follow", str(packed)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=WAIT)
    assert result.returncode == plain.returncode == 0
    assert result.stdout == plain.stdout and "tools/call echo" in result.stdout
    assert result.stderr.strip().endswith("compressed: shown whole, not followed")


@pytest.mark.parametrize(("content", "said"), [(None, "cannot read trace: No such file or directory"),
                                               (b"# notes\nnot a trace\n", "not a trace"),
                                               (b'{"v":2,"ts":1,"kind":"message"}\n', "no trace header")])
def test_a_trace_that_cannot_be_followed_is_one_line_and_exit_2(tmp_path: Path, content, said) -> None:
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_bytes(content)
    result = subprocess.run([*MCPBENCH, "inspect", "--follow", str(path)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=WAIT)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and said in result.stderr and str(path) in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("name", ["sse-legacy", "http-legacy", "http-auto", "stdio-auto"])
def test_every_transport_and_era_is_followed_call_by_call(main_job, name: str) -> None:
    """The main job's recordings: legacy SSE, Streamable HTTP in both eras, stdio in 2026-07-28."""
    trace = main_job[1] / f"{name}.jsonl"
    sessions = summarize(trace).sessions
    answered = [e for s in sessions for e in s.entries if e.kind == "request" and e.dir == "c2s" and e.latency is not None]
    assert len(answered) >= 10, name  # what the recording holds, to be seen
    viewer = follow(trace)
    try:
        last = max(answered, key=lambda e: e.ts + e.latency)
        seen = Lines(viewer).until(f"← {last.name} #{last.id}")
    finally:
        viewer.terminate()
        viewer.wait(WAIT)
    shown = ["← " + line.split(" ← ", 1)[1].split("  ")[0] for line in seen if " ← " in line and " ms " in line]  # answers
    assert sorted(shown) == sorted(f"← {e.name} #{e.id}" for e in answered)
    assert not any("violation" in line for line in seen), seen


# --- the follower and the feed, no processes ---------------------------------------------------


def numbered(n: int, direction: str = "c2s", session: str = "s1") -> bytes:
    """Call `n` (c2s) or its answer (s2c) as a trace line."""
    if direction == "c2s":
        return lines(sent(1000.0 + n, n, "tools/call", {"name": f"tool{n}"}, session=session, v=2))
    return lines(result(1000.0 + n, n, {}, session=session, v=2))


HEADER = lines(header(v=2, ts=1000.0, mcpbench="0"))


def test_the_follower_takes_whole_lines_as_they_are_written_and_a_replaced_trace_anew(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_bytes(b"")
    tail = TraceTail(path)
    assert tail.poll() == [] and tail.header is None  # an empty file: waiting for its header
    with open(path, "ab") as out:
        out.write(HEADER + numbered(1)[:10])
        out.flush()
        assert [e["kind"] for e in tail.poll()] == ["trace"]  # the half line waits for its newline
        out.write(numbered(1)[10:] + numbered(1, "s2c"))
        out.flush()
        assert [(e["dir"], e["msg"]["id"]) for e in tail.poll()] == [("c2s", 1), ("s2c", 1)]
        assert tail.poll() == [] and tail.ended is None
    path.write_bytes(HEADER + numbered(7))  # a new recording to the same path
    assert [e["kind"] for e in tail.poll()] == ["trace", "message"] and tail.generation == 1
    with open(path, "ab") as out:
        out.write(b"not json\n")
    with pytest.raises(TraceError, match=r"g\.jsonl:3: not JSON"):
        tail.poll()


def test_the_feed_stays_bounded_and_keeps_percentiles(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(live_feed, "MAX_NAMES", 5)
    monkeypatch.setattr(live_feed, "LOG_ROWS", 50)
    path = tmp_path / "b.jsonl"
    writer = TraceWriter(path, transport="stdio", header={"command": ["x"]})
    feed, stats = LiveFeed(path, max_sessions=3), None
    stats = LiveStats()
    for n in range(1, 201):
        session = f"s{n % 7}"
        writer.write_lines([numbered(n, "c2s", session), numbered(n, "s2c", session)])
        stats.take(feed.poll())
    writer.close()
    assert stats.events == 401 and stats.answered == 200
    assert len(stats.log) == 50 and stats.logged == 400
    assert len(stats.methods) == 5 and stats.methods[live_feed.OTHER].count == 196
    assert len(feed.sessions) <= 3
    assert [row.entry.id for row in stats.new_rows(stats.logged - 2)] == [200, 200]


def test_the_histogram_percentiles_are_within_one_percent() -> None:
    values = [0.0001 * 1.0035**n for n in range(4000)]  # 0.1 ms to 2 minutes
    histogram = LogHistogram()
    for value in values:
        histogram.add(value)
    for q in (50, 95, 99):
        assert abs(histogram.percentile(q) / percentile(values, q) - 1) < 0.011
    assert len(histogram.buckets) <= math.log(values[-1] / values[0]) / math.log(LogHistogram.GROWTH) + 2  # bounded by the range
