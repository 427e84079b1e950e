"""The addon's hooks driven directly (mitmproxy's test flows), HAR export, and the commands."""

import asyncio
import gzip
import logging
import signal
import subprocess
import sys
import zlib
from pathlib import Path

import brotli
import orjson
import pytest
from click.testing import CliRunner
from mitmproxy import http
from mitmproxy.test import taddons, tflow

from mcpbench.record import ADDON_PATH
from mcpbench.record import sessions
from mcpbench.record.addon import make_addons
from mcpbench.protocol.http import legacy_session_key
from mcpbench.record.sessions import conn_key
from mcpbench.record.exchange import LATIN1, url_of, wire_text
from mcpbench.record.cli import addon_path
from mcpbench.telemetry.cli import export
from mcpbench.record.har import to_har
from mcpbench.proxies.host import parse_listen, parse_upstream
from mcpbench.protocol.errors import TargetError
from mcpbench.trace.reader import read_trace
from tests.record.helpers import record_command
from tests.support.servers import REPO_ROOT

SSE_BODY = (
    b": ping - 2026-12-02 09:39:06\r\n\r\n"
    b"id: 0\r\ndata:\r\n\r\n"  # a priming event: no message
    b"event: message\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\r\n\r\n"
    b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\r\n\r\n"
)
REQUEST = (
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":"p",'
    b'"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
)


@pytest.mark.parametrize(
    ("endpoint", "key"),
    [
        ("/messages/?session_id=ab12", "ab12"),
        ("/messages?sessionId=XY", "XY"),
        ("http://h:1/m?sid=1&x=2", "sid=1&x=2"),
        ("/messages/abc", "/messages/abc"),
        ("  /m?token=t  ", "t"),
    ],
)
def test_legacy_session_key(endpoint: str, key: str) -> None:
    assert legacy_session_key(endpoint) == key


def test_conn_key() -> None:
    assert conn_key("9fcd75a7-eca7-4c1b-9d2e-000000000000") == "conn-9fcd75a7eca7"


@pytest.mark.parametrize(("url", "recorded"), [
    ("http://127.0.0.1:8000/mcp", "http://127.0.0.1:8000/mcp"),
    ("https://[::1]:8443/mcp?a=b", "https://[::1]:8443/mcp?a=b"),
    ("http://example.com/x%20y", "http://example.com:80/x%20y"),  # the port always written
])
def test_parts_read_from_message_data_are_what_mitmproxy_properties_give(url: str, recorded: str) -> None:
    """The addon reads an exchange's parts from mitmproxy's message data, with caches: the same
    strings as mitmproxy's properties, also for bytes that are not ASCII."""
    request = http.Request.make("post", url, b"{}")
    request.data.method = b"po\xffst"
    response = http.Response.make(404, b"")
    for reason in (b"Not Found", b"Nicht gefunden \xe4", b"\xff\xfe"):
        response.data.reason = reason
        assert wire_text(response.data.reason, LATIN1) == response.reason
    assert wire_text(request.data.method).upper() == request.method
    assert wire_text(request.data.http_version) == request.http_version
    for _ in range(2):  # the second time from the cache
        assert url_of(request, request.path) == recorded


def test_parse_upstream_and_listen() -> None:
    assert parse_upstream("http://127.0.0.1:8000/mcp") == ("http://127.0.0.1:8000", "/mcp")
    assert parse_upstream("https://example.org") == ("https://example.org", "")
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:8081") == ("::1", 8081)
    for bad in ("ftp://x", "127.0.0.1:8000"):
        with pytest.raises(TargetError):
            parse_upstream(bad)
    with pytest.raises(TargetError):
        parse_listen("8081")


