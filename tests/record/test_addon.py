"""The recording addon inside a real mitmdump, in front of official-SDK servers, driven by SDK clients.

Each test starts its own mitmdump (so it owns its trace); the reference servers are the shared ones of tests/conftest.py. The trace
is read after mitmdump has stopped (SIGTERM runs the `done` hooks, which complete it).
"""

import time
from collections import Counter
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import orjson
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from mcpbench.protocol.sse import SseEvent, SseParser
from mcpbench.trace.redact import fingerprint
from tests.record.helpers import (
    Capture,
    assert_paired,
    assert_same_messages,
    events,
    kinds,
    messages,
    mitmdump,
    peer_server,
)

# Per SDK call through the proxy on a busy 2-core machine: generous, but a hang still fails fast.
CALL_TIMEOUT = 20.0
SECRET = "s3cr3t-bearer-7f3a9c"
QUERY_SECRET = "k3y-in-the-url-91be"


def run(coro_fn, timeout: float = 60.0):
    async def bounded():
        with anyio.fail_after(timeout):
            return await coro_fn()

    return anyio.run(bounded)


def captured_client(url: str, mode: str, capture: Capture, headers: dict | None = None, **kwargs) -> tuple[Client, httpx2.AsyncClient]:
    http = httpx2.AsyncClient(transport=capture, headers=headers, timeout=httpx2.Timeout(CALL_TIMEOUT, read=60))
    return Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs), http


def captured_legacy_client(url: str, capture: Capture) -> Client:
    """An SDK client on the legacy transport whose HTTP goes through `capture`."""
    def factory(headers=None, timeout=None, auth=None):
        return httpx2.AsyncClient(transport=capture, headers=headers, timeout=timeout, auth=auth)

    return Client(sse_client(url, httpx_client_factory=factory), mode="legacy")


async def exercise(client: Client) -> None:
    """A bit of everything the reference server offers."""
    assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"
    assert (await client.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}
    assert (await client.call_tool("fail", {})).is_error
    tools = await client.list_tools()
    assert "echo" in {tool.name for tool in tools.tools}
    await client.read_resource("mcpbench://greeting")
    await client.get_prompt("summarize", {"topic": "MCP"})


