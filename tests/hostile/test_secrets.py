"""Secrets planted everywhere a client or server can put one never reach any output.

Every planted value contains MARK. The outputs searched: the trace file, the HAR export, `inspect`
(text and JSON), replay reports, and mcpbench's own lines on stderr (error messages, banners). What
passes through a recorder to its peer is the observed session and is not an output.
"""

import contextlib
import http.server
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import orjson
import pytest

from mcpbench.trace.reader import TraceReader
from tests.hostile.helpers import EXIT_INPUT, MCPBENCH, assert_clean_failure, assert_no_traceback, run
from tests.support.http_thread import serving
from tests.support.servers import HOST, REPO_ROOT, free_port, stop_process, wait_for_port
from tests.support.traces import event, header, result, tool_call, write_trace

MARK = "S3CR3T"
# A bound on any one wait; not a timing assertion.
WAIT = 60.0


def secret(where: str) -> str:
    return f"{where}-{MARK}-{where[::-1]}"


def assert_no_secret(what: str, data: str | bytes) -> None:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    leaks = [line for line in text.splitlines() if MARK in line]
    assert not leaks, f"{what} leaks: {leaks[:3]}"


def own_lines(stderr: str) -> str:
    """mcpbench's own lines on stderr (a tee also passes its server's stderr through, untouched)."""
    return "\n".join(line for line in stderr.splitlines() if line.startswith("mcpbench"))


def assert_outputs_clean(trace: Path) -> None:
    """The trace and everything made from it: HAR, inspect's text and JSON."""
    assert_no_secret("trace", trace.read_bytes())
    assert len(list(TraceReader(trace))) > 1
    for args in (["export", "--har", str(trace)], ["inspect", str(trace)], ["inspect", "--json", str(trace)]):
        result = run(args)
        assert "Traceback" not in result.stderr, result.stderr
        assert_no_secret(" ".join(args[:2]), result.stdout + result.stderr)


