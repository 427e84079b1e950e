"""`serve-trace --on-miss forward URL`: recorded calls from the trace, the rest from a live reference server."""

import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.sse import sse_client

from mcpbench.protocol.client import Failed
from mcpbench.protocol.http import Failure
from mcpbench.replay.forward import _Upstream
from mcpbench.system.target import parse_target
from tests.record.helpers import peer_server
from tests.replay.helpers import LIST_CHANGED, TIMEOUT, cli, mock_server, notify_trace, text_of
from tests.support.mcp_client import SAMPLED_PREFIX, sample
from tests.support.recordings import MODES
from tests.support.servers import HOST, reference_server, stdio_params

# The recorded echo answer is rewritten, so an answer from the trace cannot pass for a live one.
RECORDED = "recorded héllo"
QUESTION = "what is forwarded?"  # never recorded: the live server asks the client


def doctored(trace: Path, out: Path) -> Path:
    """`trace` with the answer to echo "héllo" changed to RECORDED."""
    text = trace.read_text(encoding="utf-8")
    changed = text.replace('{"text":"héllo","type":"text"}', '{"text":"%s","type":"text"}' % RECORDED).replace(
        '"structuredContent":{"result":"héllo"}', '"structuredContent":{"result":"%s"}' % RECORDED
    )
    assert changed != text, "the recording's echo answer has another shape"
    out.write_text(changed, encoding="utf-8")
    return out


async def check_forwarding(target: Any, mode: str) -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(target, mode=mode, sampling_callback=sample) as client:
            assert text_of(await client.call_tool("echo", {"text": "héllo"})) == RECORDED
            assert text_of(await client.call_tool("echo", {"text": "never recorded"})) == "never recorded"
            assert text_of(await client.call_tool("add", {"a": 20, "b": 3})) == "23"
            # The live server's sampling request reaches the SDK client through the mock.
            answer = await client.call_tool("ask", {"question": QUESTION})
            assert text_of(answer) == SAMPLED_PREFIX + QUESTION


@pytest.mark.parametrize("mode", MODES)
def test_unrecorded_requests_get_the_live_answer(recordings, http_server, tmp_path, mode):
    trace = doctored(recordings[mode], tmp_path / "doctored.jsonl")
    argv = [sys.executable, "-m", "mcpbench", "serve-trace", str(trace), "--on-miss", "forward", http_server.url]
    anyio.run(check_forwarding, stdio_params(argv), mode)


def test_forwarding_from_streamable_http(recordings, http_server, tmp_path):
    trace = doctored(recordings["legacy"], tmp_path / "doctored.jsonl")
    with mock_server(trace, "streamable-http", "--on-miss", "forward", http_server.url) as url:
        anyio.run(check_forwarding, url, "legacy")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/mcp", "stdio:", "http://"])
def test_a_bad_forward_url_is_one_line_and_exit_2(recordings, url):
    done = cli("serve-trace", str(recordings["legacy"]), "--on-miss", "forward", url, timeout=30)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("mcpbench: "), done.stderr


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_server_messages_outside_calls_reach_the_client(tmp_path, transport):
    """The live server's notification sent outside any request reaches the client of the mock.

    The peer's `notify` tool sends tools/list_changed unrelated to any request. The mock
    holds only the handshake, so `notify` is forwarded. Streamable HTTP: the upstream
    session opens the peer's GET stream, and the mock passes the notification on to the
    client's GET stream. Legacy SSE has one stream: the notification comes while the call
    runs and travels with it.
    """
    header_and_handshake = notify_trace(tmp_path / "notify.jsonl").read_bytes().splitlines()[:4]
    trace = tmp_path / "handshake.jsonl"
    trace.write_bytes(b"\n".join(header_and_handshake) + b"\n")
    seen: list[str] = []

    async def check(url: str) -> None:
        arrived = anyio.Event()

        async def on_message(message: Any) -> None:
            method = getattr(getattr(message, "root", message), "method", None)
            if method is not None:
                seen.append(method)
                if method == LIST_CHANGED:
                    arrived.set()

        with anyio.fail_after(TIMEOUT):
            target = sse_client(url) if transport == "sse" else url
            async with Client(target, mode="legacy", message_handler=on_message) as client:
                assert text_of(await client.call_tool("notify", {})) == "sent"
                await arrived.wait()

    upstream = f"http://{HOST}:{{port}}/mcp" if transport == "streamable-http" else f"sse+http://{HOST}:{{port}}/sse"
    with peer_server(transport) as peer, mock_server(trace, transport, "--on-miss", "forward", upstream.format(port=peer.port)) as url:
        anyio.run(check, url)
    assert seen.count(LIST_CHANGED) == 1


def test_a_lost_upstream_replaced_fails_what_is_still_in_flight_on_it():
    """A request still in flight on an upstream session that is being replaced (lost) fails at once, with
    a class that lets it go again on the new one, instead of waiting out its time."""
    with reference_server("streamable-http") as server:
        upstream = _Upstream(parse_target(server.url), hello=None, version="2025-11-25", timeout=TIMEOUT,
                             unsolicited=lambda message: None)
        replaced_while_running(upstream)


def replaced_while_running(upstream: _Upstream) -> None:
    items: list = []
    running = threading.Event()  # its first progress notification came: the call runs upstream

    def call() -> None:
        params = {"name": "slow", "arguments": {"seconds": 30.0, "steps": 30}, "_meta": {"progressToken": "p"}}
        for item in upstream.exchange("tools/call", params):
            items.append(item)
            running.set()

    waiting = threading.Thread(target=call)
    waiting.start()
    try:
        assert running.wait(TIMEOUT)
    finally:
        upstream.close(failing="the upstream session was lost")
    waiting.join(TIMEOUT)
    assert not waiting.is_alive() and isinstance(items[-1], Failed), items
    assert (items[-1].failure, items[-1].detail) == (Failure.CONNECT, "the upstream session was lost")