def recorded_exercise(server, trace_path: Path, mode: str) -> list[dict]:
    """`exercise` through a mitmdump of its own in front of `server`: the trace's events, checked to
    hold what the client saw, paired, and free of violations."""
    capture = Capture()
    with mitmdump(server.port, trace_path) as proxy:
        async def main():
            client, http = captured_client(proxy.url("/mcp"), mode, capture)
            async with http, client:
                await exercise(client)

        run(main)
    trace = events(trace_path)
    assert_same_messages(trace, capture)
    assert_paired(trace)
    assert not kinds(trace, "violation"), kinds(trace, "violation")
    return trace


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_streamable_sse_answers(http_server, tmp_path: Path, mode: str) -> None:
    capture = Capture()
    with mitmdump(http_server.port, tmp_path / "t.jsonl") as proxy:
        async def main():
            client, http = captured_client(proxy.url("/mcp"), mode, capture)
            async with http, client:
                await exercise(client)
                # Progress notifications ride the call's own SSE stream.
                got = []
                await client.call_tool("slow", {"seconds": 0.2, "steps": 4}, progress_callback=lambda *a: got.append(a))
                assert len(got) == 4

        run(main)
    trace = events(proxy.trace)
    assert_same_messages(trace, capture)
    assert_paired(trace)
    assert not kinds(trace, "violation") and not kinds(trace, "error")
    c2s = messages(trace, "c2s")
    if mode == "legacy":
        # One session, named by the Mcp-Session-Id the initialize answer minted.
        sessions = {e["session"] for e in messages(trace)}
        assert len(sessions) == 1 and not next(iter(sessions)).startswith("conn-")
        assert c2s[0]["msg"]["method"] == "initialize"
        assert any(e["method"] == "DELETE" and e["status"] == 200 for e in kinds(trace, "http"))
        progress = [e for e in messages(trace, "s2c") if e["msg"].get("method") == "notifications/progress"]
        assert len(progress) == 4 and all(e["sse"]["event"] == "message" for e in progress)
    else:
        # 2026-07-28: no session; the _meta envelope and the Mcp-Method/Mcp-Name headers are recorded.
        assert all(e["session"].startswith("conn-") for e in messages(trace))
        calls = [e for e in c2s if e["msg"]["method"] == "tools/call"]
        assert calls and all(e["http"]["headers"]["mcp-method"] == "tools/call" for e in calls)
        assert all(e["http"]["headers"]["mcp-name"] == e["msg"]["params"]["name"] for e in calls)
        assert all("io.modelcontextprotocol/protocolVersion" in e["msg"]["params"]["_meta"] for e in calls)
    for event in messages(trace, "s2c"):
        assert event["http"]["status"] == 200 and event["flow"]
    for stream in kinds(trace, "stream"):
        assert stream["event"] in ("open", "close", "error")
    # Every exchange has one http event, after its messages.
    flows = {e["flow"] for e in messages(trace)}
    assert flows <= {e["flow"] for e in kinds(trace, "http")}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_json_answers(json_http_server, tmp_path: Path, mode: str) -> None:
    trace = recorded_exercise(json_http_server, tmp_path / "t.jsonl", mode)
    answers = messages(trace, "s2c")
    assert answers and all(e["http"]["content_type"].startswith("application/json") for e in answers)


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_stateless_server_is_recorded_without_sessions(stateless_http_server, tmp_path: Path) -> None:
    """A handshake against a `stateless_http` server mints no Mcp-Session-Id: every message is keyed
    by its own client connection (`conn-…`, the `conn` of its exchange), with no lifecycle alarms."""
    trace = recorded_exercise(stateless_http_server, tmp_path / "t.jsonl", "legacy")
    exchanges = {e["flow"]: e for e in kinds(trace, "http")}
    assert exchanges and not any("mcp-session-id" in (e.get("response_headers") or {}) for e in exchanges.values())
    recorded = messages(trace)
    assert any(e["msg"].get("method") == "initialize" for e in recorded)  # a handshake, yet no session
    for event in recorded:
        assert event["session"].startswith("conn-") and event["session"] == exchanges[event["flow"]]["conn"], event


@pytest.mark.slow  # several seconds of processes (`-m "not slow"` leaves it out)
def test_get_stream_delivers_while_open(tmp_path: Path) -> None:
    """A server notification on the GET stream reaches the client while the stream is still open."""
    with peer_server() as peer, mitmdump(peer.port, tmp_path / "t.jsonl") as proxy:
        async def main():
            seen = anyio.Event()

            async def on_message(message) -> None:
                if isinstance(message, types.ToolListChangedNotification):
                    seen.set()

            async with Client(proxy.url("/mcp"), mode="legacy", message_handler=on_message) as client:
                # The SDK opens its GET stream after `initialized`; a notification sent before the
                # stream is up is dropped, so ask again until one arrives (bounded).
                for _ in range(20):
                    await client.call_tool("notify", {})
                    with anyio.move_on_after(0.5):
                        await seen.wait()
                    if seen.is_set():
                        break
                assert seen.is_set(), "no notification reached the client through the open GET stream"
                return time.time()

        delivered = run(main)
    trace = events(proxy.trace)
    note = [e for e in messages(trace, "s2c") if e["msg"].get("method") == "notifications/tools/list_changed"]
    assert note and note[0]["http"]["method"] == "GET"
    get_flow = note[0]["flow"]
    ends = [e for e in kinds(trace, "stream") if e["flow"] == get_flow and e["event"] != "open"]
    assert ends and ends[0]["ts"] > note[0]["ts"]  # recorded while the stream was open
    assert note[0]["ts"] <= delivered