def _record(tmp_path: Path, chunks: list[bytes], on_chunk=None, encoding: str | None = None) -> list[dict]:
    """Run one streamed POST through the hooks, the body cut into `chunks`; the trace's events.

    `on_chunk(addon)` runs after each chunk has been passed on; `encoding` is the response's
    Content-Encoding.
    """
    out = tmp_path / (f"{len(chunks)}.jsonl" if encoding is None else f"{len(chunks)}-{encoding}.jsonl")
    addons = make_addons()
    (addon,) = addons
    with taddons.context(*addons) as tctx:
        tctx.configure(addon, mcpbench_out=str(out))
        flow = tflow.tflow()
        flow.request = http.Request.make(
            "POST", "http://127.0.0.1:8000/mcp", REQUEST,
            {"content-type": "application/json", "mcp-session-id": "s1", "authorization": "Bearer hidden",
             "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "slow"},
        )
        addon.request(flow)
        headers = {"content-type": "text/event-stream", "mcp-session-id": "s1"}
        if encoding:
            headers["content-encoding"] = encoding
        flow.response = http.Response.make(200, b"", headers)
        addon.responseheaders(flow)
        for chunk in chunks:
            assert flow.response.stream(chunk) == chunk  # passed on unchanged
            if on_chunk is not None:
                on_chunk(addon)
        flow.response.stream(b"")
        addon.response(flow)
        addon.done()
    return list(read_trace(out))


def _shape(events: list[dict]) -> list[tuple]:
    return [(e["kind"], e.get("dir"), e.get("msg"), e.get("comment"), e.get("id"), e.get("sse"), e.get("code")) for e in events[1:]]


def test_sse_chunks_split_anywhere(tmp_path: Path) -> None:
    whole = _record(tmp_path, [SSE_BODY])
    bytewise = _record(tmp_path, [SSE_BODY[i : i + 1] for i in range(len(SSE_BODY))])
    assert _shape(whole) == _shape(bytewise)
    kinds = [e["kind"] for e in whole[1:]]
    assert kinds == ["message", "stream", "sse", "sse", "message", "message", "stream", "http"]
    assert whole[1]["session"] == "s1" and whole[1]["http"]["headers"]["authorization"].startswith("redacted:")
    assert whole[5]["sse"] == {"event": "message", "id": "1"}
    assert whole[-2]["event"] == "close" and whole[-2]["events"] == 3 and whole[-2]["bytes"] == len(SSE_BODY)
    assert not [e for e in whole if e["kind"] == "violation"]


def test_sse_chunks_are_recorded_after_they_are_passed_on(tmp_path: Path) -> None:
    """On mitmproxy's event loop a chunk is recorded in a callback of the same loop turn, once
    mitmproxy has forwarded it; any later hook records what is still queued first, so the trace is
    the same as when every chunk is recorded at once."""
    chunks = [SSE_BODY[:70], SSE_BODY[70:150], SSE_BODY[150:]]
    queued = []

    async def on_the_loop() -> list[dict]:
        return _record(tmp_path / "loop", chunks, lambda addon: queued.append(len(addon.chunks)))

    (tmp_path / "loop").mkdir()
    deferred = asyncio.run(on_the_loop())
    assert queued == [1, 2, 3]  # nothing recorded in the stream callable itself
    assert _shape(deferred) == _shape(_record(tmp_path, chunks))
    assert [e["kind"] for e in deferred[1:]] == ["message", "stream", "sse", "sse", "message", "message", "stream", "http"]


@pytest.mark.parametrize(("encoding", "compress"), [("gzip", gzip.compress), ("deflate", zlib.compress), ("br", brotli.compress)])
def test_compressed_sse_is_passed_on_untouched_and_recorded_decoded(tmp_path: Path, encoding, compress) -> None:
    packed = compress(SSE_BODY)
    step = max(1, len(packed) // 7)
    recorded = _record(tmp_path, [packed[i : i + step] for i in range(0, len(packed), step)], encoding=encoding)
    assert _shape(recorded) == _shape(_record(tmp_path, [SSE_BODY]))
    assert [e["bytes"] for e in recorded if e.get("event") == "close"] == [len(packed)]  # bytes on the wire


def test_sse_in_an_unknown_encoding_is_a_violation(tmp_path: Path) -> None:
    recorded = _record(tmp_path, [b"\x28\xb5\x2f\xfd whatever"], encoding="zstd")
    assert [e["code"] for e in recorded if e["kind"] == "violation"] == ["sse-undecodable"]
    assert not [e for e in recorded if e["kind"] == "message" and e["dir"] == "s2c"]


def test_truncated_sse_is_a_violation(tmp_path: Path) -> None:
    events = _record(tmp_path, [SSE_BODY + b"event: message\r\ndata: {\"jsonrpc\""])
    broken = [e for e in events if e["kind"] == "violation"]
    assert [e["code"] for e in broken] == ["sse-truncated"] and "jsonrpc" in broken[0]["raw"]


def test_least_recently_active_session_state_is_dropped_and_picked_up_again(tmp_path: Path, monkeypatch) -> None:
    """Sessions never DELETEd must not grow the addon's memory without bound; one that comes back after
    its state was dropped reads as joined, not as a request before initialize."""
    monkeypatch.setattr(sessions, "MAX_LIVE_SESSIONS", 2)
    out = tmp_path / "t.jsonl"
    addons = make_addons()
    (addon,) = addons
    seen = []
    with taddons.context(*addons) as tctx:
        tctx.configure(addon, mcpbench_out=str(out))
        for n, sid in enumerate(["a", "b", "c", "a"], 1):
            flow = tflow.tflow()
            body = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"}}' % n
            flow.request = http.Request.make(
                "POST", "http://127.0.0.1:8000/mcp", body,
                {"content-type": "application/json", "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"},
            )
            addon.request(flow)
            flow.response = http.Response.make(200, b'{"jsonrpc":"2.0","id":%d,"result":{}}' % n, {"content-type": "application/json"})
            addon.responseheaders(flow)
            addon.response(flow)
            seen.append(addon.sessions.keys())
        addon.done()
    assert seen == [["a"], ["a", "b"], ["b", "c"], ["c", "a"]]
    trace = list(read_trace(out))
    assert len([e for e in trace if e["kind"] == "message"]) == 8
    assert [e for e in trace if e["kind"] == "violation"] == []


def test_har_export(tmp_path: Path) -> None:
    events = _record(tmp_path, [SSE_BODY])
    har = to_har(iter(events))["log"]
    assert har["version"] == "1.2" and len(har["entries"]) == 1
    entry = har["entries"][0]
    assert entry["request"]["method"] == "POST" and orjson.loads(entry["request"]["postData"]["text"])["id"] == 7
    text = entry["response"]["content"]["text"]
    assert text.count("event: message") == 2 and ": ping" in text and entry["response"]["status"] == 200
    assert entry["_mcpbench"]["session"] == "s1"
    trace = tmp_path / "1.jsonl"
    result = CliRunner().invoke(export, ["--har", str(trace)])
    assert result.exit_code == 0 and orjson.loads(result.stdout_bytes)["log"]["entries"]


def test_export_needs_a_format_and_a_readable_trace(tmp_path: Path) -> None:
    assert CliRunner().invoke(export, [str(tmp_path / "x.jsonl")]).exit_code == 2
    result = CliRunner().invoke(export, ["--har", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2 and "cannot read trace" in result.output


def test_addon_path() -> None:
    result = CliRunner().invoke(addon_path)
    assert result.exit_code == 0 and Path(result.output.strip()) == ADDON_PATH and ADDON_PATH.is_file()


def test_record_command(tmp_path: Path, http_server) -> None:
    """`mcpbench record` prints the URL to use; Ctrl-C ends it with the trace complete."""
    import anyio
    from mcp import Client

    out = tmp_path / "t.jsonl"
    with record_command(http_server.url, out) as (proc, url):

        async def main():
            with anyio.fail_after(30):
                async with Client(url, mode="legacy") as client:
                    return (await client.call_tool("echo", {"text": "hi"})).content[0].text

        assert anyio.run(main) == "hi"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 130  # 128 + SIGINT, the trace complete
        assert b"wrote" in proc.stderr.read()
    events = list(read_trace(out))
    assert any(e["kind"] == "message" and e["msg"].get("method") == "tools/call" for e in events)
    assert any(e["kind"] == "http" and e["method"] == "DELETE" for e in events)


def test_record_command_rejects_a_bad_upstream() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mcpbench", "record", "--upstream", "ftp://x"],
        cwd=REPO_ROOT, capture_output=True, timeout=60,
    )
    assert proc.returncode == 2 and proc.stderr.decode().count("\n") == 1 and b"Traceback" not in proc.stderr


def test_method_header_problems() -> None:
    from mcpbench.protocol.http import method_header_problems
    from mcpbench.protocol.jsonrpc import Request

    call = Request(id=1, method="tools/call", params={"name": "echo"})
    assert method_header_problems(call, {"mcp-method": "tools/call", "mcp-name": "echo"}, version="2026-07-28") == []
    assert [c for c, _ in method_header_problems(call, {}, version="2026-07-28")] == ["missing-method-header", "missing-name-header"]
    assert method_header_problems(call, {}, version="2025-11-25") == []
    assert [c for c, _ in method_header_problems(call, {"mcp-method": "tools/list", "mcp-name": "x"}, version=None)] == [
        "method-header-mismatch", "name-header-mismatch"
    ]


def test_mitmproxy_streaming_line_is_dropped_while_recording(tmp_path: Path, caplog) -> None:
    """The addon streams every SSE answer; mitmproxy's line for each is dropped, its other lines kept."""
    server_log = logging.getLogger("mitmproxy.proxy.server")
    (addon,) = make_addons()
    with caplog.at_level(logging.INFO), taddons.context(addon) as tctx:
        tctx.configure(addon, mcpbench_out=str(tmp_path / "t.jsonl"))
        server_log.info("Streaming response from 127.0.0.1.")
        server_log.info("client connect")
        addon.done()
        server_log.info("Streaming response from 127.0.0.2.")
    assert [r.getMessage() for r in caplog.records if r.name == server_log.name] == [
        "client connect", "Streaming response from 127.0.0.2.",
    ]


def test_a_reason_phrase_is_recorded_as_mitmproxy_reads_it(tmp_path: Path) -> None:
    """Reason phrases are ISO-8859-1 on the wire (mitmproxy's `Response.reason`), not UTF-8."""
    out = tmp_path / "reason.jsonl"
    (addon,) = make_addons()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, mcpbench_out=str(out))
        flow = tflow.tflow()
        flow.request = http.Request.make("POST", "http://127.0.0.1:8000/mcp", REQUEST, {"content-type": "application/json"})
        addon.request(flow)
        flow.response = http.Response.make(200, b'{"jsonrpc":"2.0","id":1,"result":{}}', {"content-type": "application/json"})
        flow.response.data.reason = b"Tr\xe8s bien"
        addon.responseheaders(flow)
        addon.response(flow)
        addon.done()
    (event,) = [e for e in read_trace(out) if e["kind"] == "http"]
    assert event["reason"] == "Très bien" == flow.response.reason
