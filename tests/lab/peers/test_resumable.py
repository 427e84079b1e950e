"""`lab serve --resumable`: a stream cut by the fault proxy is resumed with Last-Event-ID, nothing lost."""

import json
from urllib.parse import urlsplit

import pytest

from mcpbench.protocol.sse import SseEvent, SseParser
from tests.support.faults import connection, fault_proxy, fault_records, initialize, post, read_until_closed, start_stream_get
from tests.support.servers import reference_server

pytestmark = pytest.mark.slow  # seconds each: `./dev test -m "not slow"` leaves them out

STEPS = 8
SECONDS = 6  # the tool's length: several cuts of CUT seconds each
CUT = 2.0  # seconds: a handshake through the proxy ends well before
# Resumptions a test allows: the call lasts SECONDS and each stream is cut after CUT.
MAX_RESUMES = 12


@pytest.fixture(scope="module")
def resumable_server():
    """`lab serve --resumable`: an event store, so a cut stream can be resumed."""
    with reference_server("streamable-http", resumable=True) as server:
        yield server


def _events(body: bytes) -> list[SseEvent]:
    return [e for e in SseParser().feed(body) if isinstance(e, SseEvent)]


def test_a_cut_post_stream_is_resumed_with_last_event_id(tmp_path, resumable_server):
    log = tmp_path / "faults.jsonl"
    with fault_proxy(resumable_server.url, "--cut-streams-after", f"{CUT}s", "--fault-log", str(log)) as url:
        headers = initialize(url)
        call = connection(url)
        answer = post(call, urlsplit(url).path, {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "slow", "arguments": {"seconds": SECONDS, "steps": STEPS}, "_meta": {"progressToken": "p"}}}, headers)
        assert answer.status == 200
        body, cut = read_until_closed(answer)
        assert cut  # the proxy cut the answer before the tool was done
        seen = _events(body)
        resumes = 0
        while not any('"result"' in (e.data or "") for e in seen):
            resumes += 1
            if resumes > MAX_RESUMES:
                pytest.fail(f"no result after {MAX_RESUMES} resumptions: {seen}")
            last = [e.id for e in seen if e.id is not None][-1]
            conn, stream = start_stream_get(url, headers, [("last-event-id", last)])
            assert stream.status == 200
            more, _ = read_until_closed(stream)  # cut again, or ended after the answer
            conn.close()
            seen += _events(more)
    assert resumes >= 1 and all(e.id for e in seen)  # every event has an id (priming ones included)
    messages = [json.loads(e.data) for e in seen if e.data]
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    assert progress == list(range(1, STEPS + 1))  # none lost, none twice
    assert [m["id"] for m in messages if "result" in m] == [7]
    ids = [e.id for e in seen if e.data]
    assert len(ids) == len(set(ids))
    assert len([r for r in fault_records(log) if r["kind"] == "cut-stream"]) >= resumes  # each resume followed a cut


def test_sessions_do_not_see_each_others_events(resumable_server):
    """Two sessions' streams share the SDK's names (request id 1): a resume replays its own session's only."""
    server = resumable_server
    first, second = initialize(server.url), initialize(server.url)
    bodies = {}
    for name, headers in (("first", first), ("second", second)):
        conn = connection(server.url)
        answer = post(conn, "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"text": name}}}, headers)
        bodies[name] = _events(answer.read())
        conn.close()
    priming = bodies["first"][0]
    assert priming.id and not priming.data  # 2025-11-25: a priming event first
    conn, stream = start_stream_get(server.url, first, [("last-event-id", priming.id)])
    replay = b""
    while b'"result"' not in replay:  # the replayed answer, then the stream stays open
        chunk = stream.read1(65536)
        assert chunk, replay
        replay += chunk
    conn.close()
    texts = [json.loads(e.data)["result"]["content"][0]["text"] for e in _events(replay) if e.data]
    assert texts == ["first"]