def test_legacy_sse(sse_server, tmp_path: Path) -> None:
    with mitmdump(sse_server.port, tmp_path / "t.jsonl") as proxy:
        # The endpoint event comes through while the stream stays open: the stream is not buffered
        # (the server never ends a legacy stream, so a buffering proxy would deliver nothing and
        # this would hit its time-out).
        async def first_event():
            async with httpx2.AsyncClient(timeout=CALL_TIMEOUT) as http:
                async with http.stream("GET", proxy.url("/sse"), headers={"accept": "text/event-stream"}) as response:
                    parser = SseParser()
                    async for chunk in response.aiter_raw():
                        found = [e for e in parser.feed(chunk) if isinstance(e, SseEvent)]
                        if found:
                            return found[0], response.is_closed

        endpoint, ended = run(first_event, timeout=CALL_TIMEOUT)
        assert endpoint.event == "endpoint" and not ended

        capture = Capture()

        async def session():
            async with captured_legacy_client(proxy.url("/sse"), capture) as client:
                await exercise(client)

        run(session)
    trace = events(proxy.trace)
    assert_same_messages(trace, capture)
    assert_paired(trace)
    assert not kinds(trace, "violation")
    endpoints = [e for e in kinds(trace, "sse") if e.get("event") == "endpoint"]
    assert len(endpoints) == 2
    key = endpoints[-1]["session"]
    assert endpoints[-1]["data"].endswith(key) and endpoints[-1]["conn_session"].startswith("conn-")
    session_messages = messages(trace)
    assert {e["session"] for e in session_messages} == {key}
    assert all(e["transport"] == "sse" for e in session_messages)
    # Answers arrive on the GET /sse stream, requests on POSTs answered 202.
    assert all(e["http"]["method"] == "GET" for e in messages(trace, "s2c"))
    posts = [e for e in kinds(trace, "http") if e["method"] == "POST"]
    assert posts and all(e["status"] == 202 for e in posts)


@pytest.mark.slow
def test_concurrent_sessions(tmp_path: Path) -> None:
    """20 sessions x 50 calls at once: nothing lost, nothing duplicated, each call executed once."""
    sessions, calls = 20, 50
    # JSON answers: the SDK then keeps its connections (it drops one after each SSE answer), which
    # halves the run time on 2 cores; SSE answers are covered by the other tests.
    with peer_server(json_response=True) as peer, mitmdump(peer.port, tmp_path / "t.jsonl") as proxy:
        async def one(n: int) -> list[str]:
            async with Client(proxy.url("/mcp"), mode="legacy") as client:
                out = []
                for i in range(calls):
                    result = await client.call_tool("tick", {"token": f"{n}-{i}"})
                    out.append(result.content[0].text)
                return out

        async def main():
            results = [None] * sessions

            async def store(n):
                results[n] = await one(n)

            async with anyio.create_task_group() as group:
                for n in range(sessions):
                    group.start_soon(store, n)
            async with Client(proxy.url("/mcp"), mode="legacy") as client:
                counts = orjson.loads((await client.call_tool("ticks", {})).content[0].text)
            return results, counts

        results, counts = run(main, timeout=110)
    expected = {f"{n}-{i}" for n in range(sessions) for i in range(calls)}
    assert [r for result in results for r in result] == [f"{n}-{i}" for n in range(sessions) for i in range(calls)]
    assert counts == {token: 1 for token in expected}
    trace = events(proxy.trace)
    assert_paired(trace)
    assert not kinds(trace, "violation")
    ticks = [e for e in messages(trace, "c2s") if e["msg"].get("params", {}).get("name") == "tick"]
    assert Counter(e["msg"]["params"]["arguments"]["token"] for e in ticks) == Counter(expected)
    by_session = Counter(e["session"] for e in ticks)
    assert len(by_session) == sessions and set(by_session.values()) == {calls}
    answers = Counter((e["session"], e["msg"]["id"]) for e in messages(trace, "s2c") if "id" in e["msg"])
    assert max(answers.values()) == 1  # no answer recorded twice


