"""Hostile upstreams and unwritable traces: the session goes on, the failure is recorded or said once.

- An upstream that refuses or resets: the client gets a 502 naming the cause, the trace an `error`
  event and an `http` event for that exchange, and the HAR export shows the failed entry.
- A trace that cannot be written any more (file size limit, full device, file removed): the traffic
  keeps flowing, the command ends with exit 3 and one line saying why, and what was written before
  reads back. The same for the samples of a load run: the load goes on, the summary says the
  samples are incomplete.

A full disk is simulated with RLIMIT_FSIZE on the recording process (writes past the limit fail with
EFBIG; Python ignores SIGXFSZ) and with /dev/full (ENOSPC): no root, no mounts.
"""

import contextlib
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import orjson
import pytest

from mcpbench.record import ADDON_PATH
from mcpbench.trace.reader import TraceReader
from tests.hostile.helpers import EXIT_ENVIRONMENT, EXIT_INPUT, EXIT_OK, MCPBENCH, assert_clean_failure, assert_no_traceback, run
from tests.record.helpers import MITMDUMP, peer_server
from tests.support.processes import forked_children
from tests.support.servers import HOST, REPO_ROOT, free_port, stop_process, wait_for_port
from tests.support.traces import header, sent, write_trace

# A bound on any one wait; none is a timing assertion.
WAIT = 60.0
# Lines the recorders print by design (where to connect, where the trace goes), not failures.
BANNERS = ("mcpbench: recording ", "mcpbench: point clients at", "mcpbench: warning: ", "mcpbench: wrote ", "mcpbench: stopped by ")
# A trace size limit that holds the header and a few exchanges, not all of them.
FSIZE_LIMIT = 3000
# An initialize request as a client sends it.
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "hostile", "version": "1"}},
}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
# A stdio "server" that echoes every line: the tee passes and records whatever it is given.
ECHO = [sys.executable, "-c", "import sys\nfor l in sys.stdin.buffer:\n    sys.stdout.buffer.write(l); sys.stdout.buffer.flush()"]
LINE = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x" * 200}}) + b"\n"


def without_banners(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """`result` with the recorders' by-design banner lines dropped from its stderr."""
    kept = [line for line in result.stderr.splitlines() if not line.startswith(BANNERS)]
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout, "\n".join(kept))


def limit_file_size(limit: int):
    """A `preexec_fn` that caps the size of any file the process writes (a disk that fills up).

    The child writes no bytecode: Python writes a `.pyc` with one unchecked write, so under the cap
    it would leave a truncated one in the worktree's `__pycache__`, and every later import of that
    module, in any test, would fail (EOFError: marshal data too short)."""

    def limit_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # in the forked child only, before its exec

    return limit_size


@dataclass
class Recorder:
    base: str
    proc: subprocess.Popen
    result: subprocess.CompletedProcess | None = None


@contextlib.contextmanager
def recorder(kind: str, upstream_port: int, trace: Path, *, fsize: int | None = None, timeout: float | None = None) -> Iterator[Recorder]:
    """`mcpbench record` or mitmdump with the addon in front of 127.0.0.1:`upstream_port`.

    Stopped on exit as a user stops it (SIGINT for record, SIGTERM for mitmdump); `result` then holds
    its exit status and stderr.
    """
    port = free_port()
    if kind == "record":
        argv = [*MCPBENCH, "record", "--upstream", f"http://{HOST}:{upstream_port}/mcp", "--listen", f"{HOST}:{port}", "--out", str(trace)]
        stop = signal.SIGINT
    else:
        argv = [MITMDUMP, "-q", "--mode", f"reverse:http://{HOST}:{upstream_port}", "--listen-host", HOST, "-p", str(port),
                "-s", str(ADDON_PATH), "--set", f"mcpbench_out={trace}"]
        stop = signal.SIGTERM
    if timeout is not None:
        argv += ["--upstream-timeout", f"{timeout:g}"] if kind == "record" else ["--set", f"mcpbench_upstream_timeout={timeout:g}"]
    err_path = trace.with_suffix(".stderr")
    with err_path.open("wb") as err:
        proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            preexec_fn=limit_file_size(fsize) if fsize else None,
        )
    running = Recorder(base=f"http://{HOST}:{port}", proc=proc)
    try:
        wait_for_port(HOST, port, proc=proc)
        yield running
        proc.send_signal(stop)
        proc.wait(WAIT)
    finally:
        stop_process(proc)
        stderr = err_path.read_text(errors="replace")
        assert_no_traceback(stderr)
        running.result = subprocess.CompletedProcess(argv, proc.returncode, "", stderr)


