"""Spans over OTLP/HTTP, received by a real receiver in the test (`tests/support/otlp.py`, protobuf
decoded with opentelemetry-proto): names, attributes, parents, a traceparent carried through, errors."""

import socket
import subprocess
import sys
import threading

import pytest

from mcpbench.companions.options import signal_url
from mcpbench.lab.peers.drive import drive, sdk_target
from mcpbench.load.samples import records as read_records
from mcpbench.protocol.errors import BadTargetError
from mcpbench.telemetry import otlp
from mcpbench.telemetry.calls import TraceParent
from mcpbench.telemetry.conventions import OTHER, Folder
from mcpbench.trace.reader import read_trace
from tests.record.helpers import record_proxy
from tests.support.otlp import OtlpReceiver
from tests.support.recordings import stdio_target
from tests.support.servers import REPO_ROOT, free_port, reference_server
from tests.telemetry.helpers import CALLER_SPAN, CALLER_TRACE, MESSAGES, by_name, one, tee_session

TOOLS = ("echo", "add", "fail", "big", "slow", "ask")


def export(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcpbench", "export", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("text", "expected"), [
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceParent(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 1)),
    ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),  # an all-zero trace id is invalid
    ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),  # version ff is forbidden
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", None),
    ("00-xyz92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),
    (17, None),
])
def test_traceparent_is_read_as_w3c_trace_context_says(text, expected):
    assert TraceParent.parse(text) == expected


@pytest.mark.parametrize(("url", "expected"), [
    ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
    ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
    ("http://collector/v1/traces", "http://collector/v1/traces"),
    ("https://collector/otlp/v1/metrics", "https://collector/otlp/v1/traces"),
    ("http://collector/otlp", "http://collector/otlp/v1/traces"),
])
def test_the_otlp_url_is_a_base_or_a_signal_endpoint(url, expected):
    assert signal_url(url, "/v1/traces") == expected


def test_a_url_that_is_no_otlp_http_url_is_refused():
    with pytest.raises(BadTargetError, match="--otlp 'grpc://x:4317'"):
        signal_url("grpc://x:4317", "/v1/traces")