def test_client_disconnect_mid_stream(http_server, tmp_path: Path) -> None:
    with mitmdump(http_server.port, tmp_path / "t.jsonl") as proxy:
        async def main():
            headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
            async with httpx2.AsyncClient(timeout=10) as http:
                init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
                response = await http.post(proxy.url("/mcp"), content=orjson.dumps(init), headers=headers)
                headers |= {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
                await http.post(proxy.url("/mcp"), content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=headers)
                call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "slow", "arguments": {"seconds": 5, "steps": 50}, "_meta": {"progressToken": "p"}}}
                async with http.stream("POST", proxy.url("/mcp"), content=orjson.dumps(call), headers=headers) as stream:
                    parser = SseParser()
                    async for chunk in stream.aiter_raw():
                        if any(isinstance(e, SseEvent) for e in parser.feed(chunk)):
                            break  # one progress event, then hang up
            # The proxy is unharmed: the same session goes on.
            async with httpx2.AsyncClient(timeout=10) as http:
                echo = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "after"}}}
                response = await http.post(proxy.url("/mcp"), content=orjson.dumps(echo), headers=headers)
                assert b'"after"' in response.content

        run(main)
    assert proxy.proc.returncode in (0, -15), proxy.stderr()
    assert "Traceback" not in proxy.stderr()
    trace = events(proxy.trace)
    broken = [e for e in kinds(trace, "stream") if e["event"] == "error"]
    assert len(broken) == 1 and broken[0]["events"] >= 1 and broken[0]["error"]
    flow = broken[0]["flow"]
    assert [e for e in kinds(trace, "http") if e["flow"] == flow][0]["error"]
    assert any(e["flow"] == flow and e["msg"].get("method") == "notifications/progress" for e in messages(trace, "s2c"))
    assert any(e["msg"].get("result", {}).get("content", [{}])[0].get("text") == "after" for e in messages(trace, "s2c"))


def test_bearer_token_and_url_key_never_reach_the_trace(http_server, tmp_path: Path) -> None:
    capture = Capture()
    with mitmdump(http_server.port, tmp_path / "t.jsonl") as proxy:
        async def main():
            url = proxy.url(f"/mcp?api_key={QUERY_SECRET}&profile=dev")
            client, http = captured_client(url, "legacy", capture, headers={"authorization": f"Bearer {SECRET}"})
            async with http, client:
                await client.call_tool("echo", {"text": "hi"})

        run(main)
    raw = proxy.trace.read_bytes()
    assert SECRET.encode() not in raw and QUERY_SECRET.encode() not in raw
    trace = events(proxy.trace)
    requests = messages(trace, "c2s")
    assert requests and all(e["http"]["headers"]["authorization"] == fingerprint(f"Bearer {SECRET}") for e in requests)
    # the query's secret is fingerprinted in place; the rest of the path is as sent
    assert {e["http"]["path"] for e in requests} == {f"/mcp?api_key={fingerprint(QUERY_SECRET)}&profile=dev"}


def test_secret_in_a_legacy_endpoint_never_reaches_the_trace(sse_server, tmp_path: Path) -> None:
    """A query parameter named with --redact is fingerprinted in the endpoint event, its session key and the POSTs."""
    capture = Capture()
    with mitmdump(sse_server.port, tmp_path / "t.jsonl", extra=["--set", "mcpbench_redact=session_id"]) as proxy:
        async def session():
            async with captured_legacy_client(proxy.url("/sse"), capture) as client:
                await client.call_tool("echo", {"text": "hi"})

        run(session)
    posted = {url.params["session_id"] for url in capture.post_urls}
    assert len(posted) == 1
    secret = posted.pop()
    assert secret.encode() not in proxy.trace.read_bytes()
    trace = events(proxy.trace)
    endpoint = [e for e in kinds(trace, "sse") if e.get("event") == "endpoint"][-1]
    assert endpoint["data"].endswith(f"session_id={fingerprint(secret)}") and endpoint["session"] == fingerprint(secret)
    # the POSTs are still told apart as that session
    assert {e["session"] for e in messages(trace)} == {fingerprint(secret)}