# What a broken upstream sends after reading a request (then it closes); None: a reset (RST).
REPLIES = {
    "reset": None,
    "garbage": b"garbage, not HTTP\r\n\r\n",
    "short-body": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"jsonrpc\":",
}


@contextlib.contextmanager
def broken_upstream(reply: bytes | None) -> Iterator[int]:
    """A TCP server that reads a request, sends `reply` and closes (None: resets the connection)."""
    listener = socket.create_server((HOST, 0))
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                if reply is None:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, (1).to_bytes(4, "little") + (0).to_bytes(4, "little"))
                else:
                    conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stopping.set()
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not
        listener.close()
        thread.join(WAIT)


def assert_stopped_cleanly(result: subprocess.CompletedProcess) -> None:
    """A recorder stopped by its user: no failure line, no traceback (record: 0, or 130 for SIGINT)."""
    assert "Traceback" not in result.stderr, result.stderr
    assert without_banners(result).stderr.strip() == "", result.stderr
    assert result.returncode in (EXIT_OK, 130), (result.returncode, result.stderr)


@contextlib.contextmanager
def upstream(case: str) -> Iterator[int]:
    if case == "refused":
        yield free_port()  # nothing listens there
    else:
        with broken_upstream(REPLIES[case]) as port:
            yield port


