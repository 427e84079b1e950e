"""Every stop signal to every long-running command, at the awkward moments: one table.

Each row is (command, moment, signal). A case starts the command as a user would, brings it to the
moment, sends the signal, and asserts: the documented exit status (128 + the signal: 130 SIGINT,
143 SIGTERM, 129 SIGHUP; the tee its server's, which dies by the signal it passes on; mitmdump with
the addon 0, mitmdump's own), no traceback, no process it started left running, no port left
listening, and everything recorded so far kept and readable (traces, HAR, summaries, samples).

Moments:

- `before-first-byte`: the command is ready (listening, its URL printed, its server started) and no
  client has sent anything; for `load`, its users' requests reached the server and none got a byte back.
- `mid-handshake`: a client's `initialize` is on its way: held unanswered by the server behind a
  recorder, or half sent to a server.
- `mid-stream`: a call's answer is streaming (progress notifications, one read, more coming); for
  `load`, samples are being written; for `lab run` and `run`, a stage is running.
- `writing-results`: as `mid-stream`, and a second stop signal once the command took the first,
  while it stops and writes what it has.

Shared servers come from the session fixtures; every run is short (a stop ends it). The cheap rows
(`tee`, `serve-trace`) take every signal at every moment; the rows whose cases take a second or
more (`SAMPLED`) take each of their moments once, the signals spread over the rows so that each
proxy and load row still takes all three, which keeps the table within the suite's time budget.
`MCPBENCH_SIGNAL_TABLE=full` runs every (command, moment, signal) instead (102 cases, minutes). The
cheap rows of `serve-trace` run in `-m "not slow"`; the rest are marked slow.
"""

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from mcpbench.record import ADDON_PATH
from mcpbench.record.har import to_har
from mcpbench.trace.reader import read_trace
from tests.hostile.clients import HEADERS, INITIALIZED, PROGRESS, LegacyStream, Stream, initialize, posting, stdio_stream
from tests.hostile.hostile_peers import STREAMING_STDIO_SERVER, hold_server, paced_trace
from tests.hostile.stops import (
    READY_WAIT, STOP_SIGNALS, assert_port_free, command, read_line_with, signal_id, started_blocking, status_of, stop,
    wait_for_file, wait_for_text,
)
from tests.support.servers import HOST, REPO_ROOT, free_port, stop_process, wait_for_port

BEFORE, HANDSHAKE, STREAM, WRITING = "before-first-byte", "mid-handshake", "mid-stream", "writing-results"
MITMDUMP = str(Path(sys.executable).with_name("mitmdump"))
# The reference server's `slow` call behind a proxy: a progress notification every 0.1 s for 20 s.
SLOW = {"seconds": 20, "steps": 200}
# A load scenario without a target (`--target` gives it): short sessions, thresholds to report on.
LOAD_SCENARIO = """\
name: signals
mix:
  - {call: tools/call, tool: echo, arguments: {text: hi}}
users: 2
spawn_rate: 10
duration: 10m
thresholds: ["p95 < 10s", "fail_ratio < 0.5"]
"""
# A sticky experiment of one small cell: a load run behind a one-instance lab.
LAB_SCENARIO = """\
name: signals
modes: [stateless]
policies: [round-robin]
instances: [1]
balancers: [builtin]
calls_per_session: 3
mix:
  - {call: tools/call, tool: echo, arguments: {text: hi}}
users: 1
spawn_rate: 1
duration: 30s
timeout: 10s
"""


# --- HTTP recorders and proxies: record, mitmdump with the addon, faults ------------------------------


@contextlib.contextmanager
def http_moment(moment: str, request: pytest.FixtureRequest) -> Iterator[tuple[str, "callable"]]:
    """An upstream for `moment` (a held handshake needs a server that holds it), and the client that
    brings a session through a proxy to the moment: (upstream URL, reach(proxy URL) -> context)."""
    if moment == HANDSHAKE:
        with hold_server() as (upstream, holder):
            @contextlib.contextmanager
            def reach(url: str) -> Iterator[None]:
                with posting(url, initialize()):
                    read_line_with(holder.stderr, b"held")  # the initialize reached the upstream: in flight
                    yield
            yield upstream, reach
        return
    upstream = request.getfixturevalue("http_server").url

    @contextlib.contextmanager
    def reach(url: str) -> Iterator[None]:
        if moment == BEFORE:
            yield
            return
        stream = Stream(url)
        try:
            assert stream.open(SLOW)["params"]["progress"] >= 1
            yield
        finally:
            stream.close()

    yield upstream, reach