def test_recording_that_starts_mid_session_flags_nothing(http_server, tmp_path: Path) -> None:
    """A session initialised before the proxy saw it: its calls through the proxy are not 'before initialize'."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": "2025-11-25"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "late"}}}

    async def main(proxy_url):
        async with httpx2.AsyncClient(timeout=CALL_TIMEOUT) as http:
            direct = f"http://127.0.0.1:{http_server.port}/mcp"
            opened = await http.post(direct, content=orjson.dumps(init), headers=headers)
            session = opened.headers["mcp-session-id"]
            headers["mcp-session-id"] = session
            await http.post(direct, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=headers)
            answer = await http.post(proxy_url, content=orjson.dumps(call), headers=headers)
            return session, answer.status_code, answer.text

    with mitmdump(http_server.port, tmp_path / "t.jsonl") as proxy:
        session, status, body = run(lambda: main(proxy.url("/mcp")))
    assert status == 200 and "late" in body
    trace = events(proxy.trace)
    assert [e["msg"]["method"] for e in messages(trace, "c2s")] == ["tools/call"]
    assert {e["session"] for e in messages(trace)} == {session}
    assert kinds(trace, "violation") == []


def test_errors_and_non_mcp_requests(http_server, tmp_path: Path) -> None:
    """Error statuses pass through with their bodies; non-MCP requests are http events only."""
    with mitmdump(http_server.port, tmp_path / "t.jsonl") as proxy:
        async def main():
            headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
            body = b'{"jsonrpc":"2.0","id":5,"method":"tools/list"}'
            async with httpx2.AsyncClient(timeout=10) as http:
                got = {}
                got["favicon"] = await http.get(proxy.url("/favicon.ico"))
                got["404"] = await http.post(proxy.url("/mcp"), content=body, headers=headers | {"mcp-session-id": "deadbeef"})
                got["406"] = await http.post(proxy.url("/mcp"), content=body, headers=headers | {"accept": "application/json"})
                got["400-ct"] = await http.post(proxy.url("/mcp"), content=body, headers=headers | {"content-type": "text/plain", "mcp-protocol-version": "2025-11-25"})
                got["400-json"] = await http.post(proxy.url("/mcp"), content=b"{not json", headers=headers)
                return {k: (r.status_code, r.content) for k, r in got.items()}

        got = run(main)
    assert got["404"][0] == 404 and got["406"][0] == 406 and got["400-ct"][0] == 400 and got["400-json"][0] == 400
    trace = events(proxy.trace)
    favicon = [e for e in kinds(trace, "http") if e["path"] == "/favicon.ico"][0]
    assert favicon["mcp"] is False and favicon["session"] is None
    assert not [e for e in trace if e.get("flow") == favicon["flow"] and e["kind"] != "http"]
    by_status = {e["status"]: e for e in kinds(trace, "http") if e["path"] == "/mcp"}
    assert by_status[404]["body"] == got["404"][1].decode()
    assert by_status[406]["body"] == got["406"][1].decode()
    texts = [e for e in kinds(trace, "http") if e["status"] == 400 and e["body"] == got["400-ct"][1].decode()]
    assert texts, "the non-JSON 400 body is kept"
    # The JSON-RPC error bodies are also messages; the broken request is a violation with its raw body.
    errors = [e for e in messages(trace, "s2c") if "error" in e["msg"]]
    assert {e["http"]["status"] for e in errors} >= {404, 406}
    bad = [e for e in kinds(trace, "violation") if e["code"] == "not-json"]
    assert bad and bad[0]["dir"] == "c2s" and bad[0]["raw"] == "{not json"


def test_regular_proxy_mode(http_server, tmp_path: Path) -> None:
    """Clients that use mitmproxy as an HTTP proxy (HTTP_PROXY) are recorded the same way."""
    with mitmdump(None, tmp_path / "t.jsonl") as proxy:
        async def main():
            http = httpx2.AsyncClient(mounts={"http://": httpx2.AsyncHTTPTransport(proxy=proxy.base)}, timeout=CALL_TIMEOUT)
            async with http, Client(streamable_http_client(http_server.url, http_client=http), mode="legacy") as client:
                assert (await client.call_tool("echo", {"text": "via proxy"})).content[0].text == "via proxy"

        run(main)
    trace = events(proxy.trace)
    assert_paired(trace)
    calls = [e for e in messages(trace, "c2s") if e["msg"]["method"] == "tools/call"]
    assert calls and not calls[0]["session"].startswith("conn-")
    assert all(e["url"].startswith(f"http://127.0.0.1:{http_server.port}/") for e in kinds(trace, "http"))