class HostileUpstream(http.server.BaseHTTPRequestHandler):
    """An HTTP MCP "server" that answers with secrets in every place an answer has."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {"set-cookie": f"sid={secret('set-cookie')}", "location": f"http://{HOST}/next?token={secret('location')}"}
        if b"want-sse" in body:
            sse = (
                f": token={secret('sse-comment')}\n\n"
                f"event: custom\ndata: {{\"api_key\": \"{secret('sse-custom-data')}\"}}\n\n"
                f"data: not json password={secret('sse-junk')}\n\n"
                f"data: {{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{{\"password\":\"{secret('sse-message')}\"}}}}\n\n"
            ).encode()
            self._answer(200, "text/event-stream", sse, headers)
        elif b"want-error" in body:
            self._answer(500, "application/json", orjson.dumps({"error": {"password": secret("error-body")}}), headers)
        elif b"want-junk" in body:
            self._answer(200, "application/json", f'{{"password": "{secret("response-junk")}", oops'.encode(), headers)
        elif b"want-text" in body:
            self._answer(502, "text/plain", f"upstream said Authorization: Bearer {secret('text-body')}".encode(), headers)
        else:
            answer = {"jsonrpc": "2.0", "id": 1, "result": {"password": secret("response-field")}}
            self._answer(200, "application/json", orjson.dumps(answer), headers)

    def _answer(self, status: int, content_type: str, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


@contextlib.contextmanager
def hostile_upstream() -> Iterator[int]:
    with serving(HostileUpstream) as port:
        yield port


def rpc(method: str, id: int, params: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}


@pytest.mark.slow
def test_http_recording_keeps_no_secret_anywhere(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    port = free_port()
    with hostile_upstream() as upstream:
        argv = [*MCPBENCH, "record", "--upstream", f"http://{HOST}:{upstream}/mcp?api_key={secret('upstream-query')}",
                "--listen", f"{HOST}:{port}", "--out", str(trace), "--redact", "password", "--redact", "params.pin"]
        err_path = tmp_path / "record.stderr"
        with err_path.open("wb") as err:
            proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_for_port(HOST, port, proc=proc)
            headers = {
                "authorization": f"Bearer {secret('authorization')}",
                "cookie": f"c={secret('cookie')}",
                "x-api-key": secret("x-api-key"),
                "x-custom": f"Bearer {secret('custom-bearer')}",
                "referer": f"http://{HOST}/page?token={secret('referer')}",
                "accept": "application/json, text/event-stream",
                "content-type": "application/json",
            }
            url = f"http://{HOST}:{port}/mcp?api_key={secret('client-query')}"
            bodies = [
                orjson.dumps(rpc("initialize", 1, {"password": secret("request-field"), "pin": secret("request-path")})),
                f'{{"jsonrpc":"2.0","id":2,"method":"x","params":{{"password":"{secret("request-bad-json")}"'.encode(),
                orjson.dumps({"password": secret("request-not-rpc"), "api_key": secret("request-not-rpc-key")}),
                orjson.dumps(rpc("want-sse", 4)),
                orjson.dumps(rpc("want-error", 5)),
                orjson.dumps(rpc("want-junk", 6)),
                orjson.dumps(rpc("want-text", 7)),
            ]
            with httpx2.Client(timeout=WAIT) as client:
                for body in bodies:
                    client.post(url, content=body, headers=headers).read()
            proc.send_signal(signal.SIGINT)
            proc.wait(WAIT)
        finally:
            stop_process(proc)
    stderr = err_path.read_text(errors="replace")
    assert_no_traceback(stderr)
    assert "Traceback" not in stderr, stderr
    assert_no_secret("record's stderr", stderr)
    events = list(TraceReader(trace))
    # Everything was recorded (only redacted): 7 requests, the SSE comment, the violations.
    assert len([e for e in events if e["kind"] == "http"]) == len(bodies)
    assert any(e["kind"] == "sse" and "comment" in e for e in events)
    assert {e["code"] for e in events if e["kind"] == "violation"} >= {"not-json", "invalid-message"}
    assert_outputs_clean(trace)


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_stdio_recording_keeps_no_secret_anywhere(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    lines = [
        f"Authorization: Bearer {secret('stdout-header')}",
        f'{{"password": "{secret("stdout-bad-json")}"',
        f'{{"password": "{secret("stdout-not-rpc")}"}}',
        orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"password": secret("stdout-result")}}).decode(),
        f"token={secret('stdout-last-line')}",
    ]
    said = tmp_path / "said.txt"  # what the server writes, kept out of its command line
    said.write_text("\n".join(lines))
    server = (
        "import sys\n"
        "sys.stderr.write(open(sys.argv[1]).read().replace('token=', 'api_key=').splitlines()[-1] + '\\n')\n"
        "sys.stdin.buffer.read()\n"
        "sys.stdout.write(open(sys.argv[1]).read())\n"
        "sys.exit(4)\n"
    )
    argv = [sys.executable, "-c", server, str(said), "--token", secret("argv-flag"), f"--api-key={secret('argv-eq')}", f"API_KEY={secret('argv-env')}",
            f"http://user:{secret('argv-userinfo')}@{HOST}/"]
    stdin = orjson.dumps(rpc("tools/call", 1, {"password": secret("stdin-field")})) + b"\n" + f"junk secret={secret('stdin-junk')}\n".encode()
    proc = subprocess.run([*MCPBENCH, "tee", "--out", str(trace), "--redact", "password", "--", *argv],
                          input=stdin, capture_output=True, cwd=REPO_ROOT, timeout=WAIT)
    stderr = proc.stderr.decode(errors="replace")
    assert_no_traceback(stderr)
    assert proc.returncode == 4 and "Traceback" not in stderr  # the server's status, passed on
    assert MARK in proc.stdout.decode()  # the session itself passes untouched
    assert "exited with status 4" in stderr
    assert_no_secret("tee's own lines", own_lines(stderr))
    events = list(TraceReader(trace))
    assert [e["kind"] for e in events if e["kind"] == "stderr"] == ["stderr"]
    assert len([e for e in events if e["kind"] == "violation" and "raw" in e]) == 5  # junk kept, redacted
    assert_outputs_clean(trace)


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    path = tmp_path / "rec.jsonl"
    return write_trace(path, [event(2.0, "s", "c2s", rpc("tools/list", 1), transport="streamable-http")],
                       header=header("streamable-http"))


def test_replay_error_and_report_keep_no_secret(recorded: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    target = f"http://{HOST}:{free_port()}/mcp?api_key={secret('replay-target')}"
    result = run(["replay", str(recorded), "--target", target, "--timeout", "5", "--report", str(report)])
    assert "Traceback" not in result.stderr and result.returncode != 0, result.stderr
    assert_no_secret("replay output", result.stdout + result.stderr)
    assert report.exists()
    assert_no_secret("replay report", report.read_bytes())


@pytest.mark.parametrize(
    "args",
    [
        ["record", "--upstream", f"ftp://{HOST}/mcp?api_key={secret('bad-upstream')}"],
        ["replay", "{trace}", "--target", f"gopher://{HOST}/mcp?token={secret('bad-target')}"],
        ["load", "--target", f"gopher://user:{secret('bad-load-target')}@{HOST}/mcp", "--from-trace", "{trace}"],
    ],
    ids=["record-upstream", "replay-target", "load-target"],
)
def test_error_messages_keep_no_secret(recorded: Path, args: list[str]) -> None:
    result = run([a.format(trace=recorded) for a in args])
    line = assert_clean_failure(result, EXIT_INPUT)
    assert_no_secret("the error line", line)
    assert "redacted:" in line  # the URL is still named, its secret fingerprinted


def test_tee_start_failure_keeps_no_secret(tmp_path: Path) -> None:
    result = run(["tee", "--out", str(tmp_path / "t.jsonl"), "--", str(tmp_path / "no-such-server"), "--token", secret("missing-server")])
    banner = "mcpbench: recording to "  # said before the server is started
    result.stderr = "\n".join(line for line in result.stderr.splitlines() if not line.startswith(banner))
    line = assert_clean_failure(result, 127, "no-such-server")
    assert_no_secret("the error line", line)


@pytest.mark.slow
def test_load_results_keep_no_secret_of_the_target(tmp_path: Path, http_server) -> None:
    scenario = tmp_path / "scenario.yaml"
    out = tmp_path / "out"
    target = f"{http_server.url}?api_key={secret('load-target')}"
    # A few calls, not 2 s: on a loaded machine 2 s could end before the first one (0 counted).
    scenario.write_text(f"target: {target}\nmix:\n  - call: tools/list\nusers: 1\nspawn_rate: 5\ncalls: 3\nduration: 60s\n")
    result = run(["load", str(scenario), "--out", str(out)])
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert_no_secret("load's output", result.stdout + result.stderr)
    public = orjson.loads((out / "scenario.json").read_bytes())
    assert public["target"].startswith(http_server.url + "?api_key=redacted:")  # named, not shown
    assert orjson.loads((out / "summary.json").read_bytes())["total"]["count"] > 0  # the real target was used
    for path in out.iterdir():
        assert_no_secret(path.name, path.read_bytes())


def test_replay_with_the_recordings_rules_compares_fingerprints_and_shows_no_live_secret(tmp_path: Path) -> None:
    from mcpbench.trace.redact import fingerprint

    value = secret("live-answer")
    trace = tmp_path / "rec.jsonl"
    write_trace(trace, [tool_call(2.0, 1, "login", session="s"),
                        result(3.0, 1, {"password": fingerprint(value)}, session="s")],  # recorded with --redact password
                header=header())
    server = tmp_path / "server.py"
    answer = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"password": value}}).decode()
    server.write_text(f"import sys\nfor line in sys.stdin:\n    print({answer!r}, flush=True)\n")
    report = tmp_path / "report.json"
    out = tmp_path / "replay.jsonl"
    done = run(["replay", str(trace), "--target", f"stdio:{sys.executable} {server}", "--redact", "password",
                "--report", str(report), "--out", str(out), "-v"])
    assert done.returncode == 0, done.stdout + done.stderr  # the same secret: nothing changed
    assert "Traceback" not in done.stderr
    for name, data in (("stdout", done.stdout + done.stderr), ("report", report.read_bytes()), ("replay trace", out.read_bytes())):
        assert_no_secret(name, data)