def check_http_trace(trace: Path, moment: str) -> None:
    """What a recorder stopped at `moment` kept: every event readable, the exchange cut short as an
    `error` event, and in the HAR export as its client saw it."""
    events = list(read_trace(trace))
    sent = [e["msg"].get("method") for e in events if e["kind"] == "message" and e["dir"] == "c2s"]
    stopped = [e for e in events if e["kind"] == "error" and "stopped" in e.get("detail", "")]
    entries = to_har(events)["log"]["entries"]
    if moment == BEFORE:
        assert events[0]["kind"] == "trace" and not sent and not stopped and not entries
    elif moment == HANDSHAKE:
        assert sent == ["initialize"] and len(stopped) == 1, events
        assert [(e["request"]["method"], e["response"]["status"]) for e in entries] == [("POST", 0)]
        assert "initialize" in entries[0]["request"]["postData"]["text"] and "stopped" in entries[0]["comment"]
    else:  # the call's SSE answer was streaming: kept with what the client had read, and its error
        assert sent == ["initialize", "notifications/initialized", "tools/call"], sent
        call = next(e["flow"] for e in events if e["kind"] == "message" and e["msg"].get("method") == "tools/call")
        assert [e["flow"] for e in stopped] == [call], events
        assert any(e["kind"] == "stream" and e.get("reason") == "proxy stopped" and e["flow"] == call for e in events)
        (entry,) = [e for e in entries if "tools/call" in e["request"].get("postData", {}).get("text", "")]
        assert entry["response"]["status"] == 200 and PROGRESS in entry["response"]["content"]["text"]
        assert "stopped" in entry["comment"]


def drive_record(tmp_path: Path, moment: str, sig: int, request: pytest.FixtureRequest) -> None:
    out, port = tmp_path / "rec.jsonl", free_port()
    with http_moment(moment, request) as (upstream, reach):
        with command(["record", "--upstream", upstream, "--listen", f"{HOST}:{port}", "--out", str(out)]) as proc:
            url = read_line_with(proc.stdout, b"/mcp").decode().strip()  # listening
            with reach(url):
                stop(proc, sig, again=moment == WRITING)
    assert_port_free(port)
    check_http_trace(out, moment)


def drive_mitmdump(tmp_path: Path, moment: str, sig: int, request: pytest.FixtureRequest, *, blocked: tuple[int, ...] = ()) -> None:
    """mitmdump stops cleanly on each (the addon makes SIGHUP do what SIGTERM does) and exits 0. A
    second signal after its `done` hooks, while its event loop closes, ends it by that signal
    (mitmdump's own way out); the trace is complete by then. `blocked`: started with these signals
    blocked (the addon unblocks them)."""
    out, port = tmp_path / "rec.jsonl", free_port()
    with http_moment(moment, request) as (upstream, reach):
        origin = upstream.rsplit("/", 1)[0]
        argv = [MITMDUMP, "-q", "--mode", f"reverse:{origin}", "--listen-host", HOST, "-p", str(port),
                "-s", str(ADDON_PATH), "--set", f"mcpbench_out={out}"]
        argv = started_blocking(blocked, argv) if blocked else argv
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for_port(HOST, port, proc=proc)
            wait_for_text(out, b'"kind":"trace"')  # the addon is loaded (mitmdump loads scripts as it starts serving)
            with reach(f"http://{HOST}:{port}/mcp"):
                stop(proc, sig, status=(0, -sig) if moment == WRITING else 0, again=moment == WRITING)
        finally:
            stop_process(proc)
            proc.stderr.close()
    assert_port_free(port)
    check_http_trace(out, moment)


def drive_faults(tmp_path: Path, moment: str, sig: int, request: pytest.FixtureRequest) -> None:
    log, port = tmp_path / "faults.jsonl", free_port()
    with http_moment(moment, request) as (upstream, reach):
        args = ["faults", "--upstream", upstream, "--listen", f"{HOST}:{port}", "--cut-streams-after", "10m", "--fault-log", str(log)]
        with command(args) as proc:
            url = read_line_with(proc.stdout, b"/mcp").decode().strip()
            with reach(url):
                stop(proc, sig, again=moment == WRITING)
    assert_port_free(port)
    assert all(orjson.loads(line) for line in log.read_bytes().splitlines()) if log.exists() else True