def test_label_values_beyond_the_limit_fold_into_other():
    fold = Folder(limit=2)
    assert [fold(name) for name in ("a", "b", "c", "a", "d", "b")] == ["a", "b", OTHER, "a", OTHER, "b"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_export_sends_a_span_per_call_under_its_session(recordings, mode):
    with OtlpReceiver() as receiver:
        result = export("--otlp", receiver.url, "--service-name", "shop-agent", str(recordings[mode]))
        assert result.returncode == 0, result.stderr
        assert "12 spans sent" in result.stderr if mode == "legacy" else "spans sent" in result.stderr
        spans = receiver.wait_for(lambda spans: any(span["name"] == "mcp.session" for span in spans))
    session = one(spans, "mcp.session")
    calls = [span for span in spans if span is not session]
    assert session["parent"] is None and session["kind"] == "INTERNAL"
    assert {span["trace_id"] for span in calls} == {session["trace_id"]}
    assert {span["parent"] for span in calls} == {session["span_id"]}
    assert {f"tools/call {tool}" for tool in TOOLS} <= set(by_name(spans))
    era = "handshake" if mode == "legacy" else "2026-07-28"
    for span in calls:
        attributes = span["attributes"]
        assert attributes["network.transport"] == "pipe" and attributes["mcpbench.transport"] == "stdio"
        assert attributes["mcpbench.era"] == era and attributes["mcp.protocol.version"]
        assert span["resource"]["service.name"] == "shop-agent"
        assert span["start"] <= span["end"]
    echo = by_name(spans)["tools/call echo"][0]
    assert echo["kind"] == "CLIENT" and echo["status"] == "UNSET"
    assert echo["attributes"]["gen_ai.tool.name"] == "echo" and echo["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert echo["attributes"]["mcp.method.name"] == "tools/call" and echo["attributes"]["jsonrpc.request.id"].isdigit()
    fail = one(spans, "tools/call fail")
    assert fail["status"] == "ERROR" and fail["attributes"]["error.type"] == "tool_error" and "fails" in fail["status_message"]
    slow = by_name(spans)["tools/call slow"][0]
    assert [event["name"] for event in slow["events"]] == ["notifications/progress"] * 2
    assert slow["events"][0]["attributes"]["progress"] > 0
    read = one(spans, "resources/read")  # a resource URI is no span name: it is an attribute
    assert read["attributes"]["mcp.resource.uri"] == "mcpbench://greeting"
    assert one(spans, "prompts/get summarize")["attributes"]["gen_ai.prompt.name"] == "summarize"
    if mode == "legacy":  # the server's request to the client: the client's SERVER span
        sampling = one(spans, "sampling/createMessage")
        assert sampling["kind"] == "SERVER" and sampling["parent"] == session["span_id"]


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_tee_sends_spans_as_it_records_and_a_traceparent_continues_the_callers_trace(tmp_path):
    with OtlpReceiver() as receiver:
        result = tee_session(tmp_path / "s.jsonl", ["--otlp", receiver.url])
        assert result.returncode == 0, result.stderr
        spans = receiver.wait_for(lambda spans: any(span["name"] == "mcp.session" for span in spans))
    assert "mcpbench: OTLP: 5 spans sent" in result.stderr and "0 dropped" in result.stderr, result.stderr
    session = one(spans, "mcp.session")
    echo = one(spans, "tools/call echo")
    assert echo["trace_id"] == CALLER_TRACE and echo["parent"] == CALLER_SPAN  # the caller's trace goes on
    assert echo["links"] == [{"trace_id": session["trace_id"], "span_id": session["span_id"]}]
    assert one(spans, "tools/call fail")["attributes"]["error.type"] == "tool_error"
    missing = one(spans, "no/such/method")
    assert missing["status"] == "ERROR" and missing["attributes"]["error.type"] == "-32601"
    assert missing["attributes"]["rpc.response.status_code"] == "-32601" and missing["parent"] == session["span_id"]
    assert session["attributes"]["mcp.protocol.version"] == "2025-06-18"


@pytest.mark.slow  # the live exporter retries a refused connection for its whole timeout (3 s), then the tee stops
def test_tee_with_an_unreachable_endpoint_records_all_and_counts_what_it_dropped(tmp_path):
    trace = tmp_path / "s.jsonl"
    result = tee_session(trace, ["--otlp", f"http://127.0.0.1:{free_port()}"])
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "connection refused" in warnings[0], result.stderr
    assert "0 spans sent" in result.stderr and "5 dropped" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    messages = [event for event in read_trace(trace) if event["kind"] == "message"]  # the session, recorded whole
    assert len([m for m in messages if m["dir"] == "c2s"]) == len(MESSAGES)
    assert {m["msg"].get("id") for m in messages if m["dir"] == "s2c" and "method" not in m["msg"]} == {1, 2, 3, 4}


def test_a_live_shipper_that_gives_up_on_a_batch_counts_it_once(monkeypatch):
    """`close` gives up on a batch still under way and counts it dropped; whatever the sending thread
    learns of that batch later changes neither count (they were said) nor says a second warning."""
    from opentelemetry.sdk.trace import TracerProvider

    monkeypatch.setattr(otlp, "CLOSE_SECONDS", 0.1)
    tracer = TracerProvider().get_tracer("test")
    said: list[str] = []
    with OtlpReceiver(held=True) as receiver:
        shipper = otlp.SpanShipper(receiver.url, live=True, warn=said.append)
        for name in ("a", "b", "c"):
            span = tracer.start_span(name)
            span.end()
            shipper.add(span)
        receiver.wait_for(lambda spans: len(spans) == 3)  # the interval sent them: the request is under way, held
        shipper.close()
        at_close = (shipper.exported, shipper.dropped)
        receiver.release()  # the endpoint takes the batch after all
        shipper._thread.join(otlp.LIVE_TIMEOUT + 10)
    assert not shipper._thread.is_alive()
    assert at_close == (shipper.exported, shipper.dropped) == (0, 3)
    assert said == [f"mcpbench: warning: OTLP export to {shipper.url} failed (no answer within 0.1 s); "
                    "the capture goes on, spans not sent are counted"]


@pytest.mark.slow  # the exporter retries a 503 for its whole timeout (10 s)
def test_export_to_a_refusing_endpoint_fails_in_one_line(recordings):
    with OtlpReceiver(status=503) as receiver:
        result = export("--otlp", receiver.url, str(recordings["legacy"]))
        assert receiver.requests >= 1
    assert result.returncode == 3 and result.stderr.count("\n") == 1, result.stderr
    assert "mcpbench: OTLP endpoint" in result.stderr and "service unavailable" in result.stderr, result.stderr


@pytest.mark.slow  # the exporter retries a refused connection for its whole timeout (10 s)
def test_export_to_no_endpoint_fails_in_one_line(recordings):
    result = export("--otlp", f"http://127.0.0.1:{free_port()}", str(recordings["legacy"]))
    assert result.returncode == 3 and result.stderr.count("\n") == 1, result.stderr
    assert "connection refused" in result.stderr


@pytest.mark.parametrize("command", ["tee", "record"])
def test_a_metrics_address_in_use_is_one_line_and_exit_3(command):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        address = f"127.0.0.1:{busy.getsockname()[1]}"
        argv = ["--metrics", address, "--", "true"] if command == "tee" else ["--metrics", address, "--upstream", "http://127.0.0.1:9/mcp"]
        result = subprocess.run([sys.executable, "-m", "mcpbench", command, *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 3 and result.stderr.count("\n") == 1, result.stderr
    assert f"cannot listen on {address}" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("transport", "mode"), [("streamable-http", "legacy"), ("streamable-http", "auto"), ("sse", "legacy")])
def test_record_sends_spans_live_on_both_http_transports(tmp_path, transport, mode):
    with OtlpReceiver() as receiver, reference_server(transport) as server:
        with record_proxy(server.url, tmp_path / "s.jsonl", extra=["--otlp", receiver.url]) as (url, proc):
            drive(sdk_target(url, transport), mode)
        handshake = mode == "legacy"
        spans = receiver.wait_for(lambda spans: "prompts/get summarize" in by_name(spans) and (not handshake or "mcp.session" in by_name(spans)))
    names = by_name(spans)
    assert {f"tools/call {tool}" for tool in TOOLS} <= set(names), sorted(names)
    sessions = names.get("mcp.session", [])
    parents = {span["parent"] for span in spans if span["name"] != "mcp.session"}
    assert parents == ({sessions[0]["span_id"]} if handshake else {None})  # 2026-07-28: no session, each call its own trace
    echo = names["tools/call echo"][0]
    attributes = echo["attributes"]
    assert attributes["network.transport"] == "tcp" and attributes["network.protocol.name"] == "http"
    assert attributes["mcpbench.transport"] == transport and attributes["server.port"] == server.port
    if mode == "legacy":
        assert len(sessions) == 1 and attributes["mcp.session.id"] == sessions[0]["attributes"]["mcp.session.id"]
        assert attributes["mcpbench.era"] == "handshake"
    else:
        assert sessions == [] and "mcp.session.id" not in attributes and attributes["mcpbench.era"] == "2026-07-28"


@pytest.mark.slow
def test_replay_sends_its_calls_as_spans(recordings):
    with OtlpReceiver() as receiver:
        result = subprocess.run(
            [sys.executable, "-m", "mcpbench", "replay", str(recordings["legacy"]), "--target", stdio_target(), "--otlp", receiver.url],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        )
        assert result.returncode == 0, result.stderr
        spans = receiver.wait_for(lambda spans: any(span["name"] == "mcp.session" for span in spans))
    assert {f"tools/call {tool}" for tool in TOOLS} <= set(by_name(spans))
    session = one(spans, "mcp.session")
    assert {span["parent"] for span in spans if span is not session} == {session["span_id"]}
    assert "spans sent" in result.stderr and "0 dropped" in result.stderr


@pytest.mark.slow
def test_load_sends_each_step_as_a_span_under_its_client_session(tmp_path, http_server):
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(f"target: {http_server.url}\nmix:\n  - call: tools/call\n    tool: echo\n    arguments: {{text: hi}}\n"
                        "  - call: tools/list\nusers: 2\nspawn_rate: 20\nduration: 4s\nthink_time: [0.05, 0.1]\n")  # 4 s: a busy machine starts Locust late
    with OtlpReceiver() as receiver:
        result = subprocess.run([sys.executable, "-m", "mcpbench", "load", str(scenario), "--out", str(tmp_path / "out"),
                                 "--otlp", receiver.url, "--service-name", "load-test"],
                                cwd=REPO_ROOT, capture_output=True, text=True, timeout=90)
        spans = list(receiver.spans)  # the export waits for each batch: all arrived before load exited
    assert result.returncode == 0, result.stdout + result.stderr
    samples = [line for line in read_records(tmp_path / "out" / "samples.jsonl") if "step" in line]
    sessions = [span for span in spans if span["name"] == "mcp.session"]
    steps = [span for span in spans if span["name"] != "mcp.session"]
    assert len(steps) == len(samples) and len(sessions) == len({sample["session"] for sample in samples}) == 2
    assert f"{len(spans)} spans sent" in result.stderr
    assert {span["parent"] for span in steps} == {session["span_id"] for session in sessions}
    assert {span["trace_id"] for span in steps} == {session["trace_id"] for session in sessions}
    echo = by_name(spans)["tools/call echo"][0]
    assert echo["kind"] == "CLIENT" and echo["status"] == "UNSET" and echo["start"] <= echo["end"]
    assert echo["attributes"]["gen_ai.tool.name"] == "echo" and echo["attributes"]["mcp.method.name"] == "tools/call"
    assert echo["attributes"]["mcpbench.transport"] == "streamable-http" and echo["attributes"]["server.address"] == "127.0.0.1"
    assert echo["resource"]["service.name"] == "load-test"


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_export_of_load_samples_gives_failures_their_class_and_skips_what_is_no_step(tmp_path):
    (tmp_path / "scenario.json").write_text('{"target": "http://10.1.2.3:8101/mcp"}')
    samples = tmp_path / "samples.jsonl"
    samples.write_bytes(
        b'{"t": 1796450268.5, "type": "sse handshake", "step": "resources/read mcpbench://greeting", "latency_ms": 4.0, "size": 9, "failure": null, "session": "7-1"}\n'
        b'{"reconnect": {"policy": "reinitialize", "extra_requests": 2}}\n'
        b'{"t": 1796450268.6, "type": "sse", "step": "tools/call echo", "latency_ms": 2.0, "size": 0, "failure": "http-5xx", '
        b'"detail": "HTTP 502", "session": "7-1"}\n'
    )
    with OtlpReceiver() as receiver:
        result = export("--otlp", receiver.url, "--load-samples", str(samples))
        spans = list(receiver.spans)
    assert result.returncode == 0, result.stderr
    assert "3 spans sent" in result.stderr and "(2 steps, 1 sessions)" in result.stderr
    read, echo, session = one(spans, "resources/read"), one(spans, "tools/call echo"), one(spans, "mcp.session")
    assert read["attributes"]["mcp.resource.uri"] == "mcpbench://greeting" and read["status"] == "UNSET"
    assert read["attributes"]["mcpbench.transport"] == "sse" and read["attributes"]["mcpbench.era"] == "handshake"
    assert echo["status"] == "ERROR" and echo["status_message"] == "HTTP 502" and echo["attributes"]["error.type"] == "http-5xx"
    assert echo["attributes"]["server.address"] == "10.1.2.3" and echo["attributes"]["server.port"] == 8101
    assert abs(echo["end"] - echo["start"] - 2_000_000) < 1_000  # 2 ms (a float of epoch seconds: ~240 ns apart)
    assert session["start"] == read["start"] and session["end"] == echo["end"] and session["attributes"]["mcpbench.failed"] == 1