@pytest.mark.parametrize("kind", ["record", "mitmdump"])
@pytest.mark.parametrize(
    "case, cause",
    [
        ("refused", "Connect call failed"),
        ("reset", "server closed connection"),
        ("garbage", "Bad HTTP response line"),
        ("short-body", "received 11 bytes, expected 100"),  # the upstream's 200 never reached the client
    ],
)
@pytest.mark.slow
def test_upstream_failure_answers_502_and_is_recorded(tmp_path: Path, kind: str, case: str, cause: str) -> None:
    trace = tmp_path / "t.jsonl"
    with upstream(case) as port, recorder(kind, port, trace) as proxy:
        answer = httpx2.post(proxy.base + "/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=WAIT)
    # The client learns why, as an MCP client reads it: a JSON-RPC error answering its request.
    assert answer.status_code == 502 and answer.headers["content-type"] == "application/json", answer.text
    error = answer.json()
    assert error["id"] == INITIALIZE["id"] and error["error"]["code"] == -32603 and cause in error["error"]["message"]
    assert_stopped_cleanly(proxy.result)

    events = list(TraceReader(trace))
    request = [e for e in events if e["kind"] == "message" and e["dir"] == "c2s"]
    errors = [e for e in events if e["kind"] == "error"]
    http = [e for e in events if e["kind"] == "http"]
    assert [e["msg"]["method"] for e in request] == ["initialize"]  # the request is kept
    assert len(errors) == 1 and cause in errors[0]["detail"] and errors[0]["flow"] == request[0]["flow"]
    assert len(http) == 1 and http[0]["status"] == 502 and cause in http[0]["error"]  # what the client got
    assert orjson.loads(http[0]["body"]) == error and http[0]["content_type"] == "application/json"

    har = run(["export", "--har", str(trace)])
    assert har.returncode == EXIT_OK and har.stderr == "", har.stderr
    (entry,) = orjson.loads(har.stdout)["log"]["entries"]
    assert entry["response"]["status"] == 502 and cause in entry["comment"]  # as the client saw it
    assert orjson.loads(entry["response"]["content"]["text"]) == error
    assert orjson.loads(entry["request"]["postData"]["text"])["method"] == "initialize"


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.parametrize("kind", ["record", "mitmdump"])
def test_a_request_that_is_not_mcp_keeps_mitmproxys_error_page(tmp_path: Path, kind: str) -> None:
    """The JSON-RPC 502 is for MCP exchanges: a browser's request through the same proxy gets mitmproxy's page."""
    trace = tmp_path / "t.jsonl"
    with upstream("refused") as port, recorder(kind, port, trace) as proxy:
        page = httpx2.get(proxy.base + "/index.html", headers={"accept": "text/html"}, timeout=WAIT)
    assert page.status_code == 502 and page.headers["content-type"] == "text/html" and "Connect call failed" in page.text
    (http,) = [e for e in TraceReader(trace) if e["kind"] == "http"]
    assert http["mcp"] is False and http["status"] is None and "Connect call failed" in http["error"]


@contextlib.contextmanager
def silent_upstream() -> Iterator[int]:
    """A TCP server that accepts and reads requests but never answers."""
    listener = socket.create_server((HOST, 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not
        listener.close()
        for conn in held:
            conn.close()
        thread.join(WAIT)


@pytest.mark.parametrize("kind", ["record", "mitmdump"])
@pytest.mark.slow
def test_upstream_that_never_answers_is_recorded_when_the_client_gives_up(tmp_path: Path, kind: str) -> None:
    trace = tmp_path / "t.jsonl"
    with silent_upstream() as port, recorder(kind, port, trace) as proxy:
        with pytest.raises(httpx2.ReadTimeout):
            httpx2.post(proxy.base + "/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=httpx2.Timeout(WAIT, read=1.0))
    assert_stopped_cleanly(proxy.result)
    events = list(TraceReader(trace))
    (request,) = [e for e in events if e["kind"] == "message"]
    (error,) = [e for e in events if e["kind"] == "error"]
    assert request["msg"]["method"] == "initialize" and error["flow"] == request["flow"]  # neither lost
    assert [e["error"] for e in events if e["kind"] == "http"] == [error["detail"]]


@pytest.mark.parametrize("kind", ["record", "mitmdump"])
@pytest.mark.slow
def test_upstream_that_times_out_answers_504_and_is_recorded(tmp_path: Path, kind: str) -> None:
    trace = tmp_path / "t.jsonl"
    with silent_upstream() as port, recorder(kind, port, trace, timeout=1) as proxy:
        # The client waits far longer than the proxy's time-out: the 504 comes from the proxy.
        reply = httpx2.post(proxy.base + "/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=WAIT)
        assert reply.status_code == 504 and "upstream timed out: no answer within 1 s" in reply.text, reply.text
        after = httpx2.post(proxy.base + "/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=WAIT)
        assert after.status_code == 504  # the proxy serves on, each exchange failing alike
    assert_stopped_cleanly(proxy.result)
    events = list(TraceReader(trace))
    requests = [e for e in events if e["kind"] == "message"]
    errors = [e for e in events if e["kind"] == "error"]
    assert len(requests) == len(errors) == 2 and [e["flow"] for e in errors] == [e["flow"] for e in requests]
    assert all("upstream timed out" in e["detail"] for e in errors), errors
    https = [e for e in events if e["kind"] == "http"]
    assert [(e["status"], e["error"]) for e in https] == [(504, errors[0]["detail"])] * 2, https
    har = run(["export", "--har", str(trace)])
    assert har.returncode == EXIT_OK, har.stderr
    assert [entry["response"]["status"] for entry in orjson.loads(har.stdout)["log"]["entries"]] == [504, 504]


@pytest.mark.parametrize("kind", ["record", "mitmdump"])
@pytest.mark.slow
def test_trace_that_fills_up_keeps_the_proxy_serving_and_ends_3(tmp_path: Path, kind: str) -> None:
    trace = tmp_path / "t.jsonl"
    with peer_server(json_response=True) as peer, recorder(kind, peer.port, trace, fsize=FSIZE_LIMIT) as proxy:
        statuses = []
        with httpx2.Client(timeout=WAIT) as client:
            for n in range(12):  # several KiB of trace: past the limit
                statuses.append(client.post(proxy.base + "/mcp", json=INITIALIZE | {"id": n}, headers=MCP_HEADERS).status_code)
    assert statuses == [200] * 12  # the session was never broken
    line = assert_clean_failure(without_banners(proxy.result), EXIT_ENVIRONMENT, str(trace), "File too large")
    assert "recording stopped" in line
    reader = TraceReader(trace)
    events = list(reader)  # what was written before the failure reads back
    assert events[0]["kind"] == "trace"
    assert [e["msg"]["id"] for e in events if e["kind"] == "message" and e["dir"] == "c2s"][:1] == [0]


def tee_exchanges(trace: Path, count: int, *, after_first=None, **popen) -> subprocess.CompletedProcess:
    """Run the tee on ECHO and make `count` exchanges one at a time, as a host talks; each must pass.

    `after_first(proc)` runs after the first exchange. Returns the exit status and stderr.
    """
    proc = subprocess.Popen(
        [*MCPBENCH, "tee", "--out", str(trace), "--", *ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=REPO_ROOT, **popen,
    )
    try:
        for n in range(count):
            proc.stdin.write(LINE)
            proc.stdin.flush()
            assert proc.stdout.readline() == LINE  # every exchange passes through
            if n == 0 and after_first:
                after_first(proc)
        proc.stdin.close()
        proc.wait(WAIT)
    finally:
        stop_process(proc)
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    proc.stdout.close()
    assert_no_traceback(stderr)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)


def test_tee_trace_that_fills_up_passes_everything_and_ends_3(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    # ~26 KiB of trace, the limit is 3 KB: the recording fills up after some exchanges were recorded.
    result = tee_exchanges(trace, 100, preexec_fn=limit_file_size(FSIZE_LIMIT))
    assert_clean_failure(without_banners(result), EXIT_ENVIRONMENT, str(trace), "File too large", "recording stopped")
    reader = TraceReader(trace)
    events = list(reader)
    assert events[0]["kind"] == "trace" and events[1]["kind"] == "process"  # kept
    assert any(e["kind"] == "message" and e["msg"] == orjson.loads(LINE) for e in events)


def test_tee_on_a_full_device_refuses_before_starting_the_server(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    server = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    result = run(["tee", "--out", "/dev/full", "--", *server], input=LINE)
    assert_clean_failure(result, EXIT_ENVIRONMENT, "/dev/full", "No space left on device")
    assert not marker.exists()


def test_tee_server_status_wins_over_a_recording_failure(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    server = [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read()); sys.exit(5)"]
    proc = subprocess.run(
        [*MCPBENCH, "tee", "--out", str(trace), "--", *server], input=LINE * 100, capture_output=True, cwd=REPO_ROOT,
        timeout=WAIT, preexec_fn=limit_file_size(FSIZE_LIMIT),
    )
    stderr = proc.stderr.decode()
    assert_no_traceback(stderr)
    assert proc.returncode == 5 and "Traceback" not in stderr  # the host sees its server's status
    assert proc.stdout == LINE * 100
    assert "File too large" in stderr and "exited with status 5" in stderr


def test_tee_trace_removed_mid_session_ends_3(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    proc = subprocess.Popen(
        [*MCPBENCH, "tee", "--out", str(trace), "--", *ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=REPO_ROOT,
    )
    try:
        proc.stdin.write(LINE)
        proc.stdin.flush()
        assert proc.stdout.readline() == LINE  # the first exchange went through
        trace.unlink()
        proc.stdin.write(LINE)
        proc.stdin.close()
        rest = proc.stdout.read()
        proc.wait(WAIT)
    finally:
        stop_process(proc)
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    proc.stdout.close()
    assert_no_traceback(stderr)
    assert rest == LINE  # the session went on
    result = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
    assert_clean_failure(without_banners(result), EXIT_ENVIRONMENT, str(trace), "removed while recording")


def start_argv(kind: str, out: str) -> list[str]:
    """A recorder that must fail before serving (its upstream is never contacted)."""
    if kind == "record":
        return ["record", "--upstream", f"http://{HOST}:{free_port()}/mcp", "--listen", f"{HOST}:0", "--out", out]
    return ["--mode", f"reverse:http://{HOST}:{free_port()}", "--listen-host", HOST, "-p", "0",
            "-s", str(ADDON_PATH), "--set", f"mcpbench_out={out}"]


def run_recorder(kind: str, args: list[str], default: Path) -> subprocess.CompletedProcess:
    """Run a recorder to its end; `default` is where it would put a trace it was given no path for."""
    env = {"MCPBENCH_TRACE_DIR": str(default)}
    if kind == "record":
        return run(args, env=env)
    proc = subprocess.run([MITMDUMP, "-q", *args], capture_output=True, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, timeout=WAIT,
                          env={**os.environ, **env})
    assert_no_traceback(proc.stderr.decode(errors="replace"))
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", proc.stderr.decode(errors="replace"))


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
@pytest.mark.parametrize("kind", ["record", "mitmdump"])
def test_recorder_on_a_full_device_ends_3_at_start(tmp_path: Path, kind: str) -> None:
    result = run_recorder(kind, start_argv(kind, "/dev/full"), tmp_path / "default")
    assert_clean_failure(without_banners(result), EXIT_ENVIRONMENT, "/dev/full", "No space left on device")
    assert not (tmp_path / "default").exists()  # no stray trace elsewhere instead


def test_mitmdump_with_a_trace_that_cannot_be_created_ends_2(tmp_path: Path) -> None:
    out = tmp_path / "not-a-folder"
    out.write_text("a file")
    result = run_recorder("mitmdump", start_argv("mitmdump", str(out / "t.jsonl")), tmp_path / "default")
    assert_clean_failure(result, EXIT_INPUT, str(out), "cannot create trace")
    assert out.read_text() == "a file"


@pytest.mark.slow
def test_replay_whose_own_trace_fills_up_reports_and_ends_3(tmp_path: Path, recordings: dict[str, Path]) -> None:
    from tests.support.recordings import stdio_target

    recording = recordings["legacy"]
    before = recording.read_bytes()
    out = tmp_path / "replay.jsonl"
    proc = subprocess.run(
        [*MCPBENCH, "replay", str(recording), "--target", stdio_target(), "--out", str(out)], capture_output=True,
        cwd=REPO_ROOT, timeout=WAIT * 2, preexec_fn=limit_file_size(FSIZE_LIMIT),
    )
    stderr = proc.stderr.decode(errors="replace")
    assert_no_traceback(stderr)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), stderr)
    assert_clean_failure(without_banners(result), EXIT_ENVIRONMENT, str(out), "File too large", "recording stopped")
    assert "1 session(s)" in result.stdout.splitlines()[0]  # the replay ran to its end and was reported
    assert recording.read_bytes() == before
    events = list(TraceReader(out))  # what was written reads back
    assert events[0]["kind"] == "trace" and any(e["kind"] == "message" for e in events)


def test_replay_onto_a_full_device_ends_3_before_replaying(tmp_path: Path) -> None:
    recording = tmp_path / "rec.jsonl"
    write_trace(recording, [sent(2.0, 1, "tools/list", session="s")], header=header())
    marker = tmp_path / "started"
    target = f"stdio:{sys.executable} -c \"open({str(marker)!r}, 'w')\""
    result = run(["replay", str(recording), "--target", target, "--out", "/dev/full"])
    assert_clean_failure(result, EXIT_ENVIRONMENT, "/dev/full", "No space left on device")
    assert not marker.exists()  # nothing replayed


@pytest.mark.parametrize("kind", ["record", "mitmdump"])
@pytest.mark.slow
def test_trace_removed_while_recording_ends_3(tmp_path: Path, kind: str) -> None:
    trace = tmp_path / "t.jsonl"
    with peer_server(json_response=True) as peer, recorder(kind, peer.port, trace) as proxy:
        with httpx2.Client(timeout=WAIT) as client:
            first = client.post(proxy.base + "/mcp", json=INITIALIZE, headers=MCP_HEADERS).status_code
            trace.unlink()
            second = client.post(proxy.base + "/mcp", json=INITIALIZE | {"id": 2}, headers=MCP_HEADERS).status_code
    assert (first, second) == (200, 200)  # the session went on
    assert_clean_failure(without_banners(proxy.result), EXIT_ENVIRONMENT, str(trace), "removed while recording")


def test_tee_whose_recorder_dies_passes_everything_and_ends_3(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"

    def kill_recorder(proc: subprocess.Popen) -> None:
        (recorder_pid,) = forked_children(proc.pid)
        os.kill(recorder_pid, signal.SIGKILL)  # the tee's forked recorder, not the server

    result = tee_exchanges(trace, 4, after_first=kill_recorder)
    assert_clean_failure(without_banners(result), EXIT_ENVIRONMENT, "recorder gone", "traffic still passes")
    assert list(TraceReader(trace))[0]["kind"] == "trace"  # what it wrote before is kept


@pytest.mark.slow
def test_sse_stream_cut_mid_event_keeps_the_bytes_it_had(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    events = b'data: {"jsonrpc":"2.0","method":"notifications/message","params":{}}\n\ndata: {"jsonrpc":"2.0","id":1,'
    reply = head + b"%x\r\n" % len(events) + events + b"\r\n"  # then the connection closes: no last chunk
    with broken_upstream(reply) as port, recorder("mitmdump", port, trace) as proxy:
        with pytest.raises(httpx2.RemoteProtocolError):
            httpx2.post(proxy.base + "/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=WAIT).read()
    assert_stopped_cleanly(proxy.result)
    recorded = list(TraceReader(trace))
    (notification,) = [e for e in recorded if e["kind"] == "message" and e["dir"] == "s2c"]
    (cut,) = [e for e in recorded if e["kind"] == "violation"]
    (broke,) = [e for e in recorded if e["kind"] == "stream" and e["event"] == "error"]
    assert notification["msg"]["method"] == "notifications/message"  # the whole event before the break
    assert cut["code"] == "sse-truncated" and cut["raw"] == 'data: {"jsonrpc":"2.0","id":1,'  # and the part after
    assert broke["bytes"] == len(events)


# --- load: a sample file that cannot be written -------------------------------------------------------

# Room for the small result files (scenario, Locust's CSVs and log, the summary) but not for the
# samples of the run: its 200 calls make ~30 KB of them (~150 bytes a sample).
LOAD_FSIZE_LIMIT = 15_000


@pytest.mark.parametrize("workers", ["0", "1"])
@pytest.mark.slow
def test_load_whose_samples_fill_up_runs_on_and_ends_3(tmp_path: Path, workers: str, http_server) -> None:
    out = tmp_path / "run"
    # Bounded by count, not by wall time: on a loaded machine a 4 s run made too few calls to fill
    # the file, and ended 1 on its p95 threshold instead; the duration is only a ceiling.
    scenario = tmp_path / "streamable-http.yaml"
    scenario.write_text((REPO_ROOT / "scenarios" / "streamable-http.yaml").read_text() + "calls: 200\n")
    proc = subprocess.run(
        [*MCPBENCH, "load", str(scenario), "--target", http_server.url, "--duration", "60s", "--users", "4",
         "--workers", workers, "--out", str(out)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=WAIT * 3, preexec_fn=limit_file_size(LOAD_FSIZE_LIMIT),
    )
    assert_no_traceback(proc.stderr)
    line = assert_clean_failure(proc, EXIT_ENVIRONMENT, "samples.", ".jsonl", "File too large", "incomplete")
    assert str(out) in line
    assert "samples incomplete: " in proc.stdout  # the printed summary says so
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["samples_incomplete"] and "File too large" in summary["samples_incomplete"][0]
    parts = sorted(out.glob("samples.*.jsonl"))
    if (out / "samples.jsonl").exists():
        files = [out / "samples.jsonl"]
        assert not parts  # merged, as in a run that went well
    else:
        # The merge writes under the same cap. A part cut just before a line's newline ends in a whole
        # sample, which the merge keeps with its newline: one byte more than the cap lets it write. Then
        # the parts stay, and the summary names the merged file as incomplete too.
        files = parts
        assert parts and any(error.startswith(f"{out / 'samples.jsonl'}:") for error in summary["samples_incomplete"])
    kept = [orjson.loads(raw) for path in files for raw in path.read_bytes().splitlines()]
    assert kept and summary["total"]["count"] == len(kept)  # what reached the disk is kept and counted