# --- serve-trace on each transport --------------------------------------------------------------------


def half_request(port: int) -> socket.socket:
    """An `initialize` POST whose body is half sent: the server waits for the rest."""
    body = orjson.dumps(initialize())
    head = "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())
    sock = socket.create_connection((HOST, port), timeout=READY_WAIT)
    sock.sendall(f"POST /mcp HTTP/1.1\r\nhost: {HOST}:{port}\r\n{head}content-length: {len(body)}\r\n\r\n".encode() + body[: len(body) // 2])
    return sock


def drive_serve_trace(tmp_path: Path, moment: str, sig: int, transport: str) -> None:
    trace = paced_trace(tmp_path / "paced.jsonl")
    if transport == "stdio":
        with command(["serve-trace", str(trace)], stdin=subprocess.PIPE) as proc:
            if moment == HANDSHAKE:  # `initialize` answered, `notifications/initialized` half sent
                proc.stdin.write(orjson.dumps(initialize()) + b"\n")
                proc.stdin.flush()
                read_line_with(proc.stdout, b'"id":1')
                line = orjson.dumps(INITIALIZED) + b"\n"
                proc.stdin.write(line[: len(line) // 2])
                proc.stdin.flush()
            else:
                assert stdio_stream(proc)["params"]["progress"] == 1
            stop(proc, sig)
        return
    port = free_port()
    with command(["serve-trace", str(trace), "--transport", transport, "--port", str(port)]) as proc:
        wait_for_port(HOST, port, proc=proc)
        with contextlib.ExitStack() as held:
            if moment == HANDSHAKE:
                held.callback(half_request(port).close)
            elif moment == STREAM:
                stream = Stream(f"http://{HOST}:{port}/mcp") if transport == "streamable-http" else LegacyStream(f"http://{HOST}:{port}/sse")
                held.callback(stream.close)
                assert stream.open()["params"]["progress"] == 1
            stop(proc, sig)
    assert_port_free(port)


# --- load: headless, with workers, with the web UI ------------------------------------------------------


def drive_load(tmp_path: Path, moment: str, sig: int, request: pytest.FixtureRequest, *, workers: int = 0, ui: bool = False) -> None:
    scenario, out = tmp_path / "load.yaml", tmp_path / "run"
    scenario.write_text(LOAD_SCENARIO)
    with contextlib.ExitStack() as stack:
        if moment == BEFORE and not ui:  # the users' handshakes are held: no sample can be written
            target, holder = stack.enter_context(hold_server(answered=1))  # the pre-flight session is answered
        else:
            target, holder = request.getfixturevalue("http_server").url, None
        args = ["load", str(scenario), "--target", target, "--workers", str(workers), "--out", str(out)]
        web = free_port()
        args += ["--ui", "--web-port", str(web)] if ui else []
        proc = stack.enter_context(command(args, start_new_session=True))
        if ui:
            wait_for_port(HOST, web, proc=proc)
        elif holder is not None:
            read_line_with(holder.stderr, b"held")  # a user's initialize is in flight, none answered
        else:
            wait_for_file(out, "samples.*.jsonl", proc)  # samples are being written
        stderr = stop(proc, sig, again=moment == WRITING)
        assert stderr.strip().splitlines()[-1] == f"mcpbench: stopped by {signal_id(sig)}"
        leftovers = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True).stdout.split()
        assert not leftovers, leftovers  # no Locust process outlives the run
    if ui:
        assert_port_free(web)
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["interrupted"] is True and 0 < summary["duration_s"] < 600  # the time that ran, not 10 minutes
    assert summary["thresholds"] and all("ok" in t for t in summary["thresholds"])
    if moment == BEFORE:
        assert summary["total"]["count"] == 0
    else:
        assert summary["total"]["count"] > 0
    assert all(orjson.loads(line) for line in (out / "samples.jsonl").read_bytes().splitlines())


# --- the lab: lab up, lab run ---------------------------------------------------------------------------


def drive_lab_up(tmp_path: Path, moment: str, sig: int) -> None:
    port = free_port()
    with command(["lab", "up", "--instances", "1", "--transport", "streamable-http", "--port", str(port)], cwd=tmp_path) as proc:
        read_line_with(proc.stdout, b"mcpbench: lab up:")
        folder = Path(read_line_with(proc.stdout, b"  folder: ").decode().split("folder: ", 1)[1].strip())
        with contextlib.ExitStack() as held:
            if moment == STREAM:
                stream = Stream(f"http://{HOST}:{port}/mcp")
                held.callback(stream.close)
                assert stream.open(SLOW)["params"]["progress"] >= 1
            stop(proc, sig)
    assert_port_free(port)
    assert not list((tmp_path / "results" / "lab-up").glob("*.json"))  # its state file is gone
    assert (tmp_path / folder).is_dir()


def drive_lab_run(tmp_path: Path, moment: str, sig: int) -> None:
    scenario, out = tmp_path / "sticky.yaml", tmp_path / "lab-run"
    scenario.write_text(LAB_SCENARIO)
    with command(["lab", "run", str(scenario), "--out", str(out)], cwd=tmp_path, start_new_session=True) as proc:
        wait_for_file(out, "**/samples.*.jsonl", proc, timeout=120)  # the first cell's load is running
        stop(proc, sig)
        leftovers = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True).stdout.split()
        assert not leftovers, leftovers
    for samples in out.glob("**/samples*.jsonl"):
        assert all(orjson.loads(line) for line in samples.read_bytes().splitlines())


# --- the main job --------------------------------------------------------------------------------------


def drive_run(tmp_path: Path, moment: str, sig: int) -> None:
    out = tmp_path / "run"
    with command(["run", "--out", str(out)], start_new_session=True) as proc:
        # Its first stage records an SDK session through the tee: a message of it is in the trace.
        wait_for_text(out / "stdio-legacy.jsonl", b'"kind":"message"', timeout=300)
        stop(proc, sig)
        leftovers = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True).stdout.split()
        assert not leftovers, leftovers
    assert any(e["kind"] == "message" for e in read_trace(out / "stdio-legacy.jsonl"))
    for trace in out.glob("*.jsonl"):  # whatever else it had begun
        assert list(read_trace(trace))[0]["kind"] == "trace"


# --- the tee ---------------------------------------------------------------------------------------------


def drive_tee(tmp_path: Path, moment: str, sig: int) -> None:
    """The tee passes the signal on; its server dies by it, and the tee exits as its server did."""
    trace = tmp_path / "tee.jsonl"
    with command(["tee", "--out", str(trace), "--", sys.executable, "-c", STREAMING_STDIO_SERVER], stdin=subprocess.PIPE) as proc:
        read_line_with(proc.stderr, b"ready")  # the server runs; nothing was sent yet
        if moment == HANDSHAKE:
            proc.stdin.write(orjson.dumps(initialize("hold")) + b"\n")
            proc.stdin.flush()
            read_line_with(proc.stderr, b"held")
        elif moment in (STREAM, WRITING):
            stdio_stream(proc)
        stop(proc, sig, again=moment == WRITING)
    events = list(read_trace(trace))
    assert [e["exit_code"] for e in events if e["kind"] == "process" and e.get("event") == "exit"] == [status_of(sig)]
    errors = [(e["dir"], e["id"]) for e in events if e["kind"] == "error"]
    progress = [e for e in events if e["kind"] == "message" and e["msg"].get("method") == PROGRESS]
    if moment == BEFORE:
        assert not errors and not any(e["kind"] == "message" for e in events)
    elif moment == HANDSHAKE:
        assert errors == [("c2s", 1)], events  # the initialize in flight
    else:
        assert errors == [("c2s", 2)] and progress, events  # the call in flight, what it streamed kept


# --- the table ---------------------------------------------------------------------------------------------

ALL = (BEFORE, HANDSHAKE, STREAM, WRITING)
ROWS = {  # command -> its moments
    "tee": ALL,
    "record": ALL,
    "mitmdump": ALL,
    "faults": (BEFORE, STREAM, WRITING),
    "serve-trace-stdio": (HANDSHAKE, STREAM),  # no event says it is ready before a byte came
    "serve-trace-sse": (BEFORE, HANDSHAKE, STREAM),
    "serve-trace-streamable-http": (BEFORE, HANDSHAKE, STREAM),
    "load": (BEFORE, STREAM, WRITING),
    "load-workers": (BEFORE, STREAM, WRITING),
    "load-ui": (BEFORE,),
    "lab-up": (BEFORE, STREAM),
    "lab-run": (STREAM,),
    "run": (STREAM,),
}
FAST = {("serve-trace-stdio", HANDSHAKE), ("serve-trace-sse", BEFORE), ("serve-trace-streamable-http", BEFORE)}
# Rows whose cases take a second or more (a proxy, Locust starting and stopping, a lab, the main
# job) take a sample: each moment once with one signal (a Latin square over the proxy and load
# rows), not every pair: every command handles the three signals in one place (cliutil's
# STOP_SIGNALS, the addon's SIGHUP), so the signal decides only how the stop is raised, the moment
# what there is to keep. A row's moments missing here are not run (their cases are in the full
# table). The issue's own cases are among them: Ctrl-C on `record` mid-stream, SIGTERM to `load
# --workers 2` while it writes samples.
FULL_TABLE = os.environ.get("MCPBENCH_SIGNAL_TABLE") == "full"
SAMPLED = {} if FULL_TABLE else {
    "record": {BEFORE: signal.SIGHUP, HANDSHAKE: signal.SIGTERM, STREAM: signal.SIGINT, WRITING: signal.SIGHUP},
    "mitmdump": {BEFORE: signal.SIGTERM, HANDSHAKE: signal.SIGHUP, STREAM: signal.SIGINT, WRITING: signal.SIGTERM},
    "faults": {BEFORE: signal.SIGINT, STREAM: signal.SIGHUP, WRITING: signal.SIGTERM},
    "load": {BEFORE: signal.SIGHUP, STREAM: signal.SIGTERM, WRITING: signal.SIGINT},
    "load-workers": {STREAM: signal.SIGTERM},
    "load-ui": {BEFORE: signal.SIGINT},
    "lab-up": {STREAM: signal.SIGHUP},
    "lab-run": {STREAM: signal.SIGINT},
    "run": {STREAM: signal.SIGHUP},  # SIGINT and SIGTERM: tests/test_pipeline.py, test_signals.py
}
DRIVERS = {
    "tee": lambda tmp, moment, sig, request: drive_tee(tmp, moment, sig),
    "record": drive_record,
    "mitmdump": drive_mitmdump,
    "faults": drive_faults,
    "serve-trace-stdio": lambda tmp, moment, sig, request: drive_serve_trace(tmp, moment, sig, "stdio"),
    "serve-trace-sse": lambda tmp, moment, sig, request: drive_serve_trace(tmp, moment, sig, "sse"),
    "serve-trace-streamable-http": lambda tmp, moment, sig, request: drive_serve_trace(tmp, moment, sig, "streamable-http"),
    "load": drive_load,
    "load-workers": lambda tmp, moment, sig, request: drive_load(tmp, moment, sig, request, workers=2),
    "load-ui": lambda tmp, moment, sig, request: drive_load(tmp, moment, sig, request, ui=True),
    "lab-up": lambda tmp, moment, sig, request: drive_lab_up(tmp, moment, sig),
    "lab-run": lambda tmp, moment, sig, request: drive_lab_run(tmp, moment, sig),
    "run": lambda tmp, moment, sig, request: drive_run(tmp, moment, sig),
}


def signals_of(name: str, moment: str) -> tuple[int, ...]:
    """The signals `name` takes at `moment`: all three, or its sample's one (none: not sampled)."""
    if name not in SAMPLED:
        return STOP_SIGNALS
    sampled = SAMPLED[name].get(moment)
    return () if sampled is None else (sampled,)


TABLE = [
    pytest.param(name, moment, sig, id=f"{name}-{moment}-{signal_id(sig)}",
                 marks=() if (name, moment) in FAST else pytest.mark.slow)
    for name, moments in ROWS.items() for moment in moments for sig in signals_of(name, moment)
]


@pytest.mark.parametrize(("name", "moment", "sig"), TABLE)
def test_a_stop_signal_ends_the_command_cleanly(tmp_path: Path, request: pytest.FixtureRequest, name: str, moment: str, sig: int) -> None:
    DRIVERS[name](tmp_path, moment, sig, request)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=signal_id)
def test_mitmdump_with_the_addon_stops_though_started_with_the_stop_signals_blocked(tmp_path: Path, request: pytest.FixtureRequest,
                                                                                    sig: int) -> None:
    # A host's thread that blocks them passes the mask on across exec: the signal stayed pending, and
    # mitmdump ran on, the trace's session left open.
    drive_mitmdump(tmp_path, HANDSHAKE, sig, request, blocked=STOP_SIGNALS)
